"""From start/end logits to answer texts: the original's n-best search,
get_final_text alignment and its three JSON files."""

import collections
import json
import math
import os

from absl import logging
import numpy as np

from runner_lib.core.files import fileio
import tokenization

RawResult = collections.namedtuple("RawResult",
                                   ["unique_id", "start_logits", "end_logits"])

_PrelimPrediction = collections.namedtuple(
    "PrelimPrediction",
    ["feature_index", "start_index", "end_index", "start_logit", "end_logit"])
_NbestPrediction = collections.namedtuple(
    "NbestPrediction", ["text", "start_logit", "end_logit"])

# SQuAD 2.0 predictions, kept apart so the threshold can be tuned later.
Predictions = collections.namedtuple(
    "Predictions", ["answers", "nbest", "null_odds", "best_non_null"])


def get_best_indexes(logits, n_best_size):
  """Indexes of the n_best_size largest logits, largest first (ties: the
  lower index first, as the original's stable sort)."""
  order = np.argsort(-np.asarray(logits), kind="stable")
  return [int(i) for i in order[:n_best_size]]


def compute_softmax(scores):
  """Softmax of a list of floats, in the original's order of operations
  (so probabilities match it to the last digit)."""
  if not scores:
    return []
  max_score = max(scores)
  exp_scores = [math.exp(score - max_score) for score in scores]
  total_sum = 0.0
  for x in exp_scores:
    total_sum += x
  return [x / total_sum for x in exp_scores]


def _strip_spaces(text):
  """(text without spaces, map from its positions to text's)."""
  ns_chars = []
  ns_to_s_map = {}
  for i, c in enumerate(text):
    if c == " ":
      continue
    ns_to_s_map[len(ns_chars)] = i
    ns_chars.append(c)
  return "".join(ns_chars), ns_to_s_map


def get_final_text(pred_text, orig_text, do_lower_case,
                   verbose_logging=False):
  """Projects a normalized predicted span back onto the original text.

  orig_text is the span of whitespace words holding the prediction, e.g.
  "Steve Smith's" for the WordPieces "steve smith". The words are run
  through BasicTokenizer; if the result, without spaces, has as many
  characters as orig_text without spaces, characters are taken as aligned
  one to one and the prediction is cut out of orig_text ("Steve Smith").
  Otherwise (the tokenizer dropped or changed characters) orig_text is
  returned whole.

  Args:
    pred_text: str, the detokenized WordPieces.
    orig_text: str, the words they came from, joined by spaces.
    do_lower_case: bool.
    verbose_logging: bool, log why an alignment failed.

  Returns:
    str.
  """
  tokenizer = tokenization.BasicTokenizer(do_lower_case=do_lower_case)
  tok_text = " ".join(tokenizer.tokenize(orig_text))

  def fail(message, *args):
    if verbose_logging:
      logging.info(message, *args)
    return orig_text

  start_position = tok_text.find(pred_text)
  if start_position == -1:
    return fail("Unable to find text: '%s' in '%s'", pred_text, orig_text)
  end_position = start_position + len(pred_text) - 1

  orig_ns_text, orig_ns_to_s_map = _strip_spaces(orig_text)
  tok_ns_text, tok_ns_to_s_map = _strip_spaces(tok_text)
  if len(orig_ns_text) != len(tok_ns_text):
    return fail("Length not equal after stripping spaces: '%s' vs '%s'",
                orig_ns_text, tok_ns_text)
  tok_s_to_ns_map = {s: ns for ns, s in tok_ns_to_s_map.items()}

  def project(position):
    ns_position = tok_s_to_ns_map.get(position)
    return None if ns_position is None else orig_ns_to_s_map.get(ns_position)

  orig_start_position = project(start_position)
  if orig_start_position is None:
    return fail("Couldn't map start position")
  orig_end_position = project(end_position)
  if orig_end_position is None:
    return fail("Couldn't map end position")
  return orig_text[orig_start_position:orig_end_position + 1]


def _detokenize(tok_tokens):
  """Joins WordPieces, gluing "##" continuations, normalizing spaces."""
  tok_text = " ".join(tok_tokens)
  tok_text = tok_text.replace(" ##", "").replace("##", "")
  return " ".join(tok_text.strip().split())


# The null score is the minimum over an example's windows, started here as
# the original starts it (kept as it is, an int, for identical JSON; also
# graph.null_score's).
NULL_SCORE_START = 1000000

