"""Where a pre-training step's time goes: ours and Model Garden's
BertPretrainerV2, op types ranked by time per step (TF profiler, CPU).

The same steps as bench_pretraining.py (config, batch, losses, AdamW with
clipping). Each is warmed up, then --steps steps are traced; the host
plane's op events are summed by op type. On a machine whose cores run
several ops at once, summed op times overstate ops that wait for the
cores (an op sharing them with a matmul takes longer); --timeline also
says how each step's wall time is shared: with no op, one op or two or
more running, which op types ran alone, and the tail after the last
matmul (the optimizer's update, which waits for the global norm of every
gradient, so overlaps none of the backward pass).

  .venv/bin/python benchmarks/profiling/profile_pretraining.py [--shape=small]
      [--steps=5] [--top=15] [--precision=bfloat16] [--timeline]
"""

import collections
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
flags.DEFINE_bool("timeline", False,
                  "Also how each step's wall time is shared between ops.")
flags.DEFINE_enum("precision", "float32", ["float32", "bfloat16"],
                  "Compute precision: ours as --precision runs it, "
                  "Model Garden under Keras' mixed policy.")
results.define_flags()


def timeline_table(name, calls):
  """Prints op_profile.timeline's shares, averaged over the traced steps,
  and returns them as a record's table."""
  lines = [op_profile.timeline(events) for events in calls]
  wall = sum(line["wall"] for line in lines) / len(lines)

  def row(what, seconds):
    """[what, ms per step, % of the wall time], from seconds summed over
    the steps."""
    seconds /= len(lines)
    return [what, round(1000 * seconds, 1), round(100 * seconds / wall, 1)]

  totals = collections.defaultdict(collections.Counter)
  for line in lines:
    for key in ("running", "alone", "tail_ops"):
      totals[key].update(line[key])
  rows = [row("wall time of a step", wall * len(lines))]
  for running, what in ((0, "no op running"), (1, "one op running"),
                        (2, "two or more ops running")):
    rows.append(row(what, totals["running"][running]))
  for op, seconds in totals["alone"].most_common(5):
    rows.append(row("%s alone" % op, seconds))
  rows.append(row("after the last matmul",
                  sum(line["tail"] for line in lines)))
  # Op time: two ops running side by side (Model Garden's updates) both
  # count, so it can exceed the tail.
  for op, seconds in totals["tail_ops"].most_common(3):
    rows.append(row("  %s in it (op time)" % op, seconds))
  print("%s: where a step's wall time goes (mean of %d steps)" % (
      name, len(lines)))
  for what, ms, share in rows:
    print("  %-40s %8.1f ms  %5.1f%%" % (what, ms, share))
  return results.table("%s: where a step's wall time goes (mean of %d "
                       "steps)" % (name, len(lines)),
                       ["", "ms per step", "% of wall time"], rows)


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
    calls = op_profile.traced_steps(step, FLAGS.steps)
    times = op_profile.times_of(calls, FLAGS.by_name)
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
    if FLAGS.timeline:
      tables.append(timeline_table(name, calls))
  if FLAGS.record:
    results.record("profile_pretraining", tables,
                   results.flag_settings(FLAGS))


if __name__ == "__main__":
  app.run(main)
