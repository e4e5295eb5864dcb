"""Training checkpoints in output_dir, in the original name-based format.

model.ckpt-STEP holds the model's weights under Google's variable names,
their `adam_m` / `adam_v` optimizer slots beside them and `global_step`, as
the original run_pretraining.py wrote them, plus the dropout generators'
states (so a resumed run continues the same random stream). The
`checkpoint` state file is rewritten atomically after the data and index
files are complete.

Resuming trusts no file blindly: the state file names the newest
checkpoint, but each candidate is read in full (index and every tensor,
checksums included) before it is used, and a damaged one is skipped for
the one before it, with a warning naming it. Without a readable state file
the model.ckpt-STEP files themselves are the candidates.
"""

import os
import re

from absl import logging
import tensorflow as tf

import modeling

_STEP = re.compile(r"model\.ckpt-(\d+)$")
# Any file of a checkpoint: its index, a data shard.
_FILE_STEP = re.compile(r"^model\.ckpt-(\d+)\.(index|data-\d+-of-\d+)$")
# What an interrupted write leaves: TensorFlow's BundleWriter writes
# `<file>.tempstate<N>` and renames it when complete; the state file is
# written as `checkpoint.tmp<hex>` and renamed.
_TEMPORARY = re.compile(r"(\.tempstate\d*$)|(^checkpoint\.tmp[0-9a-f]*$)")

STATE_FILE = "checkpoint"


