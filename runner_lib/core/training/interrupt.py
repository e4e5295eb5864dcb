"""Ctrl-C and SIGTERM during training: save a checkpoint, then stop.

A signal is recorded rather than obeyed at once: the training loop stops
a few steps after it arrives (Trainer._train_steps_fn says why not at
once), saves that step and exits, so that the rerun resumes exactly there. A
preemptible VM or a scheduler gives tens of seconds of grace; a call into
the graph runs --iterations_per_loop steps (minutes or more), so the loop
inside the graph looks at the request every step, not Python between
calls.

Python runs signal handlers only in the main thread, between bytecodes,
never while that thread is inside a graph call. So graph calls run in a
thread of their own (StopRequests.run) while the main thread waits in
short slices (_POLL_SECONDS): between two, it passes a recorded request
on (StopRequests' on_request, which Trainer uses to set a variable the
step loop reads every step). The handler itself only records: it may run
on top of any code of the main thread (a checkpoint save, a lock held
inside TensorFlow or logging), so it calls nothing that could wait for
what that code holds. Every wait has a bound: once a request is passed
on, a graph call that has not returned within StopRequests' stop_timeout
is given up (StopTimeout) instead of waited for.

Under MultiWorkerMirroredStrategy each worker records only its own
signals, and the loop averages each worker's request flags (one_hot) over
the workers in the collective it already runs every step: a signal to any
worker stops all of them after the same step
(agreed_signal). A Ctrl-C after the first signal stops at once, unsaved.
"""

import queue
import signal
import threading
import time

from absl import logging

SIGNALS = (signal.SIGINT, signal.SIGTERM)

# When workers got different signals in the same step, all stop for the
# first of these: a preemption must be reported as one (exit 143), so that
# a scheduler reruns the job.
_PRECEDENCE = (signal.SIGTERM, signal.SIGINT)


# How long the main thread waits for a graph call before it looks for a
# request to pass on: a request reaches the step loop within this time,
# and the wake-ups cost nothing measurable (20 a second).
_POLL_SECONDS = 0.05

# How long __exit__ waits for the graph calls' thread to end once its last
# call has returned (it ends at once; the bound is for a broken runtime).
_JOIN_SECONDS = 30


class StopTimeout(RuntimeError):
  """A graph call did not return within its bound (StopRequests.run).

  Attributes:
    signum: the signal recorded, or None where the call's own timeout
      passed without one.
  """

  def __init__(self, message, signum):
    super().__init__(message)
    self.signum = signum


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
    on_request: function (signum) -> None, or None; called in the main
      thread for each signal recorded, from run() (before its call, and
      while waiting for it), never from the signal handler.
    stop_timeout: float, seconds a graph call may go on once a request has
      been passed to on_request (its steps stop one or two steps later);
      past it, run() raises StopTimeout. Readable and settable between
      calls (the Trainer scales it with the time of a step).
  """

  def __init__(self, on_request=None, stop_timeout=120.0):
    self.signum = None
    self.stop_timeout = stop_timeout
    self._on_request = on_request
    self._undelivered = []  # signals recorded, not yet passed on
    self._delivered_at = None  # time.monotonic() of the first passed on
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
      # Left running (a daemon) where a second Ctrl-C or a StopTimeout
      # ended the wait for its call.
      if self._last_call.done.is_set():
        self._thread.join(_JOIN_SECONDS)
        if self._thread.is_alive():
          logging.warning("The graph calls' thread did not end within %d s "
                          "of its last call; left running.", _JOIN_SECONDS)
      self._thread = None

  def _record(self, signum, unused_frame):
    """The signal handler: records, and nothing else (see the module
    docstring); a second Ctrl-C stops at once."""
    if self.signum is not None and signum == signal.SIGINT:
      raise KeyboardInterrupt
    self.signum = signum
    self._undelivered.append(signum)

  def _deliver(self):
    """Passes the recorded requests on (main thread, outside the handler)."""
    while self._undelivered:
      signum = self._undelivered.pop(0)
      if self._delivered_at is None:
        self._delivered_at = time.monotonic()
        logging.warning("%s received: saving a checkpoint after the current "
                        "step, then stopping (Ctrl-C again: stop at once, "
                        "unsaved).", signal.Signals(signum).name)
      if self._on_request is not None:
        self._on_request(signum)

  def run(self, function, *args, timeout=None):
    """function(*args) in a thread of this StopRequests', the caller
    waiting for it.

    A direct call into the graph would keep handlers from running until it
    returned (see the module docstring); waiting on an Event lets them run
    at once (POSIX interrupts the wait; unless the handler raises, the wait
    goes on), and the wait's slices let this thread pass their requests
    on. One thread serves every call: starting one per call would cost
    about a millisecond each (TensorFlow sets up a new thread's eager
    context on its first op).

    Args:
      function: a callable, e.g. a tf.function.
      *args: its arguments.
      timeout: float or None, seconds the call may take at most (None: no
        bound until a stop request, then stop_timeout).

    Returns:
      what function returned.

    Raises:
      whatever function raised: the same exception object, traceback
      included. KeyboardInterrupt from a handler (a second Ctrl-C), or
      StopTimeout: then function may still run; the thread is a daemon,
      so that it does not keep the process from exiting at once.
    """
    self._deliver()
    if self._thread is None:
      self._thread = threading.Thread(target=self._serve, name="graph_calls",
                                      daemon=True)
      self._thread.start()
    call = self._last_call = _Call(function, args)
    self._calls.put(call)
    started = time.monotonic()
    while not call.done.wait(_POLL_SECONDS):
      self._deliver()
      now = time.monotonic()
      if timeout is not None and now - started > timeout:
        raise StopTimeout(
            "%s did not return within %.0f s." % (_name(function), timeout),
            self.signum)
      if (self._delivered_at is not None and
          now - max(started, self._delivered_at) > self.stop_timeout):
        raise StopTimeout(
            "%s did not stop within %.0f s of %s (a step that never ends: "
            "a collective waiting for a worker that is gone?)." %
            (_name(function), self.stop_timeout,
             signal.Signals(self.signum).name), self.signum)
    return call.outcome()

  def _serve(self):
    for call in iter(self._calls.get, None):
      call.run()


def _name(function):
  return getattr(function, "__name__", None) or repr(function)


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
