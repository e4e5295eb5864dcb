"""run_squad.py end to end: predictions from an original-layout checkpoint
equal an independent pipeline's; training and prediction on the real SQuAD
subsets; the v2.0 threshold it reports; bad input."""

import collections
import json
import os
import subprocess

import numpy as np
import pytest
import tensorflow as tf

import modeling
from tests import conftest
from tests import reference
from tests.conftest import read_results
from tests.conftest import run_script

# End-to-end script runs: left out of make test-fast.
pytestmark = pytest.mark.slow

WORDS = ["the", "man", "went", "to", "store", "and", "bought", "a", "gallon",
         "of", "milk", "dog", "sat", "on", "mat", "what", "did", "he", "buy",
         "where", "who", "?", ".", ",", "red", "big"]
VOCAB = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + WORDS
CONFIG = dict(vocab_size=len(VOCAB), hidden_size=32, num_hidden_layers=2,
              num_attention_heads=2, intermediate_size=64,
              max_position_embeddings=64, type_vocab_size=2)
RawResult = collections.namedtuple("RawResult",
                                   ["unique_id", "start_logits", "end_logits"])
CONTEXTS = [
    "The man went to the store, and he bought a gallon of milk. The big dog "
    "sat on the red mat. The man went to the mat.",
    "A dog sat on a mat.",
]
QUESTIONS = [(0, "q1", "What did he buy?"), (0, "q2", "Where did the dog sit?"),
             (0, "q3", "Who went to the store?"), (1, "q4", "Who sat?")]


def small_squad(directory, contexts=CONTEXTS, questions=QUESTIONS,
                config=CONFIG):
  """A vocab, config and predict file (by default of two paragraphs, four
  questions)."""
  directory.mkdir(parents=True, exist_ok=True)
  paragraphs = [{"context": c, "qas": []} for c in contexts]
  for paragraph, qid, question in questions:
    paragraphs[paragraph]["qas"].append({"id": qid, "question": question})
  (directory / "predict.json").write_text(json.dumps(
      {"version": "x", "data": [{"title": "t", "paragraphs": paragraphs}]}))
  (directory / "vocab.txt").write_text("\n".join(VOCAB) + "\n")
  (directory / "bert_config.json").write_text(
      modeling.BertConfig(**config).to_json_string())
  return directory


def run(args):
  return run_script("run_squad.py", args, timeout=900)


def read_json(path):
  with open(path) as f:
    return json.load(f)


# A context of 165 pieces: several windows even at max_seq_length 128.
LONG_CONTEXT = " ".join([CONTEXTS[0]] * 5)


