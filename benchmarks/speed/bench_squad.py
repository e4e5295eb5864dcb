"""SQuAD: feature conversion and fine-tuning, ours vs tf-models-official.

Part 1 (features/s): reading a SQuAD file and turning it into windowed
features (seq 384, stride 128, question 64), our runner_lib.squad with
our FullTokenizer against Model Garden's squad_lib with its own FullTokenizer
(its whole pipeline, as its users run it). Records are not written. The two
sides must give the same number of features.

Part 2 (examples/s): one fine-tuning step at seq 384, our SquadTask through
training.Trainer against Model Garden's BertSpanLabeler on its BertEncoder,
the same span loss and AdamW with clipping on both sides, one fixed batch.

Runs alternate; medians and the ratios are printed.

  .venv/bin/python benchmarks/speed/bench_squad.py [--part=all|features|finetune]
      [--repeats=3] [--small] [--batch_size=4] [--jit_compile]
"""

import os
import statistics
import sys
import tempfile
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
REPO = os.path.abspath(os.path.join(__file__, "../../.."))
sys.path.insert(0, REPO)

from absl import app  # pylint: disable=g-import-not-at-top
from absl import flags
from absl import logging
import numpy as np
import tensorflow as tf

from official.nlp.data import squad_lib
from official.nlp.modeling import models
from official.nlp.tools import tokenization as mg_tokenization

from benchmarks.lib import model_garden
from benchmarks.lib import results
from benchmarks.lib import timing
import modeling
from runner_lib.core import training
from runner_lib.squad import data as squad_data
from runner_lib.squad import features as squad_features
from runner_lib.squad import task as squad
from tests import reference
import tokenization

FLAGS = flags.FLAGS
DATA = os.path.join(os.path.dirname(REPO), "shared", "data")
flags.DEFINE_enum("part", "all", ["all", "features", "finetune"],
                  "Which comparison to run.")
flags.DEFINE_integer("repeats", 3, "Timed runs per side.")
flags.DEFINE_string("squad_dir", os.path.join(DATA, "squad"),
                    "Folder holding the SQuAD dev files.")
flags.DEFINE_string("vocab_file",
                    os.path.join(DATA, "vocab", "uncased_vocab.txt"),
                    "WordPiece vocab (uncased).")
flags.DEFINE_integer("max_seq_length", 384, "Sequence length.")
flags.DEFINE_integer("doc_stride", 128, "Window stride over the context.")
flags.DEFINE_integer("max_query_length", 64, "Question WordPieces kept.")
flags.DEFINE_bool("small", False,
                  "L=4 H=256 A=4 I=1024, batch 16, instead of BERT-Base.")
flags.DEFINE_integer("batch_size", None,
                     "Fine-tuning batch (default 4; 16 with --small).")
flags.DEFINE_bool("jit_compile", False, "XLA on both sides (fine-tuning).")
results.define_flags()

# (file name, version_2_with_negative); both converted in prediction mode.
SQUAD_FILES = (("dev-v1.1.subset-Super_Bowl_50.json", False),
               ("dev-v2.0.cs224n-half.json", True))


def convert_ours(path, version_2):
  """Our reading and conversion; returns the features' input_ids."""
  # A new FullTokenizer per run (built outside the timer, as theirs), so
  # its word cache starts empty as in a fresh run_squad.py process.
  tokenizer = tokenization.FullTokenizer(FLAGS.vocab_file, do_lower_case=True)
  ids = []
  start = time.perf_counter()
  examples, _ = squad_data.read_squad_examples(path, False, version_2)
  count = squad_features.convert_examples_to_features(
      examples, tokenizer, FLAGS.max_seq_length, FLAGS.doc_stride,
      FLAGS.max_query_length, False, lambda f: ids.append(f.input_ids))
  seconds = time.perf_counter() - start
  assert count == len(ids), (count, len(ids))
  return seconds, ids


