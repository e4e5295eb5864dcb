"""run_classifier.py end to end: learns a task, predicts from an original-
layout checkpoint, reports bad input."""

import random

import numpy as np
import pytest

import modeling
from tests import reference
from tests.conftest import read_results
from tests.conftest import run_script

# End-to-end script runs: left out of make test-fast.
pytestmark = pytest.mark.slow

WORDS = ["the", "cat", "dog", "sat", "ran", "on", "mat", "park", "yes", "no",
         "big", "red", "a", "is", "was"]
VOCAB = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + WORDS + [".", ","]
CONFIG = dict(vocab_size=len(VOCAB), hidden_size=32, num_hidden_layers=2,
              num_attention_heads=2, intermediate_size=64,
              max_position_embeddings=64, type_vocab_size=2)


def mrpc_folder(directory, seed=0):
  """MRPC-format files whose label is 1 when sentence B says "yes"."""
  rng = random.Random(seed)
  header = "\ufeffQuality\t#1 ID\t#2 ID\t#1 String\t#2 String\n"

  def rows(count, with_label=True):
    lines = []
    for i in range(count):
      label = rng.randint(0, 1)
      a = " ".join(rng.choice(WORDS[:8]) for _ in range(rng.randint(3, 8)))
      b = " ".join(rng.choice(WORDS[:8]) for _ in range(rng.randint(2, 6)))
      b += " yes ." if label else " no ."
      lines.append("%s\t%d\t%d\t%s\t%s\n" % (label if with_label else i, i,
                                             i + 1, a, b))
    return lines

  directory.mkdir(parents=True, exist_ok=True)
  (directory / "train.tsv").write_text(header + "".join(rows(256)))
  (directory / "dev.tsv").write_text(header + "".join(rows(61)))
  (directory / "test.tsv").write_text(
      "index\t#1 ID\t#2 ID\t#1 String\t#2 String\n" +
      "".join(rows(13, with_label=False)))
  (directory / "vocab.txt").write_text("\n".join(VOCAB) + "\n")
  (directory / "bert_config.json").write_text(
      modeling.BertConfig(**CONFIG).to_json_string())
  return directory


def run(args):
  return run_script("run_classifier.py", args)


def base_args(data, output_dir, **overrides):
  args = {"task_name": "MRPC", "data_dir": str(data),
          "vocab_file": str(data / "vocab.txt"),
          "bert_config_file": str(data / "bert_config.json"),
          "output_dir": str(output_dir), "max_seq_length": "24",
          "train_batch_size": "16", "eval_batch_size": "8",
          "predict_batch_size": "8", "learning_rate": "1e-3",
          "num_train_epochs": "6", "iterations_per_loop": "16",
          "save_checkpoints_steps": "1000", "strategy": "default"}
  args.update(overrides)
  return args


def test_train_eval_predict_beats_majority(tmp_path):
  data = mrpc_folder(tmp_path / "mrpc")
  result = run(base_args(data, tmp_path / "out", do_train="true",
                         do_eval="true", do_predict="true"))
  assert result.returncode == 0, result.stderr[-3000:]
  results = read_results(tmp_path / "out" / "eval_results.txt")
  labels = [line.split("\t")[0] for line in
            (data / "dev.tsv").read_text().splitlines()[1:]]
  majority = max(labels.count("0"), labels.count("1")) / len(labels)
  assert results["eval_accuracy"] > majority + 0.15, (results, majority)
  assert results["global_step"] == int(256 / 16 * 6)
  assert set(results) == {"eval_accuracy", "eval_loss", "f1", "global_step",
                          "loss"}
  # 61 dev examples in batches of 8: 3 padding examples, not counted.
  lines = (tmp_path / "out" / "test_results.tsv").read_text().splitlines()
  assert len(lines) == 13
  probabilities = np.array([[float(p) for p in l.split("\t")] for l in lines])
  np.testing.assert_allclose(probabilities.sum(1), 1.0, atol=1e-5)
  submission = (tmp_path / "out" / "MRPC.tsv").read_text().splitlines()
  assert submission[0] == "index\tprediction" and len(submission) == 14
  for line, row in zip(submission[1:], probabilities):
    assert line.split("\t")[1] == str(int(row.argmax()))
  for name in ("train.tf_record", "eval.tf_record", "predict.tf_record"):
    assert (tmp_path / "out" / name).exists()


