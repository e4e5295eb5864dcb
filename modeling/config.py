"""BertConfig: the original bert_config.json schema, validated on load."""

import copy
import json

from absl import logging
import tensorflow as tf

# The activations the original modeling.get_activation accepts.
KNOWN_ACTIVATIONS = ("gelu", "gelu_exact", "relu", "tanh", "linear")

# The keys of bert_config.json: every config Google released (2018's
# BERT-Base/Large, cased and uncased, multilingual, Chinese, whole word
# masking; 2020's small BERTs) carries all eleven. A file lacking one is an
# error, not a default: the original's from_dict silently kept the default
# (hidden_size 768, ...), which then fails far away, at the checkpoint.
REQUIRED_KEYS = ("attention_probs_dropout_prob", "hidden_act",
                 "hidden_dropout_prob", "hidden_size", "initializer_range",
                 "intermediate_size", "max_position_embeddings",
                 "num_attention_heads", "num_hidden_layers", "type_vocab_size",
                 "vocab_size")

# An unknown key this close (in edit distance) to a known one is taken for
# a misspelling of it, not for one of the extras released configs carry.
_TYPO_DISTANCE = 2

_SIZE_FIELDS = ("vocab_size", "hidden_size", "num_hidden_layers",
                "num_attention_heads", "intermediate_size",
                "max_position_embeddings", "type_vocab_size")
_PROBABILITY_FIELDS = ("hidden_dropout_prob", "attention_probs_dropout_prob")


class ConfigError(ValueError):
  """A bert_config.json (or dict) that cannot describe a BERT model."""


