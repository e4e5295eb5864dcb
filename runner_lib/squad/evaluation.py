"""Exact match and F1 by the official SQuAD v1.1 and v2.0 scripts, as
tf-models-official ships them, under the official scripts' key names."""

from official.nlp.tools import squad_evaluate_v1_1
from official.nlp.tools import squad_evaluate_v2_0


def is_labelled(data):
  """Whether a SQuAD file can be scored: every question has an "answers"
  list and at least one question has an answer (a test file has none)."""
  qas = [qa for article in data for paragraph in article["paragraphs"]
         for qa in paragraph["qas"]]
  return (bool(qas) and all("answers" in qa for qa in qas) and
          any(qa["answers"] for qa in qas))


def has_unanswerable(data):
  """Whether some question has no answer (SQuAD 2.0's impossible ones)."""
  return any(not qa["answers"] for article in data
             for paragraph in article["paragraphs"] for qa in paragraph["qas"])


def evaluate_v1(data, answers):
  """The official v1.1 evaluation.

  Args:
    data: the SQuAD file's "data" list.
    answers: dict question id -> predicted text.

  Returns:
    dict: exact_match and f1, in percent, over all questions (a question
    without a prediction scores 0).
  """
  scores = squad_evaluate_v1_1.evaluate(data, answers)
  # Model Garden's copy returns fractions; the official script, percent.
  return {"exact_match": 100.0 * scores["exact_match"],
          "f1": 100.0 * scores["final_f1"]}


def evaluate_v2(data, answers, null_odds=None, best_non_null=None):
  """The official v2.0 evaluation, and the best null threshold.

  Args:
    data: the SQuAD file's "data" list.
    answers: dict question id -> predicted text ("" = no answer).
    null_odds: dict question id -> null score minus best non-null score
      (null_odds.json), or None.
    best_non_null: dict question id -> best non-empty text, or None.

  Returns:
    dict with the official keys: exact, f1, total and, where the file has
    such questions, HasAns_* and NoAns_* (the scores of `answers` as
    given); with null_odds and best_non_null also best_exact,
    best_exact_thresh, best_f1, best_f1_thresh: the official threshold
    search over null_odds, run on best_non_null. Predicting with
    --null_score_diff_threshold=best_f1_thresh scores best_f1 (ties in the
    odds aside; where answering nothing is best, the threshold is below
    all odds rather than the official script's 0.0).
  """
  # No na_probs: score the answers as they are. (The official script,
  # given odds, also blanks answers whose odds exceed 1.0.)
  scores = dict(squad_evaluate_v2_0.evaluate(data, answers))
  result = {key: value for key, value in scores.items()
            if key.split("_")[0] in ("exact", "f1", "total", "HasAns",
                                     "NoAns")}
  if null_odds is not None and best_non_null is not None:
    search = squad_evaluate_v2_0.evaluate(data, best_non_null, null_odds)
    # Where answering nothing scores best, the official search reports
    # 0.0 (its start value, made for probabilities), which would answer
    # every question with odds up to 0; a threshold below all odds is the
    # one that answers nothing.
    all_null = 100.0 * scores.get("NoAns_total", 0) / scores["total"]
    for name in ("exact", "f1"):
      result["best_" + name] = search["final_" + name]
      threshold = search["final_%s_thresh" % name]
      if search["final_" + name] == all_null and null_odds:
        threshold = min(null_odds.values()) - 1.0
      result["best_%s_thresh" % name] = threshold
  return result


def evaluate(data, predictions, version_2_with_negative):
  """The official scores of predictions on a SQuAD file, as run_squad.py
  reports them in eval_results.txt.

  Args:
    data: the SQuAD file's "data" list.
    predictions: predictions.Predictions.
    version_2_with_negative: bool; with it, also the best threshold.

  Returns:
    dict of scores (evaluate_v1's, or evaluate_v2's for SQuAD 2.0 and for
    files with unanswerable questions), or None when the file has no
    answers to score against (a test set).
  """
  if not is_labelled(data):
    return None
  if version_2_with_negative:
    return evaluate_v2(data, predictions.answers, predictions.null_odds,
                       predictions.best_non_null)
  if has_unanswerable(data):
    return evaluate_v2(data, predictions.answers)
  return evaluate_v1(data, predictions.answers)
