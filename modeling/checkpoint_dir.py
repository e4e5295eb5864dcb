"""A folder of checkpoints: its `checkpoint` state file and prefixes.

A training run's folder holds model.ckpt-STEP checkpoints and a state file
naming the newest one and those kept; Google's released folders hold one
prefix, bert_model.ckpt, and no state file. Both resuming a run and an
`--init_checkpoint` directory find their checkpoint here, the same way.

The state file names checkpoints by base name, which TensorFlow (e.g.
`tf.train.latest_checkpoint`) resolves against the state file's own folder.
Entries are read by base name too, whatever path they were written with:
absolute (the original's, from another machine or a folder since moved) or
relative to another directory (this project's `../../model.ckpt-N` before
it wrote base names), so a folder always reads its own files.

Nothing here opens a checkpoint: modeling/checkpoint.py reads them, and
falls back from a damaged one to the next candidate listed here.
"""

import os
import re
import uuid

from absl import logging
import tensorflow as tf

STATE_FILE = "checkpoint"
# The state file is written to STATE_FILE + TEMPORARY_SUFFIX + <hex> and
# renamed over STATE_FILE.
TEMPORARY_SUFFIX = ".tmp"

_INDEX = ".index"
# The sidecar checkpoint beside model.ckpt-STEP that holds the training
# state the original's checkpoints lack
# (runner_lib/core/training/checkpointing.py); deleted with it, as its
# files match model.ckpt-STEP.*. Not a checkpoint to load on its own.
TRAIN_STATE_SUFFIX = ".train_state"
# Training state that the original's own checkpoints hold beside the
# weights (AdamWeightDecayOptimizer's slots, global_step): it stays in
# model.ckpt-STEP, where every reader of Google checkpoints expects and
# skips it.
_ORIGINAL_TRAINING_STATE = r"/(adam_m|adam_v)$|^global_step$"
# Training state the original never writes (dropout generators, LAMB's
# slots, float16 loss scaling): it goes in the sidecar, because readers of
# Google checkpoints (HuggingFace's load_tf_weights_in_bert) would take it
# for weights.
_EXTRA_TRAINING_STATE = (
    r"^dropout_rng/\d+$|/(lamb_m|lamb_v)$|^(loss_scale|loss_scale_good_steps)$")
_TRAINING_STATE = re.compile(_ORIGINAL_TRAINING_STATE + "|" +
                             _EXTRA_TRAINING_STATE)
_SIDECAR_STATE = re.compile(_EXTRA_TRAINING_STATE)
_STEP_NAME = "model.ckpt-%d"
_STEP = re.compile(r"model\.ckpt-(\d+)$")
# Any file of a training checkpoint: its index, a data shard.
_FILE_STEP = re.compile(r"^model\.ckpt-(\d+)\.(index|data-\d+-of-\d+)$")


def step_of(prefix):
  """The global step in a model.ckpt-STEP prefix, or None."""
  m = _STEP.search(prefix or "")
  return int(m.group(1)) if m else None


def step_prefix(directory, step):
  """directory/model.ckpt-STEP."""
  return os.path.join(directory, _STEP_NAME % step)


def saved_steps(directory):
  """Steps of every model.ckpt-STEP file in directory, ascending."""
  if not tf.io.gfile.isdir(directory):
    return []
  found = (_FILE_STEP.match(name) for name in tf.io.gfile.listdir(directory))
  return sorted({int(m.group(1)) for m in found if m})


def _state_names(directory):
  """The base names the state file lists, newest last (each once); None
  where it is missing or cannot be parsed."""
  # get_checkpoint_state logs and returns None for a file it cannot parse,
  # and raises ValueError for one naming no checkpoint (empty).
  try:
    state = tf.train.get_checkpoint_state(directory)
  except ValueError:
    return None
  if state is None:
    return None
  newest = os.path.basename(state.model_checkpoint_path)
  return [n for n in (os.path.basename(p)
                      for p in state.all_model_checkpoint_paths)
          if n != newest] + [newest]


