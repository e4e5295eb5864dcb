"""Training checkpoints in output_dir, in the original name-based format.

model.ckpt-STEP holds what the original run_pretraining.py wrote and nothing
else: the model's weights under Google's variable names, their `adam_m` /
`adam_v` optimizer slots beside them and `global_step`, so that every
reader of Google's checkpoints reads ours (HuggingFace's
load_tf_weights_in_bert stops at, or writes into a weight, any name it does
not know). The rest of the training state (the dropout generators' states,
so that a resumed run continues the same random stream; LAMB's slots;
float16 loss scaling) goes beside it in model.ckpt-STEP.train_state, a
checkpoint of its own, written first. The `checkpoint` state file is
rewritten atomically after the data and index files are complete. Which
checkpoints a folder holds, and the state file's format, are
modeling/checkpoint_dir.py's, so that an `--init_checkpoint` directory
reads as resuming does.

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
from modeling import checkpoint_dir

# What an interrupted write leaves: TensorFlow's BundleWriter writes
# `<file>.tempstate<N>` and renames it when complete; the state file is
# written as `checkpoint.tmp<hex>` and renamed.
_TEMPORARY = re.compile(r"(\.tempstate\d*$)|(^%s[0-9a-f]*$)" % re.escape(
    checkpoint_dir.STATE_FILE + checkpoint_dir.TEMPORARY_SUFFIX))

# The Trainer reports the step of the newest checkpoint with it.
step_of = checkpoint_dir.step_of

TRAIN_STATE_SUFFIX = checkpoint_dir.TRAIN_STATE_SUFFIX

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

  def latest(self):
    """The newest checkpoint prefix the state file (or, without one, the
    files) names, not yet verified; or None."""
    candidates = checkpoint_dir.training_checkpoints(self.output_dir)
    return candidates[0] if candidates else None

  def restore_latest(self):
    """Restores the newest intact checkpoint in output_dir.

    Returns:
      str, its prefix; None where output_dir holds no checkpoint.

    Raises:
      modeling.CheckpointError: checkpoints exist but none can be read, or
        they do not fit the variables (another config).
    """
    candidates = checkpoint_dir.training_checkpoints(self.output_dir)
    prefix, _ = modeling.first_intact(candidates, self.restore)
    if candidates and prefix is None:
      raise modeling.CheckpointError(
          "No intact checkpoint in %s to resume from; damaged: %s. Move "
          "them away (or use another --output_dir) to start over." %
          (self.output_dir,
           ", ".join(os.path.basename(p) for p in candidates)))
    return prefix

  def restore(self, prefix):
    """Assigns every variable from prefix, after reading it all.

    Raises:
      modeling.DamagedCheckpointError: a file is missing, truncated or
        corrupted (nothing is assigned).
      modeling.CheckpointError: a variable is missing or misshapen.
    """
    # Each name from the checkpoint that holds it: prefix, or its sidecar.
    readers = [(prefix, modeling.open_checkpoint(prefix))]
    sidecar = prefix + TRAIN_STATE_SUFFIX
    if tf.io.gfile.exists(sidecar + ".index"):
      readers.append((sidecar, modeling.open_checkpoint(sidecar)))
    source, shapes = {}, {}
    for index, (_, reader) in enumerate(readers):
      for name, shape in reader.get_variable_to_shape_map().items():
        source[name], shapes[name] = index, shape
    lacking = sorted(n for n in self.variables
                     if checkpoint_dir.is_sidecar_state(n) and n not in shapes)
    if lacking and self._sidecars_elsewhere(prefix):
      # Not the original's (which has no sidecar anywhere): ours, its
      # sidecar lost.
      raise modeling.DamagedCheckpointError(
          "Checkpoint %s lacks its training state %s.* (other checkpoints "
          "in %s have theirs): it was removed or never completed." %
          (prefix, os.path.basename(sidecar), self.output_dir))
    # Checkpoints the original scripts wrote have no dropout generator
    # states; those start fresh.
    fresh = [n for n in lacking if n.startswith("dropout_rng/")]
    if fresh:
      logging.warning(
          "%s has no dropout generator states (%d): they start from their "
          "seeds, so the resumed run draws other dropout masks than an "
          "uninterrupted one would.", prefix, len(fresh))
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
    values = {}
    for index, (path, reader) in enumerate(readers):
      values.update(modeling.read_tensors(
          reader, path, [n for n in self.variables if source.get(n) == index]))
    for name, value in values.items():
      variable = self.variables[name]
      variable.assign(tf.cast(value, variable.dtype))
    logging.info("Restored %d variables from %s", len(self.variables), prefix)

  def _sidecars_elsewhere(self, prefix):
    """Whether output_dir holds a training-state sidecar of a checkpoint
    other than prefix."""
    own = os.path.basename(prefix) + TRAIN_STATE_SUFFIX + ".index"
    return any(name != own and name.endswith(TRAIN_STATE_SUFFIX + ".index")
               for name in tf.io.gfile.listdir(self.output_dir))

  def save(self, step):
    """Writes model.ckpt-STEP and points the state file at it."""
    prefix = checkpoint_dir.step_prefix(self.output_dir, step)
    extra = {n: v for n, v in self.variables.items()
             if checkpoint_dir.is_sidecar_state(n)}
    sidecar = prefix + TRAIN_STATE_SUFFIX
    if extra:
      modeling.save_variables(sidecar, extra)
    elif tf.io.gfile.exists(sidecar + ".index"):
      tf.io.gfile.remove(sidecar + ".index")  # Another run's, at this step.
    modeling.save_variables(prefix, {n: v for n, v in self.variables.items()
                                     if n not in extra})
    steps = checkpoint_dir.state_steps(self.output_dir)
    if steps is None:
      steps = [s for s in checkpoint_dir.saved_steps(self.output_dir)
               if s < step]
    steps = [s for s in steps if s != step] + [step]
    stale, steps = (steps[:-self.keep_checkpoint_max],
                    steps[-self.keep_checkpoint_max:])
    checkpoint_dir.write_state(self.output_dir, steps)
    for old in stale:
      for path in tf.io.gfile.glob(
          checkpoint_dir.step_prefix(self.output_dir, old) + ".*"):
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

