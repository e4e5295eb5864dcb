"""SQuAD serving: question and context strings in, run_squad.py's answer out.

Everything run_squad does between a SQuAD JSON and predictions.json is here
as TensorFlow ops over a batch: whitespace words, WordPieces per word, the
question cut to max_query_length, windows doc_stride apart, each token's
max-context window, the n-best search over valid spans and get_final_text's
projection of the WordPieces back onto the context's characters.
"""

import tensorflow as tf
import tensorflow_text as tf_text

from runner_lib.serving import modules

# run_squad's word separators (data.is_whitespace), one or more.
_CONTEXT_WHITESPACE = r"[ \t\r\n\x{202F}]+"
_SPACE = ord(" ")
# The original's starting null score, the answer's when an example has no
# window (as squad/predictions.py's; task packages do not import each
# other).
NULL_SCORE_START = 1000000


def doc_windows(doc_lengths, query_lengths, seq_length, doc_stride):
  """features.doc_spans_for over a batch.

  A window holds up to max_tokens = seq_length - query - 3 tokens; all but
  the last are full, so they start min(doc_stride, max_tokens) apart, and
  the last is the first to reach the document's end. An empty document has
  no window (the original's loop never runs).

  Args:
    doc_lengths: int64 [B], WordPieces per context.
    query_lengths: int64 [B], WordPieces per (cut) question.
    seq_length: int.
    doc_stride: int.

  Returns:
    (example, start, length), int64 [W] each: every window of every
    example, in example order, then window order.
  """
  max_tokens = seq_length - 3 - query_lengths
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

  A token's score in a window is min(left, right context) + 0.01 * the
  window's length (float64, as the original computes it); the first window
  with the highest score is the token's.

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
           tf.constant(0.01, tf.float64) * tf.cast(window_length, tf.float64))
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