class BertConfig(object):
  """Configuration for `BertModel`, field for field the original's.

  Fields are exactly the JSON keys of bert_config.json. Keys the original
  does not know (released configs carry e.g. "directionality" or
  "pooler_fc_size") are kept in `extra` and written back by `to_dict`.
  """

  def __init__(self,
               vocab_size,
               hidden_size=768,
               num_hidden_layers=12,
               num_attention_heads=12,
               intermediate_size=3072,
               hidden_act="gelu",
               hidden_dropout_prob=0.1,
               attention_probs_dropout_prob=0.1,
               max_position_embeddings=512,
               type_vocab_size=16,
               initializer_range=0.02,
               extra=None,
               source="BertConfig"):
    """Builds and validates a config.

    Args:
      vocab_size: int, rows of the word embedding table.
      hidden_size: int, width H of every encoder layer and the pooler.
      num_hidden_layers: int, number L of Transformer layers.
      num_attention_heads: int, heads A per layer; must divide hidden_size.
      intermediate_size: int, width of the feed-forward layer.
      hidden_act: str, one of KNOWN_ACTIVATIONS.
      hidden_dropout_prob: float in [0, 1), dropout on the embeddings and on
        each sub-layer output.
      attention_probs_dropout_prob: float in [0, 1), dropout on attention
        probabilities.
      max_position_embeddings: int, rows of the position embedding table.
      type_vocab_size: int, rows of the segment (token type) table.
      initializer_range: float > 0, stddev of the truncated-normal init.
      extra: dict of unknown keys to carry along unchanged.
      source: str naming where the values came from, for error messages.

    Raises:
      ConfigError: a field is missing, of the wrong type or out of range.
    """
    self.vocab_size = vocab_size
    self.hidden_size = hidden_size
    self.num_hidden_layers = num_hidden_layers
    self.num_attention_heads = num_attention_heads
    self.intermediate_size = intermediate_size
    self.hidden_act = hidden_act
    self.hidden_dropout_prob = hidden_dropout_prob
    self.attention_probs_dropout_prob = attention_probs_dropout_prob
    self.max_position_embeddings = max_position_embeddings
    self.type_vocab_size = type_vocab_size
    self.initializer_range = initializer_range
    self.extra = dict(extra or {})
    self._validate(source)

  def _validate(self, source):
    for field in _SIZE_FIELDS:
      value = getattr(self, field)
      if value is None:
        raise ConfigError("%s: required field %r is missing." %
                          (source, field))
      if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise ConfigError("%s: field %r must be a positive integer, got %r." %
                          (source, field, value))
    for field in _PROBABILITY_FIELDS:
      value = getattr(self, field)
      if (isinstance(value, bool) or not isinstance(value, (int, float)) or
          not 0.0 <= value < 1.0):
        raise ConfigError("%s: field %r must be a number in [0, 1), got %r." %
                          (source, field, value))
    value = self.initializer_range
    if (isinstance(value, bool) or not isinstance(value, (int, float)) or
        value <= 0):
      raise ConfigError("%s: field 'initializer_range' must be a positive "
                        "number, got %r." % (source, value))
    if self.hidden_size % self.num_attention_heads:
      raise ConfigError(
          "%s: hidden_size (%d) is not a multiple of num_attention_heads "
          "(%d)." % (source, self.hidden_size, self.num_attention_heads))
    if (not isinstance(self.hidden_act, str) or
        self.hidden_act.lower() not in KNOWN_ACTIVATIONS):
      raise ConfigError("%s: unknown hidden_act %r; expected one of %s." %
                        (source, self.hidden_act, ", ".join(KNOWN_ACTIVATIONS)))

  @classmethod
  def from_dict(cls, json_object, source="BertConfig"):
    """Builds a config from a dict of bert_config.json keys.

    Args:
      json_object: dict holding every key of REQUIRED_KEYS; other keys are
        kept in `extra`.
      source: str naming the origin, used in error messages.

    Returns:
      A validated BertConfig.

    Raises:
      ConfigError: not a dict, a key missing, an unknown key that looks
        like a misspelt known one (within edit distance 2, e.g.
        "hiden_size"), or a field is invalid.
    """
    if not isinstance(json_object, dict):
      raise ConfigError("%s: expected a JSON object, got %s." %
                        (source, type(json_object).__name__))
    extra = {k: v for k, v in json_object.items() if k not in REQUIRED_KEYS}
    for key in sorted(extra):
      distance, known = min((_edit_distance(key, k), k) for k in REQUIRED_KEYS)
      if distance <= _TYPO_DISTANCE:
        raise ConfigError("%s: unknown key %r: did you mean %s?" %
                          (source, key, known))
    missing = [k for k in REQUIRED_KEYS if k not in json_object]
    if missing:
      raise ConfigError("%s: required field%s %s %s missing." % (
          source, "s" if len(missing) > 1 else "",
          ", ".join(repr(k) for k in missing),
          "are" if len(missing) > 1 else "is"))
    if extra:
      logging.info("%s: keeping keys the original BertConfig does not use: %s",
                   source, ", ".join(sorted(extra)))
    return cls(extra=extra, source=source,
               **{k: json_object[k] for k in REQUIRED_KEYS})

  @classmethod
  def from_json_file(cls, json_file):
    """Reads and validates a bert_config.json.

    Args:
      json_file: str, path of the JSON file (any tf.io.gfile path).

    Returns:
      A validated BertConfig.

    Raises:
      ConfigError: the file is missing, unreadable, not JSON, or invalid.
    """
    try:
      with tf.io.gfile.GFile(json_file, "r") as reader:
        text = reader.read()
    except (tf.errors.OpError, OSError) as e:
      raise ConfigError("Cannot read bert_config_file %s: %s" %
                        (json_file, e)) from None
    try:
      json_object = json.loads(text)
    except ValueError as e:
      raise ConfigError("bert_config_file %s is not valid JSON: %s" %
                        (json_file, e)) from None
    if isinstance(json_object, dict) and (
        "model_type" in json_object or "architectures" in json_object):
      # The original reads such a file too, so this warns, not refuses. Its
      # "gelu" is the exact erf form there and the tanh form here.
      logging.warning(
          "bert_config_file %s looks like a HuggingFace config.json "
          "(model_type / architectures keys), not a Google bert_config.json: "
          "its hidden_act %r means another function here. Convert the "
          "folder with convert_checkpoint.py and use its bert_config.json.",
          json_file, json_object.get("hidden_act"))
    return cls.from_dict(json_object, source="bert_config_file %s" % json_file)

  def to_dict(self):
    """Returns the config as a dict of JSON keys, extra keys included."""
    output = copy.deepcopy(self.extra)
    output.update({k: copy.deepcopy(v) for k, v in self.__dict__.items()
                   if k != "extra"})
    return output

  def to_json_string(self):
    """Returns the config as bert_config.json text (sorted keys, indent 2)."""
    return json.dumps(self.to_dict(), indent=2, sort_keys=True) + "\n"

  def __eq__(self, other):
    return isinstance(other, BertConfig) and self.to_dict() == other.to_dict()

  def __repr__(self):
    return "BertConfig(%s)" % ", ".join(
        "%s=%r" % kv for kv in sorted(self.to_dict().items()))


def _edit_distance(a, b):
  """Levenshtein distance: the fewest inserted, deleted or replaced
  characters that turn a into b."""
  previous = list(range(len(b) + 1))
  for i, char_a in enumerate(a, 1):
    current = [i]
    for j, char_b in enumerate(b, 1):
      current.append(min(previous[j] + 1, current[j - 1] + 1,
                         previous[j - 1] + (char_a != char_b)))
    previous = current
  return previous[-1]
