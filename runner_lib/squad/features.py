"""SQuAD examples to model features: WordPiece maps, answer spans tightened
to WordPieces, sliding windows with each token's max-context window, and
the original's records."""

import collections
import dataclasses

from absl import logging
import numpy as np
import tensorflow as tf

from runner_lib.core.inputs import packing
from runner_lib.core.inputs import tfrecord
from runner_lib.core.inputs import tfrecord_writer
import tokenization

# The original run_squad.py numbers features from here.
FIRST_UNIQUE_ID = 1000000000
# Examples whose features are logged in full, as the original logs them.
LOGGED_EXAMPLES = 20
# [CLS], [SEP] and [SEP] around the question and a window: a window holds
# max_seq_length - len(question) - SPECIAL_TOKENS WordPieces (also in
# graph.doc_windows).
SPECIAL_TOKENS = 3
# A window's length in a token's max-context score, the original's
# "0.01 * doc_span.length" (also in graph.max_context).
MAX_CONTEXT_LENGTH_WEIGHT = 0.01


@dataclasses.dataclass(eq=False)
class InputFeatures:
  """One window of an example: [CLS] question [SEP] context window [SEP].

  token_to_orig_map and token_is_max_context are keyed by position in
  tokens (context positions only). start_position / end_position index
  tokens (training only; 0 for [CLS] when the answer is not in the window).
  """

  unique_id: int
  example_index: int
  doc_span_index: int
  tokens: list
  token_to_orig_map: dict
  token_is_max_context: dict
  input_ids: list
  input_mask: list
  segment_ids: list
  start_position: object = None
  end_position: object = None
  is_impossible: object = None

DocSpan = collections.namedtuple("DocSpan", ["start", "length"])


def improve_answer_span(doc_tokens, input_start, input_end, tokenizer,
                        orig_answer_text, answer_tokens=None):
  """Tightens a word-level answer span to the WordPieces of the answer.

  Answers are annotated in characters and located in whitespace words, so
  "(1895-1943)." holds the answer "1895"; after WordPiece the answer can be
  matched exactly: "( 1895 - 1943 ) .". Where it cannot ("Japan" inside
  "Japanese"), the span is kept.

  Args:
    doc_tokens: list of str, the context's WordPieces.
    input_start: int, first WordPiece of the answer's words.
    input_end: int, last WordPiece of the answer's words.
    tokenizer: FullTokenizer (unused when answer_tokens is given).
    orig_answer_text: str.
    answer_tokens: tokenizer.tokenize(orig_answer_text), or None.

  Returns:
    (start, end): the first (shortest-start, then longest) sub-span whose
    WordPieces equal the answer's, else (input_start, input_end).
  """
  if answer_tokens is None:
    answer_tokens = tokenizer.tokenize(orig_answer_text)
  tok_answer_text = " ".join(answer_tokens)
  for new_start in range(input_start, input_end + 1):
    for new_end in range(input_end, new_start - 1, -1):
      text_span = " ".join(doc_tokens[new_start:(new_end + 1)])
      if text_span == tok_answer_text:
        return new_start, new_end
  return input_start, input_end


def doc_spans_for(num_tokens, max_tokens_for_doc, doc_stride):
  """Windows over a document of num_tokens WordPieces.

  Each window holds up to max_tokens_for_doc tokens and starts
  min(previous window's length, doc_stride) after the previous one, as the
  original's: a stride wider than a window makes windows abut, never skip
  tokens. The last one ends at the document's end.

  Returns:
    list of DocSpan(start, length).
  """
  doc_spans = []
  start_offset = 0
  while start_offset < num_tokens:
    length = min(num_tokens - start_offset, max_tokens_for_doc)
    doc_spans.append(DocSpan(start=start_offset, length=length))
    if start_offset + length == num_tokens:
      break
    start_offset += min(length, doc_stride)
  return doc_spans


def max_context_spans(doc_spans, num_tokens):
  """For each token, the window giving it the most context.

  A token's score in a window is min(left context, right context) plus 0.01
  times the window's length; the first window with the highest score wins
  (the original's _check_is_max_context, for all tokens at once).

  Returns:
    int numpy array [num_tokens], the window index per document position.
  """
  positions = np.arange(num_tokens)
  scores = np.full([len(doc_spans), num_tokens], -np.inf)
  for span_index, span in enumerate(doc_spans):
    end = span.start + span.length - 1
    inside = positions[span.start:end + 1]
    scores[span_index, span.start:end + 1] = (
        np.minimum(inside - span.start, end - inside) +
        MAX_CONTEXT_LENGTH_WEIGHT * span.length)
  # argmax takes the first of equal scores, as the original's strict ">".
  return scores.argmax(axis=0)


