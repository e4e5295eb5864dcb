"""Test-set outputs: the original's test_results.tsv and a GLUE submission
file."""

import os

from absl import logging
import numpy as np

from runner_lib.core.files import fileio
from runner_lib.core.training import metrics


def probabilities(logits, regression):
  """float32 [N, num_labels] softmax of logits [N, num_labels] (for
  regression: the raw scores [N, 1])."""
  if regression:
    return logits.astype(np.float32)
  return metrics.softmax(logits)


def write_predictions(output_dir, probs, label_list, submission_name):
  """Writes test_results.tsv as the original, and SUBMISSION_NAME.tsv.

  Args:
    output_dir: str.
    probs: float32 [N, num_labels], from probabilities().
    label_list: list of str, or None for regression.
    submission_name: str, the GLUE file name without ".tsv".
  """
  with fileio.atomic_output(os.path.join(output_dir,
                                         "test_results.tsv")) as writer:
    for row in probs:
      writer.write("\t".join(str(p) for p in row) + "\n")
  with fileio.atomic_output(os.path.join(
      output_dir, submission_name + ".tsv")) as writer:
    writer.write("index\tprediction\n")
    for index, row in enumerate(probs):
      label = ("%.3f" % row[0] if label_list is None else
               label_list[int(row.argmax())])
      writer.write("%d\t%s\n" % (index, label))
  logging.info("Wrote %d predictions.", len(probs))