@pytest.mark.parametrize("max_seq_length,doc_stride,max_query_length", [
    (24, 6, 8),
    # The command line: a stride (64) wider than the window of a
    # question of max_query_length pieces (128 - 64 - 3 = 61). The original
    # runs it (windows abut; a warning here says so).
    (128, 64, 64),
])
def test_predictions_equal_an_independent_pipeline(
    tmp_path, max_seq_length, doc_stride, max_query_length):
  """An original-layout fine-tuned checkpoint (cls/squad/*) predicts here
  what tf-models-official's squad_lib (its tokenizer, features and
  post-processing) makes of logits from the NumPy BERT."""
  from official.nlp.data import squad_lib  # pylint: disable=g-import-not-at-top
  from official.nlp.tools import tokenization as mg_tokenization  # pylint: disable=g-import-not-at-top
  config = dict(CONFIG, max_position_embeddings=128)
  data = small_squad(tmp_path / "data", CONTEXTS + [LONG_CONTEXT],
                     QUESTIONS + [(2, "q5", "What did the man buy?")],
                     config)
  config = modeling.BertConfig(**config)
  weights = reference.random_weights(config, seed=3, heads=False)
  rng = np.random.RandomState(4)
  weights["cls/squad/output_weights"] = rng.randn(2, 32).astype(np.float32)
  weights["cls/squad/output_bias"] = np.array([0.1, -0.2], np.float32)
  prefix = reference.write_tf1_checkpoint(
      str(tmp_path / "finetuned" / "model.ckpt-5000"), weights)
  args = {"vocab_file": data / "vocab.txt",
          "bert_config_file": data / "bert_config.json",
          "init_checkpoint": prefix, "do_predict": "true",
          "predict_file": data / "predict.json",
          "max_seq_length": max_seq_length, "doc_stride": doc_stride,
          "max_query_length": max_query_length, "predict_batch_size": 4,
          "version_2_with_negative": "true", "output_dir": tmp_path / "out"}
  result = run(args)
  assert result.returncode == 0, result.stderr[-3000:]
  window = max_seq_length - max_query_length - 3
  assert (("--doc_stride=%d is not below the context window" % doc_stride)
          in result.stderr) == (doc_stride >= window)

  tokenizer = mg_tokenization.FullTokenizer(str(data / "vocab.txt"), True)
  examples = squad_lib.read_squad_examples(str(data / "predict.json"), False,
                                           True)
  features = []
  squad_lib.convert_examples_to_features(
      examples, tokenizer, max_seq_length, doc_stride, max_query_length,
      False, lambda feature, is_padding: features.append(feature),
      batch_size=1)
  assert len(features) > len(examples)  # the long context has windows
  raw = []
  for f in features:
    sequence = reference.np_bert(
        weights, config, np.array([f.input_ids]), np.array([f.input_mask]),
        np.array([f.segment_ids]))["sequence_output"][0]
    logits = (sequence @ weights["cls/squad/output_weights"].T +
              weights["cls/squad/output_bias"])
    raw.append(RawResult(f.unique_id, logits[:, 0].tolist(),
                         logits[:, 1].tolist()))
  answers, nbest, null_odds = squad_lib.postprocess_output(
      examples, features, raw, 20, 30, True, True, 0.0)

  out = tmp_path / "out"
  assert read_json(out / "predictions.json") == answers
  got_odds = read_json(out / "null_odds.json")
  assert list(got_odds) == list(null_odds)
  np.testing.assert_allclose(list(got_odds.values()),
                             list(null_odds.values()), atol=1e-4)
  got_nbest = read_json(out / "nbest_predictions.json")
  assert list(got_nbest) == ["q1", "q2", "q3", "q4", "q5"]
  for qid, entries in nbest.items():
    assert [e["text"] for e in got_nbest[qid]] == [e["text"] for e in entries]
    for got, want in zip(got_nbest[qid], entries):
      assert list(got) == ["text", "probability", "start_logit", "end_logit"]
      for key in ("probability", "start_logit", "end_logit"):
        assert abs(got[key] - want[key]) < 1e-4, (qid, key)
  # No answers in the file: nothing to score.
  assert not (out / "eval_results.txt").exists()
  assert sorted(os.listdir(out)) == [
      "eval.tf_record", "nbest_predictions.json", "null_odds.json",
      "predictions.json"]


def test_trains_and_predicts_on_real_squad(shared_data, tmp_path):
  squad = os.path.join(shared_data, "squad")
  config = dict(CONFIG, vocab_size=30522, max_position_embeddings=128)
  (tmp_path / "bert_config.json").write_text(
      modeling.BertConfig(**config).to_json_string())
  out = tmp_path / "out"
  result = run({
      "vocab_file": os.path.join(shared_data, "vocab", "uncased_vocab.txt"),
      "bert_config_file": tmp_path / "bert_config.json",
      "do_train": "True", "do_predict": "True",
      "train_file": os.path.join(
          squad, "train-v1.1.subset-University_of_Notre_Dame.json"),
      "predict_file": os.path.join(squad,
                                   "dev-v1.1.subset-Super_Bowl_50.json"),
      "train_batch_size": 16, "learning_rate": "1e-3",
      "num_train_epochs": "2.0", "max_seq_length": 128, "doc_stride": 64,
      "max_query_length": 32, "predict_batch_size": 64, "output_dir": out})
  assert result.returncode == 0, result.stderr[-3000:]
  # 269 questions, batch 16, 2 epochs: int(269 / 16 * 2) = 33 steps; the
  # loss falls from ln(128) = 4.85 (uniform positions).
  assert "Num orig examples = 269" in result.stderr
  losses = [float(line.split(" loss ")[1].split()[0])
            for line in result.stderr.splitlines() if "step 33/33" in line]
  assert losses and losses[-1] < 4.4, losses
  reader = tf.train.load_checkpoint(str(out / "model.ckpt-33"))
  shapes = reader.get_variable_to_shape_map()
  assert shapes["cls/squad/output_weights"] == [2, 32]
  assert shapes["cls/squad/output_bias"] == [2]

  dev = read_json(os.path.join(squad, "dev-v1.1.subset-Super_Bowl_50.json"))
  ids = [qa["id"] for article in dev["data"]
         for paragraph in article["paragraphs"] for qa in paragraph["qas"]]
  predictions = read_json(out / "predictions.json")
  assert list(predictions) == ids and len(ids) == 810
  assert all(isinstance(text, str) and text for text in predictions.values())
  nbest = read_json(out / "nbest_predictions.json")
  assert list(nbest) == ids
  for qid, entries in nbest.items():
    assert 1 <= len(entries) <= 20
    assert entries[0]["text"] == predictions[qid]
    assert abs(sum(e["probability"] for e in entries) - 1.0) < 1e-6
    scores = [e["start_logit"] + e["end_logit"] for e in entries]
    assert scores == sorted(scores, reverse=True)
  assert not (out / "null_odds.json").exists()
  results = read_results(out / "eval_results.txt")
  assert set(results) == {"exact_match", "f1", "global_step"}
  assert 0 <= results["exact_match"] <= results["f1"] <= 100


