"""SQuAD JSON to examples: the original's whitespace words, answers located
in them, and checks that name the place of a malformed entry."""

import dataclasses
import json

from absl import logging
import tensorflow as tf

from runner_lib.core import errors
from runner_lib.core.inputs import text_input
import tokenization


@dataclasses.dataclass(eq=False)
class SquadExample:
  """One question on one paragraph.

  doc_tokens are the paragraph's whitespace-separated words (shared by all
  questions on the paragraph). start_position / end_position index the words
  holding the answer (training only; -1 for an impossible question).
  """

  qas_id: str
  question_text: str
  doc_tokens: list
  orig_answer_text: object = None
  start_position: object = None
  end_position: object = None
  is_impossible: bool = False

  def __repr__(self):
    return "qas_id: %s, question_text: %s, doc_tokens: [%s]" % (
        tokenization.printable_text(self.qas_id),
        tokenization.printable_text(self.question_text),
        " ".join(self.doc_tokens))

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
    errors.InputError: missing or unreadable file, not UTF-8 (its line
      named), not JSON, or a field missing or of the wrong type (its place
      named, e.g. data[3].paragraphs[0].qas[2]).
  """
  try:
    with tf.io.gfile.GFile(input_file, "rb") as reader:
      raw = reader.read()
  except (tf.errors.OpError, OSError) as e:
    raise errors.InputError("Cannot read SQuAD file %s: %s" %
                            (input_file, e)) from None
  text = text_input.decode_utf8(raw, input_file)
  try:
    document = json.loads(text)
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


# The original's word separators (U+202F, narrow no-break space, too).
WHITESPACE = " \t\r\n\u202f"


def is_whitespace(c):
  """Whether c is one of WHITESPACE."""
  return c in WHITESPACE


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
