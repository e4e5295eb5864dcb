"""SQuAD JSON to examples, and examples to model features (the original's
whitespace words, WordPiece maps and sliding windows)."""

import collections
import json

from absl import logging
import numpy as np
import tensorflow as tf

from runner_lib import errors
import tokenization

# The original run_squad.py numbers features from here.
FIRST_UNIQUE_ID = 1000000000
# Examples whose features are logged in full, as the original logs them.
LOGGED_EXAMPLES = 20


class SquadExample(object):
  """One question on one paragraph.

  doc_tokens are the paragraph's whitespace-separated words (shared by all
  questions on the paragraph). start_position / end_position index the words
  holding the answer (training only; -1 for an impossible question).
  """

  def __init__(self, qas_id, question_text, doc_tokens, orig_answer_text=None,
               start_position=None, end_position=None, is_impossible=False):
    self.qas_id = qas_id
    self.question_text = question_text
    self.doc_tokens = doc_tokens
    self.orig_answer_text = orig_answer_text
    self.start_position = start_position
    self.end_position = end_position
    self.is_impossible = is_impossible

  def __repr__(self):
    return "qas_id: %s, question_text: %s, doc_tokens: [%s]" % (
        tokenization.printable_text(self.qas_id),
        tokenization.printable_text(self.question_text),
        " ".join(self.doc_tokens))


class InputFeatures(object):
  """One window of an example: [CLS] question [SEP] context window [SEP].

  token_to_orig_map and token_is_max_context are keyed by position in
  tokens (context positions only). start_position / end_position index
  tokens (training only; 0 for [CLS] when the answer is not in the window).
  """

  def __init__(self, unique_id, example_index, doc_span_index, tokens,
               token_to_orig_map, token_is_max_context, input_ids, input_mask,
               segment_ids, start_position=None, end_position=None,
               is_impossible=None):
    self.unique_id = unique_id
    self.example_index = example_index
    self.doc_span_index = doc_span_index
    self.tokens = tokens
    self.token_to_orig_map = token_to_orig_map
    self.token_is_max_context = token_is_max_context
    self.input_ids = input_ids
    self.input_mask = input_mask
    self.segment_ids = segment_ids
    self.start_position = start_position
    self.end_position = end_position
    self.is_impossible = is_impossible


DocSpan = collections.namedtuple("DocSpan", ["start", "length"])

_JSON_TYPES = {dict: "an object", list: "a list", str: "a string",
               int: "an integer", float: "a number", bool: "a boolean",
               type(None): "null"}


def _fail(path, where, problem):
  raise errors.InputError("%s: %s %s. Expected the SQuAD JSON layout "
                          "{\"data\": [{\"paragraphs\": [{\"context\": ..., "
                          "\"qas\": [{\"id\": ..., \"question\": ..., "
                          "\"answers\": [{\"text\": ..., \"answer_start\": "
                          "...}]}]}]}]}." % (path, where, problem))


def _field(path, where, obj, key, kind):
  """obj[key], checked to be of type kind, or an error naming the place."""
  if not isinstance(obj, dict):
    _fail(path, where, "is %s, not an object" %
          _JSON_TYPES.get(type(obj), "a " + type(obj).__name__))
  if key not in obj:
    _fail(path, where, "has no %r" % key)
  value = obj[key]
  # JSON true/false load as bool, a subclass of int: not an answer_start.
  if not isinstance(value, kind) or isinstance(value, bool) != (kind is bool):
    _fail(path, "%s.%s" % (where, key), "is %s, not %s" %
          (_JSON_TYPES.get(type(value), "a " + type(value).__name__),
           _JSON_TYPES[kind]))
  return value


def read_squad_json(input_file):
  """Reads a SQuAD file's "data" list, checking its layout.

  Returns:
    list of articles (dicts with "paragraphs"), every paragraph holding a
    str "context" and a "qas" list whose entries hold str "id" and
    "question"; "answers", where present, is a list of objects with str
    "text" and int "answer_start".

  Raises:
    errors.InputError: missing or unreadable file, not JSON, or a field
      missing or of the wrong type (its place named, e.g.
      data[3].paragraphs[0].qas[2]).
  """
  try:
    with tf.io.gfile.GFile(input_file, "rb") as reader:
      raw = reader.read()
  except (tf.errors.OpError, OSError) as e:
    raise errors.InputError("Cannot read SQuAD file %s: %s" %
                            (input_file, e)) from None
  try:
    document = json.loads(raw.decode("utf-8"))
  except UnicodeDecodeError as e:
    raise errors.InputError("%s is not UTF-8 text: %s" %
                            (input_file, e)) from None
  except json.JSONDecodeError as e:
    raise errors.InputError("%s is not JSON: %s" % (input_file, e)) from None
  data = _field(input_file, "the top level", document, "data", list)
  for a, article in enumerate(data):
    where = "data[%d]" % a
    for p, paragraph in enumerate(_field(input_file, where, article,
                                         "paragraphs", list)):
      where = "data[%d].paragraphs[%d]" % (a, p)
      _field(input_file, where, paragraph, "context", str)
      for q, qa in enumerate(_field(input_file, where, paragraph, "qas",
                                    list)):
        where = "data[%d].paragraphs[%d].qas[%d]" % (a, p, q)
        _field(input_file, where, qa, "id", str)
        _field(input_file, where, qa, "question", str)
        if isinstance(qa, dict) and "answers" in qa:
          for n, answer in enumerate(_field(input_file, where, qa, "answers",
                                            list)):
            answer_where = "%s.answers[%d]" % (where, n)
            _field(input_file, answer_where, answer, "text", str)
            _field(input_file, answer_where, answer, "answer_start", int)
        if isinstance(qa, dict) and "is_impossible" in qa:
          _field(input_file, where, qa, "is_impossible", bool)
  return data


