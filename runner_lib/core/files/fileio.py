"""Output files that appear whole or not at all, and output locations
checked before any work."""

import contextlib
import os
import re

from absl import logging

from runner_lib.core import errors
from runner_lib.core import gfile


def reason(e):
  """The file system's reason in an OSError or tf.errors.OpError, without
  the path TensorFlow puts first ("PATH; Permission denied")."""
  if isinstance(e, OSError) and e.strerror:
    return e.strerror
  message = re.sub(r"\s*\[Op:\w+\]$", "", getattr(e, "message", str(e)))
  return message.rsplit("; ", 1)[-1].strip()


def naming_file(error, path):
  """error, naming path where it names no file.

  A buffered write's OSError (a full disk, often seen only at the flush)
  carries no file name; errors.write_failure reports the name it carries.

  Args:
    error: OSError.
    path: str, the file being written.

  Returns:
    OSError.
  """
  if error.filename is not None or not error.errno:
    return error
  return OSError(error.errno, error.strerror, path)


def check_output_dir(path, flag="output_dir"):
  """Checks, before any work, that `path` is a directory this process can
  write into, or one it can create.

  Nothing is created: a probe file is written and removed in `path`, or
  where it does not exist yet, in its nearest existing ancestor.

  Args:
    path: str, any gfile path.
    flag: str, the flag that gave it, for the message.

  Raises:
    errors.OutputError: naming the flag and the path.
  """
  if gfile.exists(path) and not gfile.isdir(path):
    raise errors.OutputError("--%s %s is a file, not a directory." %
                             (flag, path))
  check_writable(path, "Cannot write to --%s %s" % (flag, path))


def check_output_file(path, flag="output_file"):
  """Checks, before any work, that `path` can be written as a file: it is
  not a directory, and its directory is one this process can write into or
  create.

  Raises:
    errors.OutputError: naming the path and the flag.
  """
  culprit = "Cannot write output file %s (--%s)" % (path, flag)
  refuse_directory(path, culprit)
  check_writable(os.path.dirname(path) or ".", culprit)


def refuse_directory(path, culprit=None):
  """Raises errors.OutputError ("culprit: it is a directory.") where the
  output file path is a directory."""
  if gfile.isdir(path):
    raise errors.OutputError("%s: it is a directory." % (
        culprit or "Cannot write output file %s" % path))


def check_writable(directory, culprit):
  """Checks that files can be made in directory: writes and removes a probe
  file there or, where it does not exist yet, in its nearest existing
  ancestor.

  Args:
    directory: str, any gfile path.
    culprit: str, the start of the message: what cannot be written.

  Raises:
    errors.OutputError: "culprit: reason".
  """
  if not gfile.is_remote(directory):
    directory = os.path.abspath(directory)
  existing = directory
  while not gfile.exists(existing):
    parent = os.path.dirname(existing)
    if not parent or parent == existing:
      return
    existing = parent
  if not gfile.isdir(existing):
    raise errors.OutputError("%s: %s is a file, not a directory." %
                             (culprit, existing))
  probe = os.path.join(existing, ".write_probe.tmp-%d" % os.getpid())
  try:
    with gfile.open(probe, "w") as f:
      f.write("")
    gfile.remove(probe)
  except gfile.errors() as e:
    where = "" if existing == directory else " (in %s)" % existing
    raise errors.OutputError("%s%s: %s." % (culprit, where,
                                            reason(e))) from None


@contextlib.contextmanager
def atomic_output(path, mode="w"):
  """Opens a temporary file beside `path`, renamed to it on success.

  On any exception the temporary file is deleted, so an interrupted run
  never leaves a half-written file that looks complete.

  Args:
    path: str, final output path (any gfile path).
    mode: "w" or "wb".

  Yields:
    A writable file object.

  Raises:
    errors.OutputError: the output location cannot be written.
  """
  directory = os.path.dirname(path)
  temporary = "%s.tmp-%d" % (path, os.getpid())
  refuse_directory(path)
  try:
    if directory:
      gfile.makedirs(directory)
    writer = gfile.open(temporary, mode)
    # GFile opens on the first write: open now, so that a file nothing is
    # written to still appears (empty), and a refusal is reported here.
    writer.write(b"" if "b" in mode else "")
  except gfile.errors() as e:
    raise errors.OutputError("Cannot write output file %s: %s." %
                             (path, reason(e))) from None
  try:
    try:
      with writer:
        yield writer
    except OSError as e:
      raise naming_file(e, temporary) from None
    try:
      gfile.rename(temporary, path)
    except gfile.errors() as e:
      raise errors.OutputError("Cannot write output file %s: %s." %
                               (path, reason(e))) from None
  finally:
    if gfile.exists(temporary):
      gfile.remove(temporary)


