"""Reads and writes Google's TF1 name-based BERT checkpoints.

The map between the original variable names and our Keras weights is data,
kept here in one place. Loading resolves every name the model needs, reports
what the file lacks or holds in the wrong shape (all of it, at once), and
ignores what the model does not use (optimizer slots, global_step, heads of
other tasks). Saving writes the same names, so tools made for Google's
checkpoints read ours unchanged. A directory stands for its newest intact
checkpoint (checkpoint_dir lists the candidates, as resuming does).
"""

import collections
import os

from absl import logging
import tensorflow as tf

from modeling import bert_model
from modeling import checkpoint_dir
from modeling import heads
from modeling import layers

# (original name, attribute path from BertModel).
BERT_VARIABLES = (
    ("bert/embeddings/word_embeddings", "embeddings.word_embeddings"),
    ("bert/embeddings/token_type_embeddings",
     "embeddings.token_type_embeddings"),
    ("bert/embeddings/position_embeddings", "embeddings.position_embeddings"),
    ("bert/embeddings/LayerNorm/gamma", "embeddings.layer_norm.gamma"),
    ("bert/embeddings/LayerNorm/beta", "embeddings.layer_norm.beta"),
    ("bert/pooler/dense/kernel", "pooler.dense.kernel"),
    ("bert/pooler/dense/bias", "pooler.dense.bias"),
)

# (name under bert/encoder/layer_N/, path from encoder_layers.N).
ENCODER_LAYER_VARIABLES = (
    ("attention/self/query/kernel", "attention.query.kernel"),
    ("attention/self/query/bias", "attention.query.bias"),
    ("attention/self/key/kernel", "attention.key.kernel"),
    ("attention/self/key/bias", "attention.key.bias"),
    ("attention/self/value/kernel", "attention.value.kernel"),
    ("attention/self/value/bias", "attention.value.bias"),
    ("attention/output/dense/kernel", "attention_output.kernel"),
    ("attention/output/dense/bias", "attention_output.bias"),
    ("attention/output/LayerNorm/gamma", "attention_layer_norm.gamma"),
    ("attention/output/LayerNorm/beta", "attention_layer_norm.beta"),
    ("intermediate/dense/kernel", "intermediate.kernel"),
    ("intermediate/dense/bias", "intermediate.bias"),
    ("output/dense/kernel", "output_dense.kernel"),
    ("output/dense/bias", "output_dense.bias"),
    ("output/LayerNorm/gamma", "output_layer_norm.gamma"),
    ("output/LayerNorm/beta", "output_layer_norm.beta"),
)

# Each head class's variables: (original name, path from the head layer).
# The order is the checkpoint map's (and the optimizer's) order. A new task's
# head gets one entry here.
HEAD_VARIABLES = collections.OrderedDict([
    (heads.MaskedLMHead, (
        ("cls/predictions/transform/dense/kernel", "transform.kernel"),
        ("cls/predictions/transform/dense/bias", "transform.bias"),
        ("cls/predictions/transform/LayerNorm/gamma", "layer_norm.gamma"),
        ("cls/predictions/transform/LayerNorm/beta", "layer_norm.beta"),
        ("cls/predictions/output_bias", "output_bias"),
    )),
    (heads.NextSentenceHead, (
        ("cls/seq_relationship/output_weights", "output_weights"),
        ("cls/seq_relationship/output_bias", "output_bias"),
    )),
    # run_classifier.py created these at the root scope.
    (heads.ClassifierHead, (
        ("output_weights", "output_weights"),
        ("output_bias", "output_bias"),
    )),
    (heads.SquadHead, (
        ("cls/squad/output_weights", "output_weights"),
        ("cls/squad/output_bias", "output_bias"),
    )),
    # The original has no SWAG or NER runner; their scopes follow
    # run_squad's.
    (heads.MultipleChoiceHead, (
        ("cls/swag/output_weights", "output_weights"),
        ("cls/swag/output_bias", "output_bias"),
    )),
    (heads.TokenClassifierHead, (
        ("cls/ner/output_weights", "output_weights"),
        ("cls/ner/output_bias", "output_bias"),
    )),
    # layer_weights only where the head mixes layers by a weighted sum.
    (heads.FeatureTaggerHead, (
        ("cls/ner_features/layer_weights", "layer_weights"),
    ) + tuple(
        ("cls/ner_features/lstm_%d/%s/%s" % (i, direction, weight),
         "lstms.%d.%s_layer.cell.%s" % (i, direction, weight))
        for i in range(heads.FeatureTaggerHead.NUM_LSTM_LAYERS)
        for direction in ("forward", "backward")
        for weight in ("kernel", "recurrent_kernel", "bias")) + (
            ("cls/ner_features/output_weights",
             "output_layer.output_weights"),
            ("cls/ner_features/output_bias", "output_layer.output_bias"),
        )),
])


