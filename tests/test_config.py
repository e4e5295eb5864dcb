"""BertConfig: original fields and defaults, JSON round trip, validation."""

import json
import os

import pytest

from modeling import BertConfig
from modeling import ConfigError

# bert_config.json of Google's uncased_L-12_H-768_A-12, as released.
BASE_JSON = {
    "attention_probs_dropout_prob": 0.1,
    "hidden_act": "gelu",
    "hidden_dropout_prob": 0.1,
    "hidden_size": 768,
    "initializer_range": 0.02,
    "intermediate_size": 3072,
    "max_position_embeddings": 512,
    "num_attention_heads": 12,
    "num_hidden_layers": 12,
    "type_vocab_size": 2,
    "vocab_size": 30522,
}


def write(tmp_path, obj, name="bert_config.json"):
  path = tmp_path / name
  path.write_text(obj if isinstance(obj, str) else json.dumps(obj))
  return str(path)


def test_defaults_are_the_originals():
  config = BertConfig(vocab_size=99)
  assert (config.hidden_size, config.num_hidden_layers,
          config.num_attention_heads, config.intermediate_size) == (768, 12,
                                                                   12, 3072)
  assert config.hidden_act == "gelu"
  assert config.hidden_dropout_prob == 0.1
  assert config.attention_probs_dropout_prob == 0.1
  assert config.max_position_embeddings == 512
  assert config.type_vocab_size == 16
  assert config.initializer_range == 0.02


def test_released_config_round_trips(tmp_path):
  config = BertConfig.from_json_file(write(tmp_path, BASE_JSON))
  assert config.type_vocab_size == 2 and config.vocab_size == 30522
  assert json.loads(config.to_json_string()) == BASE_JSON
  assert config.to_json_string().startswith(
      '{\n  "attention_probs_dropout_prob": 0.1,\n')
  assert BertConfig.from_dict(config.to_dict()) == config


def test_extra_keys_are_kept(tmp_path):
  # The multilingual and Chinese releases carry these five extra keys.
  extra = {"directionality": "bidi", "pooler_fc_size": 768,
           "pooler_num_attention_heads": 12, "pooler_num_fc_layers": 3,
           "pooler_size_per_head": 128, "pooler_type": "first_token_transform"}
  config = BertConfig.from_json_file(write(tmp_path, dict(BASE_JSON, **extra)))
  assert config.extra == extra
  assert json.loads(config.to_json_string()) == dict(BASE_JSON, **extra)


def test_missing_file_names_it(tmp_path):
  with pytest.raises(ConfigError, match="Cannot read bert_config_file .*nope"):
    BertConfig.from_json_file(str(tmp_path / "nope.json"))


def test_malformed_json_names_file(tmp_path):
  path = write(tmp_path, '{"vocab_size": 10,')
  with pytest.raises(ConfigError, match="bert_config.json is not valid JSON"):
    BertConfig.from_json_file(path)


def test_not_an_object(tmp_path):
  with pytest.raises(ConfigError, match="expected a JSON object, got list"):
    BertConfig.from_json_file(write(tmp_path, [1, 2]))


@pytest.mark.parametrize("field,value,message", [
    ("vocab_size", None, "required field 'vocab_size' is missing"),
    ("hidden_size", 0, "'hidden_size' must be a positive integer, got 0"),
    ("num_hidden_layers", -1, "'num_hidden_layers' must be a positive"),
    ("intermediate_size", 3072.5, "'intermediate_size' must be a positive"),
    ("max_position_embeddings", "512", "must be a positive integer, got '512'"),
    ("num_attention_heads", 7, r"hidden_size \(768\) is not a multiple of "
     r"num_attention_heads \(7\)"),
    ("hidden_act", "swish", "unknown hidden_act 'swish'"),
    ("hidden_dropout_prob", 1.5, "'hidden_dropout_prob' must be a number in"),
    ("initializer_range", 0, "'initializer_range' must be a positive"),
])
def test_invalid_field_names_file_and_field(tmp_path, field, value, message):
  obj = dict(BASE_JSON)
  if value is None:
    del obj[field]
  else:
    obj[field] = value
  path = write(tmp_path, obj)
  with pytest.raises(ConfigError, match=message) as error:
    BertConfig.from_json_file(path)
  assert path in str(error.value)


def test_activation_names_are_case_insensitive():
  assert BertConfig(vocab_size=5, hidden_act="GELU").hidden_act == "GELU"


@pytest.mark.parametrize("typo,known", [
    ("hiden_size", "hidden_size"),
    ("num_hidden_layer", "num_hidden_layers"),
    ("vocab_sise", "vocab_size"),
    ("Hidden_Size", "hidden_size"),
    ("intermediatesize", "intermediate_size"),
    ("initializer_rnage", "initializer_range"),  # a swap: two edits
])
def test_misspelt_key_is_an_error_naming_the_file(tmp_path, typo, known):
  obj = dict(BASE_JSON)
  obj[typo] = obj.pop(known)
  path = write(tmp_path, obj)
  with pytest.raises(ConfigError) as error:
    BertConfig.from_json_file(path)
  assert str(error.value) == (
      "bert_config_file %s: unknown key %r: did you mean %s?" %
      (path, typo, known))


def test_misspelt_key_beside_the_right_one_is_still_an_error(tmp_path):
  # The typo would be silently ignored while the file looks right.
  path = write(tmp_path, dict(BASE_JSON, hiden_size=32))
  with pytest.raises(ConfigError, match="unknown key 'hiden_size': did you "
                     "mean hidden_size"):
    BertConfig.from_json_file(path)


def test_keys_further_than_two_edits_are_extras(tmp_path):
  # Keys other tools write beside the original's: none is a near miss.
  extra = {"model_type": "bert", "layer_norm_eps": 1e-12,
           "pad_token_id": 0, "position_embedding_type": "absolute",
           "architectures": ["BertForMaskedLM"]}
  config = BertConfig.from_json_file(write(tmp_path, dict(BASE_JSON, **extra)))
  assert config.extra == extra
  with pytest.raises(ConfigError, match="'hidden_size_': did you mean "
                     "hidden_size"):
    BertConfig.from_dict(dict(BASE_JSON, hidden_size_=1))


@pytest.mark.parametrize("key", sorted(BASE_JSON))
def test_every_released_key_is_required(tmp_path, key):
  obj = dict(BASE_JSON)
  del obj[key]
  path = write(tmp_path, obj)
  with pytest.raises(ConfigError) as error:
    BertConfig.from_json_file(path)
  assert str(error.value) == (
      "bert_config_file %s: required field %r is missing." % (path, key))


def test_all_missing_keys_are_named():
  with pytest.raises(ConfigError) as error:
    BertConfig.from_dict({"vocab_size": 10, "hidden_size": 32}, source="x")
  assert str(error.value) == (
      "x: required fields 'attention_probs_dropout_prob', 'hidden_act', "
      "'hidden_dropout_prob', 'initializer_range', 'intermediate_size', "
      "'max_position_embeddings', 'num_attention_heads', "
      "'num_hidden_layers', 'type_vocab_size' are missing.")


def test_the_demo_config_loads():
  # demo/run_demo.sh writes its bert_config.json from a here-document.
  with open(os.path.join(os.path.dirname(os.path.dirname(
      os.path.abspath(__file__))), "demo", "run_demo.sh")) as f:
    script = f.read()
  text = script.split('bert_config.json" <<JSON\n')[1].split("\nJSON\n")[0]
  config = BertConfig.from_dict(
      json.loads(text.replace("$VOCAB_SIZE", "3000")), source="demo")
  assert (config.hidden_size, config.vocab_size) == (128, 3000)