def test_predict_from_a_checkpoint_in_the_original_layout(tmp_path):
  data = mrpc_folder(tmp_path / "mrpc")
  config = modeling.BertConfig(**CONFIG)
  weights = reference.random_weights(config, seed=8, heads=False)
  rng = np.random.RandomState(1)
  weights["output_weights"] = rng.randn(2, 32).astype(np.float32)
  weights["output_bias"] = np.array([0.3, -0.2], np.float32)
  prefix = reference.write_tf1_checkpoint(
      str(tmp_path / "finetuned" / "model.ckpt-343"), weights)
  result = run(base_args(data, tmp_path / "out", do_predict="true",
                         init_checkpoint=prefix))
  assert result.returncode == 0, result.stderr[-3000:]
  got = np.array([[float(p) for p in l.split("\t")] for l in
                  (tmp_path / "out" / "test_results.tsv").read_text()
                  .splitlines()])
  # The same examples through the NumPy BERT and the original's layer.
  vocab = {t: i for i, t in enumerate(VOCAB)}
  rows = (data / "test.tsv").read_text().splitlines()[1:]
  for row, probabilities in zip(rows, got):
    _, _, _, a, b = row.split("\t")
    tokens = ["[CLS]"] + a.split() + ["[SEP]"] + b.split() + ["[SEP]"]
    ids = np.array([[vocab[t] for t in tokens]])
    segments = np.array([[0] * (len(a.split()) + 2) +
                         [1] * (len(b.split()) + 1)])
    pooled = reference.np_bert(weights, config, ids, np.ones_like(ids),
                               segments)["pooled_output"]
    logits = pooled @ weights["output_weights"].T + weights["output_bias"]
    want = np.exp(logits) / np.exp(logits).sum()
    np.testing.assert_allclose(probabilities, want[0], atol=1e-5)


def test_unknown_task_lists_the_known_ones(tmp_path):
  data = mrpc_folder(tmp_path / "mrpc")
  result = run(base_args(data, tmp_path / "out", task_name="squad",
                         do_train="true"))
  assert result.returncode != 0
  assert "Task not found: squad. Known tasks: cola, mnli" in result.stderr
  assert not (tmp_path / "out").exists()


def test_batch_size_below_one_is_named_before_any_work(tmp_path):
  data = mrpc_folder(tmp_path / "mrpc")
  result = run(base_args(data, tmp_path / "out", do_train="true",
                         train_batch_size="0"))
  assert result.returncode == 1
  assert "--train_batch_size must be at least 1, got 0." in result.stderr
  assert "Traceback" not in result.stderr
  assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("content", ["", "header only\n"])
def test_training_file_without_examples_is_an_error_not_a_hang(tmp_path,
                                                              content):
  data = mrpc_folder(tmp_path / "mrpc")
  (data / "train.tsv").write_text(content)
  result = run_script("run_classifier.py",
                      base_args(data, tmp_path / "out", do_train="true"),
                      timeout=120)
  assert result.returncode == 1
  assert ("--do_train: the training file in --data_dir %s holds no "
          "examples." % data) in result.stderr
  assert "Traceback" not in result.stderr
  assert not (tmp_path / "out").exists()


def test_stray_argument_is_a_usage_error(tmp_path):
  data = mrpc_folder(tmp_path / "mrpc")
  args = ["--%s=%s" % item
          for item in base_args(data, tmp_path / "out").items()]
  # "--do_train true": absl reads --do_train, and "true" is left over.
  result = run(args + ["--do_train", "true"])
  assert result.returncode == 1
  assert "Unexpected arguments: true" in result.stderr
  assert not (tmp_path / "out").exists()
