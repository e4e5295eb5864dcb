"""SWAG examples from the data release's "regular" CSV files.

train.csv and val.csv have the header below; test.csv the same without the
label column. The files are real CSV (quoted fields hold commas, quotes and,
rarely, line breaks), so they are read with the csv module.
"""

import csv
import dataclasses
import io
import os

from runner_lib.core import errors
from runner_lib.core.inputs import text_input

NUM_CHOICES = 4
HEADER = ("", "video-id", "fold-ind", "startphrase", "sent1", "sent2",
          "gold-source", "ending0", "ending1", "ending2", "ending3", "label")
TEST_HEADER = HEADER[:-1]

TRAIN, DEV, TEST = "train.csv", "val.csv", "test.csv"


@dataclasses.dataclass(eq=False)
class SwagExample:
  """One SWAG question: a context, the start of the next sentence and four
  endings for it.

  Attributes:
    swag_id: str, the row's first (unnamed) column.
    context_sentence: str, sent1.
    start_ending: str, sent2, the start every ending continues.
    endings: list of NUM_CHOICES str.
    label: int in [0, NUM_CHOICES), or None (test.csv).
  """

  swag_id: str
  context_sentence: str
  start_ending: str
  endings: list
  label: object = None

  def __repr__(self):
    return "SwagExample(%r, %r, %r, %r, %r)" % (
        self.swag_id, self.context_sentence, self.start_ending, self.endings,
        self.label)


def read_swag_examples(path, has_label=True):
  """Reads the examples of one SWAG CSV file.

  Args:
    path: str, a train.csv / val.csv / test.csv file.
    has_label: bool; if True the file must have the label column; if False
      (test.csv) the label column may be absent, and labels are ignored.

  Returns:
    list of SwagExample, in file order.

  Raises:
    errors.InputError: missing or empty file, a header other than the
      release's, a row whose field count differs from the header's, a label
      that is not an integer in [0, NUM_CHOICES), no examples; naming the
      file and line.
  """
  reader = csv.reader(io.StringIO(text_input.read_text(path), newline=""))
  header = next(reader, None)
  if header is None:
    raise errors.InputError("%s is empty; expected the SWAG header %s." %
                            (path, ",".join(HEADER)))
  headers = (HEADER,) if has_label else (HEADER, TEST_HEADER)
  if tuple(header) not in headers:
    raise errors.InputError(
        "%s, line 1: header %s is not the SWAG release's %s." %
        (path, ",".join(header), " or ".join(",".join(h) for h in headers)))
  labelled = has_label
  fields = len(header)
  examples = []
  for row in reader:
    line = reader.line_num
    if not row:
      continue
    if len(row) != fields:
      raise errors.InputError("%s, line %d: %d fields, expected %d." %
                              (path, line, len(row), fields))
    label = None
    if labelled:
      try:
        label = int(row[11])
      except ValueError:
        label = -1
      if not 0 <= label < NUM_CHOICES:
        raise errors.InputError(
            "%s, line %d: label %r is not one of 0, 1, 2, 3." %
            (path, line, row[11]))
    examples.append(SwagExample(row[0], row[4], row[5], row[7:11], label))
  if not examples:
    raise errors.InputError("%s holds no examples." % path)
  return examples


def get_train_examples(data_dir):
  """train.csv's examples, labelled."""
  return read_swag_examples(os.path.join(data_dir, TRAIN))


def get_dev_examples(data_dir):
  """val.csv's examples, labelled."""
  return read_swag_examples(os.path.join(data_dir, DEV))


def get_test_examples(data_dir):
  """test.csv's examples, without labels."""
  return read_swag_examples(os.path.join(data_dir, TEST), has_label=False)