def _tokenize_unique(tokenizer, texts):
  """dict text -> tokenizer.tokenize(text), each distinct text once.

  Words repeat, so the distinct ones are few (24k words and questions for
  6k SQuAD questions): the per-string path takes a fraction of a second,
  less than tracing the TensorFlow Text batch path would.
  """
  return {text: tokenizer.tokenize(text) for text in dict.fromkeys(texts)}


class _Document(object):
  """A paragraph's WordPieces and the maps to and from its words."""

  def __init__(self, doc_tokens, word_pieces, tokenizer):
    self.orig_to_tok_index = []
    self.tok_to_orig_index = []
    self.all_doc_tokens = []
    for i, token in enumerate(doc_tokens):
      self.orig_to_tok_index.append(len(self.all_doc_tokens))
      for sub_token in word_pieces[token]:
        self.tok_to_orig_index.append(i)
        self.all_doc_tokens.append(sub_token)
    self.all_doc_ids = tokenizer.convert_tokens_to_ids(self.all_doc_tokens)


def _tokenize_examples(examples, tokenizer, is_training):
  """Tokenizes each distinct word, question and answer once, and builds each
  paragraph's WordPieces once for all its questions.

  Returns:
    (pieces, documents): dict text -> WordPieces; dict id(doc_tokens) ->
    _Document.
  """
  texts = [e.question_text for e in examples]
  documents = {}
  for example in examples:
    if id(example.doc_tokens) not in documents:
      documents[id(example.doc_tokens)] = example.doc_tokens
      texts.extend(example.doc_tokens)
    if is_training and not example.is_impossible:
      texts.append(example.orig_answer_text)
  pieces = _tokenize_unique(tokenizer, texts)
  documents = {key: _Document(doc_tokens, pieces, tokenizer)
               for key, doc_tokens in documents.items()}
  return pieces, documents


def _answer_pieces(example, document, pieces, tokenizer):
  """A training answer's first and last WordPiece in the document, tightened
  to the answer's own WordPieces; (-1, -1) for an impossible question."""
  if example.is_impossible:
    return -1, -1
  start = document.orig_to_tok_index[example.start_position]
  if example.end_position < len(example.doc_tokens) - 1:
    end = document.orig_to_tok_index[example.end_position + 1] - 1
  else:
    end = len(document.all_doc_tokens) - 1
  return improve_answer_span(document.all_doc_tokens, start, end, tokenizer,
                             example.orig_answer_text,
                             pieces[example.orig_answer_text])


def _window_positions(answer, is_impossible, doc_span, doc_offset):
  """The training answer's (start, end) among a window's tokens: (0, 0),
  i.e. [CLS], when the window does not hold all of it or there is none."""
  start, end = answer
  doc_end = doc_span.start + doc_span.length - 1
  if is_impossible or not (start >= doc_span.start and end <= doc_end):
    return 0, 0
  return (start - doc_span.start + doc_offset,
          end - doc_span.start + doc_offset)


def convert_examples_to_features(examples, tokenizer, max_seq_length,
                                 doc_stride, max_query_length, is_training,
                                 output_fn):
  """Turns examples into windowed features, as the original.

  The question is cut to max_query_length WordPieces; the context is cut
  into windows of max_seq_length - len(question) - 3 WordPieces, doc_stride
  apart, each packed as [CLS] question [SEP] window [SEP] (core/packing).
  In training, a window without the whole answer, and every window of an
  impossible question, points at [CLS] (0, 0).

  Words, questions and answers are tokenized once per distinct text, and
  each paragraph's WordPieces are built once for all its questions: the
  same features as the original, several times faster.

  Args:
    examples: list of data.SquadExample.
    tokenizer: tokenization.FullTokenizer.
    max_seq_length: int.
    doc_stride: int.
    max_query_length: int.
    is_training: bool.
    output_fn: called with each InputFeatures, in order.

  Returns:
    int, the number of features.
  """
  pieces, documents = _tokenize_examples(examples, tokenizer, is_training)
  cls_id, sep_id = tokenizer.convert_tokens_to_ids(["[CLS]", "[SEP]"])
  unique_id = FIRST_UNIQUE_ID
  for example_index, example in enumerate(examples):
    query_tokens = pieces[example.question_text][:max_query_length]
    query_ids = tokenizer.convert_tokens_to_ids(query_tokens)
    document = documents[id(example.doc_tokens)]
    if is_training:
      answer = _answer_pieces(example, document, pieces, tokenizer)
    num_tokens = len(document.all_doc_tokens)
    doc_spans = doc_spans_for(
        num_tokens, max_seq_length - len(query_tokens) - SPECIAL_TOKENS,
        doc_stride)
    best_span = max_context_spans(doc_spans, num_tokens)
    # The window's first token follows [CLS] question [SEP].
    doc_offset = len(query_tokens) + 2
    for doc_span_index, doc_span in enumerate(doc_spans):
      window = slice(doc_span.start, doc_span.start + doc_span.length)
      # Always fits: the window was sized to, so nothing is truncated.
      tokens, segment_ids = packing.pair_layout(
          query_tokens, document.all_doc_tokens[window], max_seq_length)
      input_ids, _ = packing.pair_layout(
          query_ids, document.all_doc_ids[window], max_seq_length, cls_id,
          sep_id)
      input_ids, input_mask, segment_ids = packing.pad_features(
          input_ids, segment_ids, max_seq_length)
      positions = range(doc_offset, doc_offset + doc_span.length)
      start_position = end_position = None
      if is_training:
        start_position, end_position = _window_positions(
            answer, example.is_impossible, doc_span, doc_offset)
      feature = InputFeatures(
          unique_id=unique_id, example_index=example_index,
          doc_span_index=doc_span_index, tokens=tokens,
          token_to_orig_map=dict(zip(
              positions, document.tok_to_orig_index[window])),
          token_is_max_context=dict(zip(
              positions, (best_span[window] == doc_span_index).tolist())),
          input_ids=input_ids, input_mask=input_mask, segment_ids=segment_ids,
          start_position=start_position, end_position=end_position,
          is_impossible=example.is_impossible)
      if example_index < LOGGED_EXAMPLES:
        _log_feature(feature, is_training)
      output_fn(feature)
      unique_id += 1
  return unique_id - FIRST_UNIQUE_ID


