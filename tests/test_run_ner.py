"""run_ner.py end to end: tags as the NumPy reference BERT does from an
original-layout checkpoint (long sentences split), learns real CoNLL-2003
sentences fine-tuned and feature-based, reports bad input."""

import os

import numpy as np
import pytest
import tensorflow as tf

import modeling
from runner_lib.ner import data
from tests import reference
from tests import test_export_saved_model
from tests.conftest import read_results
from tests.conftest import run_script

# End-to-end script runs: left out of make test-fast.
pytestmark = pytest.mark.slow

WORDS = ["eu", "rejects", "german", "call", "to", "british", "lamb", "peter",
         "black", "##burn", "boy", "##cott", "."]
VOCAB = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + WORDS
CONFIG = dict(vocab_size=len(VOCAB), hidden_size=32, num_hidden_layers=2,
              num_attention_heads=2, intermediate_size=64,
              max_position_embeddings=64, type_vocab_size=2)
# Each word's pieces in VOCAB.
PIECES = {"EU": ["eu"], "rejects": ["rejects"], "German": ["german"],
          "call": ["call"], "to": ["to"], "British": ["british"],
          "lamb": ["lamb"], "Peter": ["peter"],
          "Blackburn": ["black", "##burn"], "boycott": ["boy", "##cott"],
          ".": ["."]}


def conll_text(sentences):
  """CoNLL-2003 lines (word POS chunk tag), IOB1 as the release has it."""
  lines = ["-DOCSTART- -X- O O", ""]
  for words, tags in sentences:
    lines += ["%s NN I-NP %s" % pair for pair in zip(words, tags)] + [""]
  return "\n".join(lines) + "\n"


def random_sentences(count, seed):
  rng = np.random.RandomState(seed)
  words = sorted(PIECES)
  sentences = []
  for _ in range(count):
    chosen = list(rng.choice(words, rng.randint(1, 14)))
    tags = [["O", "I-PER", "I-ORG", "I-LOC", "I-MISC"][rng.randint(5)]
            for _ in chosen]
    sentences.append((chosen, tags))
  return sentences


def folder(tmp_path, test_sentences):
  directory = tmp_path / "conll"
  directory.mkdir()
  (directory / "test.txt").write_text(conll_text(test_sentences))
  (tmp_path / "vocab.txt").write_text("\n".join(VOCAB) + "\n")
  (tmp_path / "bert_config.json").write_text(
      modeling.BertConfig(**CONFIG).to_json_string())
  return directory


def base_args(data_dir, output_dir, **overrides):
  args = {"data_dir": str(data_dir),
          "vocab_file": str(data_dir.parent / "vocab.txt"),
          "bert_config_file": str(data_dir.parent / "bert_config.json"),
          "output_dir": str(output_dir), "max_seq_length": "10",
          "predict_batch_size": "4", "strategy": "default"}
  args.update(overrides)
  return args


def reference_chunks(words, max_pieces):
  """Greedy runs of whole words of at most max_pieces pieces."""
  chunks, current, length = [], [], 0
  for word in words:
    if current and length + len(PIECES[word]) > max_pieces:
      chunks.append(current)
      current, length = [], 0
    current.append(word)
    length += len(PIECES[word])
  return chunks + [current]


