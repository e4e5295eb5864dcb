"""GPU throughput and MFU: ours vs Model Garden, one script for a device run.

Pre-training steps (masked LM + next sentence, AdamW with clipping:
train_steps.py's) and fine-tuning steps (sentence-pair
classification: bench_classifier.py's batch) for BERT-Base and
BERT-Large at seq 128 and 512, bfloat16 compute with XLA by default, ours
and Model Garden's alternated in one run. Prints sequences/s, model FLOP
utilisation against --peak_tflops and the ratio.

  .venv/bin/python benchmarks/speed/bench_gpu.py            # on the GPU machine
  .venv/bin/python benchmarks/speed/bench_gpu.py --tiny     # a CPU smoke test

FLOPs per step count the matmuls, forward and backward (3x forward): 2 *
weights per token in the encoder's dense layers, 4 * T * H per token per
layer in attention, and the masked-LM output layer on its predicted
positions (pre-training) or the classifier (fine-tuning).
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
from benchmarks.lib import results
from benchmarks.lib import train_steps
from benchmarks.lib import timing
import modeling
from runner_lib.classifier import task as classifier
from runner_lib.core import training
from tests import reference

FLAGS = flags.FLAGS
flags.DEFINE_list("models", ["base", "large"], "base, large.")
flags.DEFINE_list("seq_lengths", ["128", "512"], "Sequence lengths.")
flags.DEFINE_enum("precision", "bfloat16", ["float32", "bfloat16"],
                  "Compute precision (mixed: float32 weights).")
flags.DEFINE_bool("xla", True, "jit_compile on both sides.")
flags.DEFINE_integer("repeats", 20, "Timed steps per model and setting.")
flags.DEFINE_float("peak_tflops", 989.0, "The device's dense peak for the "
                   "precision (H100/H200 bfloat16: 989).")
flags.DEFINE_bool("tiny", False, "A 2-layer H=64 model, small batches: a "
                  "quick check that the script runs (e.g. on CPU).")
results.define_flags()

MODELS = {
    "base": dict(hidden_size=768, num_hidden_layers=12,
                 num_attention_heads=12, intermediate_size=3072),
    "large": dict(hidden_size=1024, num_hidden_layers=24,
                  num_attention_heads=16, intermediate_size=4096),
    "tiny": dict(hidden_size=64, num_hidden_layers=2, num_attention_heads=2,
                 intermediate_size=128),
}
# Sequences per step by (model, seq length): what fits an 80+ GB device
# with room to spare.
BATCH = {("base", 128): 256, ("base", 512): 64, ("large", 128): 128,
         ("large", 512): 32}
PREDICTIONS = {128: 20, 512: 76}


def step_flops(config, batch_size, seq_length, output_rows, output_width):
  """Matmul FLOPs of one training step (forward and backward).

  Args:
    config: modeling.BertConfig.
    batch_size: int.
    seq_length: int.
    output_rows: int, rows through the output layer (masked positions, or
      one per sequence for a classifier).
    output_width: int, its width (vocab size, or the labels).

  Returns:
    float.
  """
  h, i = config.hidden_size, config.intermediate_size
  tokens = batch_size * seq_length
  dense = 2 * (4 * h * h + 2 * h * i) * tokens * config.num_hidden_layers
  attention = 4 * seq_length * h * tokens * config.num_hidden_layers
  output = 2 * output_rows * (h * h + h * output_width)
  return 3.0 * (dense + attention + output)


def classifier_steps(config, batch_size, seq_length):
  """(ours, Model Garden's) fine-tuning steps on one fixed batch."""
  batch = train_steps.classifier_batch(batch_size, seq_length,
                                      seq_length // 3)
  task = classifier.ClassificationTask(config, seq_length, ["0", "1"])
  trainer = training.Trainer(
      tf.distribute.get_strategy(), task.build_model, task.loss,
      training.TrainingConfig(output_dir="/tmp/bench_gpu", learning_rate=2e-5,
                              num_train_steps=10000, num_warmup_steps=100,
                              jit_compile=FLAGS.xla))
  ours = tf.function(lambda: trainer.train_step(batch))
  theirs = model_garden.train_step(
      models.BertClassifier(reference.model_garden_encoder(config),
                            num_classes=2, dropout_rate=0.1), batch,
      lambda logits: tf.reduce_mean(task.per_example_loss(
          tf.cast(logits, tf.float32), batch["label_ids"])), 2e-5, FLAGS.xla)
  return ours, theirs


def report(kind, name, config, batch_size, seq_length, flops, medians):
  """Prints one line of sequences/s, MFU and the ratio; returns them, a
  row."""
  cells = []
  row = [kind, name, config.num_hidden_layers, config.hidden_size,
         seq_length, batch_size, FLAGS.precision, FLAGS.xla]
  for side in ("ours", "model_garden"):
    seconds = medians[side]
    cells.append("%s %.1f seq/s MFU %.1f%%" % (
        side, batch_size / seconds,
        100 * flops / seconds / (FLAGS.peak_tflops * 1e12)))
    row += [round(batch_size / seconds, 1),
            round(100 * flops / seconds / (FLAGS.peak_tflops * 1e12), 1)]
  print("%s %s L=%d H=%d seq=%d batch=%d %s xla=%s: %s; ratio "
        "ours/model_garden = %.3f" %
        (kind, name, config.num_hidden_layers, config.hidden_size,
         seq_length, batch_size, FLAGS.precision, FLAGS.xla,
         ", ".join(cells), medians["model_garden"] / medians["ours"]),
        flush=True)
  return row + [round(medians["model_garden"] / medians["ours"], 3)]


def main(argv):
  del argv
  if FLAGS.precision != "float32":
    tf_keras.mixed_precision.set_global_policy("mixed_" + FLAGS.precision)
  print("TensorFlow %s, devices %s" % (tf.__version__, [
      d.device_type for d in tf.config.list_physical_devices()]))
  names = ["tiny"] if FLAGS.tiny else FLAGS.models
  rows = []
  for name in names:
    for seq_length in [int(s) for s in FLAGS.seq_lengths]:
      config = modeling.BertConfig(vocab_size=30522, type_vocab_size=2,
                                   max_position_embeddings=512,
                                   **MODELS[name])
      batch_size = 4 if FLAGS.tiny else BATCH[(name, seq_length)]
      predictions = PREDICTIONS.get(seq_length, 20)
      batch = train_steps.make_batch(config, batch_size, seq_length,
                                           predictions)
      steps = {"ours": train_steps.ours_step(
          config, batch, seq_length, predictions, FLAGS.xla),
               "model_garden": train_steps.model_garden_step(
                   config, batch, FLAGS.xla)}
      medians = timing.alternated_medians(
          {k: (lambda fn=fn: float(fn())) for k, fn in steps.items()},
          FLAGS.repeats)
      rows.append(report("pretraining", name, config, batch_size, seq_length,
                         step_flops(config, batch_size, seq_length,
                                    batch_size * predictions,
                                    config.vocab_size), medians))
      ours, theirs = classifier_steps(config, batch_size, seq_length)
      medians = timing.alternated_medians(
          {"ours": lambda: float(ours()),
           "model_garden": lambda: float(theirs())}, FLAGS.repeats)
      rows.append(report("finetuning", name, config, batch_size,
                         seq_length, step_flops(config, batch_size,
                                                seq_length, batch_size, 2),
                         medians))
  if FLAGS.record:
    device = results.device_name()
    results.record(
        "bench_gpu",
        [results.table(
            "Sequences/s and MFU (against %g TFLOP/s) on %s" % (
                FLAGS.peak_tflops, device),
            ["kind", "model", "L", "H", "seq", "batch", "precision", "xla",
             "ours seq/s", "ours MFU %", "model_garden seq/s",
             "model_garden MFU %", "ours/model_garden"], rows)],
        results.flag_settings(FLAGS, device=device),
        headline={"%s BERT-Base seq 128 on %s: ours/Model Garden" % (
            row[0], device): row[-1]
                  for row in rows if row[1] == "base" and row[4] == 128})


if __name__ == "__main__":
  app.run(main)