def _log_feature(feature, is_training):
  logging.info("*** Example ***")
  logging.info("unique_id: %s", feature.unique_id)
  logging.info("example_index: %s", feature.example_index)
  logging.info("doc_span_index: %s", feature.doc_span_index)
  logging.info("tokens: %s", " ".join(
      tokenization.printable_text(x) for x in feature.tokens))
  logging.info("token_to_orig_map: %s", " ".join(
      "%d:%d" % item for item in feature.token_to_orig_map.items()))
  logging.info("token_is_max_context: %s", " ".join(
      "%d:%s" % item for item in feature.token_is_max_context.items()))
  logging.info("input_ids: %s", " ".join(map(str, feature.input_ids)))
  logging.info("input_mask: %s", " ".join(map(str, feature.input_mask)))
  logging.info("segment_ids: %s", " ".join(map(str, feature.segment_ids)))
  if is_training and feature.is_impossible:
    logging.info("impossible example")
  elif is_training:
    logging.info("start_position: %d", feature.start_position)
    logging.info("end_position: %d", feature.end_position)
    logging.info("answer: %s", tokenization.printable_text(" ".join(
        feature.tokens[feature.start_position:feature.end_position + 1])))


def name_to_features(max_seq_length, is_training):
  """The original's record schema (what a training step or prediction
  reads of it)."""
  seq = tf.io.FixedLenFeature([max_seq_length], tf.int64)
  features = {"unique_ids": tf.io.FixedLenFeature([], tf.int64),
              "input_ids": seq, "input_mask": seq, "segment_ids": seq}
  if is_training:
    features["start_positions"] = tf.io.FixedLenFeature([], tf.int64)
    features["end_positions"] = tf.io.FixedLenFeature([], tf.int64)
  return features


def serialize(feature, is_training):
  """An InputFeatures as the original's tf.train.Example bytes (training
  records also carry start/end positions and is_impossible)."""
  values = {"unique_ids": tfrecord.int_feature([feature.unique_id]),
            "input_ids": tfrecord.int_feature(feature.input_ids),
            "input_mask": tfrecord.int_feature(feature.input_mask),
            "segment_ids": tfrecord.int_feature(feature.segment_ids)}
  if is_training:
    values["start_positions"] = tfrecord.int_feature([feature.start_position])
    values["end_positions"] = tfrecord.int_feature([feature.end_position])
    values["is_impossible"] = tfrecord.int_feature(
        [int(bool(feature.is_impossible))])
  return tf.train.Example(features=tf.train.Features(
      feature=values)).SerializeToString(deterministic=True)


def write_features(examples, tokenizer, max_seq_length, doc_stride,
                   max_query_length, is_training, path):
  """Converts examples (as convert_examples_to_features does) and writes
  their records at path (atomically).

  Returns:
    (count, features): int, the records written; list of InputFeatures
    (empty in training, where only the records are needed and the
    features could be many).
  """
  kept = []
  with tfrecord_writer.RoundRobinWriter([path]) as writer:

    def output_fn(feature):
      writer.write(serialize(feature, is_training))
      if not is_training:
        kept.append(feature)

    count = convert_examples_to_features(
        examples, tokenizer, max_seq_length, doc_stride, max_query_length,
        is_training, output_fn)
  logging.info("  Num orig examples = %d", len(examples))
  logging.info("  Num split examples = %d", count)
  return count, kept
