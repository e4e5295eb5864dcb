"""SQuAD reading and feature conversion: hand-worked windows, max-context
flags and answer positions; the same features as tf-models-official's port
of the original on the real files; clear errors for malformed files."""

import json
import logging
import os

import pytest
import tensorflow as tf

from runner_lib.core import errors
from runner_lib.squad import data as squad_data
from runner_lib.squad import features as squad_features
import tokenization

VOCAB = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "the", "man", "went",
         "to", "store", "and", "bought", "a", "gallon", "of", "milk", "what",
         "year", "was", "john", "smith", "born", "?", ".", "(", ")", "-",
         "1895", "1943", "leader", "japanese", "japan", "electronics",
         "industry", "it", "'", "s", "car", "cafe", "who", "is"]

MILK = "the man went to the store and bought a gallon of milk"


@pytest.fixture
def tokenizer(tmp_path):
  path = tmp_path / "vocab.txt"
  path.write_text("\n".join(VOCAB) + "\n")
  return tokenization.FullTokenizer(str(path), do_lower_case=True)


def squad_file(tmp_path, paragraphs, name="squad.json"):
  """Writes a one-article SQuAD file; paragraphs: [(context, [qa, ...])]."""
  data = {"version": "test", "data": [{"title": "t", "paragraphs": [
      {"context": context, "qas": qas} for context, qas in paragraphs]}]}
  path = tmp_path / name
  path.write_text(json.dumps(data))
  return str(path)


def qa(qid, question, answer=None, context=None, impossible=None):
  """A question; the answer's offset is its first occurrence in context."""
  entry = {"id": qid, "question": question, "answers": []}
  if answer is not None:
    entry["answers"] = [{"text": answer,
                         "answer_start": context.index(answer)}]
  if impossible is not None:
    entry["is_impossible"] = impossible
  return entry


def convert(examples, tokenizer, max_seq_length, doc_stride,
            max_query_length=64, is_training=False):
  features = []
  count = squad_features.convert_examples_to_features(
      examples, tokenizer, max_seq_length, doc_stride, max_query_length,
      is_training, features.append)
  assert count == len(features)
  return features


def test_split_context_on_the_original_whitespace():
  # U+202F separates words; U+00A0 does not (the original's rule).
  tokens, offsets = squad_data.split_context("  a b\u202fcd e\u00a0f ")
  assert tokens == ["a", "b", "cd", "e\u00a0f"]
  assert offsets == [-1, -1, 0, 0, 1, 1, 2, 2, 2, 3, 3, 3, 3]


def test_windows_and_max_context_worked_by_hand(tokenizer, tmp_path):
  # 12 one-piece words, question "what": doc_offset 3. max_seq_length 9
  # leaves 5 context tokens per window; stride 3 gives windows over words
  # 0-4, 3-7, 6-10, 9-11. Scores min(left, right) + 0.01 * length pick, per
  # word: 0-3 -> A, 4-6 -> B, 7-9 -> C, 10-11 -> D (worked out by hand;
  # e.g. word 3: A min(3,1)=1.05 beats B min(0,4)=0.05; word 9: C 1.05
  # beats D 0.03; word 10: D min(1,1)+0.03=1.03 beats C 0.05).
  path = squad_file(tmp_path, [(MILK, [qa("q1", "what")])])
  examples, skipped = squad_data.read_squad_examples(path, False, False)
  assert skipped == []
  features = convert(examples, tokenizer, max_seq_length=9, doc_stride=3)
  assert [f.doc_span_index for f in features] == [0, 1, 2, 3]
  assert [f.unique_id for f in features] == [1000000000 + i
                                             for i in range(4)]
  words = MILK.split()
  for feature, (start, length) in zip(features,
                                      [(0, 5), (3, 5), (6, 5), (9, 3)]):
    assert feature.tokens == (["[CLS]", "what", "[SEP]"] +
                              words[start:start + length] + ["[SEP]"])
    assert feature.token_to_orig_map == {3 + k: start + k
                                         for k in range(length)}
  assert [list(f.token_is_max_context.values()) for f in features] == [
      [True, True, True, True, False],
      [False, True, True, True, False],
      [False, True, True, True, False],
      [False, True, True]]
  last = features[3]
  ids = {t: i for i, t in enumerate(VOCAB)}
  assert last.input_ids == [2, ids["what"], 3, ids["gallon"], ids["of"],
                            ids["milk"], 3, 0, 0]
  assert last.input_mask == [1, 1, 1, 1, 1, 1, 1, 0, 0]
  assert last.segment_ids == [0, 0, 0, 1, 1, 1, 1, 0, 0]


