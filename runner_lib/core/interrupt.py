"""Ctrl-C and SIGTERM during training: save a checkpoint, then stop.

A signal is recorded rather than obeyed at once: the training loop looks
at it between calls into the graph (every --iterations_per_loop steps or
checkpoint), saves the current step and stops, so that the rerun resumes
exactly there. Python could not act sooner anyway: its handlers run only
once the graph call returns. A Ctrl-C after the first signal stops at once,
unsaved.
"""

import signal
import threading

from absl import logging

SIGNALS = (signal.SIGINT, signal.SIGTERM)


class StopRequests(object):
  """While entered, SIGINT and SIGTERM are recorded in `signum`.

  Usage:
    with StopRequests() as stop:
      while ...:
        train_some_steps()
        if stop.signum:
          ...save and stop...
  """

  def __init__(self):
    self.signum = None
    self._previous = {}

  def __enter__(self):
    # Handlers can only be set from the main thread; elsewhere (a thread
    # of a test, a notebook's worker) signals keep their effect.
    if threading.current_thread() is threading.main_thread():
      for signum in SIGNALS:
        self._previous[signum] = signal.signal(signum, self._record)
    return self

  def __exit__(self, *unused_exc_info):
    for signum, handler in self._previous.items():
      signal.signal(signum, handler)
    self._previous = {}

  def _record(self, signum, unused_frame):
    if self.signum is not None and signum == signal.SIGINT:
      raise KeyboardInterrupt
    if self.signum is None:
      logging.warning("%s received: saving a checkpoint after the current "
                      "steps, then stopping (Ctrl-C again: stop at once, "
                      "unsaved).", signal.Signals(signum).name)
    self.signum = signum
