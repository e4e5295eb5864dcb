"""export_saved_model.py --precision=bfloat16 and int8: the OpenVINO model
beside the SavedModel, served between the SavedModel's prepare and finish.

Each task is exported once in int8 (a float32 SavedModel, the reference,
and an int8 OpenVINO model) and the classifier, SQuAD, NER and encoder once
in bfloat16 (SavedModel weights stored in bfloat16; an OpenVINO model with
float32 weights). Checked on real rows: the OpenVINO path computing in
float32 equals the float32 SavedModel (and the encoder a float64 NumPy
BERT) to float32 rounding; bfloat16 and int8 stay within stated bounds of
float32; the tokens reaching the model are FullTokenizer's on the stress
corpus; bad flags and files get clear errors.
"""

import csv
import functools
import json
import os
import re

import numpy as np
import pytest

import modeling
from runner_lib.serving import openvino_model
import tokenization
from tests import reference
from tests import stress_corpus
from tests.conftest import SHARED_DATA
from tests.conftest import run_script
from tests.conftest import run_scripts

# End-to-end script runs: left out of make test-fast.
pytestmark = pytest.mark.slow

CONFIG = dict(vocab_size=30522, hidden_size=32, num_hidden_layers=2,
              num_attention_heads=2, intermediate_size=64,
              max_position_embeddings=64, type_vocab_size=2)
SEQ = 48
INT8_TASKS = ("classifier", "squad", "ner", "swag", "encoder")
BFLOAT16_TASKS = ("classifier", "squad", "ner", "encoder")
# Largest differences from float32, in units of the float32 outputs'
# standard deviation (logits) or as probabilities: bfloat16 keeps 8 bits
# of mantissa, int8 256 levels per channel and per activation range.
BFLOAT16_TOLERANCE = 0.05
INT8_TOLERANCE = 0.15


def read_inputs(shared_data):
  """Real rows per task as the serving signature's inputs (lists)."""
  with open(os.path.join(shared_data, "glue", "MRPC", "dev.tsv")) as f:
    mrpc = [line.rstrip("\n").split("\t") for line in f][1:41]
  with open(os.path.join(shared_data, "squad",
                         "dev-v1.1.subset-Super_Bowl_50.json")) as f:
    paragraphs = json.load(f)["data"][0]["paragraphs"][:6]
  squad = [(qa["question"], p["context"]) for p in paragraphs
           for qa in p["qas"][:3]]
  with open(os.path.join(shared_data, "swag", "val.subset-first91.csv"),
            newline="") as f:
    swag = list(csv.reader(f))[1:13]
  with open(os.path.join(shared_data, "conll2003", "eng.testb")) as f:
    blocks = [b for b in f.read().split("\n\n")[1:40] if b.strip()]
  ner = [" ".join(line.split(" ")[0] for line in b.split("\n"))
         for b in blocks]
  return {
      "classifier": {"text_a": [r[3] for r in mrpc],
                     "text_b": [r[4] for r in mrpc]},
      "squad": {"question": [q for q, _ in squad],
                "context": [c for _, c in squad]},
      "swag": {"context": [r[4] for r in swag], "start": [r[5] for r in swag],
               "endings": [r[7:11] for r in swag]},
      "ner": {"text": ner},
      "encoder": {"text_a": [r[3] for r in mrpc]}}


def instances(columns):
  """Signature inputs (dict of lists) -> JSON-line instances."""
  names = sorted(columns)
  return [dict(zip(names, row)) for row in
          zip(*[columns[name] for name in names])]


