"""learn_vocab.py end to end vs the TensorFlow pipeline it replaced.

Builds corpora of at least --megabytes and four times that from
../shared/data/corpus (Gutenberg and WikiText-2 pre-training files,
repeated) and learns a 30522-entry vocab (num_unused 99) from each twice,
each in a fresh process:
- "TF": what learn_vocab.py did before: import TensorFlow, count the
  original BasicTokenizer's words with TensorFlow ops
  (tokenization.graph.split_words), learn with TensorFlow Text's WordPiece
  learner;
- "ours": learn_vocab.py as it is (pure-Python counting, the vectorized
  learner, no TensorFlow).
Prints wall times, the TF run's phases, ratios, and whether the two vocab
files are identical.

  .venv/bin/python benchmarks/speed/bench_learn_vocab.py [--megabytes=5]
      [--norecord]
"""

import json
import os
import subprocess
import sys
import tempfile
import time

REPO = os.path.abspath(os.path.join(__file__, "../../.."))
sys.path.insert(0, REPO)

from benchmarks.lib import results  # pylint: disable=g-import-not-at-top
from benchmarks.speed import bench_create_pretraining_data  # pylint: disable=g-import-not-at-top

# The replaced pipeline, run as a script: prints its phases as JSON.
_TENSORFLOW_PIPELINE = """
import collections, json, sys, time
start = time.perf_counter()
import tensorflow as tf
from tensorflow_text.tools.wordpiece_vocab import (
    wordpiece_tokenizer_learner_lib as learner)
from tokenization import graph, vocab_learning
imported = time.perf_counter()
split = tf.function(lambda texts: graph.split_words(texts, True),
                    input_signature=[tf.TensorSpec([None], tf.string)],
                    autograph=False)
counts = collections.Counter()
with open(sys.argv[1], "rb") as f:
  lines = f.read().split(b"\\n")
for begin in range(0, len(lines), 4096):
  counts.update(split(tf.constant(lines[begin:begin + 4096])).flat_values
                .numpy().tolist())
counts = {word.decode("utf-8"): n for word, n in counts.items()}
counted = time.perf_counter()
vocab = learner.learn(counts, 30522, vocab_learning.reserved_tokens(99),
                      lower_thresh=1)
learned = time.perf_counter()
with open(sys.argv[2], "w", encoding="utf-8") as f:
  f.write("".join(token + "\\n" for token in vocab))
print(json.dumps({"import": imported - start, "count": counted - imported,
                  "learn": learned - counted}))
"""


def timed_run(command):
  env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2", CUDA_VISIBLE_DEVICES="")
  start = time.perf_counter()
  result = subprocess.run(command, cwd=REPO, env=env, capture_output=True,
                          text=True)
  seconds = time.perf_counter() - start
  if result.returncode:
    sys.exit("failed: %s\n%s" % (" ".join(command), result.stderr[-3000:]))
  return seconds, result.stdout


def main():
  megabytes = 5.0
  for arg in sys.argv[1:]:
    if arg.startswith("--megabytes="):
      megabytes = float(arg.split("=", 1)[1])
  record = results.record_wanted(sys.argv[1:])
  rows = []
  print("vocab_size=30522, num_unused=99, %d CPUs" % os.cpu_count())
  with tempfile.TemporaryDirectory() as tmp:
    corpus = os.path.join(tmp, "corpus.txt")
    theirs_vocab = os.path.join(tmp, "tf_vocab.txt")
    ours_vocab = os.path.join(tmp, "our_vocab.txt")
    for scale in (1, 4):
      size = bench_create_pretraining_data.build_corpus(corpus,
                                                        megabytes * scale)
      theirs_seconds, stdout = timed_run(
          [sys.executable, "-c", _TENSORFLOW_PIPELINE, corpus, theirs_vocab])
      phases = json.loads(stdout.strip().splitlines()[-1])
      ours_seconds, _ = timed_run(
          [sys.executable, os.path.join(REPO, "learn_vocab.py"),
           "--input_file=%s" % corpus, "--output_file=%s" % ours_vocab,
           "--vocab_size=30522", "--num_unused=99"])
      with open(theirs_vocab, "rb") as a, open(ours_vocab, "rb") as b:
        identical = a.read() == b.read()
      print("%.1f MB: TF %.1f s (import %.1f, count %.1f, learn %.1f); ours "
            "%.1f s; %.1fx; vocabs identical: %s" % (
                size / 1e6, theirs_seconds, phases["import"], phases["count"],
                phases["learn"], ours_seconds, theirs_seconds / ours_seconds,
                identical), flush=True)
      rows.append([round(size / 1e6, 1), round(theirs_seconds, 1),
                   round(phases["import"], 1), round(phases["count"], 1),
                   round(phases["learn"], 1), round(ours_seconds, 1),
                   round(theirs_seconds / ours_seconds, 1), identical])
  if record:
    results.record(
        "bench_learn_vocab",
        [results.table(
            "Learning a 30522-entry vocab, seconds: TF (the replaced "
            "pipeline) vs ours (learn_vocab.py)",
            ["corpus MB", "TF", "TF import", "TF count", "TF learn", "ours",
             "TF/ours", "vocabs identical"], rows)],
        {"megabytes": megabytes},
        headline={"learn_vocab: ours/TensorFlow pipeline": rows[-1][6]})


if __name__ == "__main__":
  main()
