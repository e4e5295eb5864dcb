"""Sentence(-pair) classification data: the GLUE and XNLI readers.

The original shipped processors for CoLA, MNLI, MRPC and XNLI; here every
GLUE task (plus XNLI) reads the standard GLUE folder layout. Each processor
is a column spec over the original's TSV reading (tab separated, no quote
processing), so the examples, guids and labels are the original's where it
had a processor.
"""

import csv
import os

from absl import logging

from runner_lib.core import errors
from runner_lib.core.inputs import text_input


class InputExample(object):
  """A single example: guid, text_a, optional text_b, label (None: test)."""

  def __init__(self, guid, text_a, text_b=None, label=None):
    self.guid = guid
    self.text_a = text_a
    self.text_b = text_b
    self.label = label

  def __repr__(self):
    return "InputExample(%r, %r, %r, %r)" % (self.guid, self.text_a,
                                             self.text_b, self.label)


class DataProcessor(object):
  """Reads one task's train / dev / test files from a GLUE folder.

  Class attributes say where things are and how the task is scored:
    TRAIN, DEV, TEST: file names in data_dir.
    HEADER: whether train/dev files start with a header row (test files
      always do in GLUE).
    COLUMNS: (text_a, text_b or None, label) column indexes in train/dev.
    TEST_COLUMNS: (text_a, text_b or None) in the test file.
    LABELS: the label list (None for regression).
    METRICS: names of core/training/metrics.py functions reported beside
      accuracy (for regression: instead of it), the task's GLUE metrics.
    SUBMISSION_NAME: the GLUE leaderboard's file name for the task's test
      predictions, without ".tsv".
    SKIP_MALFORMED: skip (and count) rows with too few columns instead of
      failing; for QQP, whose GLUE files hold a few broken rows.
  """

  TRAIN, DEV, TEST = "train.tsv", "dev.tsv", "test.tsv"
  HEADER = True
  COLUMNS = (None, None, None)
  TEST_COLUMNS = (None, None)
  LABELS = None
  METRICS = ()
  SUBMISSION_NAME = None
  SKIP_MALFORMED = False

  def get_train_examples(self, data_dir):
    return self._examples(data_dir, self.TRAIN, "train")

  def get_dev_examples(self, data_dir):
    return self._examples(data_dir, self.DEV, "dev")

  def get_test_examples(self, data_dir):
    return self._examples(data_dir, self.TEST, "test")

  def get_labels(self):
    return list(self.LABELS) if self.LABELS else None

  @property
  def is_regression(self):
    return self.LABELS is None

  @classmethod
  def _read_tsv(cls, input_file):
    """Rows of a TSV file; a UTF-8 byte-order mark is dropped.

    Raises:
      errors.InputError: the file is missing or not UTF-8 (its line named).
    """
    text = text_input.read_text(input_file)
    return list(csv.reader(text.splitlines(), delimiter="\t",
                           quoting=csv.QUOTE_NONE))

  def _examples(self, data_dir, file_name, set_type):
    path = os.path.join(data_dir, file_name)
    rows = self._read_tsv(path)
    is_test = set_type == "test"
    columns = self.TEST_COLUMNS + (None,) if is_test else self.COLUMNS
    # Column c >= 0 needs c + 1 columns; c < 0 (from the end) needs -c.
    needed = max(c + 1 if c >= 0 else -c for c in columns if c is not None)
    examples, skipped = [], 0
    for number, row in enumerate(rows, 1):
      if number == 1 and (self.HEADER or is_test):
        continue
      if len(row) < needed:
        if self.SKIP_MALFORMED:
          skipped += 1
          continue
        raise errors.InputError(
            "%s, line %d: %d column(s), expected at least %d." %
            (path, number, len(row), needed))
      example = self._example(row, columns, set_type, number - 1)
      if example is not None:
        self._check_label(example, path, number)
        examples.append(example)
    if skipped:
      logging.warning("%s: skipped %d malformed rows.", path, skipped)
    return examples

  def _example(self, row, columns, set_type, index):
    a, b, label = columns
    return InputExample(
        guid="%s-%d" % (set_type, index), text_a=row[a],
        text_b=row[b] if b is not None else None,
        label=row[label] if label is not None else None)

  def _check_label(self, example, path, number):
    if example.label is None:
      return
    if self.LABELS is None:
      try:
        float(example.label)
      except ValueError:
        raise errors.InputError("%s, line %d: score %r is not a number." %
                                (path, number, example.label)) from None
    elif example.label not in self.LABELS:
      raise errors.InputError(
          "%s, line %d: label %r is not one of %s." %
          (path, number, example.label, ", ".join(self.LABELS)))


class ColaProcessor(DataProcessor):
  """CoLA: single sentences, acceptable (1) or not (0); train/dev headerless."""
  HEADER = False
  COLUMNS = (3, None, 1)
  TEST_COLUMNS = (1, None)
  LABELS = ("0", "1")
  METRICS = ("matthews_corrcoef",)
  SUBMISSION_NAME = "CoLA"


