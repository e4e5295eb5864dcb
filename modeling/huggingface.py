"""Converts HuggingFace BERT folders to Google BERT folders, and back.

A HuggingFace folder holds config.json, model.safetensors (or
pytorch_model.bin, read only where PyTorch is installed) and vocab.txt. A
Google folder holds bert_config.json, vocab.txt and bert_model.ckpt.index /
.data-00000-of-00001 under the original TF1 variable names, which
`tf.train.load_checkpoint`, `modeling.load_checkpoint` and Google's own
scripts read.

The round trip. A HuggingFace file can spell its tensors in several ways
(huggingface_weights.Layout: prefix, gamma/beta, position_ids, tied
copies, float16) and its config.json holds keys bert_config.json has no
field for; Google's format has room for neither. So a conversion to Google
also writes huggingface_layout.json into the Google folder, recording both.
Only this module reads it (Google's tools and our runners ignore the file);
converting that folder back restores every tensor name, dtype and
config.json key, so HuggingFace -> Google -> HuggingFace returns each tensor
bit for bit (always as model.safetensors, also from a pytorch_model.bin). A
Google folder without it (Google's own, or a training run's) gets the layout
transformers' save_pretrained writes.

A folder is written under a temporary name beside output_dir and renamed
into place when complete, so a refused or failed conversion (one line,
CheckpointError or ConfigError) leaves nothing, and an existing output_dir
is replaced (with overwrite) only by a complete one.
"""

import importlib.util
import json
import os
import shutil

from absl import logging
import numpy as np
import safetensors
from safetensors import numpy as safetensors_numpy

from modeling import checkpoint
from modeling import config as config_lib
from modeling import huggingface_config
from modeling import huggingface_weights

HF_CONFIG = "config.json"
SAFETENSORS = "model.safetensors"
PYTORCH = "pytorch_model.bin"
GOOGLE_CONFIG = "bert_config.json"
CHECKPOINT = "bert_model.ckpt"
VOCAB = "vocab.txt"
LAYOUT = "huggingface_layout.json"
FORMATS = ("google", "huggingface")

_LAYOUT_NOTE = ("Written and read by convert_checkpoint.py alone: the "
                "HuggingFace model this folder was converted from, its "
                "config.json keys and tensor names, restored when converting "
                "back.")
# safetensors' dtype names, for those numpy (and so this module) has.
_SAFETENSORS_DTYPES = {"F32": "float32", "F16": "float16", "I64": "int64",
                       "I32": "int32"}


def target_format(folder):
  """The format to convert a folder to: "google" for a HuggingFace folder
  (it holds config.json), "huggingface" for a Google one (bert_config.json).

  Raises:
    CheckpointError: the folder is missing, or holds neither or both.
  """
  _check_input_dir(folder)
  hf = os.path.exists(os.path.join(folder, HF_CONFIG))
  google = os.path.exists(os.path.join(folder, GOOGLE_CONFIG))
  if hf and google:
    raise checkpoint.CheckpointError(
        "%s holds both %s (HuggingFace) and %s (Google): say which format to "
        "write (--to)." % (folder, HF_CONFIG, GOOGLE_CONFIG))
  if not hf and not google:
    raise checkpoint.CheckpointError(
        "%s holds neither %s (a HuggingFace BERT folder) nor %s (a Google "
        "one)." % (folder, HF_CONFIG, GOOGLE_CONFIG))
  return "google" if hf else "huggingface"


