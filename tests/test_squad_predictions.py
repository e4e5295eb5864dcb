"""n-best post-processing and get_final_text on hand-built logits, checked
against hand-worked answers; byte-identical output to tf-models-official's
port of the original on a real dev file with random logits."""

import json
import math
import os

import numpy as np
import pytest

from runner_lib.squad import data as squad_data
from runner_lib.squad import features as squad_features
from runner_lib.squad import predictions as squad_predictions

NEG = -10.0


@pytest.mark.parametrize("pred,orig,lower,expected", [
    ("steve smith", "Steve Smith's", True, "Steve Smith"),
    ("denver broncos", "Denver Broncos.", True, "Denver Broncos"),
    ("cafe", "Caf\u00e9", True, "Caf\u00e9"),
    ("Caf\u00e9", "Caf\u00e9.", False, "Caf\u00e9"),
    ("Smith", "Smith's", False, "Smith"),
    # Cased: "smith" is not in "Smith ' s": the whole span.
    ("smith", "Smith's", False, "Smith's"),
    # Not found at all: the whole span.
    ("xyz", "Denver", True, "Denver"),
    # The tokenizer drops U+200B (a format character): 7 characters
    # without spaces against 6, the alignment fails: the whole span.
    ("foobar", "Foo\u200bbar", True, "Foo\u200bbar"),
])
def test_get_final_text(pred, orig, lower, expected):
  assert squad_predictions.get_final_text(pred, orig, lower) == expected


def test_best_indexes_and_softmax():
  # Ties keep the lower index first (the original's stable sort).
  assert squad_predictions.get_best_indexes([1.0, 3.0, 3.0, 2.0], 3) == [
      1, 2, 3]
  probs = squad_predictions.compute_softmax([10.0, 9.0, 7.0])
  total = 1 + math.exp(-1) + math.exp(-3)
  assert probs == pytest.approx([1 / total, math.exp(-1) / total,
                                 math.exp(-3) / total], rel=1e-15)


def broncos_example():
  """One example in two windows, with logits chosen to exercise each rule.

  Window 1: [CLS] who won ? [SEP] the denver broncos won . [SEP] (+1 pad)
  Window 2: [CLS] who won ? [SEP] denver broncos won . [SEP] (+2 pad)
  """
  example = squad_data.SquadExample("q1", "who won?",
                                    ["The", "Denver", "Broncos", "won."])
  query = ["[CLS]", "who", "won", "?", "[SEP]"]
  first = squad_features.InputFeatures(
      1000000000, 0, 0, query + ["the", "denver", "broncos", "won", ".",
                                 "[SEP]"],
      {5: 0, 6: 1, 7: 2, 8: 3, 9: 3}, {k: True for k in range(5, 10)},
      None, None, None)
  second = squad_features.InputFeatures(
      1000000001, 0, 1, query + ["denver", "broncos", "won", ".", "[SEP]"],
      {5: 1, 6: 2, 7: 3, 8: 3}, {k: True for k in range(5, 9)},
      None, None, None)
  start1, end1 = np.full(12, NEG), np.full(12, NEG)
  start1[[1, 6, 7, 9]] = [6.0, 5.0, 4.0, 1.0]  # 1: in the question
  end1[[11, 7, 6, 9]] = [7.0, 5.0, 2.0, 1.0]   # 11: past the tokens
  start2, end2 = np.full(12, NEG), np.full(12, NEG)
  start2[5], end2[5] = 3.0, 3.0                # "Denver" again, lower
  return example, [first, second], [start1, end1, start2, end2]


def results(features, logits):
  return [squad_predictions.RawResult(f.unique_id, logits[2 * i].tolist(),
                                      logits[2 * i + 1].tolist())
          for i, f in enumerate(features)]


def nbest_summary(predictions):
  return [(e["text"], e["start_logit"] + e["end_logit"])
          for e in predictions.nbest["q1"]]


def test_nbest_by_hand():
  example, features, logits = broncos_example()
  # Window 1, top-5 starts 1, 6, 7, 9, 0 and ends 11, 7, 6, 9, 0. Valid:
  # (6,7)=10 (7,7)=9 (6,6)=7 (6,9)=6 (7,9)=5 (9,9)=2; start 1 is in the
  # question, end 11 past the tokens, (7,6) ends before it starts, index 0
  # is not context. Window 2 adds (5,5)=6 "Denver", a duplicate of (6,6):
  # dropped. Five entries fill the n-best before (9,9).
  predictions = squad_predictions.compute_predictions(
      [example], features, results(features, logits), n_best_size=5,
      max_answer_length=30, do_lower_case=True)
  assert nbest_summary(predictions) == [
      ("Denver Broncos", 10.0), ("Broncos", 9.0), ("Denver", 7.0),
      ("Denver Broncos won.", 6.0), ("Broncos won.", 5.0)]
  assert predictions.answers == {"q1": "Denver Broncos"}
  total = sum(math.exp(s - 10.0) for s in (10.0, 9.0, 7.0, 6.0, 5.0))
  assert [e["probability"] for e in predictions.nbest["q1"]] == pytest.approx(
      [math.exp(s - 10.0) / total for s in (10.0, 9.0, 7.0, 6.0, 5.0)],
      rel=1e-12)
  assert predictions.null_odds == {}

  # At most 2 WordPieces: (6,9) and (7,9) go; "." (9,9) comes in.
  predictions = squad_predictions.compute_predictions(
      [example], features, results(features, logits), 5, 2, True)
  assert nbest_summary(predictions) == [
      ("Denver Broncos", 10.0), ("Broncos", 9.0), ("Denver", 7.0),
      (".", 2.0)]

  # A start outside its max-context window is not a candidate.
  features[0].token_is_max_context[7] = False
  predictions = squad_predictions.compute_predictions(
      [example], features, results(features, logits), 5, 30, True)
  assert [t for t, _ in nbest_summary(predictions)] == [
      "Denver Broncos", "Denver", "Denver Broncos won.", "."]


