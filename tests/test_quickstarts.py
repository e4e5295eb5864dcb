"""The README's three quick starts, run as written on tiny data.

Google's model is a tiny random checkpoint under the original names and
GLUE's MRPC a folder of made-up pairs (test_run_classifier.mrpc_folder);
pre-training keeps its corpus, vocab and records and runs 20 steps instead
of 1,000. What each prints is checked against what the README says it
prints (the eval_results.txt keys, the steps the flags imply).
"""

import json
import re

import numpy as np
import pytest

import modeling
from tests import quickstarts
from tests import reference
from tests import test_run_classifier

# The keys README.md says each eval_results.txt holds.
CLASSIFIER_KEYS = {"eval_accuracy", "eval_loss", "f1", "global_step", "loss"}
PRETRAINING_KEYS = {"global_step", "loss", "masked_lm_accuracy",
                    "masked_lm_loss", "next_sentence_accuracy",
                    "next_sentence_loss"}


def results(stdout):
  """`key = value` lines as a dict of floats."""
  return {key: float(value) for key, value in
          re.findall(r"^(\w+) = (\S+)$", stdout, re.M)}


def test_the_readme_has_three_quick_starts_with_user_paths_only():
  found = quickstarts.quickstarts()
  assert sorted(found) == ["quickstart-mrpc", "quickstart-pretrain",
                           "quickstart-serving"]
  names = [name for start in found.values() for block in start.blocks
           for name in quickstarts.placeholders(block)]
  # The original README's variables, nothing else left to the user.
  assert sorted(set(names)) == ["BERT_BASE_DIR", "GLUE_DIR"]


def google_folder(directory):
  """A Google model folder: vocab.txt, bert_config.json (128 positions, as
  the quick start's --max_seq_length needs) and bert_model.ckpt with the
  pre-training heads, as Google released them."""
  directory.mkdir()
  config = modeling.BertConfig(**dict(test_run_classifier.CONFIG,
                                      max_position_embeddings=128))
  (directory / "bert_config.json").write_text(config.to_json_string())
  (directory / "vocab.txt").write_text(
      "\n".join(test_run_classifier.VOCAB) + "\n")
  reference.write_tf1_checkpoint(str(directory / "bert_model.ckpt"),
                                 reference.random_weights(config, seed=3))
  return directory


@pytest.mark.slow
def test_fine_tune_then_serve_from_a_google_folder(tmp_path):
  found = quickstarts.quickstarts()
  # Quick start 1's other way to a Google folder, converting HuggingFace
  # weights, is test_the_minilm_conversion_block_writes_a_google_folder's.
  fine_tune = [block for block in found["quickstart-mrpc"].blocks
               if "convert_checkpoint.py" not in block]
  glue = tmp_path / "glue"
  test_run_classifier.mrpc_folder(glue / "MRPC")
  env = {"BERT_BASE_DIR": str(google_folder(tmp_path / "google")),
         "GLUE_DIR": str(glue)}
  work = tmp_path / "tmp"
  work.mkdir()
  result = quickstarts.run_with_relay(
      quickstarts.script(fine_tune, str(work)), env)
  assert result.returncode == 0, result.stderr[-3000:]
  values = results(result.stdout)
  assert set(values) == CLASSIFIER_KEYS, result.stdout
  # 256 training pairs, batch 32, 3 epochs: the original's
  # int(examples / batch * epochs) steps.
  assert values["global_step"] == 24
  assert 0.0 <= values["eval_accuracy"] <= 1.0

  serve = found["quickstart-serving"].blocks
  result = quickstarts.run_with_relay(quickstarts.script(serve, str(work)),
                                      env)
  assert result.returncode == 0, result.stderr[-3000:]
  match = re.fullmatch(r"\[b'([01])'\] \[\[\s*(\S+)\s+(\S+)\s*\]\]\n",
                       result.stdout)
  assert match, result.stdout
  probabilities = np.array([float(match.group(2)), float(match.group(3))])
  np.testing.assert_allclose(probabilities.sum(), 1.0, atol=1e-5)
  assert int(match.group(1)) == int(np.argmax(probabilities))


@pytest.mark.slow
def test_the_minilm_conversion_block_writes_a_google_folder(tmp_path):
  [convert] = [block for block in
               quickstarts.quickstarts()["quickstart-mrpc"].blocks
               if "convert_checkpoint.py" in block]
  result = quickstarts.run_with_relay(
      quickstarts.script([convert, 'echo "BERT_BASE_DIR=$BERT_BASE_DIR"'],
                         str(tmp_path)), {})
  assert result.returncode == 0, result.stderr[-3000:]
  folder = tmp_path / "minilm_google"
  assert "BERT_BASE_DIR=%s\n" % folder in result.stdout
  config = json.loads((folder / "bert_config.json").read_text())
  # all-MiniLM-L6-v2: 6 layers, H=384, BERT's uncased vocab.
  assert (config["num_hidden_layers"], config["hidden_size"],
          config["vocab_size"]) == (6, 384, 30522)
  assert (folder / "bert_model.ckpt.index").exists()
  assert len((folder / "vocab.txt").read_text().splitlines()) == 30522


@pytest.mark.slow
def test_pre_train_from_a_corpus(tmp_path):
  blocks = quickstarts.quickstarts()["quickstart-pretrain"].blocks
  script = quickstarts.script(
      blocks, str(tmp_path),
      replacements=[("--num_train_steps=1000", "--num_train_steps=20"),
                    ("--num_warmup_steps=100", "--num_warmup_steps=2")])
  result = quickstarts.run_with_relay(script, {})
  assert result.returncode == 0, result.stderr[-3000:]
  values = results(result.stdout)
  assert set(values) == PRETRAINING_KEYS, result.stdout
  assert values["global_step"] == 20
  config = json.loads((tmp_path / "pretrain" / "bert_config.json")
                      .read_text())
  vocab = (tmp_path / "pretrain" / "vocab.txt").read_text().splitlines()
  assert config["vocab_size"] == len(vocab)
  assert (tmp_path / "pretrain" / "output" / "model.ckpt-20.index").exists()
