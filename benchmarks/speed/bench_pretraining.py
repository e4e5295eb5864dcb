"""Pre-training steps/s: ours vs tf-models-official's BertPretrainerV2.

Same config, batch, sequence length, masked-LM + next-sentence losses and an
AdamW optimizer with global-norm clipping on both sides (Model Garden's
AdamWeightDecay applies bias correction, ours the original's update; the
cost is the same). One fixed batch, so only the step is timed. Runs
alternate between the two so that machine noise hits both; medians and the
ratio are printed, with and without XLA, in float32 and in bfloat16 (Keras'
mixed_bfloat16 policy set before both models are built: float32 weights,
bfloat16 compute). Each line also gives our step's model arithmetic
(train_steps.step_flops) in GFLOP/s and as a share of the machine's
practical peak in the same precision: runs of 2048 x 2048 matmuls timed
in the same alternation as the steps (the same noise hits both), their
median.

  .venv/bin/python benchmarks/speed/bench_pretraining.py [--repeats=10]
      [--shapes=small,base] [--xla=false,true] [--precision=float32,bfloat16]
"""

import os
import statistics
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
sys.path.insert(0, os.path.abspath(os.path.join(__file__, "../../..")))

from absl import app  # pylint: disable=g-import-not-at-top
from absl import flags
import tensorflow as tf
import tf_keras

from benchmarks.lib import results
from benchmarks.lib import train_steps
from benchmarks.lib import timing
import modeling

FLAGS = flags.FLAGS
flags.DEFINE_integer("repeats", 10, "Timed steps per model and setting.")
flags.DEFINE_string("shapes", "small,base", "Comma-separated: small, base.")
flags.DEFINE_string("xla", "false,true", "Comma-separated jit_compile values.")
flags.DEFINE_string("precision", "float32,bfloat16",
                    "Comma-separated: float32, bfloat16.")
results.define_flags()

COLUMNS = ["shape", "L", "H", "batch", "seq", "xla", "precision", "variant",
           "steps/s", "model_garden steps/s", "variant/model_garden",
           "GFLOP/s", "% of matmul peak"]


def bench(name, jit_compile, precision):
  """Times the steps at one shape, XLA setting and precision, alternated
  with runs of large matmuls in that precision (the peak); prints a line
  per variant of ours.

  In bfloat16, "ours" is what --precision=bfloat16 runs (bfloat16 matmuls,
  float32 elsewhere: modeling.ComputeOptions' matmul_dtype) and "ours_keras" our
  model under Keras' mixed_bfloat16 policy, as Model Garden's is.

  Returns:
    (dict variant -> median seconds per step, the lines' numbers: rows
    under COLUMNS, the peak FLOP/s).
  """
  fields, batch_size, seq_length, predictions = train_steps.SHAPES[name]
  config = modeling.BertConfig(**fields)
  batch = train_steps.make_batch(config, batch_size, seq_length,
                                 predictions)
  runs = {}
  if precision == "float32":
    runs["ours"] = train_steps.ours_step(config, batch, seq_length,
                                         predictions, jit_compile)
  else:
    runs["ours"] = train_steps.ours_step(config, batch, seq_length,
                                         predictions, jit_compile,
                                         getattr(tf, precision))
    tf_keras.mixed_precision.set_global_policy("mixed_" + precision)
  try:
    if precision != "float32":
      runs["ours_keras"] = train_steps.ours_step(config, batch, seq_length,
                                                 predictions, jit_compile)
    runs["model_garden"] = train_steps.model_garden_step(config, batch,
                                                         jit_compile)
    for fn in runs.values():
      float(fn())  # Traced (and layers built) under the policy.
  finally:
    tf_keras.mixed_precision.set_global_policy("float32")
  peak_run, peak_flops = timing.matmul_run(getattr(tf, precision))
  medians = timing.alternated_medians(
      dict({k: (lambda fn=fn: float(fn())) for k, fn in runs.items()},
           peak=peak_run), FLAGS.repeats)
  peak = peak_flops / medians.pop("peak")
  print("matmul peak (2048 x 2048, %s), alternated with the steps: %.0f "
        "GFLOP/s" % (precision, peak / 1e9), flush=True)
  rows = []
  for variant in [k for k in runs if k != "model_garden"]:
    flops = train_steps.step_flops(config, batch_size, seq_length,
                                   predictions) / medians[variant]
    print("%-5s L=%d H=%d batch=%d seq=%d xla=%-5s %-8s %-10s %.2f steps/s "
          " model_garden %.2f steps/s  ratio %s/model_garden = %.3f  "
          "%.0f GFLOP/s = %.0f%% of the matmul peak" %
          (name, config.num_hidden_layers, config.hidden_size, batch_size,
           seq_length, jit_compile, precision, variant,
           1 / medians[variant], 1 / medians["model_garden"], variant,
           medians["model_garden"] / medians[variant], flops / 1e9,
           100 * flops / peak), flush=True)
    rows.append([name, config.num_hidden_layers, config.hidden_size,
                 batch_size, seq_length, jit_compile, precision, variant,
                 round(1 / medians[variant], 2),
                 round(1 / medians["model_garden"], 2),
                 round(medians["model_garden"] / medians[variant], 3),
                 round(flops / 1e9), round(100 * flops / peak)])
  return medians, rows, peak


def main(argv):
  del argv
  print("TensorFlow %s, %d CPUs, %d repeats (medians)" %
        (tf.__version__, os.cpu_count(), FLAGS.repeats))
  precisions = FLAGS.precision.split(",")
  peaks = {precision: [] for precision in precisions}
  rows, speedups = [], []
  for name in FLAGS.shapes.split(","):
    for xla in FLAGS.xla.split(","):
      ours = {}
      for precision in precisions:
        medians, lines, peak = bench(name, xla == "true", precision)
        peaks[precision].append(peak)
        ours[precision] = medians["ours"]
        rows += lines
      if "float32" in ours and "bfloat16" in ours:
        print("%-5s xla=%-5s ours bfloat16 / ours float32 = %.2fx" %
              (name, xla == "true", ours["float32"] / ours["bfloat16"]),
              flush=True)
        speedups.append([name, xla == "true", round(
            ours["float32"] / ours["bfloat16"], 2)])
  if FLAGS.record:
    tables = [
        results.table("Matmul peak (2048 x 2048, alternated with the "
                      "steps: median over the settings), GFLOP/s",
                      ["precision", "GFLOP/s"],
                      [[p, round(statistics.median(peaks[p]) / 1e9)]
                       for p in precisions]),
        results.table("Pre-training steps/s", COLUMNS, rows)]
    if speedups:
      tables.append(results.table("ours bfloat16 / ours float32",
                                  ["shape", "xla", "speed-up"], speedups))
    results.record(
        "bench_pretraining", tables, results.flag_settings(FLAGS),
        headline={"pre-training BERT-Base %s: ours/Model Garden" % row[6]:
                  row[10] for row in rows
                  if row[0] == "base" and not row[5] and row[7] == "ours"})


if __name__ == "__main__":
  app.run(main)
