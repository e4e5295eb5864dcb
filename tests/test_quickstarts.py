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
from tests import test_create_pretraining_data as cpd
from tests import test_run_classifier
from tests.test_gradient_checkpointing import squad_training_file

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


@pytest.mark.slow
def test_own_bert_end_to_end_as_docs_pre_training_has_it(tmp_path):
  """docs/pre-training.md's journey as written: vocab, records, config,
  pre-training, fine-tuning MRPC and SQuAD from the new checkpoint with
  its own vocab and config, export and a query. Tiny: a corpus of made-up
  documents (with the fine-tuning sets' sentences, so the vocab has their
  words), a 2-layer config of H=32, 2 pre-training steps, a quarter epoch
  of 256 MRPC pairs."""
  [block] = quickstarts.section_blocks("docs/pre-training.md",
                                       "Your own BERT, end to end")
  corpus = tmp_path / "corpus"
  corpus.mkdir()
  cpd.synthetic_corpus(corpus / "made_up.txt", 60)
  glue = tmp_path / "glue"
  test_run_classifier.mrpc_folder(glue / "MRPC")
  squad = tmp_path / "squad"
  squad.mkdir()
  squad_training_file(squad / "train-v1.1.json")
  squad_training_file(squad / "dev-v1.1.json")
  context = json.loads((squad / "train-v1.1.json").read_text())["data"][0][
      "paragraphs"][0]["context"]
  pairs = [line.split("\t")[3:5] for line in
           (glue / "MRPC" / "train.tsv").read_text().splitlines()[1:]]
  (corpus / "tasks.txt").write_text(
      "\n\n".join("%s\n%s" % tuple(pair) for pair in pairs) +
      "\n\n" + context.replace(". ", ".\n") + "\n")
  script = quickstarts.script([block], str(tmp_path), replacements=[
      ("--vocab_size=30522", "--vocab_size=400"),
      ('"hidden_size": 768', '"hidden_size": 32'),
      ('"intermediate_size": 3072', '"intermediate_size": 64'),
      ('"num_attention_heads": 12', '"num_attention_heads": 2'),
      ('"num_hidden_layers": 12', '"num_hidden_layers": 2'),
      ("--num_train_steps=100000", "--num_train_steps=2"),
      ("--num_warmup_steps=10000", "--num_warmup_steps=1"),
      ("--num_train_epochs=3.0", "--num_train_epochs=0.25")])
  result = quickstarts.run_with_relay(script, {
      "CORPUS_DIR": str(corpus), "GLUE_DIR": str(glue),
      "SQUAD_DIR": str(squad)})
  assert result.returncode == 0, result.stderr[-3000:]
  work = tmp_path / "my_bert"
  vocab = (work / "vocab.txt").read_text().splitlines()
  config = json.loads((work / "bert_config.json").read_text())
  assert config["vocab_size"] == len(vocab) > 100
  assert "yes" in vocab and "milk" in vocab
  assert (work / "pretraining" / "model.ckpt-2.index").exists()
  # MRPC and SQuAD started from the new weights.
  assert result.stderr.count(" variables from %s " % (
      work / "pretraining" / "model.ckpt-2")) == 2, result.stderr[-3000:]
  # 256 pairs, batch 32, a quarter epoch: 2 steps.
  assert results((work / "mrpc" / "eval_results.txt").read_text())[
      "global_step"] == 2
  predictions = json.loads((work / "squad" / "predictions.json").read_text())
  assert sorted(predictions) == sorted("q%d" % i for i in range(12))
  # learn_vocab.py's size line, then the query's label and probabilities.
  assert "vocab_size = %d" % len(vocab) in result.stdout
  assert re.fullmatch(r"\[b'[01]'\] \[\[\s*\S+\s+\S+\s*\]\]",
                      result.stdout.splitlines()[-1]), result.stdout
