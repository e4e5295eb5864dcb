"""export_saved_model.py: each SavedModel, loaded in an isolated Python
(only TensorFlow and TensorFlow Text importable, none of our modules) and
fed raw strings, answers as the runners and BertModel do on real rows."""

import csv
import json
import os
import pathlib
import sys

import numpy as np
import pytest

import modeling
from runner_lib.core.inputs import packing
import tokenization
from tests import conftest
from tests import reference
from tests.conftest import HUB_SEQ
from tests.conftest import run_script
from tests.conftest import run_scripts

# End-to-end script runs: left out of make test-fast.
pytestmark = pytest.mark.slow

CONFIG = dict(vocab_size=30522, hidden_size=32, num_hidden_layers=2,
              num_attention_heads=2, intermediate_size=64,
              max_position_embeddings=64, type_vocab_size=2)
SEQ = 48

# Runs in `python -I` from a directory outside the repo: it can import
# TensorFlow and TensorFlow Text, not this project.
LOADER = r"""
import json, sys
import numpy as np
import tensorflow as tf
import tensorflow_text  # noqa: registers the ops
try:
  import modeling
  isolated = False
except ImportError:
  isolated = True
with open(sys.argv[1]) as f:
  request = json.load(f)
results = {"isolated": isolated}
models = {}  # Each SavedModel loaded once, whichever signatures are called.
for name, call in request.items():
  if call["path"] not in models:
    models[call["path"]] = tf.saved_model.load(call["path"])
  loaded = models[call["path"]]
  inputs = {key: tf.constant(value if key != "examples" else
                             [bytes.fromhex(v) for v in value])
            for key, value in call["inputs"].items()}
  if call["signature"] == "bert_pack_inputs":  # TF Hub's two steps
    outputs = loaded.bert_pack_inputs(
        [loaded.tokenize(inputs["text_a"]), loaded.tokenize(inputs["text_b"])],
        seq_length=call["seq_length"])
  else:
    outputs = loaded.signatures[call["signature"]](**inputs)
  results[name] = {
      key: (np.vectorize(lambda b: b.decode("utf-8"), otypes=[object])(
          value.numpy()).tolist() if value.dtype == tf.string else
            value.numpy().tolist())
      for key, value in outputs.items()}
  results[name + ":dtypes"] = {key: value.dtype.name
                               for key, value in outputs.items()}
with open(sys.argv[2], "w") as f:
  json.dump(results, f)
"""


def load_isolated(tmp_path, request):
  """Calls SavedModel signatures in a fresh, isolated Python.

  Args:
    request: dict name -> {"path", "signature", "inputs": dict of lists}.

  Returns:
    dict name -> dict of outputs as lists.
  """
  work = tmp_path / "isolated"
  work.mkdir(exist_ok=True)
  (work / "loader.py").write_text(LOADER)
  (work / "request.json").write_text(json.dumps(request))
  # `python -I`: a fork of the script server where this session has no
  # PYTHONPATH (the server has imported TensorFlow, none of our modules),
  # else a fresh interpreter.
  env = conftest.script_env()
  env.pop("PYTHONPATH", None)
  result = conftest.run(
      [sys.executable, "-I", "loader.py", "request.json", "outputs.json"],
      env=env, cwd=str(work), timeout=300)
  assert result.returncode == 0, result.stderr[-3000:]
  outputs = json.loads((work / "outputs.json").read_text())
  assert outputs.pop("isolated")
  return outputs


def export_args(tmp_path, task, config_file, vocab_file, checkpoint,
                **flags):
  args = {"task": task, "bert_config_file": str(config_file),
          "vocab_file": str(vocab_file), "init_checkpoint": str(checkpoint),
          "max_seq_length": str(SEQ),
          "export_dir": str(tmp_path / ("export_" + task))}
  args.update(flags)
  return args


def read_probabilities(path):
  with open(path) as f:
    return np.array([[float(p) for p in line.split("\t")] for line in f])


