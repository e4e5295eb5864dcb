"""Pre-training instances: the original create_pretraining_data algorithm.

Draws the random numbers exactly as the 2018 create_pretraining_data.py
does (same calls, same order, same `random.Random`), so for the same input,
vocab and seed the records are the original's, record for record. Tokens are
handled as vocab ids rather than strings, which changes nothing in the
output (ids are line numbers, the original's random words are picked by
index) and keeps documents in a fraction of the memory.

No TensorFlow here: sharding.py's worker processes import only this.
"""

import array
import collections
import dataclasses
import mmap
import random
import struct
import tempfile

from runner_lib.core.cli import progress as core_progress
from runner_lib.core.inputs import example_proto

# masked_lm_weights values, as packed little-endian float32.
_ONE = example_proto.float_payload([1.0])
_ZERO = example_proto.float_payload([0.0])

# dynamic_masking: write unmasked instances (masked_lm_candidates instead of
# masked_lm_*), for run_pretraining.py --dynamic_masking to mask.
InstanceOptions = collections.namedtuple("InstanceOptions", [
    "max_seq_length", "short_seq_prob", "masked_lm_prob",
    "max_predictions_per_seq", "do_whole_word_mask", "dynamic_masking"
], defaults=(False,))

# masked_lm_candidates values: what train-time masking needs of each
# position, so that it needs no vocab (runner_lib/pretraining/masking.py).
NEVER_MASKED = 0  # [CLS], [SEP], padding
WORD_START = 1  # a token that starts a word (or a whole word)
CONTINUATION = 2  # a "##" piece that continues the word before it


class MaskingVocab(object):
  """What masking needs to know of the vocab, by id (picklable, small)."""

  def __init__(self, vocab):
    """Reads the ids of the special tokens and of "##" continuations.

    Args:
      vocab: dict token -> id, with [CLS], [SEP] and [MASK].
    """
    self.size = len(vocab)
    self.cls_id = vocab["[CLS]"]
    self.sep_id = vocab["[SEP]"]
    self.mask_id = vocab["[MASK]"]
    self.is_continuation = bytearray(self.size)
    for token, index in vocab.items():
      self.is_continuation[index] = token.startswith("##")


@dataclasses.dataclass(eq=False)
class TrainingInstance:
  """One sentence pair with its masks; tokens and labels are vocab ids.

  An unmasked instance (InstanceOptions.dynamic_masking) has its real
  tokens and None for masked_lm_positions and masked_lm_labels.
  """

  tokens: list
  segment_ids: list
  masked_lm_positions: list
  masked_lm_labels: list
  is_random_next: bool

def random_truncate_seq_pair(tokens_a, tokens_b, max_num_tokens, rng):
  """Truncates a pair in place, from the front or back of the longer one.

  Unlike core/packing.truncate_seq_pair, which always cuts the end,
  pre-training cuts either end at random (one rng.random() per token) to
  add noise, as the original does. The cuts move offsets and the lists are
  sliced once: deleting from the front token by token, as the original
  does, takes time quadratic in a segment's length (minutes for a line of
  a few megabytes without a sentence break).
  """
  # [start, end) of each list that is kept.
  a_start, a_end, b_start, b_end = 0, len(tokens_a), 0, len(tokens_b)
  while (a_end - a_start) + (b_end - b_start) > max_num_tokens:
    if a_end - a_start > b_end - b_start:
      if rng.random() < 0.5:
        a_start += 1
      else:
        a_end -= 1
    else:
      assert b_end > b_start
      if rng.random() < 0.5:
        b_start += 1
      else:
        b_end -= 1
  tokens_a[:] = tokens_a[a_start:a_end]
  tokens_b[:] = tokens_b[b_start:b_end]


def shuffle(rng, items):
  """rng.shuffle(items), the same permutation from the same draws, faster.

  CPython's Random.shuffle is Fisher-Yates over _randbelow, which draws
  getrandbits(n.bit_length()) until below n. Inlined here: about half the
  cost, which matters at a shuffle per instance. tests check it against
  rng.shuffle; a Random subclass gets its own shuffle.
  """
  if type(rng) is not random.Random:  # pylint: disable=unidiomatic-typecheck
    rng.shuffle(items)
    return
  getrandbits = rng.getrandbits
  for i in range(len(items) - 1, 0, -1):
    n = i + 1
    bits = n.bit_length()
    j = getrandbits(bits)
    while j >= n:
      j = getrandbits(bits)
    items[i], items[j] = items[j], items[i]


