"""learn_vocab: our vectorized WordPiece learner vs TensorFlow Text's.

Builds corpora of at least --megabytes and four times that from
../shared/data/corpus (Gutenberg and WikiText-2 pre-training files,
repeated), counts their words as learn_vocab.py does, and learns a
30522-entry vocab (num_unused 99) with TensorFlow Text's learner (what
learn_vocab.py used before) and with ours; checks the vocabs are identical
and prints seconds and ratios. Whole-run time = counting + learning (the
script adds the TensorFlow import, about 4 s, to both).

  .venv/bin/python benchmarks/bench_learn_vocab.py [--megabytes=5]
"""

import os
import sys
import tempfile
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, REPO)

from tensorflow_text.tools.wordpiece_vocab import wordpiece_tokenizer_learner_lib as reference  # pylint: disable=g-import-not-at-top

from benchmarks import bench_create_pretraining_data
from tokenization import vocab_learning
from tokenization import wordpiece_learner


def timed(function, *args, **kwargs):
  start = time.perf_counter()
  result = function(*args, **kwargs)
  return time.perf_counter() - start, result


def main():
  megabytes = 5.0
  for arg in sys.argv[1:]:
    if arg.startswith("--megabytes="):
      megabytes = float(arg.split("=", 1)[1])
  reserved = vocab_learning.reserved_tokens(99)
  handle, path = tempfile.mkstemp(suffix=".txt")
  os.close(handle)
  print("vocab_size=30522, num_unused=99, lower_thresh=1, %d CPUs" %
        os.cpu_count())
  try:
    for scale in (1, 4):
      size = bench_create_pretraining_data.build_corpus(path,
                                                        megabytes * scale)
      with open(path, encoding="utf-8") as f:
        count_seconds, counts = timed(vocab_learning.count_words, f, True)
      theirs_seconds, theirs = timed(reference.learn, counts, 30522, reserved,
                                     lower_thresh=1)
      ours_seconds, ours = timed(wordpiece_learner.learn, counts, 30522,
                                 reserved, lower_thresh=1)
      print("%.1f MB, %d distinct words: counting %.1f s; learner: TF Text "
            "%.1f s, ours %.1f s (%.1fx); count + learn %.1fx; vocab %d "
            "entries, identical: %s" % (
                size / 1e6, len(counts), count_seconds, theirs_seconds,
                ours_seconds, theirs_seconds / ours_seconds,
                (count_seconds + theirs_seconds) /
                (count_seconds + ours_seconds), len(ours), ours == theirs),
            flush=True)
  finally:
    if os.path.exists(path):
      os.remove(path)


if __name__ == "__main__":
  main()
