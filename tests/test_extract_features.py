"""extract_features.py end to end, as a user runs it, and its bad input."""

import json
import os

import numpy as np
import pytest

import modeling
from runner_lib.core import errors
from runner_lib.extraction import data
from runner_lib.extraction import jsonl
from tests import conftest
from tests import reference

VOCAB = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "jim", "henson", "was",
         "a", "puppet", "##eer", "who", "?", "the", "un", "##aff", "##able",
         "is", "man", ".", ","]


@pytest.fixture
def model_dir(tmp_path):
  """A tiny 'Google BERT folder': vocab, config and a random checkpoint."""
  directory = tmp_path / "tiny_L-2_H-32"
  directory.mkdir()
  (directory / "vocab.txt").write_text("\n".join(VOCAB) + "\n")
  config = modeling.BertConfig(
      vocab_size=len(VOCAB) + 3, hidden_size=32, num_hidden_layers=3,
      num_attention_heads=4, intermediate_size=40, max_position_embeddings=16,
      type_vocab_size=2)
  (directory / "bert_config.json").write_text(config.to_json_string())
  weights = reference.random_weights(config, seed=3)
  reference.write_tf1_checkpoint(str(directory / "bert_model.ckpt"), weights)
  return directory, config, weights


def run_script(args, cwd):
  return conftest.run_script("extract_features.py", args, timeout=300,
                             cwd=cwd)


def flags_for(directory, tmp_path, **overrides):
  values = {
      "input_file": str(tmp_path / "input.txt"),
      "output_file": str(tmp_path / "out" / "output.jsonl"),
      "vocab_file": str(directory / "vocab.txt"),
      "bert_config_file": str(directory / "bert_config.json"),
      "init_checkpoint": str(directory / "bert_model.ckpt"),
      "layers": "-1,0",
      "max_seq_length": "10",
      "batch_size": "2",
  }
  values.update(overrides)
  return ["--%s=%s" % kv for kv in values.items()]


@pytest.mark.slow
def test_end_to_end_jsonl_matches_the_model(model_dir, tmp_path):
  directory, config, weights = model_dir
  (tmp_path / "input.txt").write_text(
      "Who was Jim Henson ? ||| Jim Henson was a puppeteer\n"
      "unaffable\n"
      "the man , the man , the man , the man .\n")
  result = run_script(flags_for(directory, tmp_path), str(tmp_path))
  assert result.returncode == 0, result.stderr[-3000:]
  lines = (tmp_path / "out" / "output.jsonl").read_text().splitlines()
  assert len(lines) == 3
  assert not [p for p in os.listdir(tmp_path / "out") if ".tmp-" in p]

  expected_tokens = [
      # 5 + 6 tokens truncated to 10 - 3 = 7, one at a time from the longer
      # (B on ties): B 6->5->4, A 5->4, B 4->3.
      ["[CLS]", "who", "was", "jim", "henson", "[SEP]", "jim", "henson", "was",
       "[SEP]"],
      ["[CLS]", "un", "##aff", "##able", "[SEP]"],
      ["[CLS]", "the", "man", ",", "the", "man", ",", "the", "man", "[SEP]"],
  ]
  segments = [[0] * 6 + [1] * 4, [0] * 5, [0] * 10]
  vocab = {t: i for i, t in enumerate(VOCAB)}
  for index, (line, tokens, segment) in enumerate(
      zip(lines, expected_tokens, segments)):
    record = json.loads(line)
    assert list(record) == ["linex_index", "features"]
    assert record["linex_index"] == index
    assert [f["token"] for f in record["features"]] == tokens
    ids = np.array([[vocab[t] for t in tokens]])
    want = reference.np_bert(weights, config, ids, np.ones_like(ids),
                             np.array([segment]))["all_encoder_layers"]
    for position, feature in enumerate(record["features"]):
      assert list(feature) == ["token", "layers"]
      assert [l["index"] for l in feature["layers"]] == [-1, 0]
      for layer in feature["layers"]:
        assert list(layer) == ["index", "values"]
        values = np.array(layer["values"])
        assert values.shape == (config.hidden_size,)
        # Rounded to 6 decimals, as the original writes them.
        np.testing.assert_array_equal(values, np.round(values, 6))
        np.testing.assert_allclose(
            values, want[layer["index"]][0, position], atol=2e-5)
  # The padded positions of a short example change nothing: the same text
  # alone gives the same values (the model masks padding).
  single = json.loads(lines[1])["features"][1]["layers"][0]["values"]
  model = modeling.BertModel(config)
  modeling.load_checkpoint(model, str(directory / "bert_model.ckpt"))
  ours = model({"input_ids": np.array([[2, 14, 15, 16, 3]], np.int32)})
  np.testing.assert_allclose(single, ours["sequence_output"][0, 1].numpy(),
                             atol=1.5e-6)