class TrainingCheckpoint(object):
  """Saves and restores every training variable by name."""

  def __init__(self, output_dir, variables, keep_checkpoint_max=5):
    """Args:
      output_dir: str, where model.ckpt-STEP files go.
      variables: dict checkpoint name -> tf.Variable (weights, slots,
        global_step, generator states).
      keep_checkpoint_max: int, how many recent checkpoints to keep.
    """
    self.output_dir = output_dir
    self.variables = dict(variables)
    self.keep_checkpoint_max = keep_checkpoint_max

  def _prefix(self, step):
    return os.path.join(self.output_dir, "model.ckpt-%d" % step)

  def _state(self):
    """The state file's checkpoints as steps, newest last, or None where
    the file is missing or unreadable.

    Entries are taken by their base name inside output_dir: a directory
    moved or copied elsewhere still reads (and prunes) its own files.
    """
    path = os.path.join(self.output_dir, STATE_FILE)
    if not tf.io.gfile.exists(path):
      return None
    # get_checkpoint_state logs and returns None for a file it cannot
    # parse, and raises ValueError for one naming no checkpoint (empty).
    try:
      state = tf.train.get_checkpoint_state(self.output_dir)
    except ValueError:
      state = None
    steps = [step_of(p) for p in
             list(state.all_model_checkpoint_paths if state else []) +
             [state.model_checkpoint_path if state else ""]]
    if not state or None in steps:
      logging.warning("State file %s is unreadable; looking at the "
                      "model.ckpt-STEP files instead.", path)
      return None
    return [s for s in steps[:-1] if s != steps[-1]] + [steps[-1]]

  def steps_on_disk(self):
    """Steps of every model.ckpt-STEP file in output_dir, ascending."""
    if not tf.io.gfile.isdir(self.output_dir):
      return []
    found = (_FILE_STEP.match(name)
             for name in tf.io.gfile.listdir(self.output_dir))
    return sorted({int(m.group(1)) for m in found if m})

  def candidates(self):
    """Checkpoint steps to resume from, newest first: the state file's
    newest and every older one on disk; without a readable state file,
    every one on disk."""
    on_disk = self.steps_on_disk()
    state = self._state()
    if state is None:
      if on_disk and not tf.io.gfile.exists(
          os.path.join(self.output_dir, STATE_FILE)):
        logging.warning("No state file %s beside %d checkpoint(s); looking "
                        "at the model.ckpt-STEP files instead.",
                        os.path.join(self.output_dir, STATE_FILE),
                        len(on_disk))
      return on_disk[::-1]
    newest = state[-1]
    return sorted({s for s in on_disk if s <= newest} | {newest},
                  reverse=True)

  def latest(self):
    """The newest checkpoint prefix the state file (or, without one, the
    files) names, not yet verified; or None."""
    candidates = self.candidates()
    return self._prefix(candidates[0]) if candidates else None

  def restore_latest(self):
    """Restores the newest intact checkpoint in output_dir.

    Returns:
      str, its prefix; None where output_dir holds no checkpoint.

    Raises:
      modeling.CheckpointError: checkpoints exist but none can be read, or
        they do not fit the variables (another config).
    """
    candidates = self.candidates()
    damaged = []
    for step in candidates:
      prefix = self._prefix(step)
      try:
        self.restore(prefix)
      except modeling.DamagedCheckpointError as e:
        logging.warning("%s Falling back to the checkpoint before it.", e)
        damaged.append(prefix)
        continue
      if damaged:
        logging.warning("Resuming from %s: newer checkpoint(s) damaged: %s",
                        prefix, ", ".join(damaged))
      return prefix
    if damaged:
      raise modeling.CheckpointError(
          "No intact checkpoint in %s to resume from; damaged: %s. Move "
          "them away (or use another --output_dir) to start over." %
          (self.output_dir, ", ".join(os.path.basename(p) for p in damaged)))
    return None

  def restore(self, prefix):
    """Assigns every variable from prefix, after reading it all.

    Raises:
      modeling.DamagedCheckpointError: a file is missing, truncated or
        corrupted (nothing is assigned).
      modeling.CheckpointError: a variable is missing or misshapen.
    """
    reader = modeling.open_checkpoint(prefix)
    shapes = reader.get_variable_to_shape_map()
    # Checkpoints the original scripts wrote have no dropout generator
    # states; those start fresh.
    bad = [name for name, v in self.variables.items()
           if (name not in shapes and not name.startswith("dropout_rng/")) or
           (name in shapes and list(shapes[name]) != v.shape.as_list())]
    if bad:
      raise modeling.CheckpointError(
          "Cannot resume from %s: %d variable(s) missing or of another "
          "shape (was output_dir used with another config?):\n  %s" %
          (prefix, len(bad), "\n  ".join(sorted(bad))))
    # Every tensor is read (and its checksum checked) before the first
    # assignment, so a damaged checkpoint leaves the variables untouched
    # for the fallback to the one before it.
    values = modeling.read_tensors(
        reader, prefix, [n for n in self.variables if n in shapes])
    for name, value in values.items():
      variable = self.variables[name]
      variable.assign(tf.cast(value, variable.dtype))
    logging.info("Restored %d variables from %s", len(self.variables), prefix)

  def save(self, step):
    """Writes model.ckpt-STEP and points the state file at it."""
    prefix = self._prefix(step)
    modeling.save_variables(prefix, self.variables)
    steps = self._state()
    if steps is None:
      steps = [s for s in self.steps_on_disk() if s < step]
    steps = [s for s in steps if s != step] + [step]
    stale, steps = (steps[:-self.keep_checkpoint_max],
                    steps[-self.keep_checkpoint_max:])
    # Base names, which TensorFlow reads relative to output_dir (the
    # original wrote absolute paths, so a moved output_dir resumed from,
    # and pruned, its old location). Written to a temporary file and
    # renamed: atomic.
    tf.compat.v1.train.update_checkpoint_state(
        self.output_dir, os.path.basename(prefix),
        all_model_checkpoint_paths=[
            os.path.basename(self._prefix(s)) for s in steps])
    for old in stale:
      for path in tf.io.gfile.glob(self._prefix(old) + ".*"):
        tf.io.gfile.remove(path)
    logging.info("Saved %s", prefix)
    return prefix


def remove_temporaries(output_dir):
  """Deletes what an interrupted checkpoint write left in output_dir
  (`*.tempstate*`, `checkpoint.tmp*`). Only safe while no other process
  writes there: call it holding outdir_lock."""
  for name in tf.io.gfile.listdir(output_dir):
    if _TEMPORARY.search(name):
      logging.warning("Removing %s, left by an interrupted checkpoint write.",
                      os.path.join(output_dir, name))
      tf.io.gfile.remove(os.path.join(output_dir, name))


def step_of(prefix):
  """The global step in a model.ckpt-STEP prefix, or None."""
  m = _STEP.search(prefix or "")
  return int(m.group(1)) if m else None