def convert_folder(input_dir, output_dir, to=None, overwrite=False):
  """Converts a folder; output_dir appears only when complete.

  Args:
    input_dir: str, a local HuggingFace or Google BERT folder.
    output_dir: str, the folder to write.
    to: one of FORMATS, or None for the one input_dir is not
      (target_format).
    overwrite: bool; replace an existing, non-empty output_dir, once the
      new folder is complete.

  Returns:
    str, the format written.

  Raises:
    CheckpointError, ConfigError: one line naming what is wrong; nothing
      is written then.
    ValueError: to is not one of FORMATS.
  """
  writers = {"google": to_google, "huggingface": to_huggingface}
  _check_input_dir(input_dir)
  to = to or target_format(input_dir)
  if to not in writers:
    raise ValueError("to must be one of %s, got %r." % (FORMATS, to))
  _check_output_dir(input_dir, output_dir, overwrite)
  _write_whole(os.path.abspath(output_dir),
               lambda folder: writers[to](input_dir, folder))
  return to


def to_google(hf_dir, output_dir):
  """Writes the Google folder of a HuggingFace one into output_dir.

  Args:
    hf_dir: str, holding config.json, model.safetensors (or
      pytorch_model.bin) and vocab.txt.
    output_dir: str, an existing empty folder.

  Returns:
    The BertConfig written.
  """
  config_path = _input_file(hf_dir, HF_CONFIG)
  weights_path = _hf_weights_file(hf_dir)
  vocab_path = _input_file(hf_dir, VOCAB)
  config, kept = huggingface_config.from_huggingface(
      _read_json(config_path, config_lib.ConfigError), config_path)
  weights, layout = huggingface_weights.google_weights(
      read_hf_weights(weights_path), config, weights_path, config_path)
  checkpoint.save_variables(os.path.join(output_dir, CHECKPOINT), weights)
  with open(os.path.join(output_dir, GOOGLE_CONFIG), "w") as f:
    f.write(config.to_json_string())
  _write_json(os.path.join(output_dir, LAYOUT), {
      "about": _LAYOUT_NOTE, "config": kept, "tensors": layout._asdict()})
  shutil.copyfile(vocab_path, os.path.join(output_dir, VOCAB))
  logging.info("Converted %d tensors of %s (hidden_act %s).", len(weights),
               weights_path, config.hidden_act)
  return config


def to_huggingface(google_dir, output_dir):
  """Writes the HuggingFace folder of a Google one into output_dir.

  Args:
    google_dir: str, holding bert_config.json, vocab.txt and
      bert_model.ckpt.* (or a 'checkpoint' file naming the latest
      checkpoint there), and huggingface_layout.json where it was
      converted from HuggingFace.
    output_dir: str, an existing empty folder.

  Returns:
    dict, the config.json written.
  """
  config_path = _input_file(google_dir, GOOGLE_CONFIG)
  vocab_path = _input_file(google_dir, VOCAB)
  prefix = _checkpoint_prefix(google_dir)
  config = config_lib.BertConfig.from_json_file(config_path)
  kept, layout = _read_layout(google_dir)
  values, masked_lm, next_sentence = _read_google_weights(prefix, config,
                                                          config_path)
  layout = layout or huggingface_weights.canonical_layout(
      masked_lm or next_sentence)
  safetensors_numpy.save_file(
      huggingface_weights.hf_weights(values, config, layout),
      os.path.join(output_dir, SAFETENSORS), metadata={"format": "pt"})
  hf_config = huggingface_config.to_huggingface(
      config, kept, huggingface_weights.architecture(masked_lm,
                                                     next_sentence))
  _write_json(os.path.join(output_dir, HF_CONFIG), hf_config)
  shutil.copyfile(vocab_path, os.path.join(output_dir, VOCAB))
  logging.info("Converted %d variables of %s (hidden_act %s).", len(values),
               prefix, hf_config["hidden_act"])
  return hf_config


