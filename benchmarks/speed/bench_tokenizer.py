"""Tokenization throughput: batch (TensorFlow Text) vs the pure-Python original.

The same text goes through tf-models-official's pure-Python port of the 2018
FullTokenizer (with the 2018 200-character word limit, i.e. the original
algorithm), our per-string FullTokenizer.tokenize, and our batch methods.
Outputs are checked to be identical; MB/s (UTF-8 input bytes per second,
median of the repeats) and ratios to the original are printed.

  .venv/bin/python benchmarks/speed/bench_tokenizer.py [--megabytes=4] [--repeats=3]
"""

import concurrent.futures
import os
import statistics
import sys
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
REPO = os.path.abspath(os.path.join(__file__, "../../.."))
sys.path.insert(0, REPO)

from absl import app  # pylint: disable=g-import-not-at-top
from absl import flags
import tensorflow as tf
import tensorflow_text as tf_text

from official.nlp.tools import tokenization as port

from benchmarks.lib import results
import tokenization
from tokenization import tokenizers
from tokenization import wordpiece as wordpiece_lib

FLAGS = flags.FLAGS
DATA = os.path.join(os.path.dirname(REPO), "shared", "data")
flags.DEFINE_string("vocab_file",
                    os.path.join(DATA, "vocab", "uncased_vocab.txt"),
                    "WordPiece vocab.")
flags.DEFINE_string(
    "input_files",
    ",".join(os.path.join(DATA, "corpus", f) for f in (
        "wikitext2_test_pretrain.txt", "gutenberg_pretrain.txt")),
    "Comma-separated text files, read line by line.")
flags.DEFINE_float("megabytes", 4.0, "How much text to tokenize.")
flags.DEFINE_integer("repeats", 3, "Timed runs per tokenizer.")
flags.DEFINE_bool("do_lower_case", True, "Lower-case.")
results.define_flags()


def read_lines(paths, limit_bytes):
  lines, size = [], 0
  for path in paths:
    with open(path, encoding="utf-8") as f:
      for line in f:
        line = line.rstrip("\n")
        if line:
          lines.append(line)
          size += len(line.encode("utf-8"))
          if size >= limit_bytes:
            return lines, size
  return lines, size