def serialized_example(text_a, text_b):
  """A tf.Example with text_a / text_b bytes features, serialized, hex."""
  import tensorflow as tf  # pylint: disable=g-import-not-at-top

  def feature(text):
    return tf.train.Feature(bytes_list=tf.train.BytesList(
        value=[text.encode("utf-8")]))

  return tf.train.Example(features=tf.train.Features(feature={
      "text_a": feature(text_a), "text_b": feature(text_b)})).SerializeToString(
      ).hex()


def test_exports_equal_the_runners_on_real_rows(shared_data, hub_exports,
                                                tmp_path):
  config = modeling.BertConfig(**CONFIG)
  # Original-layout weights with every task's head.
  config_file, prefix, _ = reference.write_task_checkpoint(tmp_path, config)
  vocab_file = os.path.join(shared_data, "vocab", "uncased_vocab.txt")
  tokenizer = tokenization.FullTokenizer(vocab_file)
  model_flags = {"vocab_file": vocab_file,
                 "bert_config_file": str(config_file),
                 "init_checkpoint": prefix, "max_seq_length": str(SEQ),
                 "do_predict": "true", "strategy": "default"}

  # MRPC: 40 real test rows.
  mrpc = tmp_path / "mrpc"
  mrpc.mkdir()
  with open(os.path.join(shared_data, "glue", "MRPC", "test.tsv")) as f:
    lines = f.read().splitlines()[:41]
  (mrpc / "test.tsv").write_text("\n".join(lines) + "\n")
  mrpc_rows = [line.split("\t") for line in lines[1:]]
  # SWAG: the first 12 real rows as test.csv.
  swag = tmp_path / "swag"
  swag.mkdir()
  with open(os.path.join(shared_data, "swag", "val.subset-first91.csv"),
            newline="") as f:
    swag_rows = list(csv.reader(f))[:13]
  with open(swag / "test.csv", "w", newline="") as f:
    csv.writer(f, lineterminator="\n").writerows(r[:-1] for r in swag_rows)
  swag_rows = swag_rows[1:]
  # NER: real test sentences, some longer than one sequence (both the
  # runner and the SavedModel cut those at words).
  conll = tmp_path / "conll"
  conll.mkdir()
  with open(os.path.join(shared_data, "conll2003", "eng.testb")) as f:
    blocks = [b for b in f.read().split("\n\n")[1:60] if b.strip()]
  (conll / "test.txt").write_text("\n\n".join(blocks) + "\n\n")

  def pieces(block):
    words = [line.split(" ")[0] for line in block.split("\n")]
    return sum(len(tokenizer.tokenize(w)) for w in words)

  assert sum(pieces(b) > SEQ - 2 for b in blocks) >= 2

  results = run_scripts([
      ("run_classifier.py", dict(model_flags, task_name="MRPC",
                                 data_dir=str(mrpc),
                                 output_dir=str(tmp_path / "mrpc_out"))),
      ("run_swag.py", dict(model_flags, data_dir=str(swag),
                           output_dir=str(tmp_path / "swag_out"))),
      ("run_ner.py", dict(model_flags, data_dir=str(conll),
                          output_dir=str(tmp_path / "ner_out"))),
  ] + [("export_saved_model.py",
        export_args(tmp_path, task, config_file, vocab_file, prefix,
                    **({"task_name": "MRPC"} if task == "classifier" else {})))
       for task in ("classifier", "swag", "ner")])
  for result in results:
    assert result.returncode == 0, result.stderr[-3000:]
  paths = {task: str(tmp_path / ("export_" + task))
           for task in ("classifier", "swag", "ner")}
  # The encoder and preprocessor: those test_hub_interface reads, exported
  # once for the session (conftest.hub_exports), at HUB_SEQ.
  paths["preprocessor"], paths["encoder"], hub_config, hub_prefix = (
      hub_exports)
  mrpc_want = read_probabilities(tmp_path / "mrpc_out" / "test_results.tsv")
  swag_want = read_probabilities(tmp_path / "swag_out" / "test_results.tsv")
  ner_rows = [[line.split(" ") for line in block.split("\n")] for block in
              (tmp_path / "ner_out" / "test_predictions.txt").read_text()
              .split("\n\n")[:-1]]
  texts = ["Students lower their eyes nervously.", "He rides the motorcycle."]
  got = load_isolated(tmp_path, {
      "classifier": {"path": paths["classifier"],
                     "signature": "serving_default",
                     "inputs": {"text_a": [r[3] for r in mrpc_rows],
                                "text_b": [r[4] for r in mrpc_rows]}},
      "examples": {"path": paths["classifier"], "signature": "serve_examples",
                   "inputs": {"examples": [serialized_example(
                       mrpc_rows[0][3], mrpc_rows[0][4])]}},
      "swag": {"path": paths["swag"], "signature": "serving_default",
               "inputs": {"context": [r[4] for r in swag_rows],
                          "start": [r[5] for r in swag_rows],
                          "endings": [r[7:11] for r in swag_rows]}},
      "ner": {"path": paths["ner"], "signature": "serving_default",
              "inputs": {"text": [" ".join(r[0] for r in rows)
                                  for rows in ner_rows]}},
      "encoder": {"path": paths["encoder"], "signature": "serving_default",
                  "inputs": {"text_a": texts}},
      "packed": {"path": paths["preprocessor"],
                 "signature": "bert_pack_inputs", "seq_length": 40,
                 "inputs": {"text_a": [r[3] for r in mrpc_rows],
                            "text_b": [r[4] for r in mrpc_rows]}},
      "single": {"path": paths["preprocessor"],
                 "signature": "serving_default",
                 "inputs": {"text": [r[3] for r in mrpc_rows]}}})

  np.testing.assert_allclose(got["classifier"]["probabilities"], mrpc_want,
                             atol=1e-5)
  assert got["classifier"]["label"] == [str(i) for i in
                                        mrpc_want.argmax(-1)]
  np.testing.assert_allclose(got["examples"]["probabilities"], mrpc_want[:1],
                             atol=1e-5)
  np.testing.assert_allclose(got["swag"]["probabilities"], swag_want,
                             atol=1e-5)
  assert got["swag"]["label"] == list(swag_want.argmax(-1))
  for rows, tags, words in zip(ner_rows, got["ner"]["tags"],
                               got["ner"]["words"]):
    n = len(rows)
    assert words[:n] == [r[0] for r in rows]
    assert tags[:n] == [r[2] for r in rows]
    assert set(tags[n:]) <= {""} and set(words[n:]) <= {""}
    assert "" not in tags[:n]
  # The encoder: BertModel on the original tokenization and layout.
  model = modeling.BertModel(hub_config)
  modeling.load_checkpoint(model, hub_prefix)
  for row, text in enumerate(texts):
    _, ids, mask, segments = packing.encode_pair(tokenizer, text, None,
                                                 HUB_SEQ)
    want = model({"input_ids": np.array([ids]), "input_mask": np.array([mask]),
                  "segment_ids": np.array([segments])}, training=False)
    np.testing.assert_allclose(got["encoder"]["pooled_output"][row],
                               want["pooled_output"][0], atol=1e-5)
    np.testing.assert_allclose(got["encoder"]["sequence_output"][row],
                               want["sequence_output"][0], atol=1e-5)
    np.testing.assert_allclose(got["encoder"]["encoder_outputs"][row][0],
                               want["all_encoder_layers"][0][0], atol=1e-5)

  # The TF Hub style preprocessor: the original's layout of each pair (at
  # a length chosen when called) and of single sentences.
  for row, r in enumerate(mrpc_rows):
    _, ids, mask, segments = packing.encode_pair(tokenizer, r[3], r[4], 40)
    assert got["packed"]["input_word_ids"][row] == ids
    assert got["packed"]["input_mask"][row] == mask
    assert got["packed"]["input_type_ids"][row] == segments
    _, ids, _, _ = packing.encode_pair(tokenizer, r[3], None, HUB_SEQ)
    assert got["single"]["input_word_ids"][row] == ids

  # saved_model_cli (its console script's main) lists the documented
  # signatures and runs one.
  cli = ("import sys; from tensorflow.python.tools import saved_model_cli; "
         "sys.argv[0] = 'saved_model_cli'; saved_model_cli.main()")
  shown = conftest.run([sys.executable, "-c", cli, "show", "--dir",
                        paths["classifier"], "--all"], timeout=300)
  assert shown.returncode == 0, shown.stderr[-2000:]
  for text in ("signature_def['serving_default']",
               "signature_def['serve_examples']",
               "inputs['text_a'] tensor_info:\n        dtype: DT_STRING\n"
               "        shape: (-1)",
               "outputs['probabilities'] tensor_info:\n        dtype: "
               "DT_FLOAT\n        shape: (-1, 2)"):
    assert text in shown.stdout
  # `run` executes the graph: TensorFlow Text's ops must be registered
  # first, so the CLI runs behind an import of tensorflow_text.
  ran = conftest.run(
      [sys.executable, "-c", "import tensorflow_text; " + cli, "run",
       "--dir", paths["classifier"],
       "--tag_set", "serve", "--signature_def", "serving_default",
       "--input_exprs",
       "text_a=[%r];text_b=[%r]" % (mrpc_rows[0][3], mrpc_rows[0][4])],
      timeout=300)
  assert ran.returncode == 0, ran.stderr[-2000:]
  assert "probabilities" in ran.stdout


