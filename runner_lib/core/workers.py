"""Worker processes that start in a fraction of a second: no TensorFlow.

multiprocessing's spawn start method runs the parent's main script again in
every worker, and our scripts import TensorFlow at the top (seconds and
hundreds of MB per process). These workers run this module instead
(`python -m runner_lib.core.workers FD`), import only the module of the
function they are given, and talk to the parent over a socket pair.

A worker that dies (killed, out of memory) is an error in the parent, never
a hang: multiprocessing.Pool waits forever for such a task.
"""

import importlib
import multiprocessing.connection
import os
import signal
import socket
import subprocess
import sys
import traceback


# How long a worker whose socket closed may take to exit before it is
# killed (it exits at once unless something is badly wrong).
_EXIT_SECONDS = 10


class WorkerError(RuntimeError):
  """A worker process failed; the message carries its traceback or exit."""


def _qualified_name(function):
  return function.__module__, function.__qualname__


def _resolve(qualified_name):
  module, name = qualified_name
  return getattr(importlib.import_module(module), name)


class _Worker(object):
  """One worker process and the parent's end of its socket."""

  def __init__(self, setup):
    parent, child = socket.socketpair()
    root = os.path.dirname(os.path.dirname(os.path.dirname(
        os.path.abspath(__file__))))
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(
        [root] + [p for p in [env.get("PYTHONPATH")] if p])
    self.process = subprocess.Popen(
        [sys.executable, "-m", "runner_lib.core.workers",
         str(child.fileno())], pass_fds=[child.fileno()], env=env)
    child.close()
    self.connection = multiprocessing.connection.Connection(parent.detach())
    self.connection.send(setup)
    self.index = None  # of the task in flight

  def receive(self):
    """The result of the task in flight.

    Raises:
      WorkerError: the worker raised or died.
    """
    try:
      status, value = self.connection.recv()
    except (EOFError, OSError):
      code = self._end(_EXIT_SECONDS)
      raise WorkerError("a worker process (pid %d) exited with code %s "
                        "while working; out of memory?" %
                        (self.process.pid, code)) from None
    if status == "error":
      raise WorkerError("a worker process failed:\n%s" % value)
    return value

  def close(self, busy=False):
    """Ends the worker: an idle one exits at EOF; a busy one (the run
    failed or was interrupted) is killed rather than waited for."""
    self.connection.close()
    if busy:
      self.process.kill()
    self._end(_EXIT_SECONDS)

  def _end(self, seconds):
    """The worker's exit code, once it has exited: waits up to seconds,
    then kills it (and waits as long again for the kill).

    Raises:
      WorkerError: it outlived even the kill.
    """
    for attempt in range(2):
      try:
        return self.process.wait(timeout=seconds)
      except subprocess.TimeoutExpired:
        if attempt == 0:
          self.process.kill()
    raise WorkerError("a worker process (pid %d) did not exit within %d s "
                      "of SIGKILL" % (self.process.pid, seconds))


def ordered_map(function, tasks, num_workers, initializer=None, initargs=()):
  """Yields function(task) for every task, in task order, from workers.

  Each worker holds one task at a time. The next task is drawn from the
  iterable as soon as one is handed out, so a lazy iterable (reading,
  tokenizing) runs while the workers work and a freed worker gets its next
  task at once; at most one task waits and num_workers results wait in
  memory beside those in flight.

  Args:
    function: a module-level function of a module that is cheap to import
      (no TensorFlow), task -> picklable result.
    tasks: iterable of picklable tasks.
    num_workers: int >= 1, processes.
    initializer: None or a module-level function, called once per worker
      with initargs (to set up state the function reads).
    initargs: tuple, picklable.

  Yields:
    results, in the order of tasks.

  Raises:
    WorkerError: a worker raised (its traceback is in the message) or died.
  """
  setup = (_qualified_name(function),
           initializer and _qualified_name(initializer), initargs)
  workers = [_Worker(setup) for _ in range(num_workers)]
  tasks = enumerate(tasks)
  idle, busy, done = list(workers), {}, {}
  try:
    ahead = next(tasks, None)  # drawn while the workers are busy
    next_index = 0
    while True:
      while idle and ahead is not None and len(done) < num_workers:
        worker = idle.pop()
        worker.index = ahead[0]
        try:
          worker.connection.send(ahead[1])
        except OSError:
          worker.receive()  # the worker is gone: raises its error
          raise
        busy[worker.connection] = worker
        ahead = next(tasks, None)
      if next_index in done:
        yield done.pop(next_index)
        next_index += 1
        continue
      if not busy:
        return
      for connection in multiprocessing.connection.wait(list(busy)):
        worker = busy.pop(connection)
        done[worker.index] = worker.receive()
        idle.append(worker)
  finally:
    for worker in workers:
      worker.close(busy=worker.connection in busy)


def _serve(fd):
  """The worker's loop: set up, then one result per task until EOF."""
  # Ctrl-C reaches the whole process group: the parent handles it and
  # closes the sockets, which ends the workers (EOF) without tracebacks.
  signal.signal(signal.SIGINT, signal.SIG_IGN)
  connection = multiprocessing.connection.Connection(fd)
  function, initializer, initargs = connection.recv()
  try:
    if initializer:
      _resolve(initializer)(*initargs)
    function = _resolve(function)
  except Exception:  # pylint: disable=broad-except
    connection.send(("error", traceback.format_exc()))
    return 1
  while True:
    try:
      task = connection.recv()
    except (EOFError, OSError):
      return 0  # the parent is done (or gone)
    try:
      result = ("ok", function(task))
    except Exception:  # pylint: disable=broad-except
      result = ("error", traceback.format_exc())
    try:
      connection.send(result)
    except OSError:
      return 0  # the parent stopped waiting (it failed or was interrupted)
    if result[0] == "error":
      return 1


if __name__ == "__main__":
  sys.exit(_serve(int(sys.argv[1])))