# The best [CLS] (null answer) score over an example's windows.
_NullScore = collections.namedtuple(
    "NullScore", ["score", "feature_index", "start_logit", "end_logit"])


def _valid_spans(feature, feature_index, start_logits, end_logits,
                 n_best_size, max_answer_length):
  """Candidate spans of one window among its n_best_size best starts and
  ends: inside the window's context, from the window giving the start token
  the most context, ending after they start, at most max_answer_length.

  Returns:
    list of _PrelimPrediction.
  """
  spans = []
  for start_index in get_best_indexes(start_logits, n_best_size):
    for end_index in get_best_indexes(end_logits, n_best_size):
      # Spans in the question or padding, spans ending before they
      # start, too long, or not from the token's max-context window.
      if (start_index >= len(feature.tokens) or
          end_index >= len(feature.tokens) or
          start_index not in feature.token_to_orig_map or
          end_index not in feature.token_to_orig_map or
          not feature.token_is_max_context.get(start_index, False) or
          end_index < start_index or
          end_index - start_index + 1 > max_answer_length):
        continue
      spans.append(_PrelimPrediction(
          feature_index, start_index, end_index, start_logits[start_index],
          end_logits[end_index]))
  return spans


def _prelim_predictions(features, results_by_id, n_best_size,
                        max_answer_length, version_2_with_negative):
  """An example's candidate spans over all its windows, best first.

  Returns:
    (list of _PrelimPrediction sorted by start + end logit, descending,
    with the null answer among them for SQuAD 2.0; _NullScore).
  """
  prelim_predictions = []
  null = _NullScore(NULL_SCORE_START, 0, 0, 0)
  for feature_index, feature in enumerate(features):
    result = results_by_id[feature.unique_id]
    start_logits = [float(x) for x in result.start_logits]
    end_logits = [float(x) for x in result.end_logits]
    if version_2_with_negative:
      feature_null_score = start_logits[0] + end_logits[0]
      if feature_null_score < null.score:
        null = _NullScore(feature_null_score, feature_index, start_logits[0],
                          end_logits[0])
    prelim_predictions.extend(_valid_spans(
        feature, feature_index, start_logits, end_logits, n_best_size,
        max_answer_length))
  if version_2_with_negative:
    prelim_predictions.append(_PrelimPrediction(
        null.feature_index, 0, 0, null.start_logit, null.end_logit))
  return sorted(prelim_predictions,
                key=lambda x: (x.start_logit + x.end_logit),
                reverse=True), null


def _nbest(example, features, prelim_predictions, n_best_size, do_lower_case,
           verbose_logging):
  """The n_best_size best distinct answer texts ("" for the null answer).

  Returns:
    list of _NbestPrediction, best first.
  """
  seen_predictions = set()
  nbest = []
  for pred in prelim_predictions:
    if len(nbest) >= n_best_size:
      break
    if pred.start_index > 0:
      feature = features[pred.feature_index]
      tok_text = _detokenize(
          feature.tokens[pred.start_index:pred.end_index + 1])
      orig_doc_start = feature.token_to_orig_map[pred.start_index]
      orig_doc_end = feature.token_to_orig_map[pred.end_index]
      orig_text = " ".join(example.doc_tokens[orig_doc_start:orig_doc_end + 1])
      final_text = get_final_text(tok_text, orig_text, do_lower_case,
                                  verbose_logging)
      if final_text in seen_predictions:
        continue
    else:
      final_text = ""
    seen_predictions.add(final_text)
    nbest.append(_NbestPrediction(final_text, pred.start_logit,
                                  pred.end_logit))
  return nbest


def _nbest_json(nbest):
  """nbest_predictions.json entries, with a softmax over the scores."""
  probs = compute_softmax([e.start_logit + e.end_logit for e in nbest])
  return [collections.OrderedDict([("text", entry.text),
                                   ("probability", probs[i]),
                                   ("start_logit", entry.start_logit),
                                   ("end_logit", entry.end_logit)])
          for i, entry in enumerate(nbest)]