def state_steps(directory):
  """The steps the state file lists, newest last, or None where it is
  missing, unreadable or names something other than model.ckpt-STEP
  (a warning then says so)."""
  path = os.path.join(directory, STATE_FILE)
  if not tf.io.gfile.exists(path):
    return None
  steps = [step_of(name) for name in _state_names(directory) or []]
  if not steps or None in steps:
    logging.warning("State file %s is unreadable; looking at the "
                    "model.ckpt-STEP files instead.", path)
    return None
  return steps


def training_checkpoints(directory):
  """The training checkpoints to resume from, newest first, unread.

  The state file's newest and every older model.ckpt-STEP on disk (a
  damaged newest falls back to them); without a readable state file, every
  model.ckpt-STEP on disk.

  Returns:
    list of str, prefixes directory/model.ckpt-STEP.
  """
  on_disk = saved_steps(directory)
  state = state_steps(directory)
  if state is None:
    path = os.path.join(directory, STATE_FILE)
    if on_disk and not tf.io.gfile.exists(path):
      logging.warning("No state file %s beside %d checkpoint(s); looking "
                      "at the model.ckpt-STEP files instead.", path,
                      len(on_disk))
    steps = on_disk[::-1]
  else:
    steps = sorted({s for s in on_disk if s <= state[-1]} | {state[-1]},
                   reverse=True)
  return [step_prefix(directory, s) for s in steps]


def prefixes_on_disk(directory):
  """Every checkpoint prefix in directory (each one's index), sorted."""
  return sorted(os.path.join(directory, name[:-len(_INDEX)])
                for name in tf.io.gfile.listdir(directory)
                if name.endswith(_INDEX) and
                not name.endswith(TRAIN_STATE_SUFFIX + _INDEX))


def checkpoints_to_load(directory):
  """The checkpoints an `--init_checkpoint` directory stands for, newest
  first, unread: the state file's newest where it is another prefix in the
  folder (as TensorFlow's tools point a folder at bert_model.ckpt), else
  training_checkpoints, else the folder's one prefix (a released model's
  bert_model.ckpt).

  Returns:
    list of str, prefixes; empty where there is none, or several and
    nothing says which.
  """
  names = _state_names(directory)
  if names and step_of(names[-1]) is None:
    named = os.path.join(directory, names[-1])
    if tf.io.gfile.exists(named + _INDEX):
      return [named]
  found = training_checkpoints(directory)
  if found:
    return found
  others = prefixes_on_disk(directory)
  return others if len(others) == 1 else []


def write_state(directory, steps):
  """Points the state file at model.ckpt-<steps[-1]>, listing every step.

  Written here rather than by tf.compat.v1.train.update_checkpoint_state,
  which, for a relative directory, rewrites each relative path relative to
  that directory: a base name becomes `../../model.ckpt-N` for
  `--output_dir=a/b`, which no reader resolves (its internal variant with
  save_relative_paths=True does the same). The text is TensorFlow's
  CheckpointState format, so its readers parse it. Written to a temporary
  name and renamed: a reader sees the old file or the new one.

  Args:
    directory: str, the folder.
    steps: list of int, oldest first, the newest last.
  """
  names = [_STEP_NAME % s for s in steps]
  text = 'model_checkpoint_path: "%s"\n' % names[-1] + "".join(
      'all_model_checkpoint_paths: "%s"\n' % name for name in names)
  path = os.path.join(directory, STATE_FILE)
  temporary = path + TEMPORARY_SUFFIX + uuid.uuid4().hex
  with tf.io.gfile.GFile(temporary, "w") as f:
    f.write(text)
  tf.io.gfile.rename(temporary, path, overwrite=True)


def is_training_state(name):
  """Whether a checkpoint name is training state rather than a weight."""
  return bool(_TRAINING_STATE.search(name))


def is_sidecar_state(name):
  """Whether a training variable goes in the sidecar, not model.ckpt-N:
  state the original's checkpoints never hold."""
  return bool(_SIDECAR_STATE.search(name))