@pytest.mark.parametrize("answer,expected", [
    # "bought" is word 7: in window B (3-7) at 7 - 3 + 3 and C (6-10) at
    # 7 - 6 + 3; windows A and D lack it and point at [CLS].
    ("bought", [(0, 0), (7, 7), (4, 4), (0, 0)]),
    # Words 5-8 are in no single window: every window points at [CLS].
    ("store and bought a", [(0, 0)] * 4),
    # The last word (the end-of-document branch): only in D, at 11 - 9 + 3.
    ("milk", [(0, 0), (0, 0), (0, 0), (5, 5)]),
])
def test_training_positions_across_windows(tokenizer, tmp_path, answer,
                                           expected):
  path = squad_file(tmp_path, [(MILK, [qa("q1", "what", answer, MILK)])])
  examples, _ = squad_data.read_squad_examples(path, True, False)
  features = convert(examples, tokenizer, 9, 3, is_training=True)
  assert [(f.start_position, f.end_position) for f in features] == expected
  for feature, (start, end) in zip(features, expected):
    if start:
      assert " ".join(feature.tokens[start:end + 1]) == answer


@pytest.mark.parametrize("context,answer,question,span", [
    # "(1895-1943)." is one word; its WordPieces ( 1895 - 1943 ) . hold the
    # answer exactly: the span is tightened to "1895". The question has 7
    # pieces, so the context starts at 9; "1895" is its piece 6.
    ("The leader was John Smith (1895-1943).", "1895",
     "What year was John Smith born?", (15, 15)),
    # "Japan" inside "Japanese" (one WordPiece): no tighter match, the
    # whole word stays the answer (piece 1, at 3 + 1).
    ("The Japanese electronics industry", "Japan", "what", (4, 4)),
    # Glued punctuation: "Smith's" -> smith ' s; the answer is "smith"
    # (piece 2 of it was smith ' s car .).
    ("It was Smith's car.", "Smith", "who", (5, 5)),
    # Accents stripped for an uncased vocab: "Café." -> cafe . ; the
    # answer "Café" is the piece "cafe" (piece 1).
    ("the Caf\u00e9.", "Caf\u00e9", "what", (4, 4)),
])
def test_answer_span_tightened_to_wordpieces(tokenizer, tmp_path, context,
                                            answer, question, span):
  path = squad_file(tmp_path, [(context, [qa("q1", question, answer,
                                              context)])])
  examples, _ = squad_data.read_squad_examples(path, True, False)
  (feature,) = convert(examples, tokenizer, 64, 32, is_training=True)
  assert (feature.start_position, feature.end_position) == span


def test_long_question_truncated(tokenizer, tmp_path):
  question = "what year was john smith born the man went to"
  path = squad_file(tmp_path, [(MILK, [qa("q1", question)])])
  examples, _ = squad_data.read_squad_examples(path, False, False)
  (feature,) = convert(examples, tokenizer, 32, 8, max_query_length=4)
  assert feature.tokens[:6] == ["[CLS]", "what", "year", "was", "john",
                                "[SEP]"]
  assert min(feature.token_to_orig_map) == 6


