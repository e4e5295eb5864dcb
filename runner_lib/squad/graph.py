"""SQuAD's words, windows and answer search as TensorFlow ops over a batch,
for a SavedModel (serving/squad.py).

The same rules run_squad.py runs in Python, one example at a time, in
data.py, features.py and predictions.py; the constants they share live
there:

  split_context  data.split_context's words (data.is_whitespace)
  doc_windows    features.doc_spans_for
  max_context    features.max_context_spans
  best_spans     predictions._valid_spans, and the first of
                 _prelim_predictions' sorted spans
  null_score     _prelim_predictions' null score (SQuAD 2.0)
  detokenize     predictions._detokenize
  final_text     predictions.get_final_text
  answer_start   where final_text's answer starts in the context (which
                 run_squad.py does not write)
"""

import tensorflow as tf
import tensorflow_text as tf_text

from runner_lib.squad import data
from runner_lib.squad import features
from runner_lib.squad import predictions

# data.WHITESPACE's characters, one or more: the words' separators (RE2
# takes the characters themselves inside a class).
_CONTEXT_WHITESPACE = "[%s]+" % data.WHITESPACE
_SPACE = ord(" ")


def split_context(context):
  """data.split_context's words over a batch.

  Args:
    context: string [B].

  Returns:
    (words, begins): string RaggedTensor [B, (words)]; int64 RaggedTensor
    [B, (words)], each word's byte offset in its context.
  """
  words, begins, _ = tf_text.regex_split_with_offsets(context,
                                                      _CONTEXT_WHITESPACE)
  return words, begins