class CheckpointError(ValueError):
  """A checkpoint that is missing or does not fit the model."""


class DamagedCheckpointError(CheckpointError):
  """A checkpoint whose files cannot be read back: truncated (an interrupted
  copy, a full disk) or corrupted (a checksum that does not match)."""


# What TensorFlow's checkpoint reader raises on damaged files: an OpError
# (DataLossError for a bad checksum, a bare OpError for an index that is
# not an sstable) or, for a data file cut short, a bare IndexError ("Read
# less bytes than requested").
_READ_ERRORS = (tf.errors.OpError, IndexError)


def _data_files(prefix):
  """prefix's data shards, as one name for messages."""
  shards = sorted(tf.io.gfile.glob(prefix + ".data-*"))
  return shards[0] if len(shards) == 1 else prefix + ".data-*"


def open_checkpoint(prefix):
  """A reader of prefix's index (its variable names and shapes).

  Raises:
    DamagedCheckpointError: the index is missing, truncated or corrupted.
  """
  if not tf.io.gfile.exists(prefix + ".index"):
    raise DamagedCheckpointError("Checkpoint %s has no index file %s.index."
                                 % (prefix, prefix))
  # Not tf.train.load_checkpoint, which first asks whether prefix is a
  # directory: ram:// (tests' remote file system) says yes to any prefix of
  # a file's name.
  try:
    return tf.compat.v1.train.NewCheckpointReader(prefix)
  except _READ_ERRORS as e:
    raise DamagedCheckpointError(
        "Checkpoint %s is damaged: cannot read %s.index (%s)." %
        (prefix, prefix, _first_line(e))) from e


def read_tensors(reader, prefix, names):
  """Reads the named tensors, checking each one's checksum.

  Args:
    reader: from open_checkpoint(prefix).
    prefix: str, for messages.
    names: iterable of str, variables the reader holds.

  Returns:
    dict name -> numpy array.

  Raises:
    DamagedCheckpointError: naming the data file, truncated or corrupted.
  """
  values = {}
  for name in names:
    try:
      values[name] = reader.get_tensor(name)
    except _READ_ERRORS as e:
      raise DamagedCheckpointError(
          "Checkpoint %s is damaged: cannot read %s from %s (%s)." %
          (prefix, name, _data_files(prefix), _first_line(e))) from e
  return values


def _first_line(error):
  text = str(error).strip() or type(error).__name__
  return text.splitlines()[0]


def _resolve(obj, path):
  for part in path.split("."):
    obj = obj[int(part)] if part.isdigit() else getattr(obj, part)
  return obj


def head_variable_names(head_class):
  """The original names of a head class's variables, e.g. ("output_weights",
  "output_bias") for heads.ClassifierHead: what a fine-tuning run adds to a
  pre-trained checkpoint."""
  return tuple(name for name, _ in HEAD_VARIABLES[head_class])


def _head_class(layer):
  """The HEAD_VARIABLES key a layer is an instance of, or None."""
  return next((c for c in type(layer).__mro__ if c in HEAD_VARIABLES), None)