def compute_predictions(all_examples, all_features, all_results, n_best_size,
                        max_answer_length, do_lower_case,
                        version_2_with_negative=False,
                        null_score_diff_threshold=0.0, verbose_logging=False):
  """The original write_predictions, without the writing.

  For each example, every (start, end) pair among each window's n_best_size
  best starts and ends is a candidate unless it lies outside the window's
  context, ends before it starts, is longer than max_answer_length, or its
  start is not in the window giving that token the most context. Candidates
  are ranked by start + end logit; the n_best_size best distinct texts are
  kept, with a softmax over their scores. For SQuAD 2.0 the null answer
  scores the lowest [CLS] start + end over the windows, and "" is predicted
  when it beats the best non-null answer by more than
  null_score_diff_threshold.

  Args:
    all_examples: list of data.SquadExample.
    all_features: list of features.InputFeatures of those examples.
    all_results: iterable of RawResult (logits as lists or arrays of
      floats), one per feature.
    n_best_size: int.
    max_answer_length: int, in WordPieces.
    do_lower_case: bool.
    version_2_with_negative: bool.
    null_score_diff_threshold: float.
    verbose_logging: bool.

  Returns:
    Predictions of OrderedDicts keyed by question id, in example order:
      answers: id -> predicted text;
      nbest: id -> list of OrderedDict(text, probability, start_logit,
        end_logit);
      null_odds: id -> null score minus best non-null score (SQuAD 2.0
        only, else empty);
      best_non_null: id -> the best non-empty text (what would be answered
        with an infinite threshold).
  """
  example_index_to_features = collections.defaultdict(list)
  for feature in all_features:
    example_index_to_features[feature.example_index].append(feature)
  results_by_id = {result.unique_id: result for result in all_results}

  predictions = Predictions(collections.OrderedDict(),
                            collections.OrderedDict(),
                            collections.OrderedDict(),
                            collections.OrderedDict())
  for example_index, example in enumerate(all_examples):
    features = example_index_to_features[example_index]
    prelim_predictions, null = _prelim_predictions(
        features, results_by_id, n_best_size, max_answer_length,
        version_2_with_negative)
    nbest = _nbest(example, features, prelim_predictions, n_best_size,
                   do_lower_case, verbose_logging)
    if version_2_with_negative and all(entry.text for entry in nbest):
      nbest.append(_NbestPrediction("", null.start_logit, null.end_logit))
    # No valid span at all (rare): a nonce prediction, as the original.
    if not nbest:
      nbest.append(_NbestPrediction("empty", 0.0, 0.0))
    predictions.nbest[example.qas_id] = _nbest_json(nbest)
    _choose_answer(predictions, example.qas_id, nbest, null.score,
                   version_2_with_negative, null_score_diff_threshold)
  return predictions


def _choose_answer(predictions, qas_id, nbest, score_null,
                   version_2_with_negative, null_score_diff_threshold):
  """Sets a question's answer, best non-null text and (SQuAD 2.0) null odds
  in predictions."""
  best = next((entry for entry in nbest if entry.text), None)
  if not version_2_with_negative:
    predictions.answers[qas_id] = nbest[0].text
    predictions.best_non_null[qas_id] = nbest[0].text
  elif best is None:
    # Only the null answer is possible; the original fails here.
    predictions.answers[qas_id] = ""
    predictions.best_non_null[qas_id] = ""
    predictions.null_odds[qas_id] = score_null
  else:
    score_diff = score_null - best.start_logit - best.end_logit
    predictions.null_odds[qas_id] = score_diff
    predictions.answers[qas_id] = (
        "" if score_diff > null_score_diff_threshold else best.text)
    predictions.best_non_null[qas_id] = best.text


def write_predictions(output_dir, predictions, version_2_with_negative):
  """Writes predictions.json, nbest_predictions.json and, for SQuAD 2.0,
  null_odds.json into output_dir, as the original.

  Args:
    output_dir: str.
    predictions: Predictions from compute_predictions.
    version_2_with_negative: bool.
  """
  output = lambda name: os.path.join(output_dir, name)
  logging.info("Writing predictions to: %s", output("predictions.json"))
  write_json(output("predictions.json"), predictions.answers)
  write_json(output("nbest_predictions.json"), predictions.nbest)
  if version_2_with_negative:
    write_json(output("null_odds.json"), predictions.null_odds)


def write_json(path, value):
  """Writes value as the original: json.dumps(indent=4) and a newline."""
  with fileio.atomic_output(path) as writer:
    writer.write(json.dumps(value, indent=4) + "\n")
