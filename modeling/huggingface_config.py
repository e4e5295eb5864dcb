"""HuggingFace's config.json to our BertConfig, and back.

The eleven bert_config.json fields carry over unchanged (dropout rates,
initializer_range, sizes); hidden_act is renamed where the two libraries
name one function differently. What a BertConfig cannot hold (transformers'
own keys, _name_or_path, ...) is returned for the caller to keep, so that
converting back writes the same config.json.
"""

from absl import logging

from modeling import config as config_lib
from modeling import layers

# HuggingFace hidden_act -> ours, only where transformers' ACT2FN computes
# the same function. Its "gelu" is the exact erf form; Google's "gelu" is
# the tanh approximation, which transformers names gelu_new and computes
# again as gelu_pytorch_tanh (PyTorch's kernel), gelu_accurate and
# gelu_fast (its constant 0.7978845608 is sqrt(2 / pi) to float32's
# precision). quick_gelu, gelu_10 (clipped), silu, ... have no equivalent.
ACTIVATIONS_FROM_HF = {
    "gelu": "gelu_exact", "gelu_python": "gelu_exact",
    "gelu_new": "gelu", "gelu_pytorch_tanh": "gelu", "gelu_accurate": "gelu",
    "gelu_fast": "gelu", "relu": "relu", "tanh": "tanh", "linear": "linear"}
# Ours -> the name transformers' own BERT configs use.
ACTIVATIONS_TO_HF = {"gelu": "gelu_new", "gelu_exact": "gelu",
                     "relu": "relu", "tanh": "tanh", "linear": "linear"}

# transformers' BertConfig defaults, for keys a config.json leaves out.
_DEFAULTS = {
    "vocab_size": 30522, "hidden_size": 768, "num_hidden_layers": 12,
    "num_attention_heads": 12, "intermediate_size": 3072,
    "hidden_act": "gelu", "hidden_dropout_prob": 0.1,
    "attention_probs_dropout_prob": 0.1, "max_position_embeddings": 512,
    "type_vocab_size": 2, "initializer_range": 0.02, "layer_norm_eps": 1e-12,
    "position_embedding_type": "absolute"}
# Keys to_huggingface writes from the BertConfig and the heads; the others
# are returned by from_huggingface to keep.
_DERIVED = frozenset(tuple(k for k in config_lib.REQUIRED_KEYS
                           if k != "hidden_act") +
                     ("architectures", "model_type", "layer_norm_eps",
                      "position_embedding_type"))


def from_huggingface(hf_config, source):
  """The BertConfig of a config.json, and the keys it cannot hold.

  Args:
    hf_config: dict, config.json's; keys it lacks take transformers'
      defaults (with a warning).
    source: str naming the file, for messages.

  Returns:
    (BertConfig, dict of config.json's keys that to_huggingface does not
    write from a BertConfig, hidden_act as spelt there among them).

  Raises:
    ConfigError: not a BERT encoder, or one this model cannot compute.
  """
  if not isinstance(hf_config, dict):
    raise config_lib.ConfigError("%s: expected a JSON object." % source)
  defaulted = sorted(set(_DEFAULTS) - set(hf_config))
  if defaulted:
    logging.warning("%s lacks %s: taking transformers' defaults.", source,
                    ", ".join(defaulted))
  values = dict(_DEFAULTS, **hf_config)
  problem = None
  # Configs older than model_type (2020) lack it; the tensor names still
  # have to be BERT's.
  if values.get("model_type", "bert") != "bert":
    problem = "model_type %r is not \"bert\"" % values["model_type"]
  elif values["position_embedding_type"] != "absolute":
    problem = ("position_embedding_type %r: BERT's position embeddings are "
               "absolute" % values["position_embedding_type"])
  elif values.get("is_decoder") or values.get("add_cross_attention"):
    problem = "is_decoder / add_cross_attention: a decoder is no BERT encoder"
  elif values["layer_norm_eps"] != layers.LAYER_NORM_EPSILON:
    # Not silently changed: every output would move.
    problem = ("layer_norm_eps %r: this model's LayerNorm uses the "
               "original's %g" % (values["layer_norm_eps"],
                                  layers.LAYER_NORM_EPSILON))
  elif values["hidden_act"] not in ACTIVATIONS_FROM_HF:
    problem = "hidden_act %r has no equivalent here (convertible: %s)" % (
        values["hidden_act"], ", ".join(sorted(ACTIVATIONS_FROM_HF)))
  if problem:
    raise config_lib.ConfigError("%s: cannot convert: %s." % (source, problem))
  fields = {k: values[k] for k in config_lib.REQUIRED_KEYS}
  fields["hidden_act"] = ACTIVATIONS_FROM_HF[values["hidden_act"]]
  kept = {k: v for k, v in values.items()
          if k not in _DERIVED and (k in hf_config or k == "hidden_act")}
  return config_lib.BertConfig(source=source, **fields), kept


def to_huggingface(config, kept, architecture):
  """The config.json of a BertConfig.

  Args:
    config: BertConfig.
    kept: dict, from from_huggingface when the model came from a
      config.json, else {}. Its hidden_act is written where it names the
      same function as config's (gelu_fast stays gelu_fast), transformers'
      usual name otherwise.
    architecture: str, transformers' class, e.g. "BertForPreTraining".

  Returns:
    dict: kept's keys, then config's extra keys and fields, and what
    transformers needs to build the model (model_type, layer_norm_eps, ...).
  """
  hidden_act = config.hidden_act.lower()
  if ACTIVATIONS_FROM_HF.get(kept.get("hidden_act")) == hidden_act:
    hidden_act = kept["hidden_act"]
  else:
    hidden_act = ACTIVATIONS_TO_HF[hidden_act]
  hf_config = {"pad_token_id": 0}
  hf_config.update(kept)
  # Google's extra keys ("directionality", "pooler_fc_size", ...), as
  # transformers' own converter keeps them.
  hf_config.update(config.extra)
  hf_config.update({k: getattr(config, k) for k in config_lib.REQUIRED_KEYS})
  hf_config.update(
      hidden_act=hidden_act, model_type="bert", architectures=[architecture],
      layer_norm_eps=layers.LAYER_NORM_EPSILON,
      position_embedding_type="absolute")
  return hf_config
