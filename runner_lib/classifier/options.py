"""run_classifier.py's --long_text flags, shared with export_saved_model.py
--task=classifier so a SavedModel windows texts as the runner did."""

from absl import flags

from runner_lib.classifier import windows
from runner_lib.core import errors

FLAGS = flags.FLAGS

LONG_TEXT = ("truncate", "windows")


def define_long_text_flags():
  """--long_text, --window_stride and --max_windows."""
  flags.DEFINE_enum(
      "long_text", "truncate", LONG_TEXT,
      "What happens to an example longer than max_seq_length. truncate: as "
      "the original, the pair is cut to fit (the longer text loses its "
      "last token first). windows (beyond the original): windows of "
      "max_seq_length over text_a, --window_stride apart, each with text_b "
      "(whole while text_a keeps half a window; else text_b is cut at its "
      "end); the example's logits are the mean of its windows' logits, for "
      "the loss, eval_results.txt and test_results.tsv alike (one row per "
      "example). docs/fine-tuning.md, Long texts.")
  flags.DEFINE_integer(
      "window_stride", None,
      "--long_text=windows: text_a tokens between the starts of consecutive "
      "windows, as run_squad.py's --doc_stride. Default (max_seq_length - "
      "3) // 2: 62 at 128, the most a pair task allows (the room text_a "
      "always keeps beside text_b), about half a window for single texts.")
  flags.DEFINE_integer(
      "max_windows", windows.DEFAULT_MAX_WINDOWS,
      "--long_text=windows: the most windows an example keeps (the first "
      "ones; a warning counts the examples cut). Every window of a "
      "training example is in its batch: a batch computes up to "
      "train_batch_size x max_windows sequences.")


def windows_from_flags(pair):
  """The --long_text flags, checked against --max_seq_length.

  Args:
    pair: bool, whether the task has text_b.

  Returns:
    windows.Windows for --long_text=windows, None for truncate.

  Raises:
    errors.InputError: naming the flag: --window_stride or --max_windows
      with --long_text=truncate (they would be ignored), or a bad value
      (windows.check_windows).
  """
  if FLAGS.long_text == "truncate":
    for name in ("window_stride", "max_windows"):
      if FLAGS[name].present:
        raise errors.InputError(
            "--%s is for --long_text=windows (got --long_text=truncate)." %
            name)
    return None
  return windows.check_windows(FLAGS.window_stride, FLAGS.max_windows,
                               FLAGS.max_seq_length, pair)
