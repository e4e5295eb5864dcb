"""core/workers: ordered results from TensorFlow-free processes, and errors
instead of hangs."""

import os
import sys
import time

import pytest

from runner_lib.core import workers

_state = {}


def _setup(offset):
  _state["offset"] = offset


def _slow_square(task):
  # Later tasks finish first: results must still come back in task order.
  time.sleep(0.02 * (5 - task % 5))
  return task * task + _state["offset"], os.getpid()


def _fail_on_three(task):
  if task == 3:
    raise ValueError("task three is bad")
  return task


def _die_on_two(task):
  if task == 2:
    os._exit(7)  # as a worker killed by the OOM killer would vanish
  return task


def _first_fast(task):
  if task:
    time.sleep(60)
  return task


def _imports(_):
  return sorted(name for name in ("tensorflow", "tf_keras", "numpy")
                if name in sys.modules)


def test_results_in_task_order_from_several_processes():
  consumed = []

  def tasks():
    for task in range(23):
      consumed.append(task)
      yield task

  results = list(workers.ordered_map(_slow_square, tasks(), 3, _setup, (100,)))
  assert [value for value, _ in results] == [t * t + 100 for t in range(23)]
  pids = {pid for _, pid in results}
  assert len(pids) == 3 and os.getpid() not in pids
  assert consumed == list(range(23))


def test_workers_import_no_tensorflow():
  assert list(workers.ordered_map(_imports, [0], 1)) == [[]]


def test_a_raising_task_is_an_error_with_its_traceback():
  with pytest.raises(workers.WorkerError, match="task three is bad"):
    list(workers.ordered_map(_fail_on_three, range(6), 2))


def test_a_dying_worker_is_an_error_not_a_hang():
  started = time.monotonic()
  with pytest.raises(workers.WorkerError, match="exited with code 7"):
    list(workers.ordered_map(_die_on_two, range(6), 2))
  assert time.monotonic() - started < 30


def test_a_broken_initializer_is_an_error():
  with pytest.raises(workers.WorkerError, match="missing"):
    list(workers.ordered_map(_slow_square, range(2), 1, _setup, ()))


def test_stopping_early_kills_busy_workers_at_once():
  # A failed or interrupted run closes the generator with tasks in flight:
  # their workers are killed, not waited for.
  results = workers.ordered_map(_first_fast, range(4), 2)
  started = time.monotonic()
  assert next(results) == 0
  results.close()
  assert time.monotonic() - started < 20
