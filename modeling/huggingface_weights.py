"""HuggingFace BERT tensors to Google's checkpoint variables, and back.

The weights are the same numbers: a HuggingFace Linear weight is [out, in]
where Google's kernel is [in, out], so each "/kernel" is transposed; every
other tensor keeps its orientation (cls/seq_relationship/output_weights is
[2, H] in both).

HuggingFace files spell the same weights several ways: with the "bert."
prefix (BertForPreTraining, BertForMaskedLM) or without (BertModel),
LayerNorm "weight"/"bias" or the old "gamma"/"beta", with or without the
position_ids buffer (0, 1, ..., max_position_embeddings - 1) and the masked
LM's decoder.weight / decoder.bias (copies of the word embeddings and of
cls.predictions.bias, which Google's model ties), in float32 or float16.
Google's checkpoint has one float32 variable per weight. The choices are a
Layout: google_weights finds a file's, hf_weights writes any, and
canonical_layout is what transformers' save_pretrained writes: the prefix
only with heads, weight/bias, no position_ids, no decoder copies
(transformers ties them again on load).
"""

import collections
import re

from absl import logging
import numpy as np

from modeling import checkpoint
from modeling import checkpoint_dir
from modeling import heads
from modeling import pretrainer

# Google name -> HuggingFace name (without the "bert." prefix, which cls.*
# never has), in the checkpoint map's order.
_NAMES = {
    "bert/embeddings/word_embeddings": "embeddings.word_embeddings.weight",
    "bert/embeddings/token_type_embeddings":
        "embeddings.token_type_embeddings.weight",
    "bert/embeddings/position_embeddings":
        "embeddings.position_embeddings.weight",
    "bert/embeddings/LayerNorm/gamma": "embeddings.LayerNorm.weight",
    "bert/embeddings/LayerNorm/beta": "embeddings.LayerNorm.bias",
    "bert/pooler/dense/kernel": "pooler.dense.weight",
    "bert/pooler/dense/bias": "pooler.dense.bias",
    "cls/predictions/transform/dense/kernel":
        "cls.predictions.transform.dense.weight",
    "cls/predictions/transform/dense/bias":
        "cls.predictions.transform.dense.bias",
    "cls/predictions/transform/LayerNorm/gamma":
        "cls.predictions.transform.LayerNorm.weight",
    "cls/predictions/transform/LayerNorm/beta":
        "cls.predictions.transform.LayerNorm.bias",
    # cls/predictions/output_bias: Layout.masked_lm_biases[0].
    "cls/seq_relationship/output_weights": "cls.seq_relationship.weight",
    "cls/seq_relationship/output_bias": "cls.seq_relationship.bias",
}
# The same under bert/encoder/layer_N/ and encoder.layer.N.
_LAYER_NAMES = {
    "attention/self/query/kernel": "attention.self.query.weight",
    "attention/self/query/bias": "attention.self.query.bias",
    "attention/self/key/kernel": "attention.self.key.weight",
    "attention/self/key/bias": "attention.self.key.bias",
    "attention/self/value/kernel": "attention.self.value.weight",
    "attention/self/value/bias": "attention.self.value.bias",
    "attention/output/dense/kernel": "attention.output.dense.weight",
    "attention/output/dense/bias": "attention.output.dense.bias",
    "attention/output/LayerNorm/gamma": "attention.output.LayerNorm.weight",
    "attention/output/LayerNorm/beta": "attention.output.LayerNorm.bias",
    "intermediate/dense/kernel": "intermediate.dense.weight",
    "intermediate/dense/bias": "intermediate.dense.bias",
    "output/dense/kernel": "output.dense.weight",
    "output/dense/bias": "output.dense.bias",
    "output/LayerNorm/gamma": "output.LayerNorm.weight",
    "output/LayerNorm/beta": "output.LayerNorm.bias",
}
_WORD_EMBEDDINGS = "bert/embeddings/word_embeddings"
_OUTPUT_BIAS = "cls/predictions/output_bias"
# HuggingFace's masked LM bias is one parameter under two names; files hold
# either or both.
_MASKED_LM_BIASES = ("cls.predictions.bias", "cls.predictions.decoder.bias")
_DECODER_WEIGHT = "cls.predictions.decoder.weight"
_POSITION_IDS = "embeddings.position_ids"

MASKED_LM = frozenset(checkpoint.head_variable_names(heads.MaskedLMHead))
NEXT_SENTENCE = frozenset(
    checkpoint.head_variable_names(heads.NextSentenceHead))
_TASK_HEADS = frozenset(
    name for head_class in checkpoint.HEAD_VARIABLES
    if head_class not in (heads.MaskedLMHead, heads.NextSentenceHead)
    for name in checkpoint.head_variable_names(head_class))

# prefix: "" or "bert."; layer_norm: "weight/bias" or "gamma/beta";
# position_ids: None or the buffer's dtype name; masked_lm_biases: the bias
# names held (non-empty, the first one read); decoder_weight: bool, whether
# decoder.weight is held; dtype: "float32" or "float16", of the weights.
Layout = collections.namedtuple("Layout", [
    "prefix", "layer_norm", "position_ids", "masked_lm_biases",
    "decoder_weight", "dtype"])