def test_impossible_questions_point_at_cls(tokenizer, tmp_path):
  path = squad_file(tmp_path, [(MILK, [qa("q1", "what", impossible=True),
                                       qa("q2", "what", "milk", MILK,
                                          impossible=False)])])
  examples, _ = squad_data.read_squad_examples(path, True, True)
  assert [(e.is_impossible, e.start_position, e.orig_answer_text)
          for e in examples] == [(True, -1, ""), (False, 11, "milk")]
  features = convert(examples, tokenizer, 9, 3, is_training=True)
  impossible = [f for f in features if f.example_index == 0]
  assert len(impossible) == 4
  assert all((f.start_position, f.end_position, f.is_impossible) ==
             (0, 0, True) for f in impossible)
  record = squad_features.serialize(impossible[0], True)
  parsed = tf.io.parse_single_example(record, dict(
      squad_features.name_to_features(9, True),
      is_impossible=tf.io.FixedLenFeature([], tf.int64)))
  assert int(parsed["is_impossible"]) == 1
  assert parsed["input_ids"].numpy().tolist() == impossible[0].input_ids
  assert int(parsed["unique_ids"]) == impossible[0].unique_id


def test_records_have_the_original_schema(tokenizer, tmp_path):
  path = squad_file(tmp_path, [(MILK, [qa("q1", "what", "milk", MILK)])])
  examples, _ = squad_data.read_squad_examples(path, True, False)
  feature = convert(examples, tokenizer, 9, 3, is_training=True)[-1]
  example = tf.train.Example.FromString(squad_features.serialize(feature, True))
  values = {k: list(v.int64_list.value)
            for k, v in example.features.feature.items()}
  assert values == {"unique_ids": [1000000003],
                    "input_ids": feature.input_ids,
                    "input_mask": feature.input_mask,
                    "segment_ids": feature.segment_ids,
                    "start_positions": [5], "end_positions": [5],
                    "is_impossible": [0]}
  example = tf.train.Example.FromString(
      squad_features.serialize(feature, False))
  assert sorted(example.features.feature) == ["input_ids", "input_mask",
                                              "segment_ids", "unique_ids"]


def test_answers_not_in_context_are_skipped_and_counted(tokenizer, tmp_path,
                                                        caplog):
  good = qa("good", "what", "milk", MILK)
  moved = qa("moved", "what", "milk", MILK)
  moved["answers"][0]["answer_start"] = 0  # "the m" != "milk"
  outside = qa("outside", "what", "milk", MILK)
  outside["answers"][0]["answer_start"] = len(MILK) - 2
  path = squad_file(tmp_path, [(MILK, [good, moved, outside])])
  with caplog.at_level(logging.WARNING):
    examples, skipped = squad_data.read_squad_examples(path, True, False)
  assert [e.qas_id for e in examples] == ["good"]
  assert skipped == ["moved", "outside"]
  assert "skipped 2 of 3 training questions" in caplog.text
  # Prediction reads every question.
  examples, skipped = squad_data.read_squad_examples(path, False, False)
  assert len(examples) == 3 and skipped == []


def test_training_needs_exactly_one_answer(tmp_path):
  question = qa("two", "what", "milk", MILK)
  question["answers"] *= 2
  path = squad_file(tmp_path, [(MILK, [question])])
  with pytest.raises(errors.InputError, match="question two has 2 answers"):
    squad_data.read_squad_examples(path, True, False)


def test_squad2_file_without_version_2_flag(tmp_path, caplog):
  path = squad_file(tmp_path, [(MILK, [qa("q1", "what", impossible=True)])])
  with pytest.raises(errors.InputError,
                     match="1 questions marked is_impossible.*"
                     "--version_2_with_negative=true"):
    squad_data.read_squad_examples(path, True, False)
  with caplog.at_level(logging.WARNING):
    examples, _ = squad_data.read_squad_examples(path, False, False)
  assert len(examples) == 1
  assert "never answer 'no answer'" in caplog.text


