"""Pre-training text in and records out: tokenized documents, the schema.

The instances themselves are made in instances.py (no TensorFlow).
"""

import array

import tensorflow as tf

from runner_lib.core import errors
from runner_lib.core import progress as core_progress
from runner_lib.pretraining import instances


def masking_vocab(tokenizer):
  """instances.MaskingVocab of a tokenizer's vocab.

  Args:
    tokenizer: tokenization.FullTokenizer.

  Raises:
    errors.InputError: the vocab has no [MASK].
  """
  if "[MASK]" not in tokenizer.vocab:
    raise errors.InputError(
        "vocab_file %s has no [MASK] token, which masked LM needs." %
        tokenizer.vocab_file)
  return instances.MaskingVocab(tokenizer.vocab)


def read_documents(lines, tokenizer, batch_lines=8192, total_bytes=None):
  """Tokenizes text, one sentence per line, blank lines between documents.

  As the original: a line blank after strip() starts a new document, a line
  with no tokens is skipped, documents run on across files, and empty
  documents are dropped.

  Args:
    lines: iterable of str.
    tokenizer: tokenization.FullTokenizer (its batch path is used).
    batch_lines: int, lines per tokenizer call.
    total_bytes: int or None, the text's size, for progress lines.

  Returns:
    list of documents, each a list of sentences as array('i') of ids.
  """
  documents = [[]]
  batch = []
  progress = core_progress.Progress(
      "Tokenizing", total_bytes / 1e6 if total_bytes else None)
  done_bytes = 0

  def flush():
    for line, ids in zip(batch, tokenizer.batch_tokenize_ids(batch)):
      if not line:
        documents.append([])
      if ids:
        documents[-1].append(array.array("i", ids))
    batch.clear()
    progress.update(done_bytes / 1e6, documents=len(documents))

  for line in lines:
    done_bytes += len(line)  # characters: bytes for ASCII, near enough
    batch.append(line.strip())
    if len(batch) == batch_lines:
      flush()
  flush()
  return [d for d in documents if d]


def pretraining_features(max_seq_length, max_predictions_per_seq):
  """The original pre-training record schema, for tf.io.parse_example.

  Args:
    max_seq_length: int, length of input_ids / input_mask / segment_ids.
    max_predictions_per_seq: int, length of the masked_lm_* features.

  Returns:
    dict name -> tf.io.FixedLenFeature.
  """
  seq = tf.io.FixedLenFeature([max_seq_length], tf.int64)
  predictions = tf.io.FixedLenFeature([max_predictions_per_seq], tf.int64)
  return {
      "input_ids": seq,
      "input_mask": seq,
      "segment_ids": seq,
      "masked_lm_positions": predictions,
      "masked_lm_ids": predictions,
      "masked_lm_weights": tf.io.FixedLenFeature([max_predictions_per_seq],
                                                 tf.float32),
      "next_sentence_labels": tf.io.FixedLenFeature([1], tf.int64),
  }
