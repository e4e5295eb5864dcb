"""Output files that appear whole or not at all."""

import contextlib
import os

from absl import logging
import tensorflow as tf

from runner_lib.core import errors


@contextlib.contextmanager
def atomic_output(path, mode="w"):
  """Opens a temporary file beside `path`, renamed to it on success.

  On any exception the temporary file is deleted, so an interrupted run
  never leaves a half-written file that looks complete.

  Args:
    path: str, final output path (any tf.io.gfile path).
    mode: "w" or "wb".

  Yields:
    A writable file object.

  Raises:
    errors.InputError: the output location cannot be written.
  """
  directory = os.path.dirname(path)
  temporary = "%s.tmp-%d" % (path, os.getpid())
  try:
    if directory:
      tf.io.gfile.makedirs(directory)
    writer = tf.io.gfile.GFile(temporary, mode)
  except (tf.errors.OpError, OSError) as e:
    raise errors.InputError("Cannot write output file %s: %s" %
                            (path, e)) from None
  try:
    with writer:
      yield writer
    tf.io.gfile.rename(temporary, path, overwrite=True)
  finally:
    if tf.io.gfile.exists(temporary):
      tf.io.gfile.remove(temporary)


def write_eval_results(path, results):
  """Writes `key = value` lines, sorted by key, as the original's
  eval_results.txt, and logs them."""
  with atomic_output(path) as writer:
    for key in sorted(results):
      logging.info("  %s = %s", key, results[key])
      writer.write("%s = %s\n" % (key, results[key]))