def _read_google_weights(prefix, config, config_path):
  """The variables of a Google checkpoint a HuggingFace file holds.

  Args:
    prefix: str, the checkpoint.
    config: BertConfig, of config_path.
    config_path: str, for messages.

  Returns:
    (dict name -> float32 array, whether it has the masked LM head, whether
    the next-sentence head).

  Raises:
    CheckpointError: variables missing, unknown or of the wrong shape,
      not float32, or damaged files.
  """
  reader = checkpoint.open_checkpoint(prefix)
  found = huggingface_weights.model_variables(
      reader.get_variable_to_shape_map(), prefix)
  masked_lm = any(n in huggingface_weights.MASKED_LM for n in found)
  next_sentence = any(n in huggingface_weights.NEXT_SENTENCE for n in found)
  expected = huggingface_weights.google_shapes(config, masked_lm,
                                               next_sentence)
  huggingface_weights.check_names_and_shapes(
      found, expected, "Checkpoint %s" % prefix, config_path)
  values = checkpoint.read_tensors(reader, prefix, expected)
  other_dtypes = ["%s (%s)" % (n, v.dtype) for n, v in values.items()
                  if v.dtype != np.float32]
  if other_dtypes:
    raise checkpoint.CheckpointError(
        "Checkpoint %s: variables not float32: %s." %
        (prefix, ", ".join(other_dtypes)))
  return values, masked_lm, next_sentence


def read_hf_weights(path):
  """A model.safetensors or pytorch_model.bin, as numpy arrays.

  Args:
    path: str.

  Returns:
    dict name -> numpy array.

  Raises:
    CheckpointError: unreadable, or a tensor of a dtype numpy lacks
      (bfloat16).
  """
  if path.endswith(".bin"):
    import torch  # pylint: disable=g-import-not-at-top
    state = torch.load(path, map_location="cpu", weights_only=True)
    dtypes = {n: str(t.dtype).replace("torch.", "") for n, t in state.items()}
  else:
    try:
      with safetensors.safe_open(path, framework="np") as f:
        dtypes = {n: f.get_slice(n).get_dtype() for n in f.keys()}
        dtypes = {n: _SAFETENSORS_DTYPES.get(d, d) for n, d in dtypes.items()}
        state = {n: f.get_tensor(n) for n, d in dtypes.items()
                 if d in _SAFETENSORS_DTYPES.values()}
    except safetensors.SafetensorError as e:
      raise checkpoint.CheckpointError("Cannot read %s: %s" % (path, e))
  unreadable = ["%s (%s)" % (n, d) for n, d in sorted(dtypes.items())
                if d not in _SAFETENSORS_DTYPES.values()]
  if unreadable:
    raise checkpoint.CheckpointError(
        "%s: cannot convert tensors of dtype %s%s; save the model in float32 "
        "first." % (path, ", ".join(unreadable[:3]),
                    ", ..." if unreadable[3:] else ""))
  return {n: t.numpy() if path.endswith(".bin") else t
          for n, t in state.items()}


def _read_layout(google_dir):
  """(config.json keys to keep, huggingface_weights.Layout) from the
  folder's huggingface_layout.json, or ({}, None) where it has none.

  Raises:
    CheckpointError: the file is not one to_google writes.
  """
  path = os.path.join(google_dir, LAYOUT)
  if not os.path.exists(path):
    return {}, None
  recorded = _read_json(path, checkpoint.CheckpointError)
  if not isinstance(recorded, dict) or not isinstance(recorded.get("config"),
                                                      dict):
    raise checkpoint.CheckpointError(
        "%s: not a layout convert_checkpoint.py writes." % path)
  return recorded["config"], huggingface_weights.layout_from_dict(
      recorded.get("tensors"), path)


def _hf_weights_file(folder):
  """model.safetensors, else pytorch_model.bin where PyTorch can read it.

  Raises:
    CheckpointError: neither is there, or only pytorch_model.bin and
      PyTorch is not installed.
  """
  path = os.path.join(folder, SAFETENSORS)
  if os.path.isfile(path):
    return path
  path = os.path.join(folder, PYTORCH)
  if not os.path.isfile(path):
    raise checkpoint.CheckpointError(
        "HuggingFace folder %s holds neither %s nor %s." %
        (folder, SAFETENSORS, PYTORCH))
  if importlib.util.find_spec("torch") is None:
    raise checkpoint.CheckpointError(
        "%s: reading %s needs PyTorch, which is not installed (pip install "
        "torch, or save the model as %s)." % (folder, PYTORCH, SAFETENSORS))
  return path