def _heads(model, bert):
  """dict head class -> the model's one layer of that class.

  Raises:
    CheckpointError: two heads of one class (their names would collide).
  """
  if model is bert:
    return {}
  found = {}
  for layer in model.submodules:
    head_class = _head_class(layer)
    if head_class is None or layer is found.get(head_class):
      continue
    if head_class in found:
      raise CheckpointError(
          "%s holds two %s layers (%s, %s); their variables would share the "
          "checkpoint names %s." % (model.name, head_class.__name__,
                                    found[head_class].name, layer.name,
                                    ", ".join(head_variable_names(
                                        head_class))))
    found[head_class] = layer
  return found


def variable_map(model):
  """Maps each original checkpoint name to the model's variable.

  Args:
    model: a BertModel, or a Keras model holding one as `.bert` and heads
      of the classes in HEAD_VARIABLES (anywhere among its layers).

  Returns:
    OrderedDict str -> tf.Variable, in the original's order: BertModel's,
    then each head's in HEAD_VARIABLES order.

  Raises:
    TypeError: the model holds no BertModel.
    CheckpointError: the model holds two heads of one class.
  """
  bert = model if isinstance(model, bert_model.BertModel) else getattr(
      model, "bert", None)
  if not isinstance(bert, bert_model.BertModel):
    raise TypeError("%r is neither a BertModel nor holds one as .bert" % model)
  names = collections.OrderedDict()
  for name, path in BERT_VARIABLES[:5]:
    names[name] = _resolve(bert, path)
  for n in range(len(bert.encoder_layers)):
    for name, path in ENCODER_LAYER_VARIABLES:
      names["bert/encoder/layer_%d/%s" % (n, name)] = _resolve(
          bert, "encoder_layers.%d.%s" % (n, path))
  for name, path in BERT_VARIABLES[5:]:
    names[name] = _resolve(bert, path)
  model_heads = _heads(model, bert)
  for head_class, entries in HEAD_VARIABLES.items():
    if head_class in model_heads:
      for name, path in entries:
        variable = _resolve(model_heads[head_class], path)
        if variable is not None:  # An optional weight the head lacks.
          names[name] = variable
  return names


def unmapped_variables(model):
  """The model's trainable variables that no checkpoint name covers.

  Such a variable would be trained but never saved, restored or loaded: a
  layer added to a task model without a HEAD_VARIABLES entry.

  Returns:
    list of str, the variables' Keras names, in the model's order.
  """
  mapped = {id(v) for v in variable_map(model).values()}
  return [v.name for v in model.trainable_variables if id(v) not in mapped]


def dropout_state_variables(model):
  """The random-generator states of the model's dropouts, by name.

  Not part of the original format (tools for Google's checkpoints ignore
  them); training checkpoints carry them so that a resumed run draws the
  same dropout masks as one never interrupted.

  Returns:
    dict "dropout_rng/<n>" -> int64 state variable, in layer order.
  """
  dropouts = [l for l in model.submodules
              if isinstance(l, layers.Dropout) and l.rate]
  return {"dropout_rng/%d" % i: layer.generator.state
          for i, layer in enumerate(dropouts)}


def first_intact(prefixes, use):
  """Calls use on each checkpoint in turn until one's files read back.

  A damaged checkpoint (an interrupted copy, a full disk, a bad sector) is
  skipped for the one before it, with a warning naming it: resuming or
  initializing from a folder then costs the steps since that one, not the
  run.

  Args:
    prefixes: list of str, checkpoint prefixes, newest first.
    use: callable prefix -> result, raising DamagedCheckpointError (having
      changed nothing) where the prefix's files cannot be read.

  Returns:
    (prefix, use's result) of the first intact checkpoint; (None, None)
    where every one is damaged (or prefixes is empty).

  Raises:
    CheckpointError: from use, for a checkpoint that reads back but does
      not fit (no fallback: the one before would not fit either).
  """
  for n, prefix in enumerate(prefixes):
    try:
      result = use(prefix)
    except DamagedCheckpointError as e:
      logging.warning("%s Falling back to the checkpoint before it.", e)
      continue
    if n:
      logging.warning("Using %s: newer checkpoint(s) damaged: %s", prefix,
                      ", ".join(prefixes[:n]))
    return prefix, result
  return None, None