def create_masked_lm_predictions(tokens, masked_lm_prob,
                                 max_predictions_per_seq, vocab, rng,
                                 do_whole_word_mask):
  """Chooses positions to predict and corrupts them (80/10/10).

  Args:
    tokens: list of int ids, [CLS] A [SEP] B [SEP].
    masked_lm_prob: float, share of tokens to predict.
    max_predictions_per_seq: int, cap on predictions.
    vocab: MaskingVocab.
    rng: random.Random.
    do_whole_word_mask: bool; mask all WordPieces of a word together.

  Returns:
    (output_tokens, masked_lm_positions sorted, masked_lm_labels).
  """
  num_to_predict = min(max_predictions_per_seq,
                       max(1, int(round(len(tokens) * masked_lm_prob))))
  cls_id, sep_id = vocab.cls_id, vocab.sep_id
  if do_whole_word_mask:
    chosen = _whole_word_positions(tokens, num_to_predict, vocab, rng)
  else:
    # One candidate per position: none overshoots the budget or is covered
    # twice, so the original's loop takes the first num_to_predict.
    candidates = [i for i, token in enumerate(tokens)
                  if token != cls_id and token != sep_id]
    shuffle(rng, candidates)
    chosen = candidates[:num_to_predict]

  # The original draws while choosing; choosing draws nothing, so drawing
  # afterwards, in the same order, draws the same numbers.
  output_tokens = list(tokens)
  random_number, size = rng.random, vocab.size
  for index in chosen:
    if random_number() < 0.8:
      output_tokens[index] = vocab.mask_id
    elif random_number() < 0.5:
      pass  # kept as it is, but still predicted
    else:
      output_tokens[index] = rng.randint(0, size - 1)
  positions = sorted(chosen)
  return output_tokens, positions, [tokens[i] for i in positions]


def _whole_word_positions(tokens, num_to_predict, vocab, rng):
  """Positions whole-word masking predicts, in the order it picks them."""
  cand_indexes = []
  for i, token in enumerate(tokens):
    if token == vocab.cls_id or token == vocab.sep_id:
      continue
    # As the original, a continuation right after [SEP] joins the word
    # before the [SEP].
    if cand_indexes and vocab.is_continuation[token]:
      cand_indexes[-1].append(i)
    else:
      cand_indexes.append([i])
  shuffle(rng, cand_indexes)
  chosen = []
  covered_indexes = set()
  for index_set in cand_indexes:
    if len(chosen) >= num_to_predict:
      break
    # A whole word that would overshoot the budget is skipped, not cut.
    if len(chosen) + len(index_set) > num_to_predict:
      continue
    if any(index in covered_indexes for index in index_set):
      continue
    covered_indexes.update(index_set)
    chosen.extend(index_set)
  return chosen