def convert_theirs(path, version_2):
  """squad_lib's reading and conversion with its own tokenizer."""
  tokenizer = mg_tokenization.FullTokenizer(FLAGS.vocab_file, True)
  ids = []

  def output_fn(feature, is_padding=False):
    if not is_padding:
      ids.append(feature.input_ids)

  start = time.perf_counter()
  examples = squad_lib.read_squad_examples(path, False, version_2)
  # batch_size=1: prediction mode pads the features to a whole number of
  # batches, so with 1 it adds none (output_fn skips padding regardless).
  squad_lib.convert_examples_to_features(
      examples, tokenizer, FLAGS.max_seq_length, FLAGS.doc_stride,
      FLAGS.max_query_length, False, output_fn, batch_size=1)
  seconds = time.perf_counter() - start
  return seconds, ids


def bench_features():
  """Part 1: features/s on each SQuAD file, both sides alternated.

  Returns:
    a row of the printed numbers per file timed (none where skipped).
  """
  for path in (FLAGS.squad_dir, FLAGS.vocab_file):
    if not os.path.exists(path):
      print("features: skipped, %s is missing (set --squad_dir / "
            "--vocab_file)" % os.path.abspath(path))
      return []
  files = []
  for name, version_2 in SQUAD_FILES:
    path = os.path.join(FLAGS.squad_dir, name)
    if os.path.exists(path):
      files.append((name, version_2))
    else:
      print("features: skipped %s, %s is missing" %
            (name, os.path.abspath(path)))
  if not files:
    return []
  runs = {"ours": convert_ours, "squad_lib": convert_theirs}
  # Warm-up, untimed: imports, first-call costs.
  first = os.path.join(FLAGS.squad_dir, files[0][0])
  for fn in runs.values():
    fn(first, files[0][1])
  rows = []
  for name, version_2 in files:
    path = os.path.join(FLAGS.squad_dir, name)
    times = {k: [] for k in runs}
    outputs = {}
    for _ in range(FLAGS.repeats):
      for key, fn in runs.items():
        seconds, ids = fn(path, version_2)
        times[key].append(seconds)
        outputs[key] = ids
    count = len(outputs["ours"])
    assert count == len(outputs["squad_lib"]), (
        name, count, len(outputs["squad_lib"]))
    same = sum(a == b for a, b in zip(outputs["ours"], outputs["squad_lib"]))
    m = {k: statistics.median(v) for k, v in times.items()}
    print("features %s seq=%d: ours %d features in %.2f s (%.0f features/s), "
          "squad_lib %d features in %.2f s (%.0f features/s), "
          "ratio ours/squad_lib = %.2f; identical input_ids %d/%d" %
          (name, FLAGS.max_seq_length, count, m["ours"], count / m["ours"],
           count, m["squad_lib"], count / m["squad_lib"],
           m["squad_lib"] / m["ours"], same, count))
    rows.append([name, version_2, FLAGS.max_seq_length, count,
                 round(m["ours"], 2), round(count / m["ours"]),
                 round(m["squad_lib"], 2), round(count / m["squad_lib"]),
                 round(m["squad_lib"] / m["ours"], 2), same])
  return rows


