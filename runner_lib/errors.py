"""User-facing errors and the runner entry point that reports them."""

import sys

from absl import app
from absl import logging

from modeling import checkpoint
from modeling import config


class InputError(ValueError):
  """Bad flags or input files; the message names the culprit."""


# Errors whose message is the whole story: report it, skip the traceback.
USER_ERRORS = (InputError, config.ConfigError, checkpoint.CheckpointError)


def run(main):
  """Runs `main` under absl.app; user errors print one line and exit 1."""

  def guarded(argv):
    try:
      return main(argv)
    except USER_ERRORS as e:
      logging.error("%s", e)
      sys.exit("Error: %s" % e)

  app.run(guarded)