def test_json_line_format_is_the_originals():
  feature = data.InputFeatures(7, ["[CLS]", "\u00e9"], [], [], [])
  outputs = [np.array([[0.1234567, -2.0], [1e-7, 3.14159265]], np.float32)]
  line = jsonl.to_json_line(feature, [-1], outputs)
  assert line == (
      '{"linex_index": 7, "features": [{"token": "[CLS]", "layers": '
      '[{"index": -1, "values": [0.123457, -2.0]}]}, {"token": "\\u00e9", '
      '"layers": [{"index": -1, "values": [0.0, 3.141593]}]}]}\n')


def test_json_values_are_the_originals_round_and_repr():
  # Written from whole arrays: the bytes must be the original's for every
  # float32, including halfway cases, exponent form below 1e-4, signed
  # zeros and values without a fast form (NaN, infinities, huge).
  rng = np.random.RandomState(0)
  bit_patterns = rng.randint(0, 2**32, [400, 500], np.uint64).astype(
      np.uint32).view(np.float32)
  finite = np.where(np.isfinite(bit_patterns) & (np.abs(bit_patterns) < 1e9),
                    bit_patterns, np.float32(0.5))
  cases = [
      rng.randn(12, 768),
      rng.randn(12, 768) * 1e-4,
      rng.randn(12, 768) * 1e4,
      np.arange(-1200, 1200).reshape(12, 200) / 128.0,  # ties: k + 1/2 micro
      np.arange(-3000, 3000).reshape(12, 500) * 1e-6,
      finite[:200], finite[200:] * 1e-30,
      [[0.0, -0.0, 1e-7, -1e-7, 5e-7, 1.5e-6, 9.95e-5, 1e-4, 1.5e-4, 2.0],
       [-3.0, 999999.9999995, 1e11, -0.0001, 7e-5, 2e-5, -1e-5, 1, 10, 0.1]],
      [[np.nan, 1.0], [np.inf, -np.inf], [1e13, -2.5e-5]],
  ]
  for values in cases:
    values = np.asarray(values, np.float32)
    tokens = ["t%d" % i for i in range(len(values) - 1)] + ['"\u00e9\\']
    feature = data.InputFeatures(3, tokens, [], [], [])
    layers = [values, values[::-1] * np.float32(-1)]
    assert jsonl.to_json_line(feature, [-1, 0], layers) == (
        reference.original_json_line(feature, [-1, 0], layers))


def test_pairs_are_split_on_the_delimiter(tmp_path):
  path = tmp_path / "in.txt"
  path.write_bytes(b"a b ||| c d\r\nno pair|||here\n\n")
  examples = list(data.read_examples(str(path)))
  assert [(e.unique_id, e.text_a, e.text_b) for e in examples] == [
      (0, "a b", "c d"), (1, "no pair|||here", None), (2, "", None)]


@pytest.mark.parametrize("layers,message", [
    ("-1,x", "must be comma-separated integers"),
    ("3", "layer 3 does not exist in a model with num_hidden_layers=3"),
    ("-4", "layer -4 does not exist")])
def test_bad_layers(layers, message):
  with pytest.raises(errors.InputError, match=message):
    data.parse_layers(layers, 3)


def bad_run(model_dir, tmp_path, **overrides):
  directory = model_dir[0]
  (tmp_path / "input.txt").write_text("jim henson\n")
  result = run_script(flags_for(directory, tmp_path, **overrides),
                      str(tmp_path))
  assert result.returncode != 0
  assert not (tmp_path / "out").exists() or not os.listdir(tmp_path / "out")
  return result.stderr


@pytest.mark.slow
def test_vocab_larger_than_config_is_rejected(model_dir, tmp_path):
  directory = model_dir[0]
  (directory / "vocab.txt").write_text("\n".join(VOCAB + ["x%d" % i for i in
                                                          range(9)]) + "\n")
  stderr = bad_run(model_dir, tmp_path)
  assert "has 30 entries but vocab_size in" in stderr
  assert "is 24" in stderr


@pytest.mark.slow
def test_max_seq_length_past_position_table(model_dir, tmp_path):
  stderr = bad_run(model_dir, tmp_path, max_seq_length="17")
  assert "--max_seq_length=17 exceeds max_position_embeddings=16" in stderr


@pytest.mark.slow
def test_missing_checkpoint(model_dir, tmp_path):
  stderr = bad_run(model_dir, tmp_path,
                   init_checkpoint=str(tmp_path / "none" / "bert_model.ckpt"))
  assert "Checkpoint not found: " in stderr and "none/bert_model.ckpt" in stderr


@pytest.mark.slow
def test_unreadable_config(model_dir, tmp_path):
  directory = model_dir[0]
  (directory / "bert_config.json").write_text("{not json")
  stderr = bad_run(model_dir, tmp_path)
  assert "bert_config.json is not valid JSON" in stderr


@pytest.mark.slow
def test_tpu_flag_without_use_tpu_is_rejected(model_dir, tmp_path):
  stderr = bad_run(model_dir, tmp_path, master="grpc://10.0.0.1:8470")
  assert "--master=grpc://10.0.0.1:8470 is only used with --use_tpu" in stderr
