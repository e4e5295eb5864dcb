"""Test-set outputs: test_results.tsv (the choice probabilities, as
run_classifier writes them) and test_predictions.csv (the chosen ending of
each test.csv row)."""

import csv
import os

from absl import logging

from runner_lib.core.files import fileio


def write_predictions(output_dir, examples, probabilities):
  """Writes test_results.tsv and test_predictions.csv.

  Args:
    output_dir: str.
    examples: list of data.SwagExample, test.csv's rows.
    probabilities: float32 [N, NUM_CHOICES], one row per example.
  """
  with fileio.atomic_output(os.path.join(output_dir,
                                         "test_results.tsv")) as writer:
    for row in probabilities:
      writer.write("\t".join(str(p) for p in row) + "\n")
  with fileio.atomic_output(os.path.join(output_dir,
                                         "test_predictions.csv")) as writer:
    # The first column keeps test.csv's unnamed row id.
    rows = csv.writer(writer, lineterminator="\n")
    rows.writerow(["", "label"])
    for example, row in zip(examples, probabilities):
      rows.writerow([example.swag_id, int(row.argmax())])
  logging.info("Wrote %d predictions.", len(probabilities))
