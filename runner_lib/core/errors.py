"""User-facing errors and the runner entry point that reports them."""

import signal
import sys

from absl import app
from absl import logging

import modeling


class InputError(ValueError):
  """Bad flags or input files; the message names the culprit."""


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


# Errors whose message is the whole story: report it, skip the traceback.
USER_ERRORS = (InputError, modeling.ConfigError, modeling.CheckpointError)


def run(main):
  """Runs `main` under absl.app; user errors print one line and exit 1.

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
    except USER_ERRORS as e:
      logging.error("%s", e)
      sys.exit("Error: %s" % e)
    except Interrupted as e:
      logging.warning("%s", e)
      print("Interrupted: %s" % e, file=sys.stderr)
      sys.exit(e.exit_code)
    except KeyboardInterrupt:
      print("Interrupted: stopped by Ctrl-C.", file=sys.stderr)
      sys.exit(128 + signal.SIGINT)

  app.run(guarded)