def test_bad_exports_are_one_line_and_leave_nothing(tmp_path):
  config = modeling.BertConfig(**dict(CONFIG, vocab_size=10))
  config_file = tmp_path / "bert_config.json"
  config_file.write_text(config.to_json_string())
  vocab_file = tmp_path / "vocab.txt"
  vocab_file.write_text("[PAD]\n[UNK]\n[CLS]\n[SEP]\nthe\n")
  pretrained = reference.write_tf1_checkpoint(
      str(tmp_path / "pretrained" / "bert_model.ckpt"),
      reference.random_weights(config, seed=1))
  args = export_args(tmp_path, "ner", config_file, vocab_file, pretrained,
                     export_dir=str(tmp_path / "export"))
  result = run_script("export_saved_model.py", args)
  assert result.returncode == 1
  assert "lacks 2 variable(s) of the ner model: cls/ner/output_bias, " \
         "cls/ner/output_weights" in result.stderr
  assert "Traceback" not in result.stderr
  assert not (tmp_path / "export").exists()
  (tmp_path / "export").mkdir()
  (tmp_path / "export" / "keep.txt").write_text("mine")
  result = run_script("export_saved_model.py", dict(args, task="encoder"))
  assert result.returncode == 1
  assert "exists and is not empty; pass --overwrite" in result.stderr
  assert (tmp_path / "export" / "keep.txt").read_text() == "mine"
  assert not [p for p in os.listdir(tmp_path) if ".tmp-" in p]
  result = run_script("export_saved_model.py",
                      dict(args, task="classifier",
                           export_dir=str(tmp_path / "other")))
  assert result.returncode == 1
  assert "--task=classifier needs --task_name." in result.stderr
  assert not (tmp_path / "other").exists()
  # SQuAD's windows must leave room for the context, as run_squad checks.
  result = run_script("export_saved_model.py",
                      dict(args, task="squad", max_query_length="64",
                           export_dir=str(tmp_path / "squad")))
  assert result.returncode == 1
  assert ("The max_seq_length (48) must be greater than max_query_length "
          "(64) + 3") in result.stderr
  assert "Traceback" not in result.stderr
  assert not (tmp_path / "squad").exists()