@pytest.fixture(scope="module")
def exports(tmp_path_factory):
  """dict (task, precision) -> export dir, the weights, config, inputs and
  vocab file."""
  if not os.path.isdir(SHARED_DATA):
    pytest.skip("../shared/data is absent (real data sets live there)")
  shared_data = SHARED_DATA
  tmp_path = tmp_path_factory.mktemp("precision")
  config = modeling.BertConfig(**CONFIG)
  config_file, prefix, weights = reference.write_task_checkpoint(tmp_path,
                                                                 config)
  inputs = read_inputs(shared_data)
  common = {"vocab_file": os.path.join(shared_data, "vocab",
                                       "uncased_vocab.txt"),
            "bert_config_file": str(config_file),
            "init_checkpoint": prefix, "max_seq_length": str(SEQ)}
  task_flags = {"classifier": {"task_name": "MRPC"},
                "squad": {"doc_stride": "16", "max_query_length": "12"}}
  runs, paths = [], {}
  for precision, tasks in (("int8", INT8_TASKS),
                           ("bfloat16", BFLOAT16_TASKS)):
    for task in tasks:
      paths[task, precision] = str(tmp_path / ("%s_%s" % (task, precision)))
      args = dict(common, task=task, precision=precision,
                  export_dir=paths[task, precision], **task_flags.get(task, {}))
      if precision == "int8":
        calibration = tmp_path / (task + ".jsonl")
        calibration.write_text("".join(
            json.dumps(i) + "\n" for i in instances(inputs[task])))
        args["calibration_file"] = str(calibration)
      runs.append(("export_saved_model.py", args))
  for result in run_scripts(runs):
    assert result.returncode == 0, result.stderr[-3000:]
  return paths, weights, config, inputs, common["vocab_file"]


@functools.lru_cache(maxsize=None)
def loaded(path):
  """The SavedModel at path, loaded once for the module's tests."""
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  return tf.saved_model.load(path)


@functools.lru_cache(maxsize=None)
def served(path, inference_precision=None):
  """openvino_model.load(path, ...), once for the module's tests."""
  return openvino_model.load(path, inference_precision=inference_precision)


def call_both(path, inputs, **load_flags):
  """(the float32-or-bfloat16 SavedModel's serving_default outputs, the
  OpenVINO path's), as numpy."""
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  saved = loaded(path).signatures["serving_default"]
  want = saved(**{k: tf.constant(v) for k, v in inputs.items()})
  got = served(path, **load_flags)(**inputs)
  return ({k: v.numpy() for k, v in want.items()},
          {k: v.numpy() for k, v in got.items()})


def scaled_difference(got, want):
  """Largest |got - want| in units of want's standard deviation."""
  want = np.asarray(want, np.float64)
  return float(np.abs(np.asarray(got, np.float64) - want).max() /
               np.std(want))


def encoder_reference(exports):
  """The float64 NumPy BERT's outputs of the encoder rows, packed by the
  Python FullTokenizer as the original's runners pack them."""
  paths, weights, config, inputs, vocab_file = exports
  del paths
  tokenizer = tokenization.FullTokenizer(vocab_file, True)
  ids = np.zeros([len(inputs["encoder"]["text_a"]), SEQ], np.int32)
  for row, text in enumerate(inputs["encoder"]["text_a"]):
    pieces = ["[CLS]"] + tokenizer.tokenize(text)[:SEQ - 2] + ["[SEP]"]
    ids[row, :len(pieces)] = tokenizer.convert_tokens_to_ids(pieces)
  mask = (ids > 0).astype(np.int32)
  outputs = reference.np_bert(weights, config, ids, mask, np.zeros_like(ids))
  return outputs, mask


def test_openvino_in_float32_equals_the_float32_savedmodel(exports):
  paths, _, _, inputs, _ = exports
  for task in ("classifier", "squad", "ner"):
    # The bfloat16 export's OpenVINO model holds float32 weights: computed
    # in float32, the path (prepare, OpenVINO, finish) must give the float32
    # SavedModel's outputs (the int8 export's SavedModel is float32).
    want, _ = call_both(paths[task, "int8"], inputs[task])
    _, got = call_both(paths[task, "bfloat16"], inputs[task],
                       inference_precision="f32")
    assert set(got) == set(want), task
    for key, value in want.items():
      if value.dtype.kind in "SO":
        assert got[key].tolist() == value.tolist(), (task, key)
      else:
        np.testing.assert_allclose(got[key], value, atol=2e-4, rtol=1e-4,
                                   err_msg="%s %s" % (task, key))
  # The encoder against the float64 NumPy BERT.
  _, got = call_both(paths["encoder", "bfloat16"], inputs["encoder"],
                     inference_precision="f32")
  want, mask = encoder_reference(exports)
  np.testing.assert_array_equal(got["input_mask"], mask)
  for key in ("sequence_output", "pooled_output"):
    np.testing.assert_allclose(got[key], want[key], atol=2e-4, err_msg=key)