def bench_finetune():
  """Part 2: fine-tuning examples/s at seq 384, both sides alternated.

  Returns:
    the printed numbers, a row.
  """
  fields = (dict(hidden_size=256, num_hidden_layers=4, num_attention_heads=4,
                 intermediate_size=1024) if FLAGS.small else {})
  config = modeling.BertConfig(vocab_size=30522, type_vocab_size=2, **fields)
  batch_size = FLAGS.batch_size or (16 if FLAGS.small else 4)
  seq_length = FLAGS.max_seq_length
  rng = np.random.RandomState(0)
  lengths = rng.randint(seq_length // 2, seq_length + 1, [batch_size])
  mask = (np.arange(seq_length)[None] < lengths[:, None]).astype(np.int32)
  query = rng.randint(8, 40, [batch_size])
  starts = np.array([rng.randint(q + 2, n - 1)
                     for q, n in zip(query, lengths)])
  ends = np.minimum(starts + rng.randint(0, 10, [batch_size]), lengths - 2)
  batch = {"input_ids": tf.constant(rng.randint(1000, 30000, mask.shape) *
                                    mask, tf.int32),
           "input_mask": tf.constant(mask),
           "segment_ids": tf.constant((np.arange(seq_length)[None] >=
                                       query[:, None] + 2) * mask, tf.int32),
           "start_positions": tf.constant(starts, tf.int32),
           "end_positions": tf.constant(ends, tf.int32),
           "unique_ids": tf.constant(np.arange(batch_size) + 1000000000,
                                     tf.int32)}

  task = squad.SquadTask(config, seq_length)
  trainer = training.Trainer(
      tf.distribute.get_strategy(), task.build_model, task.loss,
      training.TrainingConfig(output_dir=tempfile.mkdtemp(),
                              learning_rate=3e-5, num_train_steps=10000,
                              num_warmup_steps=100,
                              jit_compile=FLAGS.jit_compile))
  ours = tf.function(lambda: trainer.train_step(batch))

  theirs_model = models.BertSpanLabeler(reference.model_garden_encoder(config))
  theirs = model_garden.train_step(
      theirs_model, batch,
      lambda logits: (squad.span_loss(logits[0], batch["start_positions"]) +
                      squad.span_loss(logits[1], batch["end_positions"])) / 2,
      3e-5, FLAGS.jit_compile)

  m = timing.alternated_medians(
      {"ours": lambda: float(ours()), "model_garden": lambda: float(theirs())},
      FLAGS.repeats)
  print("L=%d H=%d seq=%d batch=%d xla=%s: ours %.2f examples/s, "
        "model_garden %.2f examples/s, ratio ours/model_garden = %.3f" %
        (config.num_hidden_layers, config.hidden_size, seq_length, batch_size,
         FLAGS.jit_compile, batch_size / m["ours"],
         batch_size / m["model_garden"], m["model_garden"] / m["ours"]))
  return [config.num_hidden_layers, config.hidden_size, seq_length,
          batch_size, FLAGS.jit_compile, round(batch_size / m["ours"], 2),
          round(batch_size / m["model_garden"], 2),
          round(m["model_garden"] / m["ours"], 3)]


def main(argv):
  del argv
  # Both converters log their first 20 features in full at INFO; keep that
  # (and its terminal I/O) out of the output and the timings.
  logging.set_verbosity(logging.WARNING)
  tables, headline = [], {}
  if FLAGS.part in ("all", "features"):
    rows = bench_features()
    if rows:
      tables.append(results.table(
          "Feature conversion (prediction mode): ours vs squad_lib",
          ["file", "version_2", "seq", "features", "ours s",
           "ours features/s", "squad_lib s", "squad_lib features/s",
           "ours/squad_lib", "identical input_ids"], rows))
    for row in rows:
      headline["SQuAD %s feature conversion: ours/squad_lib" % (
          "v2.0" if row[1] else "v1.1")] = row[8]
  if FLAGS.part in ("all", "finetune"):
    row = bench_finetune()
    tables.append(results.table(
        "Fine-tuning examples/s", ["L", "H", "seq", "batch", "xla", "ours",
                                   "model_garden", "ours/model_garden"],
        [row]))
    headline["SQuAD fine-tuning %s%s: ours/Model Garden" % (
        "L=4 H=256" if FLAGS.small else "BERT-Base",
        " XLA" if FLAGS.jit_compile else "")] = row[-1]
  if FLAGS.record and tables:
    results.record("bench_squad", tables, results.flag_settings(FLAGS),
                   headline=headline)


if __name__ == "__main__":
  app.run(main)
