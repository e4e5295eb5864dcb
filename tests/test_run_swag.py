"""run_swag.py end to end: learns real SWAG rows from a pre-training
checkpoint, predicts from an original-layout checkpoint as the NumPy
reference BERT does, reports bad input."""

import csv
import os
import shutil

import numpy as np
import pytest
import tensorflow as tf

import modeling
from tests import reference
from tests.conftest import read_results
from tests.conftest import run_script

# End-to-end script runs: left out of make test-fast.
pytestmark = pytest.mark.slow

HEADER = ["", "video-id", "fold-ind", "startphrase", "sent1", "sent2",
          "gold-source", "ending0", "ending1", "ending2", "ending3", "label"]
WORDS = ["the", "cat", "dog", "sat", "ran", "on", "mat", "park", "he", "she",
         "then", "slept", "ate", "fish", "away"]
VOCAB = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + WORDS + ["."]
CONFIG = dict(vocab_size=len(VOCAB), hidden_size=32, num_hidden_layers=2,
              num_attention_heads=2, intermediate_size=64,
              max_position_embeddings=64, type_vocab_size=2)


def write_csv(path, rows, header=HEADER):
  with open(path, "w", newline="") as f:
    writer = csv.writer(f, lineterminator="\n")
    writer.writerow(header)
    writer.writerows(rows)


def synthetic_rows(count, seed=0):
  """Rows of random words in the release's layout."""
  rng = np.random.RandomState(seed)

  def text(low, high):
    return " ".join(rng.choice(WORDS, rng.randint(low, high))) + " ."

  rows = []
  for i in range(count):
    sent1, sent2 = text(3, 9), rng.choice(["he", "she"])
    endings = [text(1, 6) for _ in range(4)]
    rows.append([str(i), "v%d" % i, str(i), sent1 + " " + sent2, sent1, sent2,
                 "gold"] + endings + [str(rng.randint(4))])
  return rows


def base_args(data, output_dir, config_file, vocab_file, **overrides):
  args = {"data_dir": str(data), "vocab_file": str(vocab_file),
          "bert_config_file": str(config_file),
          "output_dir": str(output_dir), "max_seq_length": "32",
          "train_batch_size": "8", "eval_batch_size": "8",
          "predict_batch_size": "8", "learning_rate": "1e-3",
          "num_train_epochs": "20", "iterations_per_loop": "50",
          "strategy": "default"}
  args.update(overrides)
  return args


def read_probabilities(path):
  with open(path) as f:
    return np.array([[float(p) for p in line.split("\t")] for line in f])


def test_learns_real_rows_from_a_pretraining_checkpoint(shared_data,
                                                        tmp_path):
  data = tmp_path / "swag"
  data.mkdir()
  val = os.path.join(shared_data, "swag", "val.subset-first91.csv")
  shutil.copy(val, data / "train.csv")
  shutil.copy(val, data / "val.csv")
  with open(val, newline="") as f:
    rows = list(csv.reader(f))
  write_csv(data / "test.csv", [row[:-1] for row in rows[1:]],
            header=HEADER[:-1])
  vocab_file = os.path.join(shared_data, "vocab", "uncased_vocab.txt")
  config = modeling.BertConfig(**dict(CONFIG, vocab_size=30522))
  (tmp_path / "bert_config.json").write_text(config.to_json_string())
  # A pre-training checkpoint as Google released them: no SWAG layer.
  prefix = reference.write_tf1_checkpoint(
      str(tmp_path / "pretrained" / "bert_model.ckpt"),
      reference.random_weights(config, seed=3, scale=0.05))
  result = run_script("run_swag.py", base_args(
      data, tmp_path / "out", tmp_path / "bert_config.json", vocab_file,
      init_checkpoint=prefix, do_train="true", do_eval="true",
      do_predict="true", max_seq_length="64"))
  assert result.returncode == 0, result.stderr[-3000:]
  results = read_results(tmp_path / "out" / "eval_results.txt")
  # Chance is 0.25; the model has seen these rows 20 times.
  assert results["eval_accuracy"] > 0.75, results
  assert results["eval_loss"] == results["loss"]
  assert results["global_step"] == int(91 / 8 * 20)
  probabilities = read_probabilities(tmp_path / "out" / "test_results.tsv")
  assert probabilities.shape == (91, 4)
  np.testing.assert_allclose(probabilities.sum(-1), 1.0, atol=1e-5)
  with open(tmp_path / "out" / "test_predictions.csv", newline="") as f:
    submission = list(csv.reader(f))
  assert submission[0] == ["", "label"]
  assert [row[0] for row in submission[1:]] == [row[0] for row in rows[1:]]
  assert [int(row[1]) for row in submission[1:]] == list(
      probabilities.argmax(-1))
  # The head is saved under its scope, beside the pre-trained names.
  saved = dict(tf.train.list_variables(str(tmp_path / "out")))
  assert saved["cls/swag/output_weights"] == [1, 32]
  assert saved["cls/swag/output_bias"] == [1]
  assert saved["bert/pooler/dense/kernel"] == [32, 32]


