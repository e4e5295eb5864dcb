"""create_pretraining_data at corpus scale: shards on several cores, streamed.

The original holds the whole corpus and every instance in memory, in one
process. Here the input is cut into shards of about SHARD_BYTES of text at
document boundaries; worker processes turn each shard into shuffled,
serialized instances (random next sentences come from other documents of
the same shard), and the parent writes them out in shard order as they
come. At most 2 shards per worker are in flight, so memory stays flat as the
corpus grows. Output depends only on the seed, the input and the number of
workers (which sets the shard size for small inputs).
"""

import collections
import multiprocessing
import random

from runner_lib.core import progress as core_progress

# Text per shard. Big enough for many documents per shard (random next
# sentences are drawn within it), small enough to keep workers lean.
SHARD_BYTES = 4 << 20

_worker = {}


def shard_size(total_bytes, num_workers):
  """SHARD_BYTES, or less so that a small corpus still feeds every worker."""
  return max(1, min(SHARD_BYTES, total_bytes // num_workers))


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


def _init_worker(vocab_file, do_lower_case, options, dupe_factor, seed):
  # Imported in the worker: it is a fresh (spawned) process.
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  from runner_lib.pretraining import data  # pylint: disable=g-import-not-at-top
  from runner_lib.pretraining import instances  # pylint: disable=g-import-not-at-top
  import tokenization  # pylint: disable=g-import-not-at-top
  # One thread per worker: the parallelism is the workers.
  tf.config.threading.set_intra_op_parallelism_threads(1)
  tf.config.threading.set_inter_op_parallelism_threads(1)
  tokenizer = tokenization.FullTokenizer(vocab_file, do_lower_case)
  _worker.update(tokenizer=tokenizer,
                 vocab=data.masking_vocab(tokenizer),
                 options=options, dupe_factor=dupe_factor, seed=seed,
                 module=data, instances=instances)


def _process_shard(task):
  """Shard lines -> (number of documents, shuffled serialized instances)."""
  index, lines = task
  data = _worker["module"]
  documents = data.read_documents(lines, _worker["tokenizer"])
  # A seed of its own per shard: independent of which worker runs it.
  rng = random.Random("%d:%d" % (_worker["seed"], index))
  rng.shuffle(documents)
  records = list(_worker["instances"].serialized_instances(
      documents, _worker["options"], _worker["vocab"], _worker["dupe_factor"],
      rng))
  rng.shuffle(records)
  return len(documents), records


def sharded_records(lines, total_bytes, num_workers, vocab_file,
                    do_lower_case, options, dupe_factor, seed):
  """Yields serialized instances of the corpus, made by worker processes.

  Args:
    lines: iterable of str, the corpus.
    total_bytes: int, size of the input (sets the shard size).
    num_workers: int >= 1.
    vocab_file: str.
    do_lower_case: bool.
    options: instances.InstanceOptions.
    dupe_factor: int.
    seed: int.

  Yields:
    bytes, in shard order.
  """
  shard_bytes = shard_size(total_bytes, num_workers)
  # spawn, not fork: TensorFlow's runtime does not survive a fork.
  context = multiprocessing.get_context("spawn")
  progress = core_progress.Progress(
      "Making instances on %d workers" % num_workers, total_bytes / 1e6)
  done_bytes = documents = instances = 0
  with context.Pool(num_workers, initializer=_init_worker,
                    initargs=(vocab_file, do_lower_case, options,
                              dupe_factor, seed)) as pool:
    pending = collections.deque()

    def collect():
      nonlocal done_bytes, documents, instances
      size, result = pending.popleft()
      num_documents, records = result.get()
      done_bytes += size
      documents += num_documents
      instances += len(records)
      progress.update(done_bytes / 1e6, documents=documents,
                      instances=instances)
      return records

    for task in enumerate(shard_lines(lines, shard_bytes)):
      size = sum(map(len, task[1]))  # characters, as shard_lines counts
      pending.append((size, pool.apply_async(_process_shard, (task,))))
      if len(pending) >= 2 * num_workers:
        yield from collect()
    while pending:
      yield from collect()
