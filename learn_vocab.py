"""Learns a WordPiece vocab.txt from plain text, for pre-training from scratch.

The original release shipped vocabs but no way to make one. This learns one
with TensorFlow Text's WordPiece learner algorithm (vectorized here, no
TensorFlow needed) from the words the original BasicTokenizer makes, and
prints the vocab_size to put in bert_config.json:

  python learn_vocab.py --input_file=corpus/*.txt --output_file=vocab.txt \
    --vocab_size=30522 --do_lower_case=True --num_unused=99
"""

import os

if __name__ == "__main__":
  # TensorFlow would import Keras 3 as it starts (~1.2 s); Keras here is
  # tf_keras, so tf.keras may be too (docs/contributing.md, Keras).
  os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")
# pylint: disable=g-import-not-at-top

from absl import flags
from absl import logging

from runner_lib.core import errors
from runner_lib.core import gfile
from runner_lib.core.cli import progress
from runner_lib.core.files import fileio
from runner_lib.core.inputs import text_input
from tokenization import vocab_learning

FLAGS = flags.FLAGS

# Required.
flags.DEFINE_string("input_file", None,
                    "Required. Comma-separated globs of UTF-8 text files.")
flags.DEFINE_string("output_file", None, "Required. Where to write vocab.txt.")

# Optional.
flags.DEFINE_integer("vocab_size", 30522,
                     "Target size: the learner aims within 5% below it, and "
                     "overshoots where no count threshold lands there.")
flags.DEFINE_bool("do_lower_case", True,
                  "Lower-case and strip accents first (an uncased vocab).")
flags.DEFINE_integer(
    "num_unused", 0,
    "[unusedN] slots after [PAD]; 99 gives Google's ids for [UNK] [CLS] "
    "[SEP] [MASK] (100-103).")
flags.DEFINE_integer("max_unique_chars", 1000,
                     "Alphabet cap; words with rarer characters are dropped.")


def main(_):
  if FLAGS.num_unused < 0:
    raise errors.InputError("--num_unused must be >= 0, got %d." %
                            FLAGS.num_unused)
  if FLAGS.vocab_size <= len(vocab_learning.reserved_tokens(FLAGS.num_unused)):
    raise errors.InputError(
        "--vocab_size=%d leaves no room beside %d reserved tokens." %
        (FLAGS.vocab_size,
         len(vocab_learning.reserved_tokens(FLAGS.num_unused))))
  fileio.check_output_file(FLAGS.output_file)
  files = text_input.expand_globs(FLAGS.input_file)
  total_bytes = sum(gfile.size(f) for f in files)
  counter = progress.Progress("Counting words", total_bytes / 1e6)
  counts = vocab_learning.count_words(
      text_input.read_lines(files), FLAGS.do_lower_case,
      progress=lambda done, counts: counter.update(
          done / 1e6, distinct_words=len(counts)))
  if not counts:
    raise errors.InputError("--input_file %s holds no words." %
                            FLAGS.input_file)
  logging.info("%d distinct words, %d in all, from %d files. Learning the "
               "vocab.", len(counts), sum(counts.values()), len(files))
  vocab = vocab_learning.learn_vocab(counts, FLAGS.vocab_size,
                                     FLAGS.num_unused, FLAGS.max_unique_chars)
  with fileio.atomic_output(FLAGS.output_file) as writer:
    writer.write("".join(token + "\n" for token in vocab))
  print("Wrote %s: vocab_size = %d (put this in bert_config.json)" %
        (FLAGS.output_file, len(vocab)))


if __name__ == "__main__":
  flags.mark_flags_as_required(["input_file", "output_file"])
  errors.run(main)
