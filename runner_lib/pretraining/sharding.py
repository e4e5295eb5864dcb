"""create_pretraining_data at corpus scale: shards made and written by workers.

The input files are cut by byte range into shards of --shard_bytes, without
reading them (plan): a shard holds the documents that begin in its range,
read by the worker that makes it (shard_lines), and its records go to
OUTPUT-00012-of-00480 through a temporary file renamed when complete
(make_shard). A shard's records depend only on its text, the flags and the
seed, so the output depends on the input, the flags, the seed and the shard
size alone: not on how many workers ran it, on which machines, nor on which
one died (a shard made twice is the same file twice). The workers are a
Dask cluster's, started here or reached by address (cluster.py); the client
only plans, watches and writes the manifest (sharded_run.py).

Documents: a document begins at the start of a file or after a blank line
(whitespace only); each file ends its last document. A shard [start, end)
begins at the first such boundary at or after start and ends at the first
at or after end, so consecutive shards meet at the same boundary. Random
next sentences come from the shard's own documents.
"""

import collections
import functools
import random
import uuid

from absl import logging

from runner_lib.core import gfile
from runner_lib.core.inputs import text_input
from runner_lib.core.inputs import tfrecord_writer
from runner_lib.pretraining import documents as documents_lib
from runner_lib.pretraining import instances
from tokenization import wordpiece

# Default text per shard: many documents per shard (random next sentences
# are drawn within it), small enough to keep workers lean (a shard's
# records are held until they are shuffled).
SHARD_BYTES = 4 << 20

# Bytes read at a time when looking back for the start of a line.
_BACK_CHUNK = 4096

# What bytes.strip() strips: a line of these only is blank.
_WHITESPACE = frozenset(b" \t\n\r\x0b\x0c")


class Shard(collections.namedtuple("Shard", "index path start end")):
  """Bytes [start, end) of the file at path; index in the run's shards."""


class Settings(collections.namedtuple("Settings", [
    "vocab_tokens", "do_lower_case", "options", "dupe_factor", "seed",
    "skip_invalid", "gzip", "output_file", "num_shards"])):
  """What every shard is made with (sent to each worker once).

  vocab_tokens: tuple of str, in id order. options:
  instances.InstanceOptions. output_file: str, the prefix of the shards'
  names (shard_path).
  """


ShardResult = collections.namedtuple(
    "ShardResult", "index path documents records skipped_lines")


def plan(files, sizes, shard_bytes):
  """Cuts files into shards of shard_bytes (the last of each file shorter).

  Args:
    files: list of str paths.
    sizes: list of int, their sizes in bytes.
    shard_bytes: int >= 1.

  Returns:
    list of Shard, in file order; an empty file has none.
  """
  shards = []
  for path, size in zip(files, sizes):
    for start in range(0, size, shard_bytes):
      shards.append(Shard(len(shards), path, start,
                          min(size, start + shard_bytes)))
  return shards


def shard_path(output_file, index, num_shards):
  """OUTPUT-00012-of-00480, as the TFRecord shards of Google's pipelines."""
  return "%s-%05d-of-%05d" % (output_file, index, num_shards)


def _is_blank(line):
  return not line.strip()


def _line_is_blank_before(reader, position):
  """Whether bytes from the start of the line holding position - 1 up to
  position are all whitespace (reads backwards; leaves reader anywhere)."""
  while position > 0:
    begin = max(0, position - _BACK_CHUNK)
    reader.seek(begin)
    chunk = reader.read(position - begin)
    for byte in reversed(chunk):
      if byte == 0x0A:  # "\n": the line started after it
        return True
      if byte not in _WHITESPACE:
        return False
    position = begin
  return True


def _first_boundary(reader, start):
  """The offset of the first document boundary at or after start, with
  reader positioned there; None if the file has none (it ends first)."""
  if start == 0:
    reader.seek(0)
    return 0
  reader.seek(start - 1)
  tail = reader.readline()  # from byte start - 1 to the end of its line
  position = start - 1 + len(tail)
  if not tail.endswith(b"\n"):
    return None
  if _is_blank(tail):
    # Blank from start - 1 on: a boundary if the whole line is blank.
    if _line_is_blank_before(reader, start - 1):
      reader.seek(position)
      return position
    reader.seek(position)
  while True:  # the rest of the document that began before start
    line = reader.readline()
    if not line:
      return None
    position += len(line)
    if _is_blank(line):
      return position


