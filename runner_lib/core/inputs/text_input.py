"""Plain-text inputs: comma-separated globs, read line by line."""

from absl import logging

from runner_lib.core import errors
from runner_lib.core import gfile


def expand_globs(patterns, flag_name="input_file"):
  """Expands comma-separated globs into a list of files, in order.

  Raises:
    errors.InputError: a pattern matches nothing.
  """
  files = []
  for pattern in patterns.split(","):
    matched = gfile.glob(pattern)
    if not matched:
      raise errors.InputError("--%s: no file matches %s." % (flag_name,
                                                            pattern))
    files.extend(matched)
  return files


def decode_utf8(data, path):
  """A whole file's bytes as text, a UTF-8 byte-order mark dropped.

  Args:
    data: bytes, the file's contents.
    path: str, the file, for the message.

  Returns:
    str.

  Raises:
    errors.InputError: naming the file and the line of the first byte that
      is not UTF-8.
  """
  try:
    text = data.decode("utf-8")
  except UnicodeDecodeError as e:
    raise errors.InputError("%s, line %d is not UTF-8 (%s)." %
                            (path, data.count(b"\n", 0, e.start) + 1,
                             e)) from None
  return text[1:] if text.startswith("\ufeff") else text


def read_text(path):
  """A data file's whole text (decode_utf8).

  Raises:
    errors.InputError: the file is missing, or not UTF-8 (its line named).
  """
  if not gfile.exists(path):
    raise errors.InputError("Missing data file %s." % path)
  with gfile.open(path, "rb") as f:
    return decode_utf8(f.read(), path)


def decode_line(line, path, line_number, skip_invalid=False):
  """A line's bytes as text, every "\\r" dropped (as read_lines).

  Args:
    line: bytes.
    path: str, the file, for the message.
    line_number: function () -> int, the line's number (called only for
      the message).
    skip_invalid: bool.

  Returns:
    str, or None for a line that is not UTF-8 where skip_invalid.

  Raises:
    errors.InputError: the line is not UTF-8 and skip_invalid is False.
  """
  if b"\r" in line:
    line = line.replace(b"\r", b"")
  try:
    return line.decode("utf-8")
  except UnicodeDecodeError as e:
    if skip_invalid:
      return None
    raise errors.InputError(
        "%s, line %d is not UTF-8 (%s); fix the file or pass "
        "--skip_invalid_lines." % (path, line_number(), e)) from None


def read_lines(files, skip_invalid=False):
  """Yields the lines of the files, decoded, split on "\\n" only.

  As the original's tf.gfile readline, "\\r", U+2028 and the like do not
  end a line, and every "\\r" is dropped ("a\\rb" reads as "ab"): TensorFlow's
  line reader skips them, and the original's tokens depend on it.

  Args:
    files: list of str paths.
    skip_invalid: bool; skip (and count, in a warning) lines that are not
      UTF-8 instead of stopping.

  Yields:
    str, with its line ending.

  Raises:
    errors.InputError: a line is not UTF-8 and skip_invalid is False.
  """
  for path in files:
    skipped = 0
    with gfile.open(path, "rb") as reader:
      for number, line in enumerate(reader, 1):
        text = decode_line(line, path, lambda n=number: n, skip_invalid)
        if text is None:
          skipped += 1
        else:
          yield text
    if skipped:
      logging.warning("%s: skipped %d lines that are not UTF-8.", path,
                      skipped)
