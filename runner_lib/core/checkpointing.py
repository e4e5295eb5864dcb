"""Training checkpoints in output_dir, in the original name-based format.

model.ckpt-STEP holds the model's weights under Google's variable names,
their `adam_m` / `adam_v` optimizer slots beside them and `global_step`, as
the original run_pretraining.py wrote them, plus the dropout generators'
states (so a resumed run continues the same random stream). The
`checkpoint` state file is rewritten atomically after the data and index
files are complete, so `latest` never names a half-written checkpoint.
"""

import os
import re

from absl import logging
import tensorflow as tf

import modeling

_STEP = re.compile(r"model\.ckpt-(\d+)$")


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
    """The newest complete checkpoint prefix in output_dir, or None."""
    return tf.train.latest_checkpoint(self.output_dir)

  def restore(self, prefix):
    """Assigns every variable from prefix.

    Raises:
      modeling.CheckpointError: a variable is missing or misshapen.
    """
    reader = tf.train.load_checkpoint(prefix)
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
    for name, variable in self.variables.items():
      if name in shapes:
        variable.assign(tf.cast(reader.get_tensor(name), variable.dtype))
    logging.info("Restored %d variables from %s", len(self.variables), prefix)

  def save(self, step):
    """Writes model.ckpt-STEP and points the state file at it."""
    prefix = os.path.join(self.output_dir, "model.ckpt-%d" % step)
    modeling.save_variables(prefix, self.variables)
    previous = tf.train.get_checkpoint_state(self.output_dir)
    paths = list(previous.all_model_checkpoint_paths) if previous else []
    paths = [p for p in paths if p != prefix] + [prefix]
    stale, paths = (paths[:-self.keep_checkpoint_max],
                    paths[-self.keep_checkpoint_max:])
    # Written to a temporary file and renamed: atomic.
    tf.compat.v1.train.update_checkpoint_state(
        self.output_dir, prefix, all_model_checkpoint_paths=paths)
    for old in stale:
      for path in tf.io.gfile.glob(old + ".*"):
        tf.io.gfile.remove(path)
    logging.info("Saved %s", prefix)
    return prefix


def step_of(prefix):
  """The global step in a model.ckpt-STEP prefix, or None."""
  m = _STEP.search(prefix or "")
  return int(m.group(1)) if m else None