def canonical_layout(with_heads):
  """The layout transformers' save_pretrained writes."""
  return Layout("bert." if with_heads else "", "weight/bias", None,
                [_MASKED_LM_BIASES[0]], False, "float32")


def layout_from_dict(values, source):
  """A Layout from Layout._asdict()'s JSON.

  Raises:
    CheckpointError: not such a dict.
  """
  layout = None
  if isinstance(values, dict) and set(values) == set(Layout._fields):
    layout = Layout(**values)
  if layout is None or not (
      layout.prefix in ("", "bert.") and
      layout.layer_norm in ("weight/bias", "gamma/beta") and
      layout.position_ids in (None, "int64", "int32") and
      isinstance(layout.masked_lm_biases, list) and
      layout.masked_lm_biases and
      set(layout.masked_lm_biases) <= set(_MASKED_LM_BIASES) and
      isinstance(layout.decoder_weight, bool) and
      layout.dtype in ("float32", "float16")):
    raise checkpoint.CheckpointError(
        "%s: not a tensor layout convert_checkpoint.py writes: %s" %
        (source, values))
  return layout


def _hf_name(google_name, layout):
  """The HuggingFace name of a Google variable, spelt as layout says."""
  if google_name == _OUTPUT_BIAS:
    return layout.masked_lm_biases[0]
  match = re.match(r"bert/encoder/layer_(\d+)/(.+)$", google_name)
  if match:
    name = "encoder.layer.%s.%s" % (match.group(1),
                                    _LAYER_NAMES[match.group(2)])
  else:
    name = _NAMES[google_name]
  if not name.startswith("cls."):
    name = layout.prefix + name
  if layout.layer_norm == "gamma/beta":
    name = re.sub(r"\.LayerNorm\.weight$", ".LayerNorm.gamma", name)
    name = re.sub(r"\.LayerNorm\.bias$", ".LayerNorm.beta", name)
  return name


def google_shapes(config, masked_lm, next_sentence):
  """Google name -> shape of the variables BertPretrainer(config) loads:
  the encoder's, and the pre-training heads' asked for.

  Args:
    config: BertConfig.
    masked_lm, next_sentence: bool, whether to include that head.

  Returns:
    OrderedDict, in the checkpoint map's order.
  """
  model = pretrainer.BertPretrainer(config)
  return collections.OrderedDict(
      (name, variable.shape.as_list())
      for name, variable in checkpoint.variable_map(model).items()
      if (masked_lm or name not in MASKED_LM) and
      (next_sentence or name not in NEXT_SENTENCE))


def _hf_entries(config, layout, shapes):
  """What a HuggingFace file of this layout holds.

  Args:
    config: BertConfig.
    layout: Layout.
    shapes: from google_shapes.

  Returns:
    OrderedDict HuggingFace name -> (Google name, HuggingFace shape); a
    tied copy comes after the tensor it copies and names the same Google
    variable; position_ids names None.
  """
  entries = collections.OrderedDict()
  for name, shape in shapes.items():
    entries[_hf_name(name, layout)] = (
        name, shape[::-1] if name.endswith("/kernel") else shape)
  if _OUTPUT_BIAS in shapes:
    copies = [(n, _OUTPUT_BIAS) for n in layout.masked_lm_biases[1:]]
    if layout.decoder_weight:
      copies.append((_DECODER_WEIGHT, _WORD_EMBEDDINGS))
    for copy, name in copies:
      entries[copy] = (name, shapes[name])
  if layout.position_ids:
    entries[layout.prefix + _POSITION_IDS] = (
        None, [1, config.max_position_embeddings])
  return entries


def check_names_and_shapes(found, expected, source, described_by):
  """Raises CheckpointError listing every name missing, unknown or of the
  wrong shape.

  Args:
    found, expected: dict name -> shape.
    source: str, the file found's names are from.
    described_by: str, the config file expected's are from.
  """
  missing = [n for n in expected if n not in found]
  unknown = sorted(set(found) - set(expected))
  misshapen = ["%s %s (expected %s)" % (n, list(found[n]), list(expected[n]))
               for n in expected
               if n in found and list(found[n]) != list(expected[n])]
  problems = ["%d %s: %s" % (len(names), what, ", ".join(names))
              for what, names in (("missing", missing), ("unknown", unknown),
                                  ("of the wrong shape", misshapen)) if names]
  if problems:
    raise checkpoint.CheckpointError(
        "%s does not hold the BERT %s describes: %s." %
        (source, described_by, "; ".join(problems)))


def _weights_dtype(tensors, source):
  """The one float dtype of a file's weights, "float32" or "float16"."""
  dtypes = collections.defaultdict(list)
  for name, value in tensors.items():
    if not name.endswith(_POSITION_IDS):
      dtypes[value.dtype.name].append(name)
  if len(dtypes) > 1 or not set(dtypes) <= {"float32", "float16"}:
    raise checkpoint.CheckpointError(
        "%s: cannot convert weights of dtype %s: expected all float32 or all "
        "float16." % (source, "; ".join(
            "%s (%s%s)" % (dtype, ", ".join(names[:3]),
                           ", ..." if names[3:] else "")
            for dtype, names in sorted(dtypes.items()))))
  return next(iter(dtypes), "float32")