def test_tags_from_a_checkpoint_in_the_original_layout(tmp_path):
  sentences = random_sentences(9, seed=1)
  data_dir = folder(tmp_path, sentences)
  config = modeling.BertConfig(**CONFIG)
  weights = reference.random_weights(config, seed=4, heads=False)
  rng = np.random.RandomState(3)
  weights["cls/ner/output_weights"] = rng.randn(9, 32).astype(np.float32)
  weights["cls/ner/output_bias"] = (0.1 * rng.randn(9)).astype(np.float32)
  prefix = reference.write_tf1_checkpoint(
      str(tmp_path / "finetuned" / "model.ckpt-50"), weights)
  result = run_script("run_ner.py", base_args(
      data_dir, tmp_path / "out", init_checkpoint=prefix, do_predict="true"))
  assert result.returncode == 0, result.stderr[-3000:]
  lines = (tmp_path / "out" / "test_predictions.txt").read_text().split(
      "\n\n")[:-1]
  assert len(lines) == len(sentences)
  vocab = {t: i for i, t in enumerate(VOCAB)}
  split = 0
  for (words, tags), block in zip(sentences, lines):
    rows = [line.split(" ") for line in block.split("\n")]
    assert [r[0] for r in rows] == words
    assert [r[1] for r in rows] == data.iob1_to_iob2(tags)
    # Each run of at most 8 pieces through the NumPy BERT; the tag at
    # each word's first piece.
    want = []
    chunks = reference_chunks(words, 8)
    split += len(chunks) > 1
    for chunk in chunks:
      pieces = ["[CLS]"] + [p for w in chunk for p in PIECES[w]] + ["[SEP]"]
      ids = np.array([[vocab[p] for p in pieces]])
      sequence = reference.np_bert(weights, config, ids, np.ones_like(ids),
                                   np.zeros_like(ids))["sequence_output"][0]
      logits = (sequence @ weights["cls/ner/output_weights"].T +
                weights["cls/ner/output_bias"])
      position = 1
      for word in chunk:
        want.append(data.LABELS[int(logits[position].argmax())])
        position += len(PIECES[word])
    assert [r[2] for r in rows] == want
  assert split >= 2  # Long sentences were split and still fully tagged.


def real_folder(shared_data, tmp_path, train, dev):
  """The first sentences of the real train and dev files, as written."""
  directory = tmp_path / "conll"
  directory.mkdir()
  for name, target, count in (("eng.train", "train.txt", train),
                              ("eng.testa", "dev.txt", dev)):
    with open(os.path.join(shared_data, "conll2003", name)) as f:
      blocks = f.read().split("\n\n")
    (directory / target).write_text("\n\n".join(blocks[:count + 1]) + "\n\n")
  return directory