def test_null_answer_squad2_by_hand():
  example, features, logits = broncos_example()
  logits[2][0] = -12.0  # window 2's null score -22 < window 1's -20
  predictions = squad_predictions.compute_predictions(
      [example], features, results(features, logits), 5, 30, True,
      version_2_with_negative=True)
  # The null entry ranks last and is appended after the five.
  summary = nbest_summary(predictions)
  assert summary[-1] == ("", -22.0) and len(summary) == 6
  assert predictions.nbest["q1"][-1]["start_logit"] == -12.0
  assert predictions.null_odds == {"q1": -22.0 - 10.0}
  assert predictions.answers == {"q1": "Denver Broncos"}
  predictions = squad_predictions.compute_predictions(
      [example], features, results(features, logits), 5, 30, True, True,
      null_score_diff_threshold=-40.0)
  assert predictions.answers == {"q1": ""}
  assert predictions.best_non_null == {"q1": "Denver Broncos"}

  # One window whose null score 16 beats every span: "" heads the n-best;
  # the difference 16 - 10 = 6 is above 0 but not above 7.
  logits[0][0] = logits[1][0] = 8.0
  for threshold, answer in ((0.0, ""), (7.0, "Denver Broncos")):
    predictions = squad_predictions.compute_predictions(
        [example], features[:1], results(features[:1], logits), 5, 30,
        True, True, threshold)
    assert nbest_summary(predictions)[0] == ("", 16.0)
    assert predictions.null_odds == {"q1": 6.0}
    assert predictions.answers == {"q1": answer}


def test_no_valid_span():
  example, features, logits = broncos_example()
  for feature in features:
    feature.token_to_orig_map = {}
  predictions = squad_predictions.compute_predictions(
      [example], features, results(features, logits), 5, 30, True)
  # The original's nonce prediction.
  assert predictions.answers == {"q1": "empty"}
  predictions = squad_predictions.compute_predictions(
      [example], features, results(features, logits), 5, 30, True, True)
  # Only "" is possible (the original fails here): predict it.
  assert predictions.answers == {"q1": ""}
  assert predictions.null_odds == {"q1": -20.0}


@pytest.mark.slow
@pytest.mark.parametrize("name,v2", [
    ("dev-v1.1.subset-Super_Bowl_50.json", False),
    ("dev-v2.0.subset-first5articles.json", True),
])
def test_identical_to_model_garden_on_a_real_file(shared_data, name, v2):
  """tf-models-official's postprocess_output (a port of the original's
  write_predictions) on the same features and random logits: the three
  JSON files byte for byte."""
  from official.nlp.data import squad_lib  # pylint: disable=g-import-not-at-top
  import tokenization  # pylint: disable=g-import-not-at-top
  tokenizer = tokenization.FullTokenizer(
      os.path.join(shared_data, "vocab", "uncased_vocab.txt"), True)
  examples, _ = squad_data.read_squad_examples(
      os.path.join(shared_data, "squad", name), False, v2)
  examples = examples[:300]
  features = []
  squad_features.convert_examples_to_features(examples, tokenizer, 96, 24,
                                              32, False, features.append)
  rng = np.random.RandomState(0)
  raw = [squad_predictions.RawResult(
      f.unique_id, (3 * rng.randn(96)).astype(np.float32).tolist(),
      (3 * rng.randn(96)).astype(np.float32).tolist()) for f in features]
  # A threshold at the median odds, so that half the answers are null.
  threshold = float(np.median(list(squad_predictions.compute_predictions(
      examples, features, raw, 20, 30, True, True).null_odds.values())))
  theirs = squad_lib.postprocess_output(examples, features, raw, 20, 30,
                                        True, v2, threshold)
  ours = squad_predictions.compute_predictions(examples, features, raw, 20,
                                               30, True, v2, threshold)
  for a, b in zip(ours[:3], theirs):
    assert json.dumps(a, indent=4) == json.dumps(b, indent=4)
  nulls = sum(1 for text in ours.answers.values() if not text)
  assert nulls == (150 if v2 else 0)
