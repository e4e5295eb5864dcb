"""Official SQuAD v1.1 / v2.0 scores on hand-made predictions, against
hand-computed values, including the v2.0 threshold search."""

import pytest

from runner_lib.squad import evaluation as squad_evaluation


def dataset(questions):
  """[(id, [answer texts])] as a one-paragraph SQuAD "data" list."""
  return [{"paragraphs": [{"context": "unused", "qas": [
      {"id": qid, "question": "?",
       "answers": [{"text": t, "answer_start": 0} for t in answers]}
      for qid, answers in questions]}]}]


def test_v1_by_hand():
  data = dataset([("q1", ["Denver Broncos", "the Denver Broncos"]),
                  ("q2", ["Broncos"]),
                  ("q3", ["Santa Clara, California"])])
  # q1 exact; q2 "denver broncos" vs "broncos" (articles dropped): P 1/2,
  # R 1, F1 2/3; q3 nothing in common.
  scores = squad_evaluation.evaluate_v1(
      data, {"q1": "Denver Broncos", "q2": "the Denver Broncos",
             "q3": "Levi's Stadium"})
  assert scores == pytest.approx({"exact_match": 100 / 3,
                                  "f1": 100 * (1 + 2 / 3) / 3})
  # A question without a prediction scores 0 and still counts.
  scores = squad_evaluation.evaluate_v1(data, {"q1": "denver broncos."})
  assert scores == pytest.approx({"exact_match": 100 / 3, "f1": 100 / 3})


V2 = dataset([("h1", ["Denver Broncos"]), ("h2", ["Broncos"]),
              ("n1", []), ("n2", [])])


def test_v2_by_hand():
  answers = {"h1": "Denver Broncos", "h2": "the Denver Broncos", "n1": "",
             "n2": "Panthers"}
  # h1 1/1, h2 0/(2/3), n1 1/1 (no answer, none given), n2 0/0.
  scores = squad_evaluation.evaluate_v2(V2, answers)
  assert scores == pytest.approx({
      "exact": 50.0, "f1": 100 * (2 + 2 / 3) / 4, "total": 4,
      "HasAns_exact": 50.0, "HasAns_f1": 100 * (1 + 2 / 3) / 2,
      "HasAns_total": 2, "NoAns_exact": 50.0, "NoAns_f1": 50.0,
      "NoAns_total": 2})


def test_v2_threshold_search_by_hand():
  best_non_null = {"h1": "Denver Broncos", "h2": "the Denver Broncos",
                   "n1": "Carolina", "n2": "Panthers"}
  null_odds = {"h1": -5.0, "h2": -2.0, "n2": -1.0, "n1": 2.0}
  # Answering in order of odds from "all null" (2 of 4 right): +1 (h1, at
  # -5), +0 / +2/3 (h2, at -2), -1 (n2), -1 (n1). Best exact: 3 of 4 at
  # -5; best F1: 3 2/3 of 4 at -2.
  scores = squad_evaluation.evaluate_v2(V2, {k: "" for k in best_non_null},
                                        null_odds, best_non_null)
  assert scores["exact"] == 50.0
  assert scores["best_exact"] == pytest.approx(75.0)
  assert scores["best_exact_thresh"] == -5.0
  assert scores["best_f1"] == pytest.approx(100 * (3 + 2 / 3) / 4)
  assert scores["best_f1_thresh"] == -2.0
  # Predicting with that threshold ("" where odds > -2) scores best_f1.
  answers = {k: "" if null_odds[k] > -2.0 else best_non_null[k]
             for k in best_non_null}
  assert squad_evaluation.evaluate_v2(V2, answers)["f1"] == pytest.approx(
      scores["best_f1"])


def test_v2_threshold_when_answering_nothing_is_best():
  # Every answer is wrong: "all null" (2 of 4) stays best. The official
  # search then reports 0.0, which would answer h1 and n2 (odds <= 0);
  # the threshold reported is below every odds value instead.
  best_non_null = {"h1": "Panthers", "h2": "Carolina", "n1": "Carolina",
                   "n2": "Panthers"}
  null_odds = {"h1": -5.0, "h2": 1.0, "n2": -1.0, "n1": 2.0}
  scores = squad_evaluation.evaluate_v2(V2, {k: "" for k in best_non_null},
                                        null_odds, best_non_null)
  assert scores["best_f1"] == scores["best_exact"] == 50.0
  assert scores["best_f1_thresh"] == scores["best_exact_thresh"] == -6.0


def test_which_files_can_be_scored():
  assert squad_evaluation.is_labelled(V2)
  assert squad_evaluation.has_unanswerable(V2)
  assert not squad_evaluation.has_unanswerable(dataset([("q", ["a"])]))
  assert not squad_evaluation.is_labelled(dataset([("q", [])]))
  unlabelled = dataset([("q", ["a"])])
  del unlabelled[0]["paragraphs"][0]["qas"][0]["answers"]
  assert not squad_evaluation.is_labelled(unlabelled)
