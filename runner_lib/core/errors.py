"""User-facing errors and the runner entry point that reports them."""

import sys

from absl import app
from absl import logging

import modeling


class InputError(ValueError):
  """Bad flags or input files; the message names the culprit."""


# Errors whose message is the whole story: report it, skip the traceback.
USER_ERRORS = (InputError, modeling.ConfigError, modeling.CheckpointError)


def run(main):
  """Runs `main` under absl.app; user errors print one line and exit 1.

  Arguments left after the flags (a typo such as `--do_train true`, which
  absl reads as --do_train and a stray "true") are a usage error.
  """

  def guarded(argv):
    if len(argv) > 1:
      raise app.UsageError("Unexpected arguments: %s" % " ".join(argv[1:]))
    try:
      return main(argv)
    except USER_ERRORS as e:
      logging.error("%s", e)
      sys.exit("Error: %s" % e)

  app.run(guarded)
