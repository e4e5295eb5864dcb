"""TFRecord files: tf.train.Feature helpers, compression, atomic writing."""

import os

import tensorflow as tf

from runner_lib.core import errors
from runner_lib.core import fileio

GZIP_MAGIC = b"\x1f\x8b"


def int_feature(values):
  return tf.train.Feature(int64_list=tf.train.Int64List(value=values))


def float_feature(values):
  return tf.train.Feature(float_list=tf.train.FloatList(value=values))


def compression_of(path):
  """'GZIP' if the file starts with the gzip magic bytes, else ''."""
  with tf.io.gfile.GFile(path, "rb") as f:
    return "GZIP" if f.read(2) == GZIP_MAGIC else ""


class RoundRobinWriter(object):
  """Writes records to several TFRecord files in turn, atomically.

  Records go to temporary files beside the outputs; close() renames them
  into place, abort() deletes them, so an interrupted run leaves no file
  that looks complete. Use as a context manager: an exception aborts.
  """

  def __init__(self, output_files, gzip=False):
    """Opens the temporary files.

    Args:
      output_files: list of str paths.
      gzip: bool, write GZIP-compressed TFRecords.

    Raises:
      errors.InputError: an output cannot be created.
    """
    self.output_files = list(output_files)
    self._temporary = ["%s.tmp-%d" % (f, os.getpid())
                       for f in self.output_files]
    options = tf.io.TFRecordOptions(compression_type="GZIP" if gzip else "")
    self._writers = []
    self.num_written = 0
    for path in self.output_files:
      fileio.refuse_directory(path)
    try:
      for path in self._temporary:
        directory = os.path.dirname(path)
        if directory:
          tf.io.gfile.makedirs(directory)
        self._writers.append(tf.io.TFRecordWriter(path, options))
    except (tf.errors.OpError, OSError) as e:
      self.abort()
      raise errors.OutputError("Cannot write output file %s: %s." %
                               (path.rsplit(".tmp-", 1)[0],
                                fileio.reason(e))) from None

  def write(self, record):
    """Writes one serialized record to the next file in turn."""
    self._writers[self.num_written % len(self._writers)].write(record)
    self.num_written += 1

  def close(self):
    """Completes the files and renames them into place.

    Raises:
      errors.OutputError: a file cannot be completed (a full disk) or
        renamed; the temporary files are removed.
    """
    path = None
    try:
      for writer, path in zip(self._writers, self.output_files):
        writer.close()
      self._writers = []
      for temporary, path in zip(self._temporary, self.output_files):
        tf.io.gfile.rename(temporary, path, overwrite=True)
    except (tf.errors.OpError, OSError) as e:
      self.abort()
      raise errors.OutputError("Cannot write output file %s: %s." %
                               (path, fileio.reason(e))) from None

  def abort(self):
    """Deletes the temporary files."""
    for writer in self._writers:
      try:
        writer.close()
      except (tf.errors.OpError, OSError):
        pass  # The file is deleted below; the first error is the story.
    self._writers = []
    for temporary in self._temporary:
      if tf.io.gfile.exists(temporary):
        tf.io.gfile.remove(temporary)

  def __enter__(self):
    return self

  def __exit__(self, exc_type, exc, tb):
    if exc_type is None:
      self.close()
    else:
      self.abort()
