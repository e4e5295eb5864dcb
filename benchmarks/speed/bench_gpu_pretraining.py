"""GPU pre-training throughput: sequences/s and model-FLOPs utilisation.

BERT-Base and BERT-Large at sequence lengths 128 and 512, bfloat16 compute
with XLA, one fixed batch (only the step is timed). Model FLOPs per step:
6 x parameters x tokens (forward and backward of every weight) plus
12 x layers x batch x seq^2 x hidden (the attention scores and context,
forward and backward). MFU = achieved / --peak_tflops.

  .venv/bin/python benchmarks/speed/bench_gpu_pretraining.py \
      [--peak_tflops=989] [--shapes=base-128,base-512,large-128,large-512]
"""

import os
import statistics
import sys
import tempfile
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
sys.path.insert(0, os.path.abspath(os.path.join(__file__, "../../..")))

from absl import app  # pylint: disable=g-import-not-at-top
from absl import flags
import numpy as np
import tensorflow as tf
import tf_keras

from benchmarks.lib import results
import modeling
from runner_lib.core import training
from runner_lib.pretraining import task as pretraining

FLAGS = flags.FLAGS
flags.DEFINE_string("shapes", "base-128,base-512,large-128,large-512",
                    "Comma-separated MODEL-SEQ (model: tiny, base, large).")
flags.DEFINE_float("peak_tflops", 989.0,
                   "Accelerator peak dense bf16 TFLOP/s (H200 SXM: 989).")
flags.DEFINE_integer("repeats", 10, "Timed steps.")
flags.DEFINE_bool("bfloat16", True, "mixed_bfloat16 compute.")
flags.DEFINE_bool("use_xla", True, "jit_compile the step.")
results.define_flags()

MODELS = {
    "tiny": dict(hidden_size=128, num_hidden_layers=2, num_attention_heads=2,
                 intermediate_size=512),
    "base": dict(hidden_size=768, num_hidden_layers=12,
                 num_attention_heads=12, intermediate_size=3072),
    "large": dict(hidden_size=1024, num_hidden_layers=24,
                  num_attention_heads=16, intermediate_size=4096),
}
# Batch per step for each sequence length (the paper's 256 x 128 and
# 256 x 512 token budgets, scaled to one device).
BATCH = {128: 256, 512: 64}


def model_flops(config, params, batch, seq):
  tokens = batch * seq
  attention = 12 * config.num_hidden_layers * batch * seq**2 * (
      config.hidden_size)
  return 6 * params * tokens + attention


def bench(shape):
  """Times one MODEL-SEQ shape; prints a line and returns its numbers, a
  row."""
  name, seq = shape.split("-")
  seq = int(seq)
  config = modeling.BertConfig(vocab_size=30522, type_vocab_size=2,
                               max_position_embeddings=512, **MODELS[name])
  batch_size = BATCH.get(seq, 32) if name != "tiny" else 8
  predictions = max(1, int(round(seq * 0.15)))
  task = pretraining.PretrainingTask(config, seq, predictions)
  trainer = training.Trainer(
      tf.distribute.get_strategy(), task.build_model, task.loss,
      training.TrainingConfig(output_dir=tempfile.mkdtemp(),
                              learning_rate=1e-4, num_train_steps=10**6,
                              num_warmup_steps=10**4,
                              jit_compile=FLAGS.use_xla))
  rng = np.random.RandomState(0)
  positions = np.sort(np.stack([rng.choice(np.arange(1, seq - 1), predictions,
                                           replace=False)
                                for _ in range(batch_size)]), 1)
  batch = {
      "input_ids": tf.constant(rng.randint(1000, 30000, [batch_size, seq]),
                               tf.int32),
      "input_mask": tf.ones([batch_size, seq], tf.int32),
      "segment_ids": tf.zeros([batch_size, seq], tf.int32),
      "masked_lm_positions": tf.constant(positions, tf.int32),
      "masked_lm_ids": tf.constant(rng.randint(1000, 30000,
                                               [batch_size, predictions]),
                                   tf.int32),
      "masked_lm_weights": tf.ones([batch_size, predictions], tf.float32),
      "next_sentence_labels": tf.zeros([batch_size, 1], tf.int32),
  }
  step = tf.function(lambda: trainer.train_step(batch))
  for _ in range(3):
    float(step())
  times = []
  for _ in range(FLAGS.repeats):
    start = time.perf_counter()
    float(step())
    times.append(time.perf_counter() - start)
  seconds = statistics.median(times)
  params = sum(int(np.prod(v.shape)) for v in trainer.trainable)
  flops = model_flops(config, params, batch_size, seq)
  print("%-6s seq=%-4d batch=%-4d %8.1f sequences/s  %7.1f TFLOP/s  "
        "MFU %.1f%%" % (name, seq, batch_size, batch_size / seconds,
                        flops / seconds / 1e12,
                        100 * flops / seconds / 1e12 / FLAGS.peak_tflops),
        flush=True)
  return [name, seq, batch_size, round(batch_size / seconds, 1),
          round(flops / seconds / 1e12, 1),
          round(100 * flops / seconds / 1e12 / FLAGS.peak_tflops, 1)]


def main(argv):
  del argv
  if FLAGS.bfloat16:
    tf_keras.mixed_precision.set_global_policy("mixed_bfloat16")
  print("TensorFlow %s, devices: %s, bf16=%s, xla=%s" % (
      tf.__version__, [d.name for d in tf.config.list_physical_devices()],
      FLAGS.bfloat16, FLAGS.use_xla))
  rows = [bench(shape) for shape in FLAGS.shapes.split(",")]
  if FLAGS.record:
    device = results.device_name()
    # Ours alone, no peer: no headline.
    results.record(
        "bench_gpu_pretraining",
        [results.table(
            "Pre-training on %s (MFU against %g TFLOP/s)" % (
                device, FLAGS.peak_tflops),
            ["model", "seq", "batch", "sequences/s", "TFLOP/s", "MFU %"],
            rows)],
        results.flag_settings(FLAGS, device=device))


if __name__ == "__main__":
  app.run(main)
