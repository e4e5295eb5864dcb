"""Where a pre-training step's time goes: ours and Model Garden's
BertPretrainerV2, op types ranked by time per step (TF profiler, CPU).

The same steps as bench_pretraining.py (config, batch, losses, AdamW with
clipping). Each is warmed up, then --steps steps are traced; the host
plane's op events are summed by op type.

  .venv/bin/python benchmarks/profile_pretraining.py [--shape=small]
      [--steps=5] [--top=15] [--precision=bfloat16]
"""

import collections
import glob
import os
import re
import sys
import tempfile

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from absl import app  # pylint: disable=g-import-not-at-top
from absl import flags
import tensorflow as tf
import tf_keras
from tensorflow.tsl.profiler.protobuf import xplane_pb2

from benchmarks import train_steps
import modeling

FLAGS = flags.FLAGS
flags.DEFINE_string("shape", "small", "small or base (bench_pretraining's).")
flags.DEFINE_integer("steps", 5, "Traced steps per model.")
flags.DEFINE_integer("top", 15, "Op types listed.")
flags.DEFINE_bool("by_name", False,
                  "Rank op names (layer numbers merged) instead of types: "
                  "which part of the model an op type's time comes from.")
flags.DEFINE_bool("jit_compile", False, "XLA on both sides.")
flags.DEFINE_enum("precision", "float32", ["float32", "bfloat16"],
                  "Compute precision: ours as --precision runs it, "
                  "Model Garden under Keras' mixed policy.")


# Events that hold the op events rather than run an op.
_ENCLOSING = ("Process", "Run", "ExecutorState::Process")


def op_times(step, steps, by_name=False):
  """dict op type (or, by_name, op name with layer_N for every layer's
  number) -> seconds per step, from a trace of `steps` calls."""
  for _ in range(3):
    float(step())
  logdir = tempfile.mkdtemp()
  tf.profiler.experimental.start(logdir)
  for _ in range(steps):
    float(step())
  tf.profiler.experimental.stop()
  space = xplane_pb2.XSpace()
  with open(glob.glob(os.path.join(logdir, "**", "*.xplane.pb"),
                      recursive=True)[0], "rb") as f:
    space.ParseFromString(f.read())
  totals = collections.Counter()
  for plane in space.planes:
    if plane.name != "/host:CPU":
      continue
    for line in plane.lines:
      for event in line.events:
        name = plane.event_metadata[event.metadata_id].name
        # Executor op events are "op_name:OpType"; the function and
        # executor events enclosing them are left out.
        if ":" not in name or name.startswith(("Iterator", "$", " ")):
          continue
        op_name, op_type = [part.strip() for part in name.rsplit(":", 1)]
        if op_type not in _ENCLOSING and not op_type.startswith(
            "__inference"):
          key = ("%s (%s)" % (re.sub(r"layer_\d+", "layer_N", op_name),
                              op_type) if by_name else op_type)
          totals[key] += event.duration_ps * 1e-12
  return {op: seconds / steps for op, seconds in totals.items()}


def main(argv):
  del argv
  fields, batch_size, seq_length, predictions = train_steps.SHAPES[
      FLAGS.shape]
  config = modeling.BertConfig(**fields)
  batch = train_steps.make_batch(config, batch_size, seq_length,
                                       predictions)
  # Ours as --precision runs it (bfloat16 matmuls only, and the fused
  # update), Model Garden under Keras' mixed policy.
  steps = {"ours": train_steps.ours_step(
      config, batch, seq_length, predictions, FLAGS.jit_compile,
      getattr(tf, FLAGS.precision))}
  tf_keras.mixed_precision.set_global_policy(
      "float32" if FLAGS.precision == "float32" else
      "mixed_" + FLAGS.precision)
  steps["model_garden"] = train_steps.model_garden_step(
      config, batch, FLAGS.jit_compile)
  float(steps["model_garden"]())  # Built and traced under the policy.
  tf_keras.mixed_precision.set_global_policy("float32")
  for name, step in steps.items():
    times = op_times(step, FLAGS.steps, FLAGS.by_name)
    total = sum(times.values())
    print("%s (L=%d H=%d batch=%d seq=%d): %.1f ms of op time per step "
          "(summed over threads)" % (name, config.num_hidden_layers,
                                     config.hidden_size, batch_size,
                                     seq_length, 1000 * total))
    for op, seconds in sorted(times.items(), key=lambda x: -x[1])[
        :FLAGS.top]:
      print("  %-60s %8.2f ms  %5.1f%%" % (op[-60:], 1000 * seconds,
                                          100 * seconds / total))


if __name__ == "__main__":
  app.run(main)
