"""In-graph BERT input preprocessing: raw strings -> model inputs."""

import tensorflow as tf
import tensorflow_text as tf_text
import tf_keras as keras

from tokenization import graph
from tokenization import tokenizers


def truncated_pair_lengths(length_a, length_b, max_length):
  """Lengths the original _truncate_seq_pair leaves, in closed form.

  The original pops one token at a time from the longer sequence (from B on
  a tie) until the pair fits. So the shorter one is kept whole if it fits in
  its half; otherwise both end at ceil / floor of half (A gets the extra).

  Args:
    length_a: int Tensor [B].
    length_b: int Tensor [B].
    max_length: int, the budget for both.

  Returns:
    (new_length_a, new_length_b), int Tensors [B].
  """
  max_length = tf.cast(max_length, length_b.dtype)
  new_b = tf.minimum(length_b,
                     tf.maximum(max_length // 2, max_length - length_a))
  new_a = tf.minimum(length_a, max_length - new_b)
  return new_a, new_b


def _keep_first(ragged, lengths):
  """Keeps the first lengths[i] items of row i of a RaggedTensor [B, (N)].

  A gather of each row's first indices: a mask compared against lengths
  broadcast over the ragged rows gives the same, but takes seconds to
  trace.
  """
  row_lengths = ragged.row_lengths()
  keep = tf.clip_by_value(tf.cast(lengths, row_lengths.dtype), 0, row_lengths)
  starts = ragged.row_starts()
  indices = tf.ragged.range(starts, starts + keep)
  return indices.with_flat_values(tf.gather(ragged.values,
                                            indices.flat_values))


class BertPreprocessor(keras.layers.Layer):
  """Raw text (one or two segments) -> input_ids, input_mask, segment_ids.

  Tokenizes like FullTokenizer, truncates like the original (single: keep
  seq_length - 2 tokens; pair: _truncate_seq_pair to seq_length - 3), lays
  out [CLS] A [SEP] B [SEP] with segment ids 0 / 1 and pads with 0. Runs in
  a tf.function and inside a SavedModel (import tensorflow_text before
  loading it, which registers the ops).
  """

  def __init__(self, vocab_file, do_lower_case, seq_length,
               name="bert_preprocessor", **kwargs):
    """Loads and compiles the vocab.

    Args:
      vocab_file: str, vocab.txt.
      do_lower_case: bool.
      seq_length: int >= 3, output length.
      name: Keras name.
      **kwargs: passed to keras.layers.Layer.

    Raises:
      tokenizers.VocabError: see FullTokenizer.
      ValueError: seq_length < 3.
    """
    super().__init__(name=name, trainable=False, **kwargs)
    if seq_length < 3:
      raise ValueError("seq_length must be at least 3 ([CLS] A [SEP] B "
                       "[SEP]), got %d." % seq_length)
    tokens = tokenizers.read_vocab_tokens(vocab_file)
    tokenizers.check_vocab_tokens(tokens, vocab_file)
    self.seq_length = seq_length
    self.tokenizer = graph.GraphTokenizer(tokens, do_lower_case)
    self.cls_id = tokens.index("[CLS]")
    self.sep_id = tokens.index("[SEP]")

  def call(self, inputs):
    """Preprocesses a batch.

    Args:
      inputs: string Tensor [B] (single sentences), or a list / tuple of one
        or two string Tensors [B] (sentence A, sentence B).

    Returns:
      dict of int32 [B, seq_length]: input_ids, input_mask, segment_ids.
    """
    if isinstance(inputs, (list, tuple)):
      segments = list(inputs)
    else:
      segments = [inputs]
    if not 1 <= len(segments) <= 2:
      raise ValueError("BertPreprocessor takes one or two segments, got %d." %
                       len(segments))
    ids = [self.tokenizer.tokenize_ids(tf.reshape(s, [-1])) for s in segments]
    return pack_inputs(ids, self.seq_length, self.cls_id, self.sep_id)


def pack_inputs(ids, seq_length, cls_id, sep_id):
  """Truncates, lays out and pads one or two segments of token ids.

  As the original: a single segment keeps seq_length - 2 tokens; a pair is
  cut by _truncate_seq_pair to seq_length - 3, except that a row whose B
  has no tokens is a single sentence (the original's `if tokens_b`).

  Args:
    ids: list of one or two int RaggedTensors [B, (tokens)].
    seq_length: int or int scalar Tensor >= 3.
    cls_id: int, the [CLS] id.
    sep_id: int, the [SEP] id.

  Returns:
    dict of int32 [B, seq_length]: input_ids, input_mask, segment_ids.
  """
  ids = [tf.cast(segment, tf.int64) for segment in ids]
  if len(ids) == 1:
    ids = [ids[0][:, :seq_length - 2]]
  else:
    length_a, length_b = ids[0].row_lengths(), ids[1].row_lengths()
    new_a, new_b = truncated_pair_lengths(length_a, length_b, seq_length - 3)
    no_b = tf.equal(length_b, 0)
    new_a = tf.where(no_b, tf.minimum(length_a, tf.cast(seq_length - 2,
                                                        tf.int64)), new_a)
    ids = [_keep_first(ids[0], new_a), _keep_first(ids[1], new_b)]
  input_ids, segment_ids = tf_text.combine_segments(
      ids, start_of_sequence_id=cls_id, end_of_segment_id=sep_id)
  if len(ids) == 2:
    # ... and has no second [SEP].
    kept = input_ids.row_lengths() - tf.cast(no_b, tf.int64)
    input_ids = _keep_first(input_ids, kept)
    segment_ids = _keep_first(segment_ids, kept)
  input_ids, input_mask = tf_text.pad_model_inputs(input_ids, seq_length)
  segment_ids, _ = tf_text.pad_model_inputs(segment_ids, seq_length)
  return {"input_ids": tf.cast(input_ids, tf.int32),
          "input_mask": tf.cast(input_mask, tf.int32),
          "segment_ids": tf.cast(segment_ids, tf.int32)}
