"""run_squad.py's SQuAD flags, shared with export_saved_model.py --task=squad
so both window, search and threshold the same way."""

from absl import flags
from absl import logging

from runner_lib.core import errors
from runner_lib.core.cli import flags as runner_flags
from runner_lib.squad import features

FLAGS = flags.FLAGS


def define_window_flags():
  """Windowing: --doc_stride and --max_query_length."""
  flags.DEFINE_integer(
      "doc_stride", 128,
      "When splitting up a long document into chunks, how much stride to "
      "take between chunks.")
  flags.DEFINE_integer(
      "max_query_length", 64,
      "The maximum number of tokens for the question. Questions longer than "
      "this will be truncated to this length.")


def define_answer_flags():
  """The n-best search: --n_best_size and --max_answer_length."""
  flags.DEFINE_integer(
      "n_best_size", 20,
      "The total number of n-best predictions to generate in the "
      "nbest_predictions.json output file.")
  flags.DEFINE_integer(
      "max_answer_length", 30,
      "The maximum length of an answer that can be generated. This is "
      "needed because the start and end predictions are not conditioned on "
      "one another.")


def define_version_2_flags():
  """SQuAD 2.0: --version_2_with_negative, --null_score_diff_threshold."""
  flags.DEFINE_bool(
      "version_2_with_negative", False,
      "If true, the SQuAD examples contain some that do not have an answer.")
  flags.DEFINE_float(
      "null_score_diff_threshold", 0.0,
      "If null_score - best_non_null is greater than the threshold predict "
      "null.")


def check_flags():
  """Checks the flags above and --max_seq_length against each other.

  Raises:
    errors.InputError: naming the flag.
  """
  if FLAGS.max_seq_length <= FLAGS.max_query_length + features.SPECIAL_TOKENS:
    raise errors.InputError(
        "The max_seq_length (%d) must be greater than max_query_length "
        "(%d) + 3: [CLS] question [SEP] context [SEP] leaves no room for "
        "the context." % (FLAGS.max_seq_length, FLAGS.max_query_length))
  runner_flags.check_positive(("doc_stride", "max_query_length",
                               "n_best_size", "max_answer_length"))
  warn_disjoint_windows()


def warn_disjoint_windows():
  """Warns where --doc_stride is as wide as the context window of a question
  of max_query_length pieces, or wider.

  Windows then abut instead of overlapping, so an answer across a window's
  edge is whole in none. Nothing is skipped either way: as the original,
  a window starts min(its length, doc_stride) after the one before, and
  the original accepts any stride, so this only warns.
  """
  window = (FLAGS.max_seq_length - FLAGS.max_query_length -
            features.SPECIAL_TOKENS)
  if FLAGS.doc_stride >= window:
    logging.warning(
        "--doc_stride=%d is not below the context window of a question of "
        "--max_query_length=%d pieces (max_seq_length - max_query_length - "
        "3 = %d): such windows do not overlap, so an answer across a "
        "window's edge is whole in none. Windows advance by min(window "
        "length, doc_stride), as in the original, so no context is "
        "skipped.", FLAGS.doc_stride, FLAGS.max_query_length, window)
