"""Ctrl-C and SIGTERM during training: save a checkpoint, then stop.

A signal is recorded rather than obeyed at once: the training loop stops
a few steps after it arrives (Trainer.train says why not at once), saves
that step and exits, so that the rerun resumes exactly there. A
preemptible VM or a scheduler gives tens of seconds of grace; a call into
the graph runs --iterations_per_loop steps (minutes or more), so the loop
inside the graph looks at the request every step, not Python between
calls.

Python runs signal handlers only in the main thread, between bytecodes,
never while that thread is inside a graph call. So graph calls run in a
thread of their own (StopRequests.run) while the main thread waits, which
POSIX lets signals interrupt: the handler runs at once and passes the
request on (StopRequests' on_request, which Trainer uses to set a variable
the step loop reads every step). Under MultiWorkerMirroredStrategy each
worker records only its own signals, and the loop averages each worker's
request flags (one_hot) over the workers in the collective it already runs
every step: a signal to any worker stops all of them after the same step
(agreed_signal). A Ctrl-C after the first signal stops at once, unsaved.
"""

import queue
import signal
import threading

from absl import logging

SIGNALS = (signal.SIGINT, signal.SIGTERM)

# When workers got different signals in the same step, all stop for the
# first of these: a preemption must be reported as one (exit 143), so that
# a scheduler reruns the job.
_PRECEDENCE = (signal.SIGTERM, signal.SIGINT)


def one_hot(signum):
  """A worker's stop request as flags: list of float, one per SIGNALS."""
  return [1.0 if s == signum else 0.0 for s in SIGNALS]


def agreed_signal(flags):
  """The signal every worker stops for, or None.

  Args:
    flags: sequence of float, one per SIGNALS: each worker's one_hot (zeros
      where it got no signal) averaged over the workers, so the same on
      every worker.

  Returns:
    a signal.Signals that some worker got, or None where none got one.
  """
  for signum in _PRECEDENCE:
    if flags[SIGNALS.index(signum)] > 0:
      return signum
  return None


class StopRequests(object):
  """While entered, SIGINT and SIGTERM are recorded in `signum`, and graph
  calls made through run() leave the main thread free to handle them.

  Usage:
    with StopRequests(on_request=tell_the_step_loop) as stop:
      while ...:
        stop.run(train_some_steps)
        ...save and stop if the steps stopped for a request...

  Args:
    on_request: function (signum) -> None, or None; called from the
      handler, in the main thread, on each signal recorded.
  """

  def __init__(self, on_request=None):
    self.signum = None
    self._on_request = on_request
    self._previous = {}
    self._calls = queue.Queue()
    self._thread = None
    self._last_call = None

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
    if self._thread is not None:
      self._calls.put(None)  # The thread ends after its current call.
      # Left running only where a second Ctrl-C interrupted the wait.
      if self._last_call.done.is_set():
        self._thread.join()
      self._thread = None

  def _record(self, signum, unused_frame):
    if self.signum is not None and signum == signal.SIGINT:
      raise KeyboardInterrupt
    if self.signum is None:
      logging.warning("%s received: saving a checkpoint after the current "
                      "step, then stopping (Ctrl-C again: stop at once, "
                      "unsaved).", signal.Signals(signum).name)
    self.signum = signum
    if self._on_request is not None:
      self._on_request(signum)

  def run(self, function, *args):
    """function(*args) in a thread of this StopRequests', the caller
    waiting for it.

    A direct call into the graph would keep handlers from running until it
    returned (see the module docstring); waiting on an Event lets them run
    at once (POSIX interrupts the wait; unless the handler raises, the wait
    goes on). One thread serves every call: starting one per call would
    cost about a millisecond each (TensorFlow sets up a new thread's eager
    context on its first op).

    Args:
      function: a callable, e.g. a tf.function.
      *args: its arguments.

    Returns:
      what function returned.

    Raises:
      whatever function raised: the same exception object, traceback
      included. KeyboardInterrupt from a handler (a second Ctrl-C): then
      function may still run; the thread is a daemon, so that it does not
      keep the process from exiting at once.
    """
    if self._thread is None:
      self._thread = threading.Thread(target=self._serve, name="graph_calls",
                                      daemon=True)
      self._thread.start()
    self._last_call = _Call(function, args)
    self._calls.put(self._last_call)
    self._last_call.done.wait()
    return self._last_call.outcome()

  def _serve(self):
    for call in iter(self._calls.get, None):
      call.run()


class _Call(object):
  """A function call made in one thread, its outcome read in another."""

  def __init__(self, function, args):
    self._function = function
    self._args = args
    self._result = None
    self._error = None
    self.done = threading.Event()

  def run(self):
    try:
      self._result = self._function(*self._args)
    # Everything, to raise it in the caller's thread, unchanged.
    except BaseException as e:  # pylint: disable=broad-except
      self._error = e
    self.done.set()

  def outcome(self):
    if self._error is not None:
      raise self._error
    return self._result
