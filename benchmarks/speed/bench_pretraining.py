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

Then BERT-Base on real text (--real_text, recorded apart as
bench_pretraining_real_text): records create_pretraining_data.py writes
from WikiText-2's test split (../shared/data/corpus), batches drawn from
them, their padding share printed; ours as run_pretraining.py runs it (the
encoder on real tokens only, --skip_padding), ours with every position
computed (--skip_padding=false) and Model Garden's, float32, no XLA,
examples/s over the same batches.

  .venv/bin/python benchmarks/speed/bench_pretraining.py [--repeats=10]
      [--shapes=small,base] [--xla=false,true] [--precision=float32,bfloat16]
      [--real_text=128,512] [--real_text_batches=4]
"""

import os
import random
import statistics
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
sys.path.insert(0, os.path.abspath(os.path.join(__file__, "../../..")))

from absl import app  # pylint: disable=g-import-not-at-top
from absl import flags
import numpy as np
import tensorflow as tf
import tf_keras

from benchmarks.lib import results
from benchmarks.lib import train_steps
from benchmarks.lib import timing
import modeling
from runner_lib.pretraining import data as pretraining_data
from runner_lib.pretraining import documents as pretraining_documents
from runner_lib.pretraining import instances as pretraining_instances
from tests.conftest import SHARED_DATA
from tokenization import wordpiece

FLAGS = flags.FLAGS
flags.DEFINE_integer("repeats", 10, "Timed steps per model and setting.")
flags.DEFINE_string("shapes", "small,base", "Comma-separated: small, base.")
flags.DEFINE_string("xla", "false,true", "Comma-separated jit_compile values.")
flags.DEFINE_string("precision", "float32,bfloat16",
                    "Comma-separated: float32, bfloat16.")
flags.DEFINE_string("real_text", "128,512",
                    "Comma-separated sequence lengths of the real-text "
                    "rows; empty: none.")
flags.DEFINE_integer("real_text_batches", 4,
                     "Batches (of the base shape's size) per timed pass of "
                     "the real-text rows.")
flags.DEFINE_integer("real_text_repeats", 3,
                     "Timed passes per variant of the real-text rows.")
results.define_flags()

CORPUS = os.path.join(SHARED_DATA, "corpus", "wikitext2_test_pretrain.txt")
VOCAB = os.path.join(SHARED_DATA, "vocab", "uncased_vocab.txt")
REAL_TEXT_COLUMNS = ["seq", "batch", "batches", "records' padding %",
                     "batches' padding %", "ours ex/s",
                     "ours_padded ex/s", "model_garden ex/s",
                     "ours/ours_padded", "ours/model_garden"]

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


def predictions_per_seq(seq_length):
  """The original's 20 at seq 128; 15% of the positions above (76 at
  512)."""
  return max(20, int(0.15 * seq_length))


def real_text_batches(seq_length, batch_size, count):
  """count batches of records that create_pretraining_data.py writes from
  WikiText-2's test split (its defaults, dupe_factor 1, --random_seed
  12345): a systematic sample over the records sorted by length (every
  n / (batch_size * count)-th), shuffled into batches (seed 0), so that
  the few timed batches hold the records' share of padding (a random
  draw of 32 of them can miss it by a third).

  Returns:
    (list of dicts of Tensors as the input pipeline parses them, the
    records' padding share).
  """
  vocab = wordpiece.load_vocab(VOCAB)
  with open(CORPUS, encoding="utf-8") as f:
    documents = pretraining_documents.read_documents(
        f, wordpiece.IdTokenizer(vocab, True).tokenize_ids)
  predictions = predictions_per_seq(seq_length)
  records = list(pretraining_instances.create_training_records(
      documents, pretraining_instances.InstanceOptions(
          seq_length, 0.1, 0.15, predictions, False),
      pretraining_instances.MaskingVocab(vocab), 1, random.Random(12345)))
  features = pretraining_data.pretraining_features(seq_length, predictions)
  lengths = tf.reduce_sum(tf.io.parse_example(records, {
      "input_mask": features["input_mask"]})["input_mask"], 1).numpy()
  by_length = np.argsort(lengths, kind="stable")
  step = len(records) / (batch_size * count)
  chosen = by_length[(np.arange(batch_size * count) * step +
                      step / 2).astype(int)]
  np.random.RandomState(0).shuffle(chosen)
  parsed = tf.io.parse_example([records[i] for i in chosen], features)
  parsed = {k: tf.cast(v, tf.int32) if v.dtype == tf.int64 else v
            for k, v in parsed.items()}
  return [{k: v[i * batch_size:(i + 1) * batch_size]
           for k, v in parsed.items()} for i in range(count)], (
               1 - lengths.mean() / seq_length)


def bench_real_text(seq_length):
  """BERT-Base on real-text batches at seq_length: ours unpadded, ours
  padded, Model Garden; prints and returns a REAL_TEXT_COLUMNS row."""
  fields, batch_size, _, _ = train_steps.SHAPES["base"]
  config = modeling.BertConfig(**fields)
  batches, records_padding = real_text_batches(seq_length, batch_size,
                                               FLAGS.real_text_batches)
  padding = 100 * (1 - float(np.mean([b["input_mask"].numpy().mean()
                                      for b in batches])))
  predictions = predictions_per_seq(seq_length)
  steps = {
      "ours": train_steps.pretraining_batch_step(config, seq_length,
                                                 predictions, True),
      "ours_padded": train_steps.pretraining_batch_step(
          config, seq_length, predictions, False),
      "model_garden": train_steps.model_garden_pretraining_batch_step(
          config)}
  times = timing.alternated_times(
      {name: (lambda step=step: [float(step(b)) for b in batches])
       for name, step in steps.items()}, FLAGS.real_text_repeats, warmup=1)
  examples = batch_size * len(batches)
  rate = {name: examples / statistics.median(t) for name, t in times.items()}
  row = [seq_length, batch_size, len(batches),
         round(100 * records_padding, 1), round(padding, 1),
         round(rate["ours"], 3), round(rate["ours_padded"], 3),
         round(rate["model_garden"], 3),
         round(timing.paired_ratio(times, "ours_padded", "ours"), 3),
         round(timing.paired_ratio(times, "model_garden", "ours"), 3)]
  print("base real text seq=%d: %d batches of %d, padding %.1f%% of the "
        "records, %.1f%% of the batches: ours %.3f, ours_padded %.3f, "
        "model_garden %.3f examples/s; ours/ours_padded %.3f, "
        "ours/model_garden %.3f" %
        tuple([row[0], row[2], row[1]] + row[3:]), flush=True)
  return row


def main(argv):
  del argv
  print("TensorFlow %s, %d CPUs, %d repeats (medians)" %
        (tf.__version__, os.cpu_count(), FLAGS.repeats))
  precisions = FLAGS.precision.split(",")
  peaks = {precision: [] for precision in precisions}
  rows, speedups = [], []
  for name in [n for n in FLAGS.shapes.split(",") if n]:
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
  real_text = [int(n) for n in FLAGS.real_text.split(",") if n]
  real_rows = []
  if real_text and not os.path.exists(CORPUS):
    print("Real-text rows skipped: %s is absent (../shared/data)." % CORPUS)
  elif real_text:
    real_rows = [bench_real_text(n) for n in real_text]
  if FLAGS.record and real_rows:
    results.record(
        "bench_pretraining_real_text",
        [results.table("Pre-training BERT-Base on real text, float32",
                       REAL_TEXT_COLUMNS, real_rows)],
        results.flag_settings(FLAGS),
        headline={"pre-training BERT-Base seq %d on real text: unpadded / "
                  "padded" % row[0]: row[8] for row in real_rows})
  if FLAGS.record and rows:
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