def squad_rows(path, paragraphs):
  """(questions, contexts, ids) of the given paragraphs of the first
  article, and the file cut to them."""
  with open(path) as f:
    data = json.load(f)
  data["data"] = data["data"][:1]
  kept = data["data"][0]["paragraphs"]
  kept[:] = [kept[i] for i in paragraphs]
  rows = [(qa["question"], p["context"], qa["id"]) for p in kept
          for qa in p["qas"]]
  return [list(column) for column in zip(*rows)], data


def test_squad_export_answers_as_run_squad(shared_data, tmp_path):
  config = modeling.BertConfig(**dict(CONFIG, max_position_embeddings=128))
  config_file = tmp_path / "bert_config.json"
  config_file.write_text(config.to_json_string())
  weights = reference.random_weights(config, seed=6)
  rng = np.random.RandomState(7)
  weights["cls/squad/output_weights"] = rng.randn(2, 32).astype(np.float32)
  weights["cls/squad/output_bias"] = (0.1 * rng.randn(2)).astype(np.float32)
  prefix = reference.write_tf1_checkpoint(
      str(tmp_path / "finetuned" / "model.ckpt-9"), weights)
  vocab_file = os.path.join(shared_data, "vocab", "uncased_vocab.txt")
  # SQuAD 2.0 (its answers go through the v1.1 search too, then the null
  # comparison): contexts of 156, 269, 88, 197, 148 and 62 WordPieces.
  # Windows of at most 96 - 3 - question pieces, 32 apart: most contexts
  # take several windows, some one.
  v2, v2_data = squad_rows(
      os.path.join(shared_data, "squad", "dev-v2.0.subset-first5articles.json"),
      [0, 1, 2, 3, 4, 21])
  (tmp_path / "v2.json").write_text(json.dumps(v2_data))
  tokenizer = tokenization.FullTokenizer(vocab_file)
  questions, contexts, _ = v2
  windows = [len(tokenizer.tokenize(c)) > 96 - 3 - min(
      24, len(tokenizer.tokenize(q))) for q, c in zip(questions, contexts)]
  assert any(windows) and not all(windows)
  common = {"vocab_file": vocab_file, "bert_config_file": str(config_file),
            "init_checkpoint": prefix, "max_seq_length": "96",
            "doc_stride": "32", "max_query_length": "24"}
  # A threshold that answers some SQuAD 2.0 questions with "" and not others
  # (checked below).
  v2_flags = {"version_2_with_negative": "true",
              "null_score_diff_threshold": "-22.8"}
  results = run_scripts([
      ("run_squad.py", dict(common, do_predict="true", **v2_flags,
                            predict_file=str(tmp_path / "v2.json"),
                            output_dir=str(tmp_path / "v2_out"),
                            strategy="default")),
      ("export_saved_model.py", dict(common, task="squad", **v2_flags,
                                     export_dir=str(tmp_path / "v2_export")))])
  for result in results:
    assert result.returncode == 0, result.stderr[-3000:]
  got = load_isolated(tmp_path, {
      version: {"path": str(tmp_path / (version + "_export")),
                "signature": "serving_default",
                "inputs": {"question": rows[0], "context": rows[1]}}
      for version, rows in (("v2", v2),)})

  def read(version, name):
    return json.loads((tmp_path / (version + "_out") / name).read_text())

  partial = 0
  for version, (_, contexts, ids) in (("v2", v2),):
    answers = read(version, "predictions.json")
    nbest = read(version, "nbest_predictions.json")
    out = got[version]
    assert out["answer_text"] == [answers[i] for i in ids]
    for row, qas_id in enumerate(ids):
      text, start = out["answer_text"][row], out["answer_start"][row]
      if not text:
        assert start == -1
        continue
      # The answer is where answer_start says, often part of a word (the
      # WordPieces projected back onto the context's characters).
      context = contexts[row]
      assert context[start:start + len(text)] == text
      end = start + len(text)
      partial += not ((start == 0 or context[start - 1].isspace()) and
                      (end == len(context) or context[end].isspace()))
      best = next(e for e in nbest[qas_id] if e["text"])
      assert out["score"][row] == pytest.approx(
          best["start_logit"] + best["end_logit"], abs=1e-4)
  # Random weights pick spans anywhere: some start or end inside a word
  # (6 of the answers here), where a projection that snapped to whole
  # words would differ.
  assert partial >= 3
  null_odds = read("v2", "null_odds.json")
  v2_answers = read("v2", "predictions.json")
  np.testing.assert_allclose(got["v2"]["null_score_diff"],
                             [null_odds[i] for i in v2[2]], atol=1e-4)
  assert got["v2"]["best_non_null_text"] == [
      next(e["text"] for e in read("v2", "nbest_predictions.json")[i]
           if e["text"]) for i in v2[2]]
  assert 5 <= sum(v2_answers[i] == "" for i in v2[2]) <= len(v2[2]) - 5


