"""--long_text=windows: what windows of padding alone cost a training step.

Records hold --max_windows windows per example, most of them padding for
short examples. BertClassifier.call_windows leaves them out before the
encoder where it skips padding (trimmed batches, no XLA; the runner's
default) and computes them otherwise. One training step (forward,
backward, no update) of batch 16 at seq 128, each example with R real
windows of 8, is timed three ways: the windows of padding skipped, the
same computed (--trim_padding=false's model), and the R real windows alone
as [16 * R, 128] through the original's [B, T] path (the floor).
Calls alternate; medians and ratios are printed.

  .venv/bin/python benchmarks/speed/bench_windows.py [--shape=small]
      [--repeats=10]
"""

import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")
sys.path.insert(0, os.path.abspath(os.path.join(__file__, "../../..")))

from absl import app  # pylint: disable=g-import-not-at-top
from absl import flags
import numpy as np
import tensorflow as tf

from benchmarks.lib import results
from benchmarks.lib import timing
from benchmarks.lib.shapes import SHAPES
import modeling

FLAGS = flags.FLAGS
flags.DEFINE_enum("shape", "small", sorted(SHAPES), "Model shape.")
flags.DEFINE_integer("repeats", 10, "Timed steps of each way.")
flags.DEFINE_string("real_windows", "1,2,8",
                    "Comma-separated R: real windows per example of 8.")
results.define_flags()

BATCH, WINDOWS, SEQ = 16, 8, 128


def step_fn(model, inputs, labels):
  """A tf.function: the mean cross-entropy's gradients (no update)."""

  @tf.function
  def step():
    with tf.GradientTape() as tape:
      logits = model(inputs, training=True)
      loss = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(
          labels, tf.cast(logits, tf.float32)))
    grads = tape.gradient(loss, model.trainable_variables)
    return tf.add_n([tf.reduce_sum(g) for g in grads if g is not None])

  return lambda: float(step())


def main(argv):
  if len(argv) > 1:
    raise app.UsageError("Unexpected arguments: %s" % " ".join(argv[1:]))
  config = modeling.BertConfig(vocab_size=30522, max_position_embeddings=512,
                               type_vocab_size=2, **SHAPES[FLAGS.shape])
  models = {skip: modeling.BertClassifier(
      config, 2, seed=1, options=modeling.ComputeOptions(skip_padding=skip))
            for skip in (True, False)}
  rng = np.random.RandomState(0)
  labels = tf.constant(rng.randint(0, 2, BATCH), tf.int32)
  rows = []
  for real in [int(r) for r in FLAGS.real_windows.split(",")]:
    mask = np.zeros([BATCH, WINDOWS, SEQ], np.int32)
    mask[:, :real] = 1  # every real window full: trimming cuts nothing
    ids = rng.randint(1000, 30000, mask.shape).astype(np.int32) * mask
    inputs = {"input_ids": tf.constant(ids), "input_mask": tf.constant(mask),
              "segment_ids": tf.zeros_like(ids),
              "window_mask": tf.constant(mask.max(-1))}
    alone = {key: tf.reshape(value[:, :real], [-1, SEQ])
             for key, value in inputs.items() if key != "window_mask"}
    times = timing.alternated_medians({
        "skipped": step_fn(models[True], inputs, labels),
        "computed": step_fn(models[False], inputs, labels),
        "real windows alone": step_fn(
            models[False], alone, tf.repeat(labels, real)),
    }, FLAGS.repeats)
    row = [FLAGS.shape, real, WINDOWS, BATCH, SEQ,
           round(times["skipped"], 3), round(times["computed"], 3),
           round(times["real windows alone"], 3),
           round(times["computed"] / times["skipped"], 2),
           round(times["skipped"] / times["real windows alone"], 2)]
    rows.append(row)
    print("R=%d of %d: skipped %.3f s, computed %.3f s, real windows alone "
          "%.3f s; computed/skipped %.2f, skipped/alone %.2f" % (
              real, WINDOWS, *row[5:]))
  if FLAGS.record:
    results.record("bench_windows", [results.table(
        "Training step (forward + backward), seconds",
        ["shape", "real windows", "windows", "batch", "seq", "skipped",
         "computed", "real windows alone", "computed/skipped",
         "skipped/alone"], rows)], results.flag_settings(FLAGS))


if __name__ == "__main__":
  app.run(main)
