"""Entity-level scores (seqeval, conlleval's semantics) and the conlleval
input files of the predictions."""

import os

from absl import logging
from seqeval import metrics as seqeval_metrics

from runner_lib.core.files import fileio


def entity_types(label_list):
  """The entity types of B-/I- tags, in label_list order: PER, ORG, ..."""
  return list(dict.fromkeys(tag[2:] for tag in label_list if tag != "O"))


def eval_results(gold, predicted, label_list):
  """Entity precision, recall and F1 (an entity counts where its type and
  its whole span match), overall and per type.

  Args:
    gold: list (per sentence) of lists of IOB2 tags.
    predicted: the same shape.
    label_list: list of str, the tags (for the per-type keys).

  Returns:
    dict: eval_precision, eval_recall, eval_f1 and eval_f1_<TYPE> for each
    type, as fractions (0.0 where undefined).
  """
  results = {
      "eval_precision": seqeval_metrics.precision_score(
          gold, predicted, zero_division=0),
      "eval_recall": seqeval_metrics.recall_score(gold, predicted,
                                                  zero_division=0),
      "eval_f1": seqeval_metrics.f1_score(gold, predicted, zero_division=0),
  }
  report = seqeval_metrics.classification_report(
      gold, predicted, output_dict=True, zero_division=0)
  for entity in entity_types(label_list):
    results["eval_f1_" + entity] = float(
        report.get(entity, {}).get("f1-score", 0.0))
  return {key: float(value) for key, value in results.items()}


def write_conll(path, sentences, predicted):
  """Writes `WORD GOLD PRED` lines, a blank line after each sentence:
  conlleval's input.

  Args:
    path: str.
    sentences: list of data.Sentence (gold tags in IOB2).
    predicted: list (per sentence) of lists of tags.
  """
  with fileio.atomic_output(path) as writer:
    for sentence, tags in zip(sentences, predicted):
      for word, gold, tag in zip(sentence.words, sentence.tags, tags):
        writer.write("%s %s %s\n" % (word, gold, tag))
      writer.write("\n")
  logging.info("Wrote %d sentences to %s.", len(sentences),
               os.path.basename(path))