def main(argv):
  del argv
  lines, size = read_lines(FLAGS.input_files.split(","),
                           int(FLAGS.megabytes * 2**20))
  ours = tokenization.FullTokenizer(FLAGS.vocab_file, FLAGS.do_lower_case)
  basic = port.BasicTokenizer(do_lower_case=FLAGS.do_lower_case)
  wordpiece = port.WordpieceTokenizer(port.load_vocab(FLAGS.vocab_file),
                                      max_input_chars_per_word=200)

  def original(texts):
    return [[p for w in basic.tokenize(t) for p in wordpiece.tokenize(w)]
            for t in texts]

  fast_bert = tf_text.FastBertTokenizer(
      vocab=list(ours.vocab), suffix_indicator="##", max_bytes_per_word=200,
      token_out_type=tf.int64, unknown_token="[UNK]",
      lower_case_nfd_strip_accents=FLAGS.do_lower_case)
  fast_bert_fn = tf.function(fast_bert.tokenize,
                             input_signature=[tf.TensorSpec([None],
                                                            tf.string)])

  def fast_bert_chunk(texts):
    ids = fast_bert_fn(tf.constant([t.encode("utf-8") for t in texts]))
    flat = ids.flat_values.numpy().tolist()
    splits = ids.row_splits.numpy().tolist()
    return [flat[b:e] for b, e in zip(splits, splits[1:])]

  def fast_bert_ids(texts, threads=1):
    """TensorFlow Text's FastBertTokenizer alone, with the same chunks and
    conversion from and to Python lists as batch_tokenize_ids; chunks run
    on `threads` threads (batch_tokenize_ids uses one per core)."""
    chunk = tokenizers.BATCH_CHUNK
    chunks = [texts[start:start + chunk]
              for start in range(0, len(texts), chunk)]
    with concurrent.futures.ThreadPoolExecutor(threads) as pool:
      return [row for rows in pool.map(fast_bert_chunk, chunks)
              for row in rows]

  runs = [
      ("original (pure Python port)", original),
      ("ours FullTokenizer.tokenize",
       lambda ts: [ours.tokenize(t) for t in ts]),
      ("ours batch_tokenize", ours.batch_tokenize),
      ("ours batch_tokenize_ids", ours.batch_tokenize_ids),
      # Pure Python, no TensorFlow (create_pretraining_data's); a new one
      # per run, so its word cache starts empty each time.
      ("ours IdTokenizer (no TF)_ids", lambda ts: wordpiece_lib.IdTokenizer(
          ours.vocab, FLAGS.do_lower_case).tokenize_ids_batch(ts)),
      ("TF Text FastBertTokenizer_ids", fast_bert_ids),
      ("TF Text FastBertTokenizer, threads_ids",
       lambda ts: fast_bert_ids(ts, os.cpu_count())),
  ]
  ours.batch_tokenize_ids(lines[:100])  # trace once, outside the timings
  fast_bert_ids(lines[:100])
  print("%d lines, %.2f MB of text, do_lower_case=%s, %d repeats (medians)" %
        (len(lines), size / 2**20, FLAGS.do_lower_case, FLAGS.repeats))
  reference = None
  speeds = {}
  rows = []
  for name, fn in runs:
    times = []
    for _ in range(FLAGS.repeats):
      start = time.perf_counter()
      output = fn(lines)
      times.append(time.perf_counter() - start)
    if reference is None:
      reference = output
      reference_ids = [ours.convert_tokens_to_ids(t) for t in reference]
    if name.startswith("TF Text"):
      # Not the original's tokenizer: report where it differs.
      differs = sum(a != b for a, b in zip(output, reference_ids))
      agreement = "differs on %d lines" % differs
    else:
      assert output == (reference_ids if name.endswith("_ids") else
                        reference), name
      agreement = "identical output"
    speeds[name] = size / 2**20 / statistics.median(times)
    print("%-30s %7.2f MB/s  ratio to original %6.2fx  (%s)" %
          (name, speeds[name], speeds[name] / speeds[runs[0][0]], agreement),
          flush=True)
    rows.append([name, round(speeds[name], 2),
                 round(speeds[name] / speeds[runs[0][0]], 2), agreement])
  print("ratio ours batch_tokenize_ids / FastBertTokenizer = %.2f (as "
        "called: one op per chunk, one after the other); / FastBertTokenizer "
        "on as many threads as ours = %.2f" % (
            speeds["ours batch_tokenize_ids"] /
            speeds["TF Text FastBertTokenizer_ids"],
            speeds["ours batch_tokenize_ids"] /
            speeds["TF Text FastBertTokenizer, threads_ids"]))
  if FLAGS.record:
    ours_ids = speeds["ours batch_tokenize_ids"]
    results.record(
        "bench_tokenizer",
        [results.table("Tokenization, MB/s of UTF-8 input",
                       ["tokenizer", "MB/s", "ratio to original", "output"],
                       rows),
         results.table(
             "ours batch_tokenize_ids against TF Text's FastBertTokenizer",
             ["FastBertTokenizer", "ratio ours/FastBertTokenizer"],
             [["as called: one op per chunk, one after the other",
               round(ours_ids / speeds["TF Text FastBertTokenizer_ids"], 2)],
              ["on as many threads as ours", round(
                  ours_ids / speeds["TF Text FastBertTokenizer, threads_ids"],
                  2)]])],
        results.flag_settings(FLAGS),
        headline={"tokenizer batch_tokenize_ids: ours/original":
                  round(ours_ids / speeds[runs[0][0]], 2)},
        notes=["%d lines, %.2f MB of text" % (len(lines), size / 2**20)])


if __name__ == "__main__":
  app.run(main)