def test_bfloat16_and_int8_stay_near_float32(exports):
  paths, _, _, inputs, _ = exports
  want, _ = encoder_reference(exports)
  for precision, tolerance in (("bfloat16", BFLOAT16_TOLERANCE),
                               ("int8", INT8_TOLERANCE)):
    saved, served = call_both(paths["encoder", precision], inputs["encoder"])
    if precision == "bfloat16":
      # The SavedModel's own bfloat16 matmuls over bfloat16 weights.
      assert scaled_difference(saved["sequence_output"],
                               want["sequence_output"]) < tolerance
    else:
      # The int8 export's SavedModel is float32.
      np.testing.assert_allclose(saved["sequence_output"],
                                 want["sequence_output"], atol=2e-4)
    difference = scaled_difference(served["sequence_output"],
                                   want["sequence_output"])
    assert difference < tolerance, (precision, difference)
    if precision == "bfloat16" and not openvino_model._bf16_units():  # pylint: disable=protected-access
      # A CPU without bfloat16 units (an AVX2-only EPYC): Served warns and
      # has OpenVINO compute the export in float32, float32's outputs.
      assert difference < 1e-4, difference
    else:
      # Not float32's outputs either: the precision is applied.
      assert difference > 1e-4, precision
    for task in ("classifier", "ner", "squad") + (
        ("swag",) if precision == "int8" else ()):
      float32, _ = call_both(paths[task, "int8"], inputs[task])
      _, got = call_both(paths[task, precision], inputs[task])
      if task == "squad":
        assert scaled_difference(got["score"], float32["score"]) < (
            4 * tolerance), precision
        agree = np.mean(got["answer_text"] == float32["answer_text"])
      elif task == "ner":
        agree = np.mean(got["tags"] == float32["tags"])
      else:
        assert np.abs(got["probabilities"] -
                      float32["probabilities"]).max() < tolerance, (
                          precision, task)
        agree = np.mean(got["probabilities"].argmax(-1) ==
                        float32["probabilities"].argmax(-1))
      assert agree >= 0.8, (precision, task, agree)


def test_the_tokens_reaching_the_model_are_full_tokenizers(exports):
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  paths, _, _, _, vocab_file = exports
  lines = stress_corpus.corpus()[:600]
  prepare = loaded(paths["encoder", "int8"]).prepare
  inputs, _ = prepare(text_a=tf.constant(lines))
  tokenizer = tokenization.FullTokenizer(vocab_file, True)
  for row, line in zip(inputs["input_ids"].numpy(), lines):
    pieces = ["[CLS]"] + tokenizer.tokenize(line)[:SEQ - 2] + ["[SEP]"]
    want = tokenizer.convert_tokens_to_ids(pieces)
    assert row.tolist() == want + [0] * (SEQ - len(want)), line


def test_int8_export_errors(exports, tmp_path):
  paths, _, _, _, vocab_file = exports
  common = {"task": "encoder", "vocab_file": vocab_file,
            "bert_config_file": "unused.json", "init_checkpoint": "unused",
            "export_dir": str(tmp_path / "out")}
  result = run_script("export_saved_model.py", dict(common, precision="int8"))
  assert result.returncode != 0
  assert "--precision=int8 needs --calibration_file" in result.stderr
  result = run_script("export_saved_model.py", dict(
      common, calibration_file="x.jsonl"))
  assert result.returncode != 0
  assert "--calibration_file is for --precision=int8" in result.stderr
  assert not (tmp_path / "out").exists()