def is_whitespace(c):
  """The original's word separators (U+202F, narrow no-break space, too)."""
  return c in " \t\r\n" or ord(c) == 0x202F


def split_context(paragraph_text):
  """Splits a context into words on whitespace, as the original.

  Returns:
    (doc_tokens, char_to_word_offset): list of str words; for each character
    the index of the word it belongs to (a space: the word before it; -1
    before the first word).
  """
  doc_tokens = []
  char_to_word_offset = []
  prev_is_whitespace = True
  for c in paragraph_text:
    if is_whitespace(c):
      prev_is_whitespace = True
    else:
      if prev_is_whitespace:
        doc_tokens.append(c)
      else:
        doc_tokens[-1] += c
      prev_is_whitespace = False
    char_to_word_offset.append(len(doc_tokens) - 1)
  return doc_tokens, char_to_word_offset


def count_impossible(data):
  """Questions marked is_impossible (SQuAD 2.0's unanswerable ones)."""
  return sum(1 for article in data for paragraph in article["paragraphs"]
             for qa in paragraph["qas"] if qa.get("is_impossible"))


def read_squad_examples(input_file, is_training, version_2_with_negative,
                        data=None):
  """Reads a SQuAD file into SquadExamples, as the original.

  In training, answers whose text cannot be found in the context at their
  offset (odd Unicode, a wrong answer_start) are skipped, as the original
  skips them, and counted.

  Args:
    input_file: str, the SQuAD JSON file.
    is_training: bool; read the answer and locate it in the words.
    version_2_with_negative: bool; honour is_impossible (SQuAD 2.0).
    data: the file's already-read "data" list (read_squad_json), or None.

  Returns:
    (examples, skipped): list of SquadExample in file order; list of the
    skipped questions' ids.

  Raises:
    errors.InputError: the file does not fit the SQuAD layout; in training,
      a question without exactly one answer, or an impossible question
      without --version_2_with_negative.
  """
  if data is None:
    data = read_squad_json(input_file)
  impossible = count_impossible(data)
  if impossible and not version_2_with_negative:
    message = ("%s has %d questions marked is_impossible (SQuAD 2.0) but "
               "--version_2_with_negative is false" % (input_file, impossible))
    if is_training:
      raise errors.InputError(
          message + ": they would be trained as answerable. Pass "
          "--version_2_with_negative=true for SQuAD 2.0 files.")
    logging.warning("%s: the model will never answer 'no answer'. Pass "
                    "--version_2_with_negative=true for SQuAD 2.0 files.",
                    message)
  examples, skipped = [], []
  for article in data:
    for paragraph in article["paragraphs"]:
      doc_tokens, char_to_word_offset = split_context(paragraph["context"])
      for qa in paragraph["qas"]:
        example = SquadExample(qa["id"], qa["question"], doc_tokens)
        if is_training and not _locate_answer(example, qa, paragraph,
                                              char_to_word_offset,
                                              version_2_with_negative,
                                              input_file):
          skipped.append(qa["id"])
          continue
        examples.append(example)
  if skipped:
    logging.warning("%s: skipped %d of %d training questions whose answer "
                    "text is not at its offset in the context (the original "
                    "skips them too), e.g. %s.", input_file, len(skipped),
                    len(skipped) + len(examples), ", ".join(skipped[:5]))
  return examples, skipped


def _locate_answer(example, qa, paragraph, char_to_word_offset,
                   version_2_with_negative, input_file):
  """Sets the example's answer words; False when the text is not there."""
  example.is_impossible = bool(version_2_with_negative and
                               qa.get("is_impossible", False))
  if example.is_impossible:
    example.start_position = example.end_position = -1
    example.orig_answer_text = ""
    return True
  answers = qa.get("answers", [])
  if len(answers) != 1:
    raise errors.InputError(
        "%s: question %s has %d answers; for training, each question "
        "should have exactly 1 answer." % (input_file, qa["id"],
                                           len(answers)))
  text, offset = answers[0]["text"], answers[0]["answer_start"]
  end = offset + len(text) - 1
  if not text or offset < 0 or end >= len(paragraph["context"]):
    logging.warning("Answer %r of question %s lies outside its context.",
                    text, qa["id"])
    return False
  start_position = char_to_word_offset[offset]
  end_position = char_to_word_offset[end]
  actual_text = " ".join(example.doc_tokens[start_position:end_position + 1])
  cleaned_answer_text = " ".join(tokenization.whitespace_tokenize(text))
  if actual_text.find(cleaned_answer_text) == -1:
    logging.warning("Could not find answer: '%s' vs. '%s'", actual_text,
                    cleaned_answer_text)
    return False
  example.orig_answer_text = text
  example.start_position = start_position
  example.end_position = end_position
  return True


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

  Each window holds up to max_tokens_for_doc tokens and starts doc_stride
  after the previous one (less when the rest fits); the last one ends at the
  document's end.

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
        np.minimum(inside - span.start, end - inside) + 0.01 * span.length)
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