def google_weights(tensors, config, source, described_by):
  """A HuggingFace file's tensors as Google's variables.

  Args:
    tensors: dict HuggingFace name -> numpy array.
    config: BertConfig, of the file's config.json.
    source, described_by: str, the weights and the config file, for
      messages.

  Returns:
    (dict Google name -> float32 array, the file's Layout).

  Raises:
    CheckpointError: tensors missing, unknown or of the wrong shape (each
      named), weights not all float32 or all float16, a position_ids other
      than 0, 1, ..., or a copy that differs from what it should copy.
  """
  names = set(tensors)
  prefix = "bert." if any(n.startswith("bert.") for n in names) else ""
  position_ids = tensors.get(prefix + _POSITION_IDS)
  layout = Layout(
      prefix=prefix,
      layer_norm=("gamma/beta" if any(
          re.search(r"\.LayerNorm\.(gamma|beta)$", n) for n in names)
                  else "weight/bias"),
      position_ids=None if position_ids is None else position_ids.dtype.name,
      masked_lm_biases=([n for n in _MASKED_LM_BIASES if n in names] or
                        [_MASKED_LM_BIASES[0]]),
      decoder_weight=_DECODER_WEIGHT in names,
      dtype=_weights_dtype(tensors, source))
  entries = _hf_entries(config, layout, google_shapes(
      config, any(n.startswith("cls.predictions.") for n in names),
      any(n.startswith("cls.seq_relationship.") for n in names)))
  check_names_and_shapes({n: v.shape for n, v in tensors.items()},
                         {n: shape for n, (_, shape) in entries.items()},
                         source, described_by)
  weights = {}
  for name, (google_name, _) in entries.items():
    value = tensors[name]
    if google_name is None:
      # Positions 0..T-1 are what this model (and Google's) adds.
      if value.dtype.kind != "i" or not np.array_equal(
          value[0], np.arange(value.shape[1])):
        raise checkpoint.CheckpointError(
            "%s: %s is not the integers 0, 1, ..., %d that positions are." %
            (source, name, value.shape[1] - 1))
    elif google_name in weights:
      original = _hf_name(google_name, layout)
      if not np.array_equal(value, tensors[original]):
        raise checkpoint.CheckpointError(
            "%s: %s differs from %s, which Google's masked LM ties it to." %
            (source, name, original))
    else:
      # float16 to float32 is exact, so converting back restores it.
      weights[google_name] = (value.T if google_name.endswith("/kernel")
                              else value).astype(np.float32)
  return weights, layout


def hf_weights(values, config, layout):
  """Google variables as a HuggingFace file's tensors, spelt as layout says.

  Args:
    values: dict Google name -> float32 array: the encoder's variables and
      those of the pre-training heads the file is to hold.
    config: BertConfig.
    layout: Layout.

  Returns:
    dict HuggingFace name -> contiguous numpy array, in layout.dtype where
    every weight fits it exactly, else float32 (with a warning).
  """
  shapes = collections.OrderedDict(
      (name, list(value.shape)) for name, value in values.items())
  tensors = {}
  for name, (google_name, _) in _hf_entries(config, layout, shapes).items():
    if google_name is None:
      tensors[name] = np.arange(config.max_position_embeddings,
                                dtype=layout.position_ids)[np.newaxis]
    else:
      value = values[google_name]
      tensors[name] = np.ascontiguousarray(
          value.T if google_name.endswith("/kernel") else value)
  if layout.dtype != "float32":
    narrow = {n: v.astype(layout.dtype) if v.dtype == np.float32 else v
              for n, v in tensors.items()}
    if all(np.array_equal(narrow[n].astype(v.dtype), v)
           for n, v in tensors.items()):
      return narrow
    logging.warning("The weights no longer fit %s exactly (trained since "
                    "the conversion?): writing float32.", layout.dtype)
  return tensors


def model_variables(shapes, source):
  """The checkpoint variables a HuggingFace file can hold.

  Optimizer and training state goes silently; fine-tuning heads go with a
  warning (HuggingFace's BertModel and BertForPreTraining have no place for
  them). Other variables stay, for the caller's check to name.

  Args:
    shapes: dict name -> shape, a checkpoint's variables.
    source: str, the checkpoint, for messages.

  Returns:
    dict name -> shape.
  """
  task_heads = sorted(n for n in shapes if n in _TASK_HEADS)
  if task_heads:
    logging.warning("%s: not converting the fine-tuning head variables %s.",
                    source, ", ".join(task_heads))
  return {n: s for n, s in shapes.items()
          if n not in _TASK_HEADS and not checkpoint_dir.is_training_state(n)}


def architecture(masked_lm, next_sentence):
  """transformers' class for a BERT with these pre-training heads."""
  return {(True, True): "BertForPreTraining", (True, False): "BertForMaskedLM",
          (False, True): "BertForNextSentencePrediction",
          (False, False): "BertModel"}[(masked_lm, next_sentence)]