def create_instances_from_document(all_documents, document_index, options,
                                   vocab, rng):
  """Makes the instances of one document.

  Segments (sentences) are packed up to a target length (max_seq_length - 3,
  or with short_seq_prob a random shorter one, fixed per document), split
  into A and B at a random sentence boundary; half the time B is replaced by
  text from a random other document and the unused segments are put back.

  Args:
    all_documents: list of documents (lists of id sequences).
    document_index: int, the document to use.
    options: InstanceOptions.
    vocab: MaskingVocab.
    rng: random.Random.

  Returns:
    list of TrainingInstance.
  """
  document = all_documents[document_index]
  max_num_tokens = options.max_seq_length - 3
  target_seq_length = max_num_tokens
  if rng.random() < options.short_seq_prob:
    target_seq_length = rng.randint(2, max_num_tokens)

  instances = []
  current_chunk = []
  current_length = 0
  i = 0
  while i < len(document):
    segment = document[i]
    current_chunk.append(segment)
    current_length += len(segment)
    if i == len(document) - 1 or current_length >= target_seq_length:
      if current_chunk:
        a_end = 1
        if len(current_chunk) >= 2:
          a_end = rng.randint(1, len(current_chunk) - 1)
        tokens_a = []
        for j in range(a_end):
          tokens_a.extend(current_chunk[j])

        tokens_b = []
        # The short circuit matters: no draw when the chunk is one segment.
        if len(current_chunk) == 1 or rng.random() < 0.5:
          is_random_next = True
          target_b_length = target_seq_length - len(tokens_a)
          for _ in range(10):
            random_document_index = rng.randint(0, len(all_documents) - 1)
            if random_document_index != document_index:
              break
          random_document = all_documents[random_document_index]
          random_start = rng.randint(0, len(random_document) - 1)
          for j in range(random_start, len(random_document)):
            tokens_b.extend(random_document[j])
            if len(tokens_b) >= target_b_length:
              break
          # Put the segments not used for A back, for the next instance.
          i -= len(current_chunk) - a_end
        else:
          is_random_next = False
          for j in range(a_end, len(current_chunk)):
            tokens_b.extend(current_chunk[j])
        random_truncate_seq_pair(tokens_a, tokens_b, max_num_tokens, rng)
        assert tokens_a and tokens_b

        tokens = ([vocab.cls_id] + tokens_a + [vocab.sep_id] + tokens_b +
                  [vocab.sep_id])
        segment_ids = [0] * (len(tokens_a) + 2) + [1] * (len(tokens_b) + 1)
        positions = labels = None
        if not options.dynamic_masking:
          # Unmasked instances skip these draws, and only these: the rest
          # of the stream is made by the same calls in the same order.
          tokens, positions, labels = create_masked_lm_predictions(
              tokens, options.masked_lm_prob,
              options.max_predictions_per_seq, vocab, rng,
              options.do_whole_word_mask)
        instances.append(TrainingInstance(tokens, segment_ids, positions,
                                          labels, is_random_next))
      current_chunk = []
      current_length = 0
    i += 1
  return instances


class InstanceEncoder(object):
  """The original tf.train.Example of an instance, padded, as bytes.

  Written by hand (core/inputs/example_proto.py): the same bytes as TensorFlow's
  deterministic serialization of the original's Example, several times
  faster, and with no TensorFlow in the process.
  """

  def __init__(self, vocab_size, max_seq_length, max_predictions_per_seq):
    self._ids = example_proto.VarintTable(max(vocab_size, max_seq_length))
    self.max_seq_length = max_seq_length
    self.max_predictions_per_seq = max_predictions_per_seq

  def encode(self, instance, vocab=None):
    """TrainingInstance -> serialized tf.train.Example bytes.

    An unmasked instance needs vocab (MaskingVocab), to write its
    masked_lm_candidates (unmasked_features).
    """
    num_tokens = len(instance.tokens)
    assert num_tokens <= self.max_seq_length
    padding = b"\x00" * (self.max_seq_length - num_tokens)
    if instance.masked_lm_positions is None:
      return example_proto.example(
          self.unmasked_features(instance, vocab, padding))
    num_predictions = len(instance.masked_lm_positions)
    unused = self.max_predictions_per_seq - num_predictions
    prediction_padding = b"\x00" * unused
    encode, feature = self._ids.encode, example_proto.int64_feature
    return example_proto.example({
        "input_ids": feature(encode(instance.tokens) + padding),
        "input_mask": feature(b"\x01" * num_tokens + padding),
        "segment_ids": feature(encode(instance.segment_ids) + padding),
        "masked_lm_positions": feature(
            encode(instance.masked_lm_positions) + prediction_padding),
        "masked_lm_ids": feature(encode(instance.masked_lm_labels) +
                                 prediction_padding),
        "masked_lm_weights": example_proto.float_feature(
            _ONE * num_predictions + _ZERO * unused),
        "next_sentence_labels": feature(
            b"\x01" if instance.is_random_next else b"\x00"),
    })


  def unmasked_features(self, instance, vocab, padding):
    """The features of an unmasked instance: the original's without
    masked_lm_*, and masked_lm_candidates (int64 [max_seq_length]: 0 for
    [CLS], [SEP] and padding, 1 for a word's first piece, 2 for a "##"
    piece)."""
    candidates = bytearray(len(instance.tokens))
    for i, token in enumerate(instance.tokens):
      if token != vocab.cls_id and token != vocab.sep_id:
        candidates[i] = (CONTINUATION if vocab.is_continuation[token] else
                         WORD_START)
    encode, feature = self._ids.encode, example_proto.int64_feature
    # Values 0-2 are one varint byte each: the bytes are the payload.
    return {
        "input_ids": feature(encode(instance.tokens) + padding),
        "input_mask": feature(b"\x01" * len(instance.tokens) + padding),
        "segment_ids": feature(encode(instance.segment_ids) + padding),
        "masked_lm_candidates": feature(bytes(candidates) + padding),
        "next_sentence_labels": feature(
            b"\x01" if instance.is_random_next else b"\x00"),
    }