class MnliProcessor(DataProcessor):
  """MultiNLI; dev is dev_matched (MnliMismatchedProcessor: mismatched)."""
  DEV, TEST = "dev_matched.tsv", "test_matched.tsv"
  COLUMNS = (8, 9, -1)
  TEST_COLUMNS = (8, 9)
  LABELS = ("contradiction", "entailment", "neutral")
  SUBMISSION_NAME = "MNLI-m"

  def _example(self, row, columns, set_type, index):
    example = super()._example(row, columns, set_type, index)
    example.guid = "%s-%s" % (set_type, row[0])  # the original's guid
    return example


class MnliMismatchedProcessor(MnliProcessor):
  DEV, TEST = "dev_mismatched.tsv", "test_mismatched.tsv"
  SUBMISSION_NAME = "MNLI-mm"


class MrpcProcessor(DataProcessor):
  """MRPC: paraphrase (1) or not (0)."""
  COLUMNS = (3, 4, 0)
  TEST_COLUMNS = (3, 4)
  LABELS = ("0", "1")
  METRICS = ("f1",)
  SUBMISSION_NAME = "MRPC"


class Sst2Processor(DataProcessor):
  """SST-2: a movie review sentence, positive (1) or negative (0). Its test
  file numbers the sentences in a first column."""
  COLUMNS = (0, None, 1)
  TEST_COLUMNS = (1, None)
  LABELS = ("0", "1")
  SUBMISSION_NAME = "SST-2"


class StsbProcessor(DataProcessor):
  """STS-B: a similarity score in [0, 5], learned as a regression (one
  output, squared error) and scored by correlation."""
  COLUMNS = (7, 8, -1)
  TEST_COLUMNS = (7, 8)
  METRICS = ("pearson", "spearman")
  SUBMISSION_NAME = "STS-B"


class QqpProcessor(DataProcessor):
  """QQP: are two Quora questions duplicates (1)? The rows GLUE's files
  break (a question with a newline in it) are skipped and counted."""
  COLUMNS = (3, 4, 5)
  TEST_COLUMNS = (1, 2)
  LABELS = ("0", "1")
  METRICS = ("f1",)
  SUBMISSION_NAME = "QQP"
  SKIP_MALFORMED = True


class QnliProcessor(DataProcessor):
  """QNLI: does the sentence (column 2) hold the answer to the question
  (column 1)?"""
  COLUMNS = (1, 2, -1)
  TEST_COLUMNS = (1, 2)
  LABELS = ("entailment", "not_entailment")
  SUBMISSION_NAME = "QNLI"


class RteProcessor(QnliProcessor):
  """RTE: QNLI's layout and labels."""
  SUBMISSION_NAME = "RTE"


class WnliProcessor(DataProcessor):
  """WNLI: Winograd schemas as sentence pairs; does the second, with its
  pronoun resolved, follow from the first (1)? The paper leaves it out: its
  dev set is adversarial to what train teaches."""
  COLUMNS = (1, 2, -1)
  TEST_COLUMNS = (1, 2)
  LABELS = ("0", "1")
  SUBMISSION_NAME = "WNLI"


class XnliProcessor(DataProcessor):
  """XNLI as the original: train on MultiNLI translated to `language`, dev
  rows of that language from xnli.dev.tsv."""
  language = "zh"
  COLUMNS = (0, 1, 2)
  LABELS = ("contradiction", "entailment", "neutral")
  SUBMISSION_NAME = "XNLI"

  def get_train_examples(self, data_dir):
    examples = self._examples(
        os.path.join(data_dir, "multinli"),
        "multinli.train.%s.tsv" % self.language, "train")
    for example in examples:
      if example.label == "contradictory":
        example.label = "contradiction"
    return examples

  def get_dev_examples(self, data_dir):
    path = os.path.join(data_dir, "xnli.dev.tsv")
    examples = []
    for number, row in enumerate(self._read_tsv(path), 1):
      if number == 1 or row[0] != self.language:
        continue
      if len(row) < 8:
        raise errors.InputError("%s, line %d: %d column(s), expected at "
                                "least 8." % (path, number, len(row)))
      examples.append(InputExample("dev-%d" % (number - 1), row[6], row[7],
                                   row[1]))
    return examples

  def get_test_examples(self, data_dir):
    raise errors.InputError("XNLI has no test set in this layout; use "
                            "--do_eval.")

  def _check_label(self, example, path, number):
    if example.label == "contradictory":
      return
    super()._check_label(example, path, number)


PROCESSORS = {
    "cola": ColaProcessor,
    "mnli": MnliProcessor,
    "mnli-mm": MnliMismatchedProcessor,
    "mrpc": MrpcProcessor,
    "sst-2": Sst2Processor,
    "sts-b": StsbProcessor,
    "qqp": QqpProcessor,
    "qnli": QnliProcessor,
    "rte": RteProcessor,
    "wnli": WnliProcessor,
    "xnli": XnliProcessor,
}


def get_processor(task_name):
  """The processor of a task (case-insensitive).

  Raises:
    errors.InputError: unknown task, listing the known ones.
  """
  name = task_name.lower()
  if name not in PROCESSORS:
    raise errors.InputError("Task not found: %s. Known tasks: %s." %
                            (task_name, ", ".join(sorted(PROCESSORS))))
  return PROCESSORS[name]()
