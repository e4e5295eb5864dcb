"""Writing TFRecord files without TensorFlow: the framing, by hand.

A TFRecord file is a sequence of records, each framed as
  uint64 length (little-endian), uint32 masked CRC32C of those 8 bytes,
  the data, uint32 masked CRC32C of the data,
optionally GZIP-compressed as a whole. Written here with the same bytes as
tf.io.TFRecordWriter (tests compare them), so that create_pretraining_data,
whose workers and main process need no model, runs without TensorFlow.
"""

import os
import struct
import zlib

import google_crc32c

from runner_lib.core import errors
from runner_lib.core import gfile
from runner_lib.core.files import fileio

_MASK_DELTA = 0xA282EAD8

# TensorFlow's GZIP options (ZlibCompressionOptions::GZIP): zlib's default
# level and strategy, a 15-bit window with the gzip wrapper, memory level 9
# (Python's default is 8, which compresses differently).
_GZIP_WBITS = 16 + zlib.MAX_WBITS
_GZIP_MEM_LEVEL = 9


def masked_crc32c(data):
  """The CRC32C of data, rotated and offset as TFRecords store it (a CRC of
  data that itself holds CRCs is then not trivially related to them)."""
  crc = google_crc32c.value(data)
  return (((crc >> 15) | (crc << 17)) + _MASK_DELTA) & 0xFFFFFFFF


def frame(record):
  """One record as the bytes a TFRecord file holds for it.

  Args:
    record: bytes.

  Returns:
    bytes, 16 longer than record.
  """
  length = struct.pack("<Q", len(record))
  return b"".join((length, struct.pack("<I", masked_crc32c(length)), record,
                   struct.pack("<I", masked_crc32c(record))))


def count_records(path, gzip=False):
  """The number of records in a TFRecord file (read frame by frame).

  Raises:
    errors.InputError: the file ends inside a record.
  """
  with gfile.open(path, "rb") as reader:
    data = reader.read()
  if gzip:
    data = zlib.decompress(data, _GZIP_WBITS)
  count, position = 0, 0
  while position < len(data):
    if position + 12 > len(data):
      break
    (length,) = struct.unpack("<Q", data[position:position + 8])
    position += 12 + length + 4
    count += 1
  if position != len(data):
    raise errors.InputError("%s ends inside a record." % path)
  return count


class _GzipStream(object):
  """A binary file that GZIP-compresses what is written, as TensorFlow's
  TFRecordWriter does (one gzip member, no file name, time 0)."""

  def __init__(self, raw):
    self._raw = raw
    self._compressor = zlib.compressobj(zlib.Z_DEFAULT_COMPRESSION,
                                        zlib.DEFLATED, _GZIP_WBITS,
                                        _GZIP_MEM_LEVEL)

  def write(self, data):
    self._raw.write(self._compressor.compress(data))

  def close(self):
    try:
      self._raw.write(self._compressor.flush())
    finally:
      self._raw.close()


class RoundRobinWriter(object):
  """Writes records to several TFRecord files in turn, atomically.

  Records go to temporary files beside the outputs; close() renames them
  into place, abort() deletes them, so an interrupted run leaves no file
  that looks complete. Use as a context manager: an exception aborts.
  """

  def __init__(self, output_files, gzip=False, temporary_tag=None):
    """Opens the temporary files.

    Args:
      output_files: list of str paths (gfile paths: local, or gs:// and the
        like through TensorFlow).
      gzip: bool, write GZIP-compressed TFRecords.
      temporary_tag: str, ending the temporary files' names (PATH.tmp-TAG);
        None: this process's id.

    Raises:
      errors.OutputError: an output cannot be created.
    """
    self.output_files = list(output_files)
    tag = os.getpid() if temporary_tag is None else temporary_tag
    self._temporary = ["%s.tmp-%s" % (f, tag) for f in self.output_files]
    self._writers = []
    self.num_written = 0
    for path in self.output_files:
      fileio.refuse_directory(path)
    try:
      for path in self._temporary:
        directory = os.path.dirname(path)
        if directory:
          gfile.makedirs(directory)
        writer = gfile.open(path, "wb")
        self._writers.append(_GzipStream(writer) if gzip else writer)
    except gfile.errors() as e:
      self.abort()
      raise errors.OutputError("Cannot write output file %s: %s." %
                               (path.rsplit(".tmp-", 1)[0],
                                fileio.reason(e))) from None

  def write(self, record):
    """Writes one serialized record to the next file in turn."""
    index = self.num_written % len(self._writers)
    try:
      self._writers[index].write(frame(record))
    except OSError as e:
      raise fileio.naming_file(e, self._temporary[index]) from None
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
        gfile.rename(temporary, path)
    except gfile.errors() as e:
      self.abort()
      raise errors.OutputError("Cannot write output file %s: %s." %
                               (path, fileio.reason(e))) from None

  def abort(self):
    """Deletes the temporary files."""
    for writer in self._writers:
      try:
        writer.close()
      except gfile.errors():
        pass  # The file is deleted below; the first error is the story.
    self._writers = []
    for temporary in self._temporary:
      if gfile.exists(temporary):
        gfile.remove(temporary)

  def __enter__(self):
    return self

  def __exit__(self, exc_type, exc, tb):
    if exc_type is None:
      self.close()
    else:
      self.abort()