def test_learns_real_sentences_fine_tuned_then_feature_based(shared_data,
                                                             tmp_path):
  data_dir = real_folder(shared_data, tmp_path, 600, 150)
  config = modeling.BertConfig(**dict(CONFIG, vocab_size=30522,
                                      hidden_size=64, intermediate_size=128))
  (tmp_path / "bert_config.json").write_text(config.to_json_string())
  prefix = reference.write_tf1_checkpoint(
      str(tmp_path / "pretrained" / "bert_model.ckpt"),
      reference.random_weights(config, seed=2, scale=0.05))
  common = dict(vocab_file=os.path.join(shared_data, "vocab",
                                        "uncased_vocab.txt"),
                max_seq_length="48", train_batch_size="16",
                eval_batch_size="32", iterations_per_loop="100",
                do_train="true", do_eval="true")
  # 8 epochs at 6e-4 (not 15 at 3e-4): half the steps, and an F1 near
  # 0.38, as at 5e-4 (0.33) and 7e-4 (0.38); from 1e-3 it tags all O.
  result = run_script("run_ner.py", base_args(
      data_dir, tmp_path / "tuned", init_checkpoint=prefix,
      learning_rate="6e-4", num_train_epochs="8", **common))
  assert result.returncode == 0, result.stderr[-3000:]
  tuned = read_results(tmp_path / "tuned" / "eval_results.txt")
  # Tagging everything O scores 0 entity F1.
  assert tuned["eval_f1"] > 0.25, tuned
  assert set(tuned) == {"eval_precision", "eval_recall", "eval_f1",
                        "eval_f1_PER", "eval_f1_ORG", "eval_f1_LOC",
                        "eval_f1_MISC", "eval_loss", "global_step"}
  dev_lines = (tmp_path / "tuned" / "eval_predictions.txt").read_text()
  dev_blocks = (data_dir / "dev.txt").read_text().split("\n\n")
  assert dev_lines.count("\n\n") == sum(
      1 for b in dev_blocks if b.strip() and not b.startswith("-DOCSTART-"))

  # The feature-based tagger on the fine-tuned BERT, frozen.
  result = run_script("run_ner.py", base_args(
      data_dir, tmp_path / "features", feature_based="true",
      init_checkpoint=str(tmp_path / "tuned"), lstm_units="32",
      feature_layers="-1,-2", learning_rate="3e-3", num_train_epochs="2",
      **common))
  assert result.returncode == 0, result.stderr[-3000:]
  frozen = read_results(tmp_path / "features" / "eval_results.txt")
  assert frozen["eval_f1"] > 0.1, frozen
  # BERT did not move; the tagger's variables are saved under its scope.
  before = tf.train.load_checkpoint(str(tmp_path / "tuned"))
  after = tf.train.load_checkpoint(str(tmp_path / "features"))
  for name in ("bert/embeddings/word_embeddings",
               "bert/encoder/layer_1/output/dense/kernel"):
    np.testing.assert_array_equal(before.get_tensor(name),
                                  after.get_tensor(name))
  shapes = after.get_variable_to_shape_map()
  # Two layers of H=64 concatenated in, 4 gates of 32 units out.
  assert shapes["cls/ner_features/lstm_0/forward/kernel"] == [128, 128]
  assert shapes["cls/ner_features/output_weights"] == [9, 64]
  assert "cls/ner_features/layer_weights" not in shapes

  # Its SavedModel tags raw dev sentences as run_ner.py did.
  result = run_script("export_saved_model.py", dict(
      task="ner", feature_based="true", feature_layers="-1,-2",
      lstm_units="32", vocab_file=common["vocab_file"],
      bert_config_file=str(tmp_path / "bert_config.json"),
      init_checkpoint=str(tmp_path / "features"), max_seq_length="48",
      export_dir=str(tmp_path / "export")))
  assert result.returncode == 0, result.stderr[-3000:]
  rows = [[line.split(" ") for line in block.split("\n")] for block in
          (tmp_path / "features" / "eval_predictions.txt").read_text()
          .split("\n\n")[:-1]]
  got = test_export_saved_model.load_isolated(tmp_path, {"ner": {
      "path": str(tmp_path / "export"), "signature": "serving_default",
      "inputs": {"text": [" ".join(r[0] for r in sentence)
                          for sentence in rows]}}})["ner"]
  assert len(rows) == dev_lines.count("\n\n") > 100
  for sentence, tags in zip(rows, got["tags"]):
    assert tags[:len(sentence)] == [r[2] for r in sentence]


@pytest.mark.parametrize("case,message", [
    ("tag", "train.txt, line 5: tag 'B-PR' is not one of O, B-PER"),
    ("column", "train.txt, line 3: one column ('EU');"),
    ("empty", "train.txt holds no sentences."),
    ("layers", "--feature_layers=-3: Layer -3 does not exist"),
])
def test_bad_input_is_one_line_and_writes_nothing(tmp_path, case, message):
  data_dir = folder(tmp_path, random_sentences(3, seed=0))
  text = {"tag": "-DOCSTART- -X- O O\n\nEU NN I-NP I-ORG\n\nhe NN I-NP I-PR\n",
          "column": "-DOCSTART- -X- O O\n\nEU\n",
          "empty": "",
          "layers": conll_text(random_sentences(3, seed=0))}[case]
  (data_dir / "train.txt").write_text(text)
  (data_dir / "dev.txt").write_text(conll_text(random_sentences(3, seed=1)))
  extra = {"feature_based": "true", "feature_layers": "-3"} if (
      case == "layers") else {}
  result = run_script("run_ner.py", base_args(
      data_dir, tmp_path / "out", do_train="true", do_eval="true", **extra))
  assert result.returncode == 1, result.stderr[-3000:]
  assert message in result.stderr
  assert "Traceback" not in result.stderr
  assert not (tmp_path / "out").exists()
