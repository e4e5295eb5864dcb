"""SQuAD serving: question and context strings in, run_squad.py's answer out.

Everything run_squad does between a SQuAD JSON and predictions.json, as
TensorFlow ops over a batch: whitespace words, WordPieces per word, the
question cut to max_query_length, windows doc_stride apart, each token's
max-context window, the n-best search over valid spans and get_final_text's
projection of the WordPieces back onto the context's characters. The rules
are squad/graph.py's, the TensorFlow twins of squad/'s Python; this module
tokenizes, packs, runs the model and assembles the outputs.
"""

import tensorflow as tf

from runner_lib.serving import modules
from runner_lib.squad import graph


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
      (see graph.best_spans); "doc_ids" int64 RaggedTensor [B, (N)];
      "piece_word" int64 [sum N], each WordPiece's word in
      words.flat_values; "basic" string RaggedTensor [words, (basic
      words)], BasicTokenizer's words of each word.
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
    example, start, length = graph.doc_windows(
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
    is_best = graph.max_context(
        start, length, first_piece,
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
    # The span's WordPieces detokenized, then the words holding them and
    # their BasicTokenizer words, joined (as predictions._nbest).
    pred_text = graph.detokenize(self.tokenizer.id_to_token(tf.gather(
        doc_ids.flat_values, tf.ragged.range(first, last + 1))))
    orig_text = graph.join_rows(tf.gather(words.flat_values, word_range))
    tok_text = graph.join_rows(
        tf.gather(windows["basic"], word_range).merge_dims(1, 2))
    text, orig_start = tf.map_fn(
        graph.final_text, (pred_text, orig_text, tok_text),
        fn_output_signature=(tf.string, tf.int64))
    return text, first_word, orig_text, orig_start

  def _prepare(self, question, context):
    """Every window's model inputs (int32 [W, T]), and the state: the
    contexts (as decoded), their words and where each begins, and
    _windows' answer-search tensors.

    Args:
      question: string [B].
      context: string [B].
    """
    # Characters are counted in decoded text: an invalid byte is one U+FFFD
    # (which the tokenizer drops).
    question = tf.strings.unicode_transcode(question, "UTF-8", "UTF-8",
                                            errors="replace")
    context = tf.strings.unicode_transcode(context, "UTF-8", "UTF-8",
                                           errors="replace")
    words, begins = graph.split_context(context)
    windows = self._windows(question, words)
    inputs = windows.pop("inputs")
    return inputs, {"context": context, "words": words, "begins": begins,
                    "windows": windows}

  def _core(self, inputs):
    start_logits, end_logits = self.model(inputs, training=False)
    return {"start_logits": tf.cast(start_logits, tf.float32),
            "end_logits": tf.cast(end_logits, tf.float32)}

  def _finish(self, outputs, state):
    """The batch's answers, from every window's logits.

    Returns:
      dict: "answer_text" string [B], predictions.json's answer;
      "answer_start" int64 [B], its first character in context (-1 for ""
      or no answer); "score" float32 [B], its start + end logit (for "",
      the null score: the lowest [CLS] start + end over the windows). SQuAD
      2.0 also: "null_score_diff" float32 [B], null_odds.json's value;
      "best_non_null_text" string [B], the answer at an infinite threshold.
    """
    context, words, begins, windows = (
        state["context"], state["words"], state["begins"], state["windows"])
    start_logits = outputs["start_logits"]
    end_logits = outputs["end_logits"]
    batch_size = tf.size(context, out_type=tf.int64)
    span = graph.best_spans(start_logits, end_logits, windows["start_ok"],
                            windows["end_ok"], windows["example"],
                            batch_size, self.n_best_size,
                            self.max_answer_length)
    found = span["found"]
    text, first_word, orig_text, orig_start = self._texts(span, windows,
                                                          words)
    answer_start = tf.where(found, graph.answer_start(
        context, words, begins, first_word, orig_text, orig_start), -1)
    score = span["start_logit"] + span["end_logit"]
    if not self.version_2_with_negative:
      # No valid span: the original's nonce answer.
      return {"answer_text": tf.where(found, text, "empty"),
              "answer_start": answer_start,
              "score": tf.cast(score, tf.float32)}
    score_null = graph.null_score(start_logits, end_logits,
                                  windows["example"], batch_size)
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