def _final_text(texts):
  """get_final_text for one answer, in code points.

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
  parts = tf.strings.split(tok_text, sep=pred_text, maxsplit=1)
  found = (tf.size(parts) == 2) & (pred_text != "")
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


def _join_rows(strings):
  """" ".join of each row of a string RaggedTensor [B, (N)] -> [B]."""
  return tf.strings.reduce_join(strings, axis=-1, separator=" ")


def _answer_start(context, words, begins, first_word, orig_text,
                  orig_start):
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


class SquadModule(modules.ServingModule):
  """run_squad's model: question and context in; the answer, where it starts
  in the context and its score out (SQuAD 2.0: also the null score
  difference, and the answer "" above the threshold)."""

  def __init__(self, model, vocab_file, do_lower_case, seq_length,
               doc_stride, max_query_length, n_best_size, max_answer_length,
               version_2_with_negative=False, null_score_diff_threshold=0.0):
    """Args: as ServingModule, and run_squad.py's flags of the same names
    (seq_length is its max_seq_length)."""
    super().__init__(model, vocab_file, do_lower_case, seq_length)
    self.doc_stride = doc_stride
    self.max_query_length = max_query_length
    self.n_best_size = n_best_size
    self.max_answer_length = max_answer_length
    self.version_2_with_negative = version_2_with_negative
    self.null_score_diff_threshold = null_score_diff_threshold
    self.serve = modules.function(self._serve, input_signature=[
        modules.string_spec("question"), modules.string_spec("context")])

  def _windows(self, question, words):
    """Every window's model inputs and what the answer search needs.

    Args:
      question: string [B].
      words: string RaggedTensor [B, (words)], the contexts' words.

    Returns:
      dict: "inputs" (model inputs, int32 [W, T]); "example", "start" (its
      first WordPiece in the document) and "offset" (that WordPiece's
      position in the window), int64 [W]; "start_ok", "end_ok" bool [W, T]
      (see best_spans); "doc_ids" int64 RaggedTensor [B, (N)]; "piece_word"
      int64 [sum N], each WordPiece's word in words.flat_values; "basic"
      string RaggedTensor [words, (basic words)], BasicTokenizer's words of
      each word.
    """
    seq_length = self.preprocessor.seq_length
    tokenizer = self.preprocessor.tokenizer
    query = tokenizer.tokenize_ids(question, valid_utf8=True)
    query = query[:, :self.max_query_length]  # [B, (Q)]
    # Each whitespace word's WordPieces, as run_squad tokenizes them.
    basic = tokenizer.split_words(words.flat_values, valid_utf8=True)
    word_ids = tokenizer.wordpiece_ids(basic).merge_dims(1, 2)  # [words, (P)]
    doc_lengths = tf.math.unsorted_segment_sum(
        word_ids.row_lengths(), words.value_rowids(), words.nrows())
    doc_ids = tf.RaggedTensor.from_row_lengths(word_ids.flat_values,
                                               doc_lengths)  # [B, (N)]
    example, start, length = doc_windows(
        doc_lengths, query.row_lengths(), seq_length, self.doc_stride)
    first_piece = tf.gather(doc_ids.row_starts(), example)
    window_ids = tf.gather(doc_ids.flat_values,
                           tf.ragged.range(start, start + length) +
                           first_piece[:, tf.newaxis])  # [W, (length)]
    column = lambda value: tf.fill([tf.size(example), 1], value)
    # [CLS] question [SEP], then the window and [SEP].
    head = tf.concat([column(tf.constant(self.preprocessor.cls_id, tf.int64)),
                      tf.gather(query, example),
                      column(tf.constant(self.preprocessor.sep_id, tf.int64))],
                     axis=1)
    tail = tf.concat(
        [window_ids,
         column(tf.constant(self.preprocessor.sep_id, tf.int64))], axis=1)
    input_ids = tf.concat([head, tail], axis=1)
    segment_ids = tf.concat([tf.zeros_like(head), tf.ones_like(tail)], axis=1)
    not_doc = tf.zeros_like(head, tf.bool)
    is_best = max_context(start, length, first_piece,
                          tf.size(doc_ids.flat_values, out_type=tf.int64))
    last = column(False)
    dense = lambda ragged, value: ragged.to_tensor(
        tf.constant(value, ragged.dtype), shape=[None, seq_length])
    return {
        "inputs": {
            "input_ids": tf.cast(dense(input_ids, 0), tf.int32),
            "input_mask": tf.cast(dense(tf.ones_like(input_ids), 0),
                                  tf.int32),
            "segment_ids": tf.cast(dense(segment_ids, 0), tf.int32)},
        "example": example, "start": start, "offset": head.row_lengths(),
        "start_ok": dense(tf.concat([not_doc, is_best, last], axis=1), False),
        "end_ok": dense(tf.concat([not_doc, tf.ones_like(is_best), last],
                                  axis=1), False),
        "doc_ids": doc_ids, "piece_word": word_ids.value_rowids(),
        "basic": basic}

  def _texts(self, span, windows, words):
    """The span's text as get_final_text gives it.

    Returns:
      (text string [B], first_word int64 [B] in words.flat_values,
      orig_text string [B], orig_start int64 [B]: where text starts in
      orig_text).
    """
    found = span["found"]
    doc_ids = windows["doc_ids"]
    place = lambda values: tf.gather(tf.concat([values, [0]], 0),
                                     span["window"])
    base = doc_ids.row_starts() + place(windows["start"]) - place(
        windows["offset"])
    first = base + span["start"]
    last = tf.where(found, base + span["end"], first - 1)
    piece_word = tf.concat([windows["piece_word"], [0]], 0)
    none = tf.size(piece_word, out_type=tf.int64) - 1
    first_word = tf.gather(piece_word, tf.where(found, first, none))
    last_word = tf.where(found, tf.gather(piece_word, tf.where(
        found, last, none)), first_word - 1)
    word_range = tf.ragged.range(first_word, last_word + 1)
    # _detokenize, then the words and their BasicTokenizer words, joined.
    pred_text = _join_rows(self.tokenizer.id_to_token(tf.gather(
        doc_ids.flat_values, tf.ragged.range(first, last + 1))))
    pred_text = tf.strings.regex_replace(pred_text, " ##", "")
    pred_text = tf.strings.regex_replace(pred_text, "##", "")
    pred_text = _join_rows(tf.strings.split(pred_text))
    orig_text = _join_rows(tf.gather(words.flat_values, word_range))
    tok_text = _join_rows(
        tf.gather(windows["basic"], word_range).merge_dims(1, 2))
    text, orig_start = tf.map_fn(
        _final_text, (pred_text, orig_text, tok_text),
        fn_output_signature=(tf.string, tf.int64))
    return text, first_word, orig_text, orig_start

  def _serve(self, question, context):
    """Answers a batch of questions.

    Args:
      question: string [B].
      context: string [B].

    Returns:
      dict: "answer_text" string [B], predictions.json's answer;
      "answer_start" int64 [B], its first character in context (-1 for ""
      or no answer); "score" float32 [B], its start + end logit (for "",
      the null score: the lowest [CLS] start + end over the windows). SQuAD
      2.0 also: "null_score_diff" float32 [B], null_odds.json's value;
      "best_non_null_text" string [B], the answer at an infinite threshold.
    """
    # Characters are counted in decoded text: an invalid byte is one U+FFFD
    # (which the tokenizer drops).
    question = tf.strings.unicode_transcode(question, "UTF-8", "UTF-8",
                                            errors="replace")
    context = tf.strings.unicode_transcode(context, "UTF-8", "UTF-8",
                                           errors="replace")
    batch_size = tf.size(context, out_type=tf.int64)
    words, begins, _ = tf_text.regex_split_with_offsets(context,
                                                        _CONTEXT_WHITESPACE)
    windows = self._windows(question, words)
    start_logits, end_logits = self.model(windows["inputs"], training=False)
    start_logits = tf.cast(start_logits, tf.float32)
    end_logits = tf.cast(end_logits, tf.float32)
    span = best_spans(start_logits, end_logits, windows["start_ok"],
                      windows["end_ok"], windows["example"], batch_size,
                      self.n_best_size, self.max_answer_length)
    found = span["found"]
    text, first_word, orig_text, orig_start = self._texts(span, windows,
                                                          words)
    answer_start = tf.where(found, _answer_start(
        context, words, begins, first_word, orig_text, orig_start), -1)
    score = span["start_logit"] + span["end_logit"]
    if not self.version_2_with_negative:
      # No valid span: the original's nonce answer.
      return {"answer_text": tf.where(found, text, "empty"),
              "answer_start": answer_start,
              "score": tf.cast(score, tf.float32)}
    null_scores = (tf.cast(start_logits[:, 0], tf.float64) +
                   tf.cast(end_logits[:, 0], tf.float64))
    score_null = tf.minimum(
        tf.math.unsorted_segment_min(null_scores, windows["example"],
                                     batch_size),
        tf.constant(NULL_SCORE_START, tf.float64))
    # In the original's order of operations, for the same float64 value.
    score_diff = tf.where(
        found, score_null - span["start_logit"] - span["end_logit"],
        score_null)
    null = ~found | (score_diff > self.null_score_diff_threshold)
    return {"answer_text": tf.where(null, "", text),
            "answer_start": tf.where(null, tf.constant(-1, tf.int64),
                                     answer_start),
            "score": tf.cast(tf.where(null, score_null, score), tf.float32),
            "null_score_diff": tf.cast(score_diff, tf.float32),
            "best_non_null_text": tf.where(found, text, "")}

  def signatures(self):
    return {"serving_default": self.serve}