def doc_windows(doc_lengths, query_lengths, seq_length, doc_stride):
  """features.doc_spans_for over a batch.

  A window holds up to max_tokens = seq_length - query -
  features.SPECIAL_TOKENS tokens; all but the last are full, so they start
  min(doc_stride, max_tokens) apart, and the last is the first to reach the
  document's end. An empty document has no window (the original's loop
  never runs).

  Args:
    doc_lengths: int64 [B], WordPieces per context.
    query_lengths: int64 [B], WordPieces per (cut) question.
    seq_length: int.
    doc_stride: int.

  Returns:
    (example, start, length), int64 [W] each: every window of every
    example, in example order, then window order.
  """
  max_tokens = seq_length - features.SPECIAL_TOKENS - query_lengths
  stride = tf.minimum(tf.constant(doc_stride, tf.int64), max_tokens)
  extra = doc_lengths - max_tokens
  counts = tf.where(doc_lengths == 0, tf.zeros_like(extra),
                    tf.where(extra <= 0, tf.ones_like(extra),
                             (extra + stride - 1) // stride + 1))
  example = tf.repeat(tf.range(tf.size(counts, out_type=tf.int64)), counts)
  start = tf.ragged.range(counts).flat_values * tf.gather(stride, example)
  length = tf.minimum(tf.gather(doc_lengths, example) - start,
                      tf.gather(max_tokens, example))
  return example, start, length


def max_context(start, length, first_piece, num_tokens):
  """features.max_context_spans over a batch's windows.

  A token's score in a window is min(left, right context) +
  features.MAX_CONTEXT_LENGTH_WEIGHT (0.01) * the window's length (float64,
  as the original computes it); the first window with the highest score is
  the token's.

  Args:
    start: int64 [W], each window's first WordPiece in its document.
    length: int64 [W].
    first_piece: int64 [W], the window's document's first WordPiece in the
      batch (so tokens are numbered over the batch).
    num_tokens: int64 scalar, WordPieces in the batch's documents.

  Returns:
    bool RaggedTensor [W, (length)]: the window is the token's.
  """
  positions = tf.ragged.range(start, start + length)  # [W, (length)]
  window = positions.value_rowids()
  position = positions.flat_values
  window_start = tf.gather(start, window)
  window_length = tf.gather(length, window)
  score = (tf.cast(tf.minimum(position - window_start,
                              window_start + window_length - 1 - position),
                   tf.float64) +
           tf.constant(features.MAX_CONTEXT_LENGTH_WEIGHT, tf.float64) *
           tf.cast(window_length, tf.float64))
  token = position + tf.gather(first_piece, window)
  best = tf.math.unsorted_segment_max(score, token, num_tokens)
  num_windows = tf.size(start, out_type=tf.int64)
  first = tf.math.unsorted_segment_min(
      tf.where(score == tf.gather(best, token), window, num_windows), token,
      num_tokens)
  return positions.with_flat_values(tf.gather(first, token) == window)


def best_spans(start_logits, end_logits, start_ok, end_ok, example,
               batch_size, n_best_size, max_answer_length):
  """The original's best prelim prediction per example, over its windows.

  Among each window's n_best_size best starts and ends (ties: the lower
  position first), a span is valid when its start is a context token in its
  max-context window, its end a context token, end >= start and it is at
  most max_answer_length long. Its score is start + end logit (float64);
  the first best in (window, start rank, end rank) order wins, as after the
  original's stable sort.

  Args:
    start_logits: float32 [W, T].
    end_logits: float32 [W, T].
    start_ok: bool [W, T], context tokens in their max-context window.
    end_ok: bool [W, T], context tokens.
    example: int64 [W], each window's example.
    batch_size: int64 scalar, B.
    n_best_size: int.
    max_answer_length: int.

  Returns:
    dict of [B]: "found" bool; "window" (over the batch), "start", "end"
    (positions in the window) int64; "start_logit", "end_logit" float64.
    Where nothing was found, window is W and the rest 0.
  """
  k = min(n_best_size, start_logits.shape[-1])
  start_values, start_index = tf.math.top_k(start_logits, k)  # [W, k]
  end_values, end_index = tf.math.top_k(end_logits, k)
  starts = start_index[:, :, tf.newaxis]
  ends = end_index[:, tf.newaxis, :]
  valid = (tf.gather(start_ok, start_index, batch_dims=1)[:, :, tf.newaxis] &
           tf.gather(end_ok, end_index, batch_dims=1)[:, tf.newaxis, :] &
           (ends >= starts) & (ends - starts + 1 <= max_answer_length))
  scores = (tf.cast(start_values, tf.float64)[:, :, tf.newaxis] +
            tf.cast(end_values, tf.float64)[:, tf.newaxis, :])
  valid = tf.reshape(valid, [-1])  # [W * k * k]
  scores = tf.where(valid, tf.reshape(scores, [-1]),
                    tf.constant(-float("inf"), tf.float64))
  owner = tf.repeat(example, k * k)
  found = tf.math.unsorted_segment_sum(tf.cast(valid, tf.int32), owner,
                                       batch_size) > 0
  best = tf.math.unsorted_segment_max(scores, owner, batch_size)
  candidates = tf.size(owner, out_type=tf.int64)
  first = tf.math.unsorted_segment_min(
      tf.where(valid & (scores == tf.gather(best, owner)),
               tf.range(candidates), candidates), owner, batch_size)
  num_windows = tf.size(example, out_type=tf.int64)
  window = tf.where(found, first // (k * k), num_windows)
  start_rank = tf.where(found, first % (k * k) // k, 0)
  end_rank = tf.where(found, first % k, 0)

  def pick(values, rank):
    """values[window, rank], 0 where nothing was found."""
    values = tf.concat([values, tf.zeros([1, k], values.dtype)], axis=0)
    return tf.gather_nd(values, tf.stack([window, rank], axis=1))

  return {"found": found, "window": window,
          "start": tf.cast(pick(start_index, start_rank), tf.int64),
          "end": tf.cast(pick(end_index, end_rank), tf.int64),
          "start_logit": tf.cast(pick(start_values, start_rank), tf.float64),
          "end_logit": tf.cast(pick(end_values, end_rank), tf.float64)}


def null_score(start_logits, end_logits, example, batch_size):
  """SQuAD 2.0's null score per example: the lowest [CLS] start + end logit
  over its windows (float64), predictions.NULL_SCORE_START for an example
  without a window, as _prelim_predictions.

  Args:
    start_logits: float32 [W, T].
    end_logits: float32 [W, T].
    example: int64 [W], each window's example.
    batch_size: int64 scalar, B.

  Returns:
    float64 [B].
  """
  null_scores = (tf.cast(start_logits[:, 0], tf.float64) +
                 tf.cast(end_logits[:, 0], tf.float64))
  return tf.minimum(
      tf.math.unsorted_segment_min(null_scores, example, batch_size),
      tf.constant(predictions.NULL_SCORE_START, tf.float64))


def join_rows(strings):
  """" ".join of each row of a string RaggedTensor [B, (N)] -> [B]."""
  return tf.strings.reduce_join(strings, axis=-1, separator=" ")


def detokenize(tokens):
  """predictions._detokenize over a batch.

  Args:
    tokens: string RaggedTensor [B, (pieces)], each span's WordPieces.

  Returns:
    string [B]: "##" continuations glued on, spaces normalized.
  """
  text = join_rows(tokens)
  text = tf.strings.regex_replace(text, " ##", "")
  text = tf.strings.regex_replace(text, "##", "")
  return join_rows(tf.strings.split(text))


def final_text(texts):
  """predictions.get_final_text for one answer, in code points.

  Args:
    texts: (pred_text, orig_text, tok_text), string scalars: the joined
      WordPieces, the whitespace words holding them joined by " ", and
      BasicTokenizer's words of those joined by " ".

  Returns:
    (final_text string, start int64): the text and where it starts in
    orig_text, in characters.
  """
  pred_text, orig_text, tok_text = texts
  # str.find, for one needle: the text before its first occurrence (UTF-8
  # is self-synchronizing, so the first byte match is the first character
  # match).
  # An empty tok_text splits into no part at all (a row without an
  # answer, whose text is dropped): the "" after the parts keeps parts[0].
  parts = tf.concat([tf.strings.split(tok_text, sep=pred_text, maxsplit=1),
                     [""]], 0)
  found = (tf.size(parts) == 3) & (pred_text != "")
  start = tf.strings.length(parts[0], unit="UTF8_CHAR")
  end = start + tf.strings.length(pred_text, unit="UTF8_CHAR") - 1
  orig = tf.strings.unicode_decode(orig_text, "UTF-8")
  tok = tf.strings.unicode_decode(tok_text, "UTF-8")
  orig_chars = tf.where(orig != _SPACE)[:, 0]  # _strip_spaces' map
  tok_is_char = tok != _SPACE
  tok_length = tf.size(tok)

  def project(position):
    """(tok position is a character, its orig position)."""
    inside = (position >= 0) & (position < tok_length)
    clipped = tf.clip_by_value(position, 0, tf.maximum(tok_length - 1, 0))
    is_char = inside & tf.gather(tf.concat([tok_is_char, [False]], 0),
                                 tf.where(inside, clipped, tok_length))
    chars_before = tf.reduce_sum(tf.cast(tok_is_char[:clipped], tf.int32))
    orig_position = tf.gather(tf.concat([orig_chars, [0]], 0),
                              tf.minimum(chars_before, tf.size(orig_chars)))
    return is_char, tf.cast(orig_position, tf.int32)

  start_ok, orig_start = project(start)
  end_ok, orig_end = project(end)
  aligned = (found & start_ok & end_ok &
             (tf.size(orig_chars) == tf.reduce_sum(
                 tf.cast(tok_is_char, tf.int32))))
  orig_start = tf.where(aligned, orig_start, 0)
  text = tf.where(aligned, tf.strings.substr(
      orig_text, orig_start, orig_end - orig_start + 1, unit="UTF8_CHAR"),
                  orig_text)
  return text, tf.cast(orig_start, tf.int64)


def answer_start(context, words, begins, first_word, orig_text, orig_start):
  """Where each answer starts in its context, in characters.

  Args:
    context: string [B].
    words: string RaggedTensor [B, (words)], the contexts' words.
    begins: int64 RaggedTensor [B, (words)], their byte offsets.
    first_word: int64 [B], the answer's first word in words.flat_values.
    orig_text: string [B], the answer's words joined by single spaces.
    orig_start: int64 [B], the answer's first character in orig_text.

  Returns:
    int64 [B]: the start of its word in context plus its place in the word.
  """
  chars = tf.strings.unicode_decode(orig_text, "UTF-8")  # [B, (chars)]
  row = chars.value_rowids()
  position = tf.ragged.range(chars.row_lengths()).flat_values
  space_before = ((chars.flat_values == _SPACE) &
                  (position < tf.gather(orig_start, row)))
  batch_size = chars.nrows()
  spaces = tf.math.unsorted_segment_sum(tf.cast(space_before, tf.int64), row,
                                        batch_size)
  last_space = tf.maximum(tf.math.unsorted_segment_max(
      tf.where(space_before, position, -1), row, batch_size), -1)
  word_begin = tf.strings.length(tf.strings.substr(
      tf.gather(context, words.value_rowids()),
      tf.zeros_like(begins.flat_values), begins.flat_values),
                                 unit="UTF8_CHAR")
  word = tf.clip_by_value(first_word + spaces, 0,
                          tf.size(word_begin, out_type=tf.int64))
  word_begin = tf.concat([tf.cast(word_begin, tf.int64), [0]], axis=0)
  return tf.gather(word_begin, word) + orig_start - last_space - 1