def test_predict_from_a_checkpoint_in_the_original_layout(tmp_path):
  data = tmp_path / "swag"
  data.mkdir()
  rows = synthetic_rows(11)
  write_csv(data / "test.csv", [row[:-1] for row in rows], HEADER[:-1])
  (tmp_path / "vocab.txt").write_text("\n".join(VOCAB) + "\n")
  config = modeling.BertConfig(**CONFIG)
  (tmp_path / "bert_config.json").write_text(config.to_json_string())
  weights = reference.random_weights(config, seed=5, heads=False)
  rng = np.random.RandomState(2)
  weights["cls/swag/output_weights"] = rng.randn(1, 32).astype(np.float32)
  weights["cls/swag/output_bias"] = np.array([0.4], np.float32)
  prefix = reference.write_tf1_checkpoint(
      str(tmp_path / "finetuned" / "model.ckpt-100"), weights)
  result = run_script("run_swag.py", base_args(
      data, tmp_path / "out", tmp_path / "bert_config.json",
      tmp_path / "vocab.txt", init_checkpoint=prefix, do_predict="true",
      predict_batch_size="4"))
  assert result.returncode == 0, result.stderr[-3000:]
  got = read_probabilities(tmp_path / "out" / "test_results.tsv")
  assert got.shape == (11, 4)
  # Each choice through the NumPy BERT, laid out by hand.
  vocab = {t: i for i, t in enumerate(VOCAB)}
  for row, probabilities in zip(rows, got):
    context = row[4].split()
    scores = []
    for ending in row[7:11]:
      second = row[5].split() + ending.split()
      tokens = ["[CLS]"] + context + ["[SEP]"] + second + ["[SEP]"]
      ids = np.array([[vocab[t] for t in tokens]])
      segments = np.array([[0] * (len(context) + 2) + [1] * (len(second) + 1)])
      pooled = reference.np_bert(weights, config, ids, np.ones_like(ids),
                                 segments)["pooled_output"]
      scores.append((pooled @ weights["cls/swag/output_weights"].T +
                     weights["cls/swag/output_bias"])[0, 0])
    want = np.exp(scores) / np.exp(scores).sum()
    np.testing.assert_allclose(probabilities, want, atol=1e-5)


@pytest.mark.parametrize("case,message", [
    ("header", "val.csv, line 1: header ,video-id,fold-ind,startphrase,"
               "sent1,sent2,gold-source,ending0,ending1,ending2,ending_3,label"
               " is not the SWAG release's"),
    ("fields", "val.csv, line 4: 11 fields, expected 12."),
    ("label", "val.csv, line 3: label '7' is not one of 0, 1, 2, 3."),
    ("no_test", "Missing data file %s"),
])
def test_bad_input_is_one_line_and_writes_nothing(tmp_path, case, message):
  data = tmp_path / "swag"
  data.mkdir()
  rows = synthetic_rows(5)
  header = list(HEADER)
  if case == "header":
    header[10] = "ending_3"
  elif case == "fields":
    rows[2] = rows[2][:-1]
  elif case == "label":
    rows[1][-1] = "7"
  write_csv(data / "train.csv", synthetic_rows(5))
  write_csv(data / "val.csv", rows, header)
  (tmp_path / "vocab.txt").write_text("\n".join(VOCAB) + "\n")
  (tmp_path / "bert_config.json").write_text(
      modeling.BertConfig(**CONFIG).to_json_string())
  result = run_script("run_swag.py", base_args(
      data, tmp_path / "out", tmp_path / "bert_config.json",
      tmp_path / "vocab.txt", do_train="true", do_eval="true",
      do_predict=str(case == "no_test")))
  assert result.returncode == 1, result.stderr[-3000:]
  if case == "no_test":
    message = message % (data / "test.csv")
  assert message in result.stderr
  assert "Traceback" not in result.stderr
  assert not (tmp_path / "out").exists()