def convert_examples_to_features(examples, tokenizer, max_seq_length,
                                 doc_stride, max_query_length, is_training,
                                 output_fn):
  """Turns examples into windowed features, as the original.

  The question is cut to max_query_length WordPieces; the context is cut
  into windows of max_seq_length - len(question) - 3 WordPieces, doc_stride
  apart. In training, a window without the whole answer, and every window
  of an impossible question, points at [CLS] (0, 0).

  Words, questions and answers are tokenized once per distinct text, and
  each paragraph's WordPieces are built once for all its questions: the
  same features as the original, several times faster.

  Args:
    examples: list of SquadExample.
    tokenizer: tokenization.FullTokenizer.
    max_seq_length: int.
    doc_stride: int.
    max_query_length: int.
    is_training: bool.
    output_fn: called with each InputFeatures, in order.

  Returns:
    int, the number of features.
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

  cls_id, sep_id = tokenizer.convert_tokens_to_ids(["[CLS]", "[SEP]"])
  unique_id = FIRST_UNIQUE_ID
  for example_index, example in enumerate(examples):
    query_tokens = pieces[example.question_text][:max_query_length]
    document = documents[id(example.doc_tokens)]
    all_doc_tokens = document.all_doc_tokens
    tok_start_position = tok_end_position = None
    if is_training and example.is_impossible:
      tok_start_position = tok_end_position = -1
    if is_training and not example.is_impossible:
      tok_start_position = document.orig_to_tok_index[example.start_position]
      if example.end_position < len(example.doc_tokens) - 1:
        tok_end_position = document.orig_to_tok_index[
            example.end_position + 1] - 1
      else:
        tok_end_position = len(all_doc_tokens) - 1
      tok_start_position, tok_end_position = improve_answer_span(
          all_doc_tokens, tok_start_position, tok_end_position, tokenizer,
          example.orig_answer_text, pieces[example.orig_answer_text])

    # The -3 accounts for [CLS], [SEP] and [SEP].
    max_tokens_for_doc = max_seq_length - len(query_tokens) - 3
    doc_spans = doc_spans_for(len(all_doc_tokens), max_tokens_for_doc,
                              doc_stride)
    best_span = max_context_spans(doc_spans, len(all_doc_tokens))
    query_ids = tokenizer.convert_tokens_to_ids(query_tokens)
    doc_offset = len(query_tokens) + 2

    for doc_span_index, doc_span in enumerate(doc_spans):
      window = range(doc_span.start, doc_span.start + doc_span.length)
      tokens = (["[CLS]"] + query_tokens + ["[SEP]"] +
                all_doc_tokens[window.start:window.stop] + ["[SEP]"])
      positions = range(doc_offset, doc_offset + doc_span.length)
      token_to_orig_map = dict(zip(
          positions, document.tok_to_orig_index[window.start:window.stop]))
      token_is_max_context = dict(zip(
          positions,
          (best_span[window.start:window.stop] == doc_span_index).tolist()))
      input_ids = ([cls_id] + query_ids + [sep_id] +
                   document.all_doc_ids[window.start:window.stop] +
                   [sep_id])
      segment_ids = [0] * doc_offset + [1] * (doc_span.length + 1)
      padding = max_seq_length - len(input_ids)
      input_mask = [1] * len(input_ids) + [0] * padding
      input_ids += [0] * padding
      segment_ids += [0] * padding

      start_position = end_position = None
      if is_training and not example.is_impossible:
        doc_end = doc_span.start + doc_span.length - 1
        if (tok_start_position >= doc_span.start and
            tok_end_position <= doc_end):
          start_position = tok_start_position - doc_span.start + doc_offset
          end_position = tok_end_position - doc_span.start + doc_offset
        else:
          # The answer is not (wholly) in this window: point at [CLS].
          start_position = end_position = 0
      if is_training and example.is_impossible:
        start_position = end_position = 0

      feature = InputFeatures(
          unique_id=unique_id, example_index=example_index,
          doc_span_index=doc_span_index, tokens=tokens,
          token_to_orig_map=token_to_orig_map,
          token_is_max_context=token_is_max_context, input_ids=input_ids,
          input_mask=input_mask, segment_ids=segment_ids,
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
