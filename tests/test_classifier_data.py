"""GLUE processors on fixtures in the real formats and on ../shared/data/glue;
metrics against hand-computed values."""

import os
import re

import numpy as np
import pytest

from runner_lib.classifier import data as classifier_data
from runner_lib.core import errors
from runner_lib.core.training import metrics


def write(path, text):
  path.parent.mkdir(parents=True, exist_ok=True)
  path.write_bytes(text.encode("utf-8"))


def test_mrpc_fixture_with_bom_and_quotes(tmp_path):
  write(tmp_path / "train.tsv",
        "\ufeffQuality\t#1 ID\t#2 ID\t#1 String\t#2 String\n"
        "1\t702876\t702977\tHe called \"the witness\" a liar.\tHe lied.\n"
        "0\t2108705\t2108831\tYucaipa owned it.\tIt was sold.\n")
  write(tmp_path / "test.tsv",
        "index\t#1 ID\t#2 ID\t#1 String\t#2 String\n0\t1\t2\tA b.\tC d.\n")
  processor = classifier_data.get_processor("MRPC")
  train = processor.get_train_examples(str(tmp_path))
  assert [(e.guid, e.text_a, e.text_b, e.label) for e in train] == [
      ("train-1", 'He called "the witness" a liar.', "He lied.", "1"),
      ("train-2", "Yucaipa owned it.", "It was sold.", "0")]
  test = processor.get_test_examples(str(tmp_path))
  assert [(e.guid, e.text_a, e.text_b, e.label) for e in test] == [
      ("test-1", "A b.", "C d.", None)]
  assert processor.get_labels() == ["0", "1"]


def test_cola_fixture_has_no_header(tmp_path):
  write(tmp_path / "train.tsv", "gj04\t1\t\tThe sailors rode.\n"
                                "gj04\t0\t*\tRode the sailors the.\n")
  examples = classifier_data.ColaProcessor().get_train_examples(str(tmp_path))
  assert [(e.guid, e.text_a, e.label) for e in examples] == [
      ("train-0", "The sailors rode.", "1"),
      ("train-1", "Rode the sailors the.", "0")]


def test_mnli_guid_and_last_column_label(tmp_path):
  header = "\t".join("c%d" % i for i in range(12)) + "\n"
  row = ["31193", "1", "2", "g", "p1", "p2", "p3", "p4", "Premise.",
         "Hypothesis.", "neutral", "entailment"]
  write(tmp_path / "dev_matched.tsv", header + "\t".join(row) + "\n")
  (example,) = classifier_data.MnliProcessor().get_dev_examples(str(tmp_path))
  assert (example.guid, example.text_a, example.text_b, example.label) == (
      "dev-31193", "Premise.", "Hypothesis.", "entailment")


@pytest.mark.parametrize("content,message", [
    ("Quality\ta\tb\tc\td\n1\t2\t3\tonly four\n",
     "train.tsv, line 2: 4 column(s), expected at least 5"),
    ("Quality\ta\tb\tc\td\n7\t2\t3\tx\ty\n",
     "train.tsv, line 2: label '7' is not one of 0, 1"),
])
def test_bad_rows_name_file_and_line(tmp_path, content, message):
  write(tmp_path / "train.tsv", content)
  with pytest.raises(errors.InputError, match=re.escape(message)):
    classifier_data.MrpcProcessor().get_train_examples(str(tmp_path))


def test_missing_file_and_unknown_task(tmp_path):
  with pytest.raises(errors.InputError, match="Missing data file .*dev.tsv"):
    classifier_data.RteProcessor().get_dev_examples(str(tmp_path))
  with pytest.raises(errors.InputError,
                     match="Task not found: squad. Known tasks: cola, mnli"):
    classifier_data.get_processor("squad")


def test_qqp_skips_its_broken_rows(tmp_path):
  write(tmp_path / "train.tsv",
        "id\tqid1\tqid2\tquestion1\tquestion2\tis_duplicate\n"
        "1\t2\t3\tHow? Why? 0\n4\t5\t6\tA?\tB?\t1\n")
  examples = classifier_data.QqpProcessor().get_train_examples(str(tmp_path))
  assert [(e.text_a, e.label) for e in examples] == [("A?", "1")]


