"""User-facing errors and the runner entry point that reports them."""

import errno
import os
import re
import signal
import sys

from absl import app
from absl import logging

from runner_lib.core import gfile


class InputError(ValueError):
  """Bad flags or input files; the message names the culprit."""


class OutputError(InputError):
  """An output cannot be written (a read-only or full disk, a directory in
  the way); the message names the path."""


class Interrupted(Exception):
  """Training stopped by a signal (Ctrl-C, preemption) after saving.

  Attributes:
    exit_code: int, 128 + the signal's number, what a shell reports for a
      process the signal killed: non-zero, so that a script or scheduler
      does not take the run for finished (and a preempted job is rerun).
  """

  def __init__(self, message, signum):
    super().__init__(message)
    self.exit_code = 128 + signum


def user_errors():
  """Errors whose message is the whole story: report it, skip the traceback.

  InputError, and modeling's ConfigError and CheckpointError where modeling
  is loaded. Looked up, not imported: a script that never loads modeling
  (and so TensorFlow), such as create_pretraining_data, cannot raise them
  and should not pay for the import.
  """
  modeling = sys.modules.get("modeling")
  if modeling is None or not hasattr(modeling, "CheckpointError"):
    return (InputError,)
  return (InputError, modeling.ConfigError, modeling.CheckpointError)


# Refusals the file system can give any write in the middle of a run (a
# full disk, a quota), after the checks before work passed.
_WRITE_FAILURES = (errno.ENOSPC, errno.EDQUOT, errno.EFBIG, errno.EROFS)

# Suffixes of the temporary names outputs are written under: this
# project's atomic writers (.tmp-PID) and TensorFlow's checkpoint writer
# (.tempstateNNN).
_TEMPORARY_SUFFIX = re.compile(r"\.(tmp-[0-9a-f]+|tempstate\d+)$")


def write_failure(e):
  """The one-line message for a write the file system refused, or None.

  Args:
    e: an exception: OSError or tf.errors.OpError (TensorFlow reports the
      file as "PATH; No space left on device").

  Returns:
    str naming the file (its final name, not the temporary one) and the
    reason, or None where e is not such a refusal.
  """
  if isinstance(e, OSError):
    if e.errno not in _WRITE_FAILURES:
      return None
    path, reason = e.filename, e.strerror
  elif isinstance(e, gfile.errors()):  # tf.errors.OpError
    # E.g. "{{function_node ...SaveV2...}} PATH; No space left on device
    # [Op:SaveV2]".
    first_line = re.sub(r"^\{\{function_node [^}]*\}\}\s*", "",
                        e.message.strip().split("\n")[0])
    for code in _WRITE_FAILURES:
      reason = os.strerror(code)
      if "; " + reason in first_line:
        path = first_line.rsplit("; " + reason, 1)[0]
        break
    else:
      return None
  else:
    return None
  if not path:
    return "Cannot write output: %s." % reason
  return "Cannot write %s: %s." % (
      _TEMPORARY_SUFFIX.sub("", str(path)), reason)


def run(main):
  """Runs `main` under absl.app; user errors print one line and exit 1.

  So do writes the file system refuses mid-run (write_failure).
  Arguments left after the flags (a typo such as `--do_train true`, which
  absl reads as --do_train and a stray "true") are a usage error. An
  interruption prints one line too: Interrupted's exit code, or 130 for a
  Ctrl-C outside training (nothing to save).
  """

  def guarded(argv):
    if len(argv) > 1:
      raise app.UsageError("Unexpected arguments: %s" % " ".join(argv[1:]))
    try:
      return main(argv)
    except user_errors() as e:
      logging.error("%s", e)
      sys.exit("Error: %s" % e)
    except gfile.errors() as e:
      message = write_failure(e)
      if message is None:
        raise
      logging.error("%s", message)
      sys.exit("Error: %s" % message)
    except Interrupted as e:
      logging.warning("%s", e)
      print("Interrupted: %s" % e, file=sys.stderr)
      sys.exit(e.exit_code)
    except KeyboardInterrupt:
      print("Interrupted: stopped by Ctrl-C.", file=sys.stderr)
      sys.exit(128 + signal.SIGINT)

  app.run(guarded)
