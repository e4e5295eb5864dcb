"""Where a pre-training step's time goes: ours and Model Garden's
BertPretrainerV2, op types ranked by time per step (TF profiler, CPU).

The same steps as bench_pretraining.py (config, batch, losses, AdamW with
clipping). Each is warmed up, then --steps steps are traced; the host
plane's op events are summed by op type.

  .venv/bin/python benchmarks/profiling/profile_pretraining.py [--shape=small]
      [--steps=5] [--top=15] [--precision=bfloat16]
"""

import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
sys.path.insert(0, os.path.abspath(os.path.join(__file__, "../../..")))

from absl import app  # pylint: disable=g-import-not-at-top
from absl import flags
import tensorflow as tf
import tf_keras

from benchmarks.lib import op_profile
from benchmarks.lib import results
from benchmarks.lib import train_steps
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
results.define_flags()


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
  tables = []
  for name, step in steps.items():
    times = op_profile.op_times(step, FLAGS.steps, FLAGS.by_name)
    total = sum(times.values())
    print("%s (L=%d H=%d batch=%d seq=%d): %.1f ms of op time per step "
          "(summed over threads)" % (name, config.num_hidden_layers,
                                     config.hidden_size, batch_size,
                                     seq_length, 1000 * total))
    op_profile.print_top(times, FLAGS.top, width=60, indent="  ")
    tables.append(results.table(
        "%s (L=%d H=%d batch=%d seq=%d): %.1f ms of op time per step" % (
            name, config.num_hidden_layers, config.hidden_size, batch_size,
            seq_length, 1000 * total),
        ["op name (type)" if FLAGS.by_name else "op type", "ms per step",
         "% of op time"], op_profile.top_rows(times, FLAGS.top)))
  if FLAGS.record:
    results.record("profile_pretraining", tables,
                   results.flag_settings(FLAGS))


if __name__ == "__main__":
  app.run(main)