# The weight files of a HuggingFace model folder, which a Google
# checkpoint reader cannot read.
HUGGINGFACE_WEIGHT_FILES = ("model.safetensors", "pytorch_model.bin",
                            "tf_model.h5")


def _convert_hint(directory):
  """How to turn a HuggingFace folder into the Google one a runner reads."""
  return ("It looks like a HuggingFace model folder: convert it first "
          "(convert_checkpoint.py --input_dir=%s --output_dir=DIR), then give "
          "--init_checkpoint=DIR/bert_model.ckpt with DIR's bert_config.json "
          "and vocab.txt." % directory.rstrip("/"))


def _use_resolved(checkpoint, use):
  """Calls use on a prefix, or on a directory's newest intact checkpoint.

  Args:
    checkpoint: str, a prefix, or a directory: see
      checkpoint_dir.checkpoints_to_load for the checkpoints it stands for.
    use: as for first_intact.

  Returns:
    (prefix, use's result).

  Raises:
    CheckpointError: no such prefix or no checkpoint in the directory; or
      from use. DamagedCheckpointError: the prefix, or every checkpoint in
      the directory, is damaged.
  """
  # The prefix test first: ram:// takes any prefix of a file's name for a
  # directory.
  if tf.io.gfile.exists(checkpoint + ".index"):
    return checkpoint, use(checkpoint)
  if not tf.io.gfile.isdir(checkpoint):
    hint = ""
    if checkpoint.endswith((".index", ".meta")) or ".data-" in checkpoint:
      hint = " Give the prefix without the .index/.data/.meta suffix."
    elif checkpoint.endswith(HUGGINGFACE_WEIGHT_FILES):
      hint = " " + _convert_hint(os.path.dirname(checkpoint) or ".")
    raise CheckpointError("Checkpoint not found: %s (no file %s.index).%s" %
                          (checkpoint, checkpoint, hint))
  prefixes = checkpoint_dir.checkpoints_to_load(checkpoint)
  if not prefixes and any(
      tf.io.gfile.exists(os.path.join(checkpoint, name))
      for name in HUGGINGFACE_WEIGHT_FILES):
    raise CheckpointError("Directory %s holds no Google checkpoint. %s" %
                          (checkpoint, _convert_hint(checkpoint)))
  if not prefixes:
    others = checkpoint_dir.prefixes_on_disk(checkpoint)
    if others:
      raise CheckpointError(
          "Directory %s holds %d checkpoints (%s) and no 'checkpoint' state "
          "file naming one; give the prefix instead, e.g. %s" %
          (checkpoint, len(others),
           ", ".join(os.path.basename(p) for p in others), others[-1]))
    raise CheckpointError(
        "No checkpoint in directory %s (no 'checkpoint' state file, "
        "model.ckpt-N or other *.index file); give the prefix instead, "
        "e.g. %s/bert_model.ckpt" % (checkpoint, checkpoint.rstrip("/")))
  prefix, result = first_intact(prefixes, use)
  if prefix is None:
    raise DamagedCheckpointError(
        "No intact checkpoint in directory %s; damaged: %s." %
        (checkpoint, ", ".join(os.path.basename(p) for p in prefixes)))
  return prefix, result


def resolve_checkpoint_path(checkpoint):
  """Turns a checkpoint prefix or a directory into an existing prefix.

  Args:
    checkpoint: str, a prefix such as ".../bert_model.ckpt" (the files are
      prefix.index and prefix.data-*), or a directory: the newest
      checkpoint its state file names (by base name, wherever the file
      says it was), else its newest model.ckpt-N, else its one prefix. An
      index that cannot be read falls back to the checkpoint before it.

  Returns:
    str, the prefix; its index has been read, its data not yet.

  Raises:
    CheckpointError: nothing there, or indexes that cannot be read
      (DamagedCheckpointError).
  """
  return _use_resolved(checkpoint, open_checkpoint)[0]