# Official row counts (../shared/data/PROVENANCE.md).
GLUE_COUNTS = [
    ("cola", "train", 8551), ("cola", "dev", 1043),
    ("mrpc", "train", 3668), ("mrpc", "dev", 408), ("mrpc", "test", 1725),
    ("sst-2", "train", 67349), ("sst-2", "dev", 872),
    ("sts-b", "train", 5749), ("sts-b", "dev", 1500), ("sts-b", "test", 1379),
    ("qnli", "dev", 5463), ("qnli", "test", 5463),
    ("rte", "train", 2490), ("rte", "dev", 277), ("rte", "test", 3000),
    ("wnli", "train", 635), ("wnli", "dev", 71),
]
FOLDERS = {"cola": "CoLA", "mrpc": "MRPC", "sst-2": "SST-2", "sts-b": "STS-B",
           "qnli": "QNLI", "rte": "RTE", "wnli": "WNLI"}


@pytest.mark.parametrize("task,split,count", GLUE_COUNTS)
def test_real_glue_row_counts(shared_data, task, split, count):
  processor = classifier_data.get_processor(task)
  data_dir = os.path.join(shared_data, "glue", FOLDERS[task])
  examples = getattr(processor, "get_%s_examples" % split)(data_dir)
  assert len(examples) == count
  assert all(e.text_a for e in examples)


def test_real_qqp_subset_skips_its_malformed_row(shared_data):
  processor = classifier_data.QqpProcessor()
  processor.TRAIN = "train.subset-23k.tsv"
  examples = processor.get_train_examples(
      os.path.join(shared_data, "glue", "QQP"))
  assert len(examples) == 23497 - 1


def test_accuracy_and_f1_by_hand():
  labels = [1, 0, 1, 1, 0, 0]
  predictions = [1, 1, 0, 1, 0, 0]
  assert metrics.accuracy(labels, predictions) == 4 / 6
  # TP 2, FP 1, FN 1: precision 2/3, recall 2/3.
  assert metrics.f1(labels, predictions) == pytest.approx(2 / 3)
  assert metrics.f1([0, 0], [0, 0]) == 0.0


def test_matthews_by_hand():
  # TP 2, TN 2, FP 1, FN 1: (4 - 1) / sqrt(3 * 3 * 3 * 3) = 1/3.
  labels = [1, 1, 1, 0, 0, 0]
  predictions = [1, 1, 0, 0, 0, 1]
  assert metrics.matthews_corrcoef(labels, predictions) == pytest.approx(1 / 3)
  assert metrics.matthews_corrcoef([1, 1], [1, 1]) == 0.0


def test_pearson_and_spearman_by_hand():
  x = [1.0, 2.0, 3.0, 4.0]
  y = [2.0, 4.0, 5.0, 4.0]
  # Pearson: dx = (-1.5, -.5, .5, 1.5), dy = (-1.75, .25, 1.25, .25):
  # sum dx dy = 2.625 - .125 + .625 + .375 = 3.5, sum dx^2 = 5,
  # sum dy^2 = 4.75.
  assert metrics.pearson(x, y) == pytest.approx(3.5 / np.sqrt(5 * 4.75))
  # Ranks of y with the tie averaged: (1, 2.5, 4, 2.5); against (1, 2, 3, 4):
  # dy = (-1.5, 0, 1.5, 0), sum dx dy = 3, sum dy^2 = 4.5.
  assert metrics.spearman(x, y) == pytest.approx(3 / np.sqrt(5 * 4.5))
  assert metrics.spearman(x, [10, 20, 30, 40]) == pytest.approx(1.0)


def test_softmax_by_hand():
  got = metrics.softmax(np.array([[0.0, np.log(3.0)], [1000.0, 1000.0]],
                                 np.float32))
  assert got.dtype == np.float32
  # Large logits do not overflow: the row maximum is subtracted first.
  np.testing.assert_allclose(got, [[0.25, 0.75], [0.5, 0.5]], rtol=1e-6)