def serialized_instances(documents, options, vocab, dupe_factor, rng,
                         progress=None):
  """Yields every instance as bytes, in the original's creation order.

  progress, if given, is called with the number of documents done (over
  all dupe_factor passes) after each document.
  """
  encoder = InstanceEncoder(vocab.size, options.max_seq_length,
                           options.max_predictions_per_seq)
  done = 0
  for _ in range(dupe_factor):
    for document_index in range(len(documents)):
      for instance in create_instances_from_document(documents, document_index,
                                                     options, vocab, rng):
        yield encoder.encode(instance, vocab)
      done += 1
      if progress:
        progress(done)


class _Spill(object):
  """Records parked in a temporary file, to be read back in any order."""

  def __init__(self, directory=None):
    self._file = tempfile.TemporaryFile(dir=directory)
    self._directory = directory or tempfile.gettempdir()
    self._offsets = array.array("q")
    self._size = 0

  def __len__(self):
    return len(self._offsets)

  def _named(self, error):
    """The file has no name (deleted on close): a write error names its
    directory, so that a full disk is reported where it is."""
    return OSError(error.errno, error.strerror,
                   "temporary records in %s" % self._directory)

  def append(self, record):
    self._offsets.append(self._size)
    try:
      self._file.write(struct.pack("<I", len(record)))
      self._file.write(record)
    except OSError as e:
      raise self._named(e) from None
    self._size += 4 + len(record)

  def read_in_order(self, order):
    try:
      self._file.flush()
    except OSError as e:
      raise self._named(e) from None
    if not self._size:
      return
    with mmap.mmap(self._file.fileno(), 0, access=mmap.ACCESS_READ) as data:
      for index in order:
        start = self._offsets[index]
        (length,) = struct.unpack_from("<I", data, start)
        yield data[start + 4:start + 4 + length]

  def close(self):
    try:
      self._file.close()
    except OSError as e:
      raise self._named(e) from None


def create_training_records(documents, options, vocab, dupe_factor, rng,
                            spill_directory=None):
  """All instances of a corpus, shuffled as the original shuffles them.

  The original builds every instance in memory and then shuffles the list.
  Here serialized instances are parked on disk and read back in the
  permutation rng.shuffle gives a list of the same length: the same order,
  with only the offsets in memory.

  Args:
    documents: list of documents from read_documents (shuffled in place).
    options: InstanceOptions.
    vocab: MaskingVocab.
    dupe_factor: int, passes over the corpus with different masks.
    rng: random.Random, in the state the original's is after reading.
    spill_directory: str or None, where to park records (default: $TMPDIR).

  Yields:
    serialized tf.train.Example bytes.
  """
  rng.shuffle(documents)
  spill = _Spill(spill_directory)
  progress = core_progress.Progress(
      "Making instances (%d documents x %d)" % (len(documents), dupe_factor),
      len(documents) * dupe_factor, unit="documents")
  try:
    for record in serialized_instances(
        documents, options, vocab, dupe_factor, rng,
        progress=lambda done: progress.update(done, instances=len(spill))):
      spill.append(record)
    order = list(range(len(spill)))
    rng.shuffle(order)
    yield from spill.read_in_order(order)
  finally:
    spill.close()