def _line_number(path, offset):
  """1-based number of the line that begins at byte offset of path."""
  count = 0
  with gfile.open(path, "rb") as reader:
    while offset > 0:
      chunk = reader.read(min(offset, 1 << 20))
      if not chunk:
        break
      count += chunk.count(b"\n")
      offset -= len(chunk)
  return count + 1


def shard_lines(shard, skip_invalid=False, skipped=None):
  """Yields the lines of the documents that begin in the shard's range.

  As text_input.read_lines: split on "\\n" only, every "\\r" dropped, each
  line decoded as UTF-8.

  Args:
    shard: Shard.
    skip_invalid: bool; skip lines that are not UTF-8 instead of stopping.
    skipped: None or a list, to which 1 is appended per skipped line.

  Yields:
    str, with its line ending.

  Raises:
    errors.InputError: a line is not UTF-8 (the file and line named) and
      skip_invalid is False.
  """
  with gfile.open(shard.path, "rb") as reader:
    position = _first_boundary(reader, shard.start)
    if position is None or position >= shard.end:
      return  # no document begins in [start, end)
    while True:
      line = reader.readline()
      if not line:
        return
      begins, position = position, position + len(line)
      text = text_input.decode_line(
          line, shard.path, lambda: _line_number(shard.path, begins),
          skip_invalid)
      if text is not None:
        yield text
      elif skipped is not None:
        skipped.append(1)
      if position >= shard.end and _is_blank(line):
        return


@functools.lru_cache(maxsize=2)
def _tools(vocab_tokens, do_lower_case):
  """(tokenizer, masking vocab): built once per worker process and run."""
  vocab = {token: index for index, token in enumerate(vocab_tokens)}
  return (wordpiece.IdTokenizer(vocab, do_lower_case),
          instances.MaskingVocab(vocab))


def shard_records(shard, settings, skipped=None):
  """(number of documents, the shard's serialized instances, shuffled)."""
  tokenizer, vocab = _tools(settings.vocab_tokens, settings.do_lower_case)
  documents = documents_lib.read_documents(
      shard_lines(shard, settings.skip_invalid, skipped),
      tokenizer.tokenize_ids)
  # A seed of its own per shard: independent of which worker runs it.
  rng = random.Random("%d:%d" % (settings.seed, shard.index))
  rng.shuffle(documents)
  records = list(instances.serialized_instances(
      documents, settings.options, vocab, settings.dupe_factor, rng))
  rng.shuffle(records)
  return len(documents), records


def make_shard(shard, settings):
  """Makes a shard's records and writes them to its file: runs on a worker.

  The file appears complete or not at all (a temporary name of its own,
  renamed when done), so a shard made twice, after a worker was lost,
  leaves one whole file.

  Returns:
    ShardResult.
  """
  skipped = []
  documents, records = shard_records(shard, settings, skipped)
  path = shard_path(settings.output_file, shard.index, settings.num_shards)
  # Unique even across machines: a lost worker may still be writing.
  with tfrecord_writer.RoundRobinWriter(
      [path], settings.gzip, temporary_tag=uuid.uuid4().hex) as writer:
    for record in records:
      writer.write(record)
  return ShardResult(shard.index, shard.path, documents, len(records),
                     len(skipped))


def temporary_files(output_file, num_shards):
  """Temporary files of the shards, left by workers that died."""
  pattern = shard_path(output_file, 0, num_shards).replace(
      "-00000-of-", "-[0-9][0-9][0-9][0-9][0-9]-of-") + ".tmp-*"
  return gfile.glob(pattern)


def existing_shards(output_file):
  """Paths of complete shard files of any run under this prefix."""
  pattern = "%s-[0-9][0-9][0-9][0-9][0-9]-of-[0-9][0-9][0-9][0-9][0-9]" % (
      output_file)
  return sorted(gfile.glob(pattern))


def remove_quietly(paths):
  for path in paths:
    try:
      gfile.remove(path)
    except gfile.errors() as e:
      logging.warning("Cannot remove %s: %s", path, e)