def _is_leftover(name, pid, names):
  """Whether a file a failed run wrote in its output directory is to go:
  temporary files, the runner's record files, checkpoint data whose index
  was never written, and the training-state sidecar of such a checkpoint
  (model.ckpt-N.train_state.*, written before model.ckpt-N).

  Args:
    name: str, the file's name.
    pid: int, this process's id (the suffix of its temporary files).
    names: the names of all files in the directory.
  """
  checkpoint = re.match(
      r"(model\.ckpt-\d+)(\.data-|\.train_state\.(data-|index$))", name)
  return (name.endswith(".tmp-%d" % pid) or ".tempstate" in name or
          name.endswith(".tf_record") or
          bool(checkpoint and checkpoint.group(1) + ".index" not in names))


def _listing(directory):
  """{name: modification time} of the files in directory (none if absent)."""
  if not gfile.isdir(directory):
    return {}
  return {name: gfile.mtime_ns(os.path.join(directory, name))
          for name in gfile.listdir(directory)
          if not gfile.isdir(os.path.join(directory, name))}


# Output directories that this process shares with the chief of its
# cluster (leave_to_chief).
_CHIEFS_DIRECTORIES = set()


def leave_to_chief(directory):
  """Marks directory as written by the chief of this process's cluster.

  Another worker writes nothing there, so when it fails it must remove
  nothing there either: what it would take for its own leftovers are the
  chief's files in the making (a checkpoint's sidecar, written before its
  index; a `.tempstate`), which the chief is saving at that moment, the
  stop step of a preemption in particular. cleaned_on_failure leaves
  directory alone in this process from then on.

  Args:
    directory: str, as given to cleaned_on_failure.
  """
  _CHIEFS_DIRECTORIES.add(directory)


@contextlib.contextmanager
def cleaned_on_failure(directory):
  """Removes, when the body fails, what it left half done in directory.

  Removed are the files the body wrote (new, or rewritten since entry)
  that only served the failed run: temporary files (*.tmp-PID, TensorFlow's
  *.tempstate*), checkpoint data without its index, and record files
  (*.tf_record, which every run writes anew); its TensorBoard event files
  too where it saved no checkpoint (they would chart steps that no
  checkpoint holds); and directory itself if the body created it and left
  it empty. Checkpoints and complete results stay. A clean exit
  (SystemExit with status 0) is not a failure. Nothing is removed where
  the directory was left to the chief (leave_to_chief).

  Args:
    directory: str, the run's output directory (any gfile path).
  """
  before = _listing(directory)
  existed = gfile.exists(directory)
  try:
    yield
  except BaseException as e:
    if not (isinstance(e, SystemExit) and not e.code) and (
        directory not in _CHIEFS_DIRECTORIES):
      try:
        _remove_leftovers(directory, before, existed)
      except gfile.errors() as cleanup_error:
        # The run's own error is the one to report.
        logging.warning("Could not clean %s: %s", directory,
                        reason(cleanup_error))
    raise


def _remove_leftovers(directory, before, existed):
  after = _listing(directory)
  written = [name for name, mtime in after.items()
             if before.get(name) != mtime]
  saved_checkpoint = any(re.match(r"model\.ckpt-\d+\.index$", name)
                         for name in written)
  pid = os.getpid()
  for name in written:
    events = name.startswith("events.out.tfevents.")
    if _is_leftover(name, pid, after) or (events and not saved_checkpoint):
      gfile.remove(os.path.join(directory, name))
      logging.info("Removed %s, left by the failed run.",
                   os.path.join(directory, name))
  if not existed and gfile.isdir(directory) and not (
      gfile.listdir(directory)):
    gfile.rmtree(directory)


def write_eval_results(path, results):
  """Writes `key = value` lines, sorted by key, as the original's
  eval_results.txt, and logs them."""
  with atomic_output(path) as writer:
    for key in sorted(results):
      logging.info("  %s = %s", key, results[key])
      writer.write("%s = %s\n" % (key, results[key]))
