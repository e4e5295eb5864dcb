"""create_pretraining_data at corpus scale: shards on several cores, streamed.

The original holds the whole corpus and every instance in memory, in one
process. Here the input is cut into shards of at most SHARD_BYTES of text at
document boundaries; worker processes without TensorFlow (core/workers.py)
tokenize each shard (the pure-Python 2018 tokenizer) and turn its documents
into shuffled, serialized instances (random next sentences come from other
documents of the same shard); they are written out in shard order as they
come. A few shards are in flight at a time, so memory stays flat as the
corpus grows. Output depends only on the seed, the input and the number of
workers (which sets the shard size for small inputs).
"""

import random

from runner_lib.core import progress as core_progress
from runner_lib.core import workers
from runner_lib.pretraining import documents as documents_lib
from runner_lib.pretraining import instances
from tokenization import wordpiece

# Text per shard, at most. Big enough for many documents per shard (random
# next sentences are drawn within it), small enough to keep workers lean.
SHARD_BYTES = 4 << 20

# Shards per worker, at least: the last shards of a run finish at different
# times, and smaller shards leave less of that tail on one core.
SHARDS_PER_WORKER = 4

_worker = {}


def shard_size(total_bytes, num_workers):
  """SHARD_BYTES, or less so that every worker gets SHARDS_PER_WORKER."""
  return max(1, min(SHARD_BYTES,
                    total_bytes // (SHARDS_PER_WORKER * num_workers)))


def shard_lines(lines, shard_bytes):
  """Groups lines into shards, each cut after a blank line (document end).

  Args:
    lines: iterable of str.
    shard_bytes: int, a shard is closed at the first document end past it.

  Yields:
    lists of str.
  """
  shard, size = [], 0
  for line in lines:
    shard.append(line)
    size += len(line)
    if size >= shard_bytes and not line.strip():
      yield shard
      shard, size = [], 0
  if shard:
    yield shard


def _init_worker(vocab, do_lower_case, options, dupe_factor, seed):
  _worker.update(
      tokenizer=wordpiece.IdTokenizer(vocab, do_lower_case), options=options,
      vocab=instances.MaskingVocab(vocab), dupe_factor=dupe_factor,
      seed=seed)


def _process_shard(task):
  """(shard index, lines) -> (number of documents, shuffled records).

  Runs in a worker process, without TensorFlow.
  """
  index, lines = task
  documents = documents_lib.read_documents(lines,
                                           _worker["tokenizer"].tokenize_ids)
  # A seed of its own per shard: independent of which worker runs it.
  rng = random.Random("%d:%d" % (_worker["seed"], index))
  rng.shuffle(documents)
  records = list(instances.serialized_instances(
      documents, _worker["options"], _worker["vocab"],
      _worker["dupe_factor"], rng))
  rng.shuffle(records)
  return len(documents), records


def sharded_records(lines, total_bytes, num_workers, vocab, do_lower_case,
                    options, dupe_factor, seed):
  """Yields serialized instances of the corpus, made by worker processes.

  Args:
    lines: iterable of str, the corpus.
    total_bytes: int, size of the input (sets the shard size).
    num_workers: int >= 1.
    vocab: dict token -> id (with [MASK]).
    do_lower_case: bool.
    options: instances.InstanceOptions.
    dupe_factor: int.
    seed: int.

  Yields:
    bytes, in shard order.
  """
  progress = core_progress.Progress(
      "Making instances on %d workers" % num_workers, total_bytes / 1e6)
  sizes = []

  def tasks():
    for index, shard in enumerate(
        shard_lines(lines, shard_size(total_bytes, num_workers))):
      sizes.append(sum(map(len, shard)))  # characters, as shard_lines counts
      yield index, shard

  done_bytes = documents = num_instances = 0
  for index, (num_documents, records) in enumerate(workers.ordered_map(
      _process_shard, tasks(), num_workers, _init_worker,
      (vocab, do_lower_case, options, dupe_factor, seed))):
    done_bytes += sizes[index]
    documents += num_documents
    num_instances += len(records)
    progress.update(done_bytes / 1e6, documents=documents,
                    instances=num_instances)
    yield from records