def test_bad_calibration_file_is_named(exports, tmp_path):
  from runner_lib.core import errors  # pylint: disable=g-import-not-at-top
  path = tmp_path / "calibration.jsonl"
  path.write_text('{"text_a": "fine"}\n\n{"text": "wrong name"}\n')
  with pytest.raises(errors.InputError, match="line 3: expected an object "
                     "with the signature's inputs text_a"):
    openvino_model.read_instances(str(path), ["text_a"])
  path.write_text('{"text_a": "fine"}\nnot json\n')
  with pytest.raises(errors.InputError, match="line 2 is not JSON"):
    openvino_model.read_instances(str(path), ["text_a"])
  path.write_text("\n")
  with pytest.raises(errors.InputError, match="holds no instance"):
    openvino_model.read_instances(str(path), ["text_a"])
  path.write_text('{"text_a": "x"}\n' * 400)
  assert len(openvino_model.read_instances(str(path), ["text_a"])) == (
      openvino_model.MAX_CALIBRATION)
  # An export without the OpenVINO model: load says how to make one.
  float32 = tmp_path / "float32"
  float32.mkdir()
  with pytest.raises(errors.InputError, match="has no OpenVINO model"):
    openvino_model.load(str(float32))


def rest_examples():
  """docs/serving.md's REST requests and responses: dict task ->
  (request, response), each parsed JSON."""
  path = os.path.join(os.path.dirname(__file__), "..", "docs", "serving.md")
  with open(path, encoding="utf-8") as f:
    text = f.read()
  found = {}
  for match in re.finditer(r"<!-- rest (\w+) (request|response) -->\n"
                           r"```json\n(.*?)\n```", text, re.S):
    found.setdefault(match.group(1), {})[match.group(2)] = json.loads(
        match.group(3))
  return {task: (pair["request"], pair["response"])
          for task, pair in found.items()}


def kind(value):
  """A JSON value's type and nesting: "str", "int", "float", or
  "list of <kind of its first element>"."""
  if isinstance(value, list):
    return "list of " + kind(value[0])
  return {str: "str", int: "int", float: "float"}[type(value)]


def rest_predict(signature, request):
  """TensorFlow Serving's REST predict in the row format: each instance's
  inputs stacked into columns, the outputs split back into one object per
  instance (strings decoded, numbers as JSON numbers)."""
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  instances = request["instances"]
  columns = {name: tf.constant([instance[name] for instance in instances])
             for name in instances[0]}
  outputs = signature(**columns)

  def plain(value):
    if isinstance(value, bytes):
      return value.decode("utf-8")
    if isinstance(value, list):
      return [plain(v) for v in value]
    return value

  return {"predictions": [
      {name: plain(np.asarray(value.numpy()[row]).tolist())
       for name, value in outputs.items()}
      for row in range(len(instances))]}


def test_rest_requests_in_the_docs_give_their_responses(exports):
  paths = exports[0]
  examples = rest_examples()
  assert sorted(examples) == sorted(INT8_TASKS)
  for task, (request, response) in examples.items():
    # The int8 export's SavedModel is the float32 one.
    got = rest_predict(loaded(paths[task, "int8"]).signatures[
        "serving_default"], request)
    assert len(got["predictions"]) == len(request["instances"])
    want = response["predictions"][0]
    prediction = got["predictions"][0]
    assert sorted(prediction) == sorted(want), task
    for key, value in want.items():
      assert kind(prediction[key]) == kind(value), (task, key)
    if task == "ner":
      assert prediction["words"] == want["words"]
      assert len(prediction["tags"]) == len(want["tags"])


def test_bfloat16_export_on_a_cpu_without_bfloat16_units(exports, monkeypatch,
                                                          caplog):
  # pylint: disable-next=g-import-not-at-top
  from runner_lib.core.training import precision
  paths, _, _, inputs, _ = exports
  path = paths["classifier", "bfloat16"]
  monkeypatch.setattr(precision, "cpu_flags", lambda: {"avx2", "fma"})
  with caplog.at_level("WARNING"):
    got = openvino_model.load(path)(**inputs["classifier"])
  assert "has no bfloat16 units" in caplog.text
  # Computed in float32, as the float32 path.
  want = served(path, "f32")(**inputs["classifier"])
  np.testing.assert_allclose(got["probabilities"].numpy(),
                             want["probabilities"].numpy(), atol=1e-6)