@pytest.mark.parametrize("content,message", [
    ("{\"data\": [", "is not JSON"),
    ("[1, 2]", "the top level is a list, not an object"),
    ("{\"version\": \"1.1\"}", "the top level has no 'data'"),
    ("{\"data\": [{\"paragraphs\": [{\"qas\": []}]}]}",
     r"data\[0\].paragraphs\[0\] has no 'context'"),
    ("{\"data\": [{\"paragraphs\": [{\"context\": \"a\", \"qas\": "
     "[{\"id\": \"x\", \"question\": \"q\", \"answers\": [{\"text\": \"a\", "
     "\"answer_start\": \"0\"}]}]}]}]}",
     r"data\[0\].paragraphs\[0\].qas\[0\].answers\[0\].answer_start is a "
     "string, not an integer"),
    ("{\"data\": [{\"paragraphs\": [{\"context\": \"a\", \"qas\": "
     "[{\"question\": \"q\"}]}]}]}",
     r"data\[0\].paragraphs\[0\].qas\[0\] has no 'id'"),
])
def test_malformed_files_name_the_place(tmp_path, content, message):
  path = tmp_path / "bad.json"
  path.write_text(content)
  with pytest.raises(errors.InputError, match=message) as info:
    squad_data.read_squad_json(str(path))
  assert str(path) in str(info.value)


def test_missing_file(tmp_path):
  with pytest.raises(errors.InputError, match="Cannot read SQuAD file"):
    squad_data.read_squad_json(str(tmp_path / "absent.json"))


def first_answer_only(path, tmp_path):
  """A dev file made trainable: each question keeps its first answer."""
  with open(path) as f:
    data = json.load(f)
  for article in data["data"]:
    for paragraph in article["paragraphs"]:
      for question in paragraph["qas"]:
        question["answers"] = question["answers"][:1]
  out = tmp_path / os.path.basename(path)
  out.write_text(json.dumps(data))
  return str(out)


@pytest.mark.slow
@pytest.mark.parametrize("name,is_training,v2", [
    ("dev-v1.1.subset-Super_Bowl_50.json", False, False),
    ("train-v1.1.subset-University_of_Notre_Dame.json", True, False),
    ("dev-v2.0.subset-first5articles.json", True, True),
])
def test_same_features_as_model_garden_on_real_files(shared_data, tmp_path,
                                                     name, is_training, v2):
  """tf-models-official's squad_lib (a port of the original) as the oracle,
  fed the same tokenizer: every field of every feature equal."""
  from official.nlp.data import squad_lib  # pylint: disable=g-import-not-at-top
  path = os.path.join(shared_data, "squad", name)
  if is_training and "dev" in name:
    path = first_answer_only(path, tmp_path)
  tokenizer = tokenization.FullTokenizer(
      os.path.join(shared_data, "vocab", "uncased_vocab.txt"), True)
  for max_seq_length, doc_stride, max_query_length in ((384, 128, 64),
                                                       (64, 16, 20)):
    theirs = []
    squad_lib.convert_examples_to_features(
        squad_lib.read_squad_examples(path, is_training, v2), tokenizer,
        max_seq_length, doc_stride, max_query_length, is_training,
        lambda feature, **_: theirs.append(feature), batch_size=1)
    examples, skipped = squad_data.read_squad_examples(path, is_training, v2)
    assert skipped == []
    ours = convert(examples, tokenizer, max_seq_length, doc_stride,
                   max_query_length, is_training)
    assert len(ours) == len(theirs) > len(examples)
    for a, b in zip(ours, theirs):
      for field in ("unique_id", "example_index", "doc_span_index", "tokens",
                    "token_to_orig_map", "token_is_max_context", "input_ids",
                    "input_mask", "segment_ids"):
        assert getattr(a, field) == getattr(b, field), (a.unique_id, field)
      if is_training:
        assert (a.start_position, a.end_position) == (b.start_position,
                                                      b.end_position)