def test_squad2_threshold_reported_is_the_one_to_use(shared_data, tmp_path):
  """The best_f1_thresh in eval_results.txt, passed back as
  --null_score_diff_threshold, gives predictions scoring best_f1.

  An untrained model on two real articles: answering nothing scores best
  (the share of unanswerable questions), so this checks the wiring and the
  all-null case; test_squad_evaluation checks a threshold inside the odds
  by hand."""
  data = small_squad(tmp_path / "data")
  # Normans and Sky (United Kingdom): 418 questions, 214 unanswerable.
  with open(os.path.join(shared_data, "squad",
                         "dev-v2.0.subset-first5articles.json")) as f:
    dev = json.load(f)
  dev["data"] = [dev["data"][0], dev["data"][3]]
  (tmp_path / "dev.json").write_text(json.dumps(dev))
  questions = [qa for article in dev["data"]
               for paragraph in article["paragraphs"]
               for qa in paragraph["qas"]]
  unanswerable = sum(qa["is_impossible"] for qa in questions)
  config = dict(CONFIG, vocab_size=30522, max_position_embeddings=128)
  (data / "bert_config.json").write_text(
      modeling.BertConfig(**config).to_json_string())
  weights = reference.random_weights(modeling.BertConfig(**config), seed=5,
                                     heads=False, scale=0.05)
  weights["cls/squad/output_weights"] = np.random.RandomState(6).randn(
      2, 32).astype(np.float32)
  weights["cls/squad/output_bias"] = np.zeros(2, np.float32)
  prefix = reference.write_tf1_checkpoint(str(tmp_path / "ckpt" / "model"),
                                          weights)
  args = {"vocab_file": os.path.join(shared_data, "vocab",
                                     "uncased_vocab.txt"),
          "bert_config_file": data / "bert_config.json",
          "init_checkpoint": prefix, "do_predict": "true",
          "predict_file": tmp_path / "dev.json",
          "max_seq_length": 128, "doc_stride": 64, "max_query_length": 32,
          "predict_batch_size": 64, "version_2_with_negative": "true",
          "output_dir": tmp_path / "a"}
  result = run(args)
  assert result.returncode == 0, result.stderr[-3000:]
  first = read_results(tmp_path / "a" / "eval_results.txt")
  assert set(first) == {
      "exact", "f1", "total", "HasAns_exact", "HasAns_f1", "HasAns_total",
      "NoAns_exact", "NoAns_f1", "NoAns_total", "best_exact",
      "best_exact_thresh", "best_f1", "best_f1_thresh", "global_step"}
  assert (first["total"], first["HasAns_total"], first["NoAns_total"]) == (
      len(questions), len(questions) - unanswerable, unanswerable) == (
          418, 204, 214)
  assert first["best_f1"] >= first["f1"]
  odds = read_json(tmp_path / "a" / "null_odds.json")
  assert len(odds) == len(questions)
  threshold = first["best_f1_thresh"]
  # The default threshold 0 answers "" exactly where the odds exceed it.
  answers = read_json(tmp_path / "a" / "predictions.json")
  assert all((answers[q] == "") == (odds[q] > 0.0) for q in odds)

  # Read back by docs/fine-tuning.md's own command.
  with open(os.path.join(conftest.REPO_ROOT, "docs", "fine-tuning.md")) as f:
    [line] = [line for line in f if line.startswith("THRESH=$(")]
  read = subprocess.run(
      ["bash", "-c", line.replace("/tmp/squad2_base/", "%s/a/" % tmp_path) +
       'printf %s "$THRESH"'], capture_output=True, text=True, timeout=60)
  assert float(read.stdout) == threshold, (read.stdout, read.stderr)
  result = run(dict(args, null_score_diff_threshold=read.stdout,
                    output_dir=tmp_path / "b"))
  assert result.returncode == 0, result.stderr[-3000:]
  second = read_results(tmp_path / "b" / "eval_results.txt")
  assert abs(second["f1"] - first["best_f1"]) < 1e-9, (first, second)
  assert first["best_f1"] == 100.0 * unanswerable / len(questions)
  answers = read_json(tmp_path / "b" / "predictions.json")
  assert all((answers[q] == "") == (odds[q] > threshold) for q in odds)