def _checkpoint_prefix(folder):
  """folder/bert_model.ckpt, else the latest checkpoint the folder's
  'checkpoint' file names (a training run's output_dir).

  Raises:
    CheckpointError: neither is there.
  """
  prefix = os.path.join(folder, CHECKPOINT)
  if os.path.exists(prefix + ".index"):
    return prefix
  if os.path.exists(os.path.join(folder, "checkpoint")):
    return checkpoint.resolve_checkpoint_path(folder)
  raise checkpoint.CheckpointError(
      "Google BERT folder %s holds no %s.index (nor a 'checkpoint' file "
      "naming its latest checkpoint)." % (folder, CHECKPOINT))


def _check_input_dir(folder):
  if not os.path.isdir(folder):
    raise checkpoint.CheckpointError("Input folder %s does not exist." %
                                     folder)


def _input_file(folder, name):
  path = os.path.join(folder, name)
  if not os.path.isfile(path):
    raise checkpoint.CheckpointError("%s holds no %s." % (folder, name))
  return path


def _check_output_dir(input_dir, output_dir, overwrite):
  """Refuses an output_dir that is a file, that holds input_dir, or that
  is not empty (unless overwrite)."""
  if os.path.exists(output_dir) and not os.path.isdir(output_dir):
    raise checkpoint.CheckpointError("Output folder %s is a file." %
                                     output_dir)
  source = os.path.realpath(input_dir)
  target = os.path.realpath(output_dir)
  if source == target or source.startswith(target + os.sep):
    raise checkpoint.CheckpointError(
        "Output folder %s would replace the input folder %s." %
        (output_dir, input_dir))
  if os.path.isdir(output_dir) and os.listdir(output_dir) and not overwrite:
    raise checkpoint.CheckpointError(
        "Output folder %s exists and is not empty; pass --overwrite to "
        "replace it." % output_dir)


def _write_whole(output_dir, write):
  """Calls write(folder) on a new temporary folder beside output_dir, then
  renames it to output_dir. On any failure the temporary folder goes, and
  so do the parent folders made for it.

  Raises:
    CheckpointError: output_dir's parent cannot be written.
  """
  temporary = "%s.tmp-%d" % (output_dir, os.getpid())
  created = []
  parent = os.path.dirname(output_dir)
  while not os.path.exists(parent):
    created.append(parent)
    parent = os.path.dirname(parent)
  try:
    os.makedirs(temporary)
  except OSError as e:
    raise checkpoint.CheckpointError("Cannot write output folder %s: %s." %
                                     (output_dir, e.strerror)) from None
  try:
    write(temporary)
    _replace(temporary, output_dir)
  except BaseException:
    shutil.rmtree(temporary, ignore_errors=True)
    for folder in created:
      if os.path.isdir(folder) and not os.listdir(folder):
        os.rmdir(folder)
    raise


def _replace(temporary, output_dir):
  """Renames the complete temporary folder to output_dir. An old
  output_dir is moved aside first and removed last, so that one of the two
  is always there whole."""
  old = None
  if os.path.exists(output_dir):
    old = "%s.old-%d" % (output_dir, os.getpid())
    os.rename(output_dir, old)
  try:
    os.rename(temporary, output_dir)
  except OSError:
    if old:
      os.rename(old, output_dir)
    raise
  if old:
    shutil.rmtree(old)


def _read_json(path, error):
  """The JSON value of a file; error (an exception class) if it is not
  JSON."""
  with open(path, encoding="utf-8") as f:
    text = f.read()
  try:
    return json.loads(text)
  except ValueError as e:
    raise error("%s is not valid JSON: %s" % (path, e)) from None


def _write_json(path, value):
  with open(path, "w", encoding="utf-8") as f:
    f.write(json.dumps(value, indent=2, sort_keys=True) + "\n")