def graph_matmul_dtypes(export_dir):
  """The T attribute of every matmul node in a SavedModel's graph and its
  functions, read from saved_model.pb."""
  from tensorflow.core.protobuf import saved_model_pb2  # pylint: disable=g-import-not-at-top
  saved = saved_model_pb2.SavedModel()
  with open(os.path.join(export_dir, "saved_model.pb"), "rb") as f:
    saved.ParseFromString(f.read())
  graph = saved.meta_graphs[0].graph_def
  nodes = list(graph.node) + [n for fn in graph.library.function
                              for n in fn.node_def]
  return [n.attr["T"].type for n in nodes
          if n.op in ("MatMul", "BatchMatMulV2", "BatchMatMulV3")]


def test_bfloat16_export_answers_as_float32_on_real_weights(
    shared_data, minilm_google_dir, tmp_path):
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  google_dir = pathlib.Path(minilm_google_dir)
  config_file, vocab_file = (google_dir / "bert_config.json",
                             google_dir / "vocab.txt")
  config = modeling.BertConfig.from_json_file(str(config_file))
  tokenizer = tokenization.FullTokenizer(str(vocab_file), do_lower_case=True)
  with open(os.path.join(shared_data, "glue", "MRPC", "dev.tsv")) as f:
    rows = [line.split("\t") for line in f.read().splitlines()[1:65]]
  # The float32 reference: BertModel's pooled outputs of the real pairs.
  model = modeling.BertModel(config)
  modeling.load_checkpoint(model, str(google_dir / "bert_model.ckpt"))
  encoded = [packing.encode_pair(tokenizer, r[3], r[4], SEQ)[1:]
             for r in rows]
  pooled = model({key: np.array([e[i] for e in encoded]) for i, key in
                  enumerate(("input_ids", "input_mask", "segment_ids"))},
                 training=False)["pooled_output"].numpy()
  # A classifier head whose margins are as large as a fine-tuned one's,
  # its bias splitting the real pairs between the two labels.
  rng = np.random.RandomState(3)
  head = (rng.randn(2, config.hidden_size) * 0.3).astype(np.float32)
  margin = pooled @ (head[1] - head[0])
  bias = np.array([np.median(margin), 0], np.float32)
  logits = pooled @ head.T + bias
  want = np.exp(logits) / np.exp(logits).sum(-1, keepdims=True)
  assert 20 <= (want.argmax(-1) == 1).sum() <= 44
  weights = {name: tf.train.load_checkpoint(
      str(google_dir / "bert_model.ckpt")).get_tensor(name)
             for name, _ in tf.train.list_variables(
                 str(google_dir / "bert_model.ckpt"))
             if name.startswith("bert/")}
  weights.update(output_weights=head, output_bias=bias)
  prefix = reference.write_tf1_checkpoint(
      str(tmp_path / "finetuned" / "model.ckpt-9"), weights)
  result = run_script("export_saved_model.py", export_args(
      tmp_path, "classifier", config_file, vocab_file, prefix,
      task_name="MRPC", precision="bfloat16"))
  assert result.returncode == 0, result.stderr[-3000:]
  export_dir = str(tmp_path / "export_classifier")
  dtypes = graph_matmul_dtypes(export_dir)
  # Every layer's Q, K, V, output and feed-forward products, its two
  # attention products, the pooler's and the head's: all in bfloat16.
  assert len(dtypes) >= 8 * config.num_hidden_layers + 2
  assert set(dtypes) == {tf.bfloat16.as_datatype_enum}, dtypes
  got = load_isolated(tmp_path, {"mrpc": {
      "path": export_dir, "signature": "serving_default",
      "inputs": {"text_a": [r[3] for r in rows],
                 "text_b": [r[4] for r in rows]}}})
  assert got["mrpc:dtypes"]["probabilities"] == "float32"
  probabilities = np.array(got["mrpc"]["probabilities"])
  # bfloat16 rounds each matmul's operands to 8 bits of mantissa; through
  # six layers the probabilities move by under 0.02, and only a pair the
  # float32 model scores within that of 0.5 may change label.
  np.testing.assert_allclose(probabilities, want, atol=0.02)
  sure = np.abs(want[:, 1] - 0.5) > 0.02
  assert sure.sum() >= 50
  assert (probabilities.argmax(-1)[sure] == want.argmax(-1)[sure]).all()
  assert np.abs(probabilities - want).max() > 1e-6  # bfloat16 did compute
