"""Writing a serving module as a SavedModel, whole or not at all."""

import os
import shutil

from absl import logging
import tensorflow as tf

from runner_lib.core import errors
from runner_lib.core.files import fileio


def check_export_dir(export_dir, overwrite):
  """Refuses an existing non-empty export_dir unless overwrite, and one
  whose parent cannot be written (the model is written beside it first).

  Raises:
    errors.InputError: naming the directory.
  """
  if tf.io.gfile.isdir(export_dir) and tf.io.gfile.listdir(export_dir):
    if not overwrite:
      raise errors.InputError(
          "--export_dir %s exists and is not empty; pass --overwrite to "
          "replace it." % export_dir)
  elif tf.io.gfile.exists(export_dir) and not tf.io.gfile.isdir(export_dir):
    raise errors.InputError("--export_dir %s exists and is not a directory." %
                            export_dir)
  fileio.check_writable(os.path.dirname(export_dir) or ".",
                        "Cannot write --export_dir %s" % export_dir)


def save(module, export_dir, overwrite=False, write_beside=None):
  """Saves module with its signatures() to export_dir.

  The SavedModel is written beside export_dir under a temporary name and
  renamed into place when complete, so an interrupted export leaves no
  directory that looks like a model.

  Args:
    module: a modules.ServingModule.
    export_dir: str.
    overwrite: bool, replace an existing export_dir.
    write_beside: None, or a function of the directory being written,
      called before the SavedModel is saved there (openvino_model.write).

  Raises:
    errors.InputError: see check_export_dir, or export_dir's parent cannot
      be written.
  """
  check_export_dir(export_dir, overwrite)
  signatures = module.signatures()
  export_dir = os.path.abspath(export_dir)
  temporary = "%s.tmp-%d" % (export_dir, os.getpid())
  try:
    tf.io.gfile.makedirs(os.path.dirname(export_dir))
    if write_beside is not None:
      write_beside(temporary)
    tf.saved_model.save(module, temporary, signatures=signatures)
    if tf.io.gfile.exists(export_dir):
      shutil.rmtree(export_dir)
    os.rename(temporary, export_dir)
  except (tf.errors.OpError, OSError) as e:
    raise errors.InputError("Cannot write --export_dir %s: %s" %
                            (export_dir, e)) from None
  finally:
    if os.path.exists(temporary):
      shutil.rmtree(temporary)
  logging.info("Wrote the SavedModel to %s with signatures %s.", export_dir,
               ", ".join(sorted(signatures)))