LoadResult = collections.namedtuple("LoadResult",
                                    ["loaded", "missing", "unused"])


def load_checkpoint(model, checkpoint, allow_partial=False):
  """Loads an original-format checkpoint into a model.

  Args:
    model: a BertModel or a model accepted by variable_map.
    checkpoint: str, checkpoint prefix or directory (see
      resolve_checkpoint_path; in a directory a damaged checkpoint, index
      or data, falls back to the one before it, with a warning).
    allow_partial: bool; if True, variables the file lacks keep their
      initial values (fine-tuning from a pre-training checkpoint, whose
      task layer is new). Shape mismatches are errors either way.

  Returns:
    LoadResult of sorted name lists: loaded, missing (kept initial values),
    unused (in the file, not in the model).

  Raises:
    CheckpointError: the checkpoint is missing; or it lacks variables (unless
      allow_partial) or holds some in another shape, each one listed; or
      its files are damaged (DamagedCheckpointError, naming the file).
  """
  names = variable_map(model)
  return _use_resolved(
      checkpoint, lambda prefix: _load(names, prefix, allow_partial))[1]


def _load(names, path, allow_partial):
  """Assigns names' variables from the checkpoint path; see
  load_checkpoint. Raises DamagedCheckpointError before any assignment."""
  reader = open_checkpoint(path)
  shapes = reader.get_variable_to_shape_map()
  missing, mismatched = [], []
  for name, variable in names.items():
    if name not in shapes:
      missing.append(name)
    elif list(shapes[name]) != variable.shape.as_list():
      mismatched.append("%s: checkpoint %s, model %s" %
                        (name, shapes[name], variable.shape.as_list()))
  problems = []
  if mismatched:
    problems.append("%d variable(s) with the wrong shape:\n  %s" %
                    (len(mismatched), "\n  ".join(mismatched)))
  if missing and not allow_partial:
    problems.append("%d variable(s) missing:\n  %s" %
                    (len(missing), "\n  ".join(missing)))
  if problems:
    raise CheckpointError("Checkpoint %s does not fit the model (config "
                          "mismatch?). %s" % (path, "\n".join(problems)))
  loaded = [name for name in names if name in shapes]
  # Read in full before any assignment: a damaged file leaves the model as
  # it was.
  values = read_tensors(reader, path, loaded)
  for name in loaded:
    names[name].assign(tf.cast(values[name], names[name].dtype))
  unused = sorted(set(shapes) - set(names))
  for name in unused:
    logging.debug("Not used from %s: %s", path, name)
  for name in missing:
    logging.info("Not in %s, left at its initial value: %s", path, name)
  logging.info("Loaded %d variables from %s (%d missing, %d unused).",
               len(loaded), path, len(missing), len(unused))
  return LoadResult(sorted(loaded), sorted(missing), unused)


def save_variables(prefix, name_to_value):
  """Writes tensors as a TF1 name-based checkpoint.

  Args:
    prefix: str, checkpoint prefix; writes prefix.index and
      prefix.data-00000-of-00001 (the index last, so a checkpoint cut short
      has no index and is not mistaken for a whole one).
    name_to_value: dict str -> tf.Variable or Tensor.

  Returns:
    str, the prefix.
  """
  names = sorted(name_to_value)
  directory = prefix.rpartition("/")[0]
  if directory:
    tf.io.gfile.makedirs(directory)
  with tf.device("/cpu:0"):
    tensors = [tf.convert_to_tensor(name_to_value[n]) for n in names]
    tf.raw_ops.SaveV2(prefix=prefix, tensor_names=names,
                      shape_and_slices=[""] * len(names), tensors=tensors)
  return prefix


def save_checkpoint(model, prefix):
  """Writes a model's weights under the original variable names.

  Args:
    model: a BertModel or a model accepted by variable_map.
    prefix: str, checkpoint prefix, e.g. ".../model.ckpt-1000".

  Returns:
    str, the prefix.
  """
  return save_variables(prefix, variable_map(model))
