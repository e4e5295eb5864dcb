"""Fine-tuning examples/s: ours vs tf-models-official's BertClassifier.

The MRPC recipe's shape (BERT-Base, seq 128, batch 32, two labels), the
same cross-entropy and AdamW with clipping on both sides, one fixed batch.
Runs alternate; medians and the ratio are printed, for each --precision
(bfloat16: ours as --precision=bfloat16 runs on a CPU, Model Garden under
Keras' mixed_bfloat16; onednn_amp: both float32 models under TensorFlow's
auto_mixed_precision_onednn_bfloat16 graph rewrite, ours with the fused
update as in bfloat16; it stays on for the rest of the process, so list
it last); --profile=N adds where each step's time goes. oneDNN's float32
math mode is an environment variable read at start: run the benchmark
under TF_SET_ONEDNN_FPMATH_MODE=BF16 to time float32 matmuls computed in
bfloat16.

  .venv/bin/python benchmarks/speed/bench_classifier.py [--repeats=5]
      [--shape=base|small|minilm] [--precision=float32,bfloat16,onednn_amp]
      [--profile=3]
"""

import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
sys.path.insert(0, os.path.abspath(os.path.join(__file__, "../../..")))

from absl import app  # pylint: disable=g-import-not-at-top
from absl import flags
import tensorflow as tf
import tf_keras

from official.nlp.modeling import models

from benchmarks.lib import model_garden
from benchmarks.lib import op_profile
from benchmarks.lib import results
from benchmarks.lib import timing
from benchmarks.lib import train_steps
from benchmarks.lib.shapes import SHAPES
import modeling
from runner_lib.classifier import task as classifier
from tests import reference

FLAGS = flags.FLAGS
flags.DEFINE_integer("repeats", 5, "Timed steps per model.")
flags.DEFINE_bool("small", False, "L=4 H=256 instead of BERT-Base.")
flags.DEFINE_enum("shape", "base", ["base", "small", "minilm"],
                  "BERT-Base, L=4 H=256 (as --small), or all-MiniLM-L6-v2's "
                  "L=6 H=384.")
flags.DEFINE_bool("jit_compile", False, "XLA on both sides.")
flags.DEFINE_string("precision", "float32",
                    "Comma-separated: float32, bfloat16 (ours as "
                    "--precision=bfloat16 runs it, Model Garden under "
                    "Keras' mixed_bfloat16), onednn_amp (float32 models "
                    "under the auto_mixed_precision_onednn_bfloat16 "
                    "rewrite; last).")
flags.register_validator(
    "precision",
    lambda value: set(value.split(",")) <= {"float32", "bfloat16",
                                            "onednn_amp"},
    "--precision takes a comma-separated list of float32, bfloat16, "
    "onednn_amp.")
flags.DEFINE_integer("profile", 0,
                     "Also trace this many steps of each and list the op "
                     "types taking the most time.")
results.define_flags()

# How the README and the docs name each shape.
SHAPE_NAMES = {"base": "BERT-Base", "small": "L=4 H=256",
               "minilm": "MiniLM-L6 shape"}


def steps(config, batch, precision):
  """{"ours": step, "model_garden": step} computing in precision."""
  seq_length = batch["input_ids"].shape[1]
  task = classifier.ClassificationTask(config, seq_length, ["0", "1"])
  if precision == "onednn_amp":
    tf.config.optimizer.set_experimental_options(
        {"auto_mixed_precision_onednn_bfloat16": True})
  compute = tf.bfloat16 if precision == "bfloat16" else tf.float32
  # As the runners' --precision on a CPU (precision.training_options): every
  # fused kernel, none in a step XLA compiles.
  ours = train_steps.classifier_step(config, batch, FLAGS.jit_compile,
                                     compute)
  tf_keras.mixed_precision.set_global_policy(
      "mixed_bfloat16" if precision == "bfloat16" else "float32")
  try:
    theirs_model = models.BertClassifier(
        reference.model_garden_encoder(config), num_classes=2,
        dropout_rate=0.1)
    theirs = model_garden.train_step(
        theirs_model, batch,
        lambda logits: tf.reduce_mean(task.per_example_loss(
            tf.cast(logits, tf.float32), batch["label_ids"])),
        2e-5, FLAGS.jit_compile)
    float(theirs())  # Built and traced under the policy.
  finally:
    tf_keras.mixed_precision.set_global_policy("float32")
  return {"ours": lambda: float(ours()), "model_garden": lambda: float(theirs())}


def main(argv):
  del argv
  shape = "small" if FLAGS.small else FLAGS.shape
  config = modeling.BertConfig(vocab_size=30522, type_vocab_size=2,
                               **SHAPES[shape])
  batch_size, seq_length = 32, 128
  batch = train_steps.classifier_batch(batch_size, seq_length, 40)
  ours = {}
  rows, tables = [], []
  for precision in FLAGS.precision.split(","):
    runs = steps(config, batch, precision)
    m = timing.alternated_medians(runs, FLAGS.repeats)
    ours[precision] = m["ours"]
    print("L=%d H=%d seq=%d batch=%d xla=%s %s: ours %.1f examples/s, "
          "model_garden %.1f examples/s, ratio ours/model_garden = %.3f" %
          (config.num_hidden_layers, config.hidden_size, seq_length,
           batch_size, FLAGS.jit_compile, precision, batch_size / m["ours"],
           batch_size / m["model_garden"], m["model_garden"] / m["ours"]),
          flush=True)
    rows.append([config.num_hidden_layers, config.hidden_size, seq_length,
                 batch_size, FLAGS.jit_compile, precision,
                 round(batch_size / m["ours"], 1),
                 round(batch_size / m["model_garden"], 1),
                 round(m["model_garden"] / m["ours"], 3)])
    for name, step in runs.items() if FLAGS.profile else ():
      times = op_profile.op_times(step, FLAGS.profile)
      print("  %s %s: %.1f ms of op time per step" % (
          name, precision, 1000 * sum(times.values())))
      op_profile.print_top(times, 12, width=40, indent="    ")
      tables.append(results.table(
          "%s %s: %.1f ms of op time per step, top op types" % (
              name, precision, 1000 * sum(times.values())),
          ["op type", "ms per step", "% of op time"],
          op_profile.top_rows(times, 12)))
  speedups = []
  for precision in ours if "float32" in ours else ():
    if precision != "float32":
      print("ours %s / ours float32 = %.2fx" %
            (precision, ours["float32"] / ours[precision]))
      speedups.append([precision, round(ours["float32"] / ours[precision],
                                        2)])
  if FLAGS.record:
    tables.insert(0, results.table(
        "Fine-tuning examples/s", ["L", "H", "seq", "batch", "xla",
                                   "precision", "ours", "model_garden",
                                   "ours/model_garden"], rows))
    if speedups:
      tables.insert(1, results.table("ours against ours float32",
                                     ["precision", "speed-up"], speedups))
    results.record(
        "bench_classifier", tables, results.flag_settings(FLAGS),
        headline={"fine-tuning %s %s%s: ours/Model Garden" % (
            SHAPE_NAMES[shape], row[5], " XLA" if FLAGS.jit_compile else ""):
                  row[-1] for row in rows})


if __name__ == "__main__":
  app.run(main)