def test_bad_input_is_named_and_leaves_nothing(tmp_path):
  data = small_squad(tmp_path / "data")
  base = {"vocab_file": data / "vocab.txt",
          "bert_config_file": data / "bert_config.json", "do_predict": "true",
          "predict_file": data / "predict.json", "max_seq_length": 24,
          "max_query_length": 8, "doc_stride": 6,
          "output_dir": tmp_path / "out"}
  (data / "bad.json").write_text(json.dumps(
      {"data": [{"paragraphs": [{"context": "a", "qas": [{"id": "x"}]}]}]}))
  for overrides, message in [
      ({"predict_file": data / "bad.json"},
       "bad.json: data[0].paragraphs[0].qas[0] has no 'question'"),
      ({"max_query_length": 21},
       "The max_seq_length (24) must be greater than max_query_length (21)"),
      ({"max_seq_length": 100}, "--max_seq_length=100 exceeds "
                                "max_position_embeddings=64"),
  ]:
    result = run(dict(base, **overrides))
    assert result.returncode == 1, result.stderr[-2000:]
    assert message in result.stderr
    assert "Traceback" not in result.stderr
    assert not (tmp_path / "out").exists()


def test_squad2_training_records(tmp_path):
  """Training with --version_2_with_negative: the train.tf_record windows
  of an impossible question point at [CLS] and are marked; answerable
  ones decode to their answer where the window holds it."""
  data = small_squad(tmp_path / "data")
  qas = [[{"id": "buy", "question": "What did he buy?",
           "answers": [{"text": "a gallon of milk",
                        "answer_start": CONTEXTS[0].index("a gallon")}],
           "is_impossible": False},
          {"id": "none", "question": "What did the dog buy?", "answers": [],
           "is_impossible": True}],
         [{"id": "sat", "question": "Who sat?",
           "answers": [{"text": "dog", "answer_start": 2}],
           "is_impossible": False}]]
  (data / "train.json").write_text(json.dumps({"data": [{"paragraphs": [
      {"context": c, "qas": q} for c, q in zip(CONTEXTS, qas)]}]}))
  result = run({"vocab_file": data / "vocab.txt",
                "bert_config_file": data / "bert_config.json",
                "do_train": "true", "train_file": data / "train.json",
                "version_2_with_negative": "true", "max_seq_length": 24,
                "doc_stride": 6, "max_query_length": 8,
                "train_batch_size": 2, "num_train_epochs": "2",
                "output_dir": tmp_path / "out"})
  assert result.returncode == 0, result.stderr[-3000:]
  assert (tmp_path / "out" / "model.ckpt-3.index").exists()  # int(3/2*2)
  answers = {}
  for record in tf.data.TFRecordDataset(str(tmp_path / "out" /
                                            "train.tf_record")):
    feature = tf.train.Example.FromString(record.numpy()).features.feature
    value = lambda name: list(feature[name].int64_list.value)
    tokens = [VOCAB[i] for i in value("input_ids")]
    question = " ".join(tokens[1:tokens.index("[SEP]")])
    start, end = value("start_positions")[0], value("end_positions")[0]
    answers.setdefault(question, []).append(
        (value("is_impossible")[0], " ".join(tokens[start:end + 1])))
  assert set(answers["what did the dog buy ?"]) == {(1, "[CLS]")}
  assert len(answers["what did the dog buy ?"]) > 1  # every window of the long context
  assert (0, "a gallon of milk") in answers["what did he buy ?"]
  assert answers["who sat ?"] == [(0, "dog")]
