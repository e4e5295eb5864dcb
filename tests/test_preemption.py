"""SIGTERM / SIGINT stop training a few steps after they arrive, whatever
--iterations_per_loop, and every worker of a cluster after the same step."""

import glob
import json
import os
import random
import re
import signal
import subprocess
import threading
import time

import numpy as np
import pytest
import tensorflow as tf

from runner_lib.core import errors
from runner_lib.core import training
from runner_lib.core.training import interrupt
from runner_lib.pretraining import task as pretraining
from tests import conftest
from tests import test_resume_faults as resume_test
from tests import test_run_pretraining as pretraining_test
from tests import test_training
from tests.test_modeling import tiny_config

data = pretraining_test.data  # The records fixture (a tiny corpus).


def kill_when(predicate, signum, timeout=120):
  """Sends signum to this process, from a thread, once predicate() holds;
  gives up after timeout seconds (so that a failed test cannot signal a
  later one)."""
  deadline = time.time() + timeout

  def watch():
    while not predicate():
      if time.time() > deadline:
        return
      time.sleep(0.001)
    os.kill(os.getpid(), signum)

  threading.Thread(target=watch, daemon=True).start()


def graph_calls():
  """The threads StopRequests.run started that still run."""
  return [t for t in threading.enumerate() if t.name == "graph_calls"]


def test_agreed_signal_is_any_workers_sigterm_first():
  nothing = [0.0, 0.0]
  assert interrupt.agreed_signal(nothing) is None
  # Means over two workers of which one got the signal.
  for signum in interrupt.SIGNALS:
    assert interrupt.agreed_signal(
        np.mean([interrupt.one_hot(signum), nothing], 0)) == signum
  # Both in the same step: a preemption is reported as one.
  assert interrupt.agreed_signal(np.mean(
      [interrupt.one_hot(signal.SIGINT), interrupt.one_hot(signal.SIGTERM)],
      0)) == signal.SIGTERM


def test_a_handler_runs_during_a_graph_call_and_ends_its_loop():
  # A variable read every iteration sees an assign made meanwhile by
  # another thread (here the handler, in the main thread): the read is not
  # hoisted out of the while loop.
  flags = tf.Variable([0.0, 0.0])
  count = tf.Variable(0)

  @tf.function
  def loop(steps):
    for _ in tf.range(steps):
      requests = flags.read_value()
      count.assign_add(1)
      if tf.reduce_max(requests) > 0:
        break
    return count.read_value()

  loop(tf.constant(1))
  count.assign(0)
  assigned_at = []

  def request(signum):
    flags.assign(interrupt.one_hot(signum))
    assigned_at.append(int(count.numpy()))

  with interrupt.StopRequests(request) as stop:
    kill_when(lambda: int(count.numpy()) >= 100, signal.SIGTERM)
    ended = int(stop.run(loop, tf.constant(10**9)))
  assert stop.signum == signal.SIGTERM
  # The next iteration ends the loop, or, where its read came just before
  # the assign, the one after.
  assert 100 <= ended <= assigned_at[0] + 2, (assigned_at, ended)
  assert not graph_calls()


def test_errors_of_the_graph_call_reach_the_caller_unchanged():
  @tf.function
  def check(x):
    tf.debugging.assert_non_negative(x, message="x went negative")
    return x

  error = training.TrainingError("Loss is nan")

  def fail():
    raise error

  with interrupt.StopRequests() as stop:
    assert int(stop.run(check, tf.constant(3))) == 3
    with pytest.raises(tf.errors.InvalidArgumentError,
                       match="x went negative"):
      stop.run(check, tf.constant(-1))
    with pytest.raises(training.TrainingError) as raised:
      stop.run(fail)
    assert raised.value is error
    assert int(stop.run(check, tf.constant(4))) == 4  # Still serving.
  assert not graph_calls()


def hanging_step():
  """A tf.function whose call waits (a collective waiting for a dead peer,
  say) until the returned Event is set; and an Event set once it waits."""
  hanging, release = threading.Event(), threading.Event()

  def hang():
    hanging.set()
    release.wait(timeout=60)
    return 0

  @tf.function
  def step():
    return tf.py_function(hang, [], tf.int32)

  return step, hanging, release


def test_second_ctrl_c_stops_at_once_while_a_step_hangs():
  step, hanging, release = hanging_step()
  requests = []
  with interrupt.StopRequests(requests.append) as stop:
    kill_when(hanging.is_set, signal.SIGINT)
    kill_when(lambda: requests, signal.SIGINT)
    started = time.time()
    with pytest.raises(KeyboardInterrupt):
      stop.run(step)
  assert time.time() - started < 10
  assert requests == [signal.SIGINT]
  # The call goes on until it can stop; it then ends on its own.
  (left,) = graph_calls()
  release.set()
  left.join(timeout=60)
  assert not left.is_alive()


def test_a_call_that_does_not_stop_after_a_request_is_given_up():
  step, hanging, release = hanging_step()
  requests = []
  with interrupt.StopRequests(requests.append, stop_timeout=2) as stop:
    kill_when(hanging.is_set, signal.SIGTERM)
    started = time.time()
    with pytest.raises(interrupt.StopTimeout,
                       match=r"did not stop within 2 s of SIGTERM") as raised:
      stop.run(step)
  # Passed on by run() while waiting, then 2 s more.
  assert 2 <= time.time() - started < 10
  assert requests == [signal.SIGTERM]
  assert raised.value.signum == signal.SIGTERM
  (left,) = graph_calls()
  release.set()
  left.join(timeout=60)
  assert not left.is_alive()


def test_a_bounded_call_is_given_up_at_its_bound_without_a_request():
  step, hanging, release = hanging_step()
  with interrupt.StopRequests() as stop:
    started = time.time()
    with pytest.raises(interrupt.StopTimeout,
                       match=r"did not return within 1 s") as raised:
      stop.run(step, timeout=1)
  assert hanging.is_set() and 1 <= time.time() - started < 10
  assert raised.value.signum is None
  release.set()
  for left in graph_calls():
    left.join(timeout=60)
  assert not graph_calls()


def test_a_signal_between_calls_reaches_the_next_call_not_the_handler():
  # The handler may run on top of any code (a save, a lock held inside
  # TensorFlow): it records, and the next run() passes the request on.
  requests = []
  with interrupt.StopRequests(requests.append) as stop:
    os.kill(os.getpid(), signal.SIGTERM)
    time.sleep(0.01)  # The handler has run: Python runs it at once.
    assert stop.signum == signal.SIGTERM and requests == []
    assert int(stop.run(lambda: tf.constant(7))) == 7
    assert requests == [signal.SIGTERM]
  assert not graph_calls()


@pytest.mark.slow
def test_trainer_stops_a_few_steps_after_a_signal_mid_call(tmp_path):
  config = tiny_config()
  task = pretraining.PretrainingTask(config, 8, 2)
  batch = test_training.pretraining_batch(config)
  steps = 300
  # One graph call for all steps: before, it ran them all.
  trainer = training.Trainer(
      tf.distribute.get_strategy(), task.build_model, task.loss,
      training.TrainingConfig(
          output_dir=str(tmp_path), learning_rate=1e-3,
          num_train_steps=steps, num_warmup_steps=10,
          iterations_per_loop=1000, save_checkpoints_steps=1000))

  def train():
    trainer.train(lambda context, step: tf.data.Dataset.from_tensors(
        batch).repeat(), 4)

  at, requested_at = [], []
  request_stop = trainer._request_stop

  def record_and_request(signum):
    # The step when the handler ran: on a loaded machine the graph goes on
    # for a few steps between the watcher's look and the handler.
    requested_at.append(trainer.step)
    request_stop(signum)

  trainer._request_stop = record_and_request
  kill_when(lambda: at.append(trainer.step) or at[-1] >= 30, signal.SIGTERM)
  with pytest.raises(errors.Interrupted) as raised:
    train()
  stopped = trainer.step
  assert raised.value.exit_code == 143
  assert str(raised.value) == (
      "SIGTERM at step %d of %d; saved model.ckpt-%d. Run the same command "
      "again to resume." % (stopped, steps, stopped))
  # The step under way and the next one may have read the request before
  # it came; the one after that carries it, and the loop ends a step after
  # the agreement (Trainer._train_steps_fn).
  (requested,) = requested_at
  assert 30 <= at[-1] <= requested < stopped <= requested + 3, (
      at[-1], requested, stopped)
  assert saved_steps(tmp_path) == [stopped]
  assert not graph_calls()
  # The rest, with a Ctrl-C during the last save, after the steps' last
  # look: still a stop (the request is agreed on after the loop too).
  save = trainer.save

  def save_then_signal():
    save()
    if trainer.step == steps:
      os.kill(os.getpid(), signal.SIGINT)

  trainer.save = save_then_signal
  with pytest.raises(errors.Interrupted) as raised:
    train()
  assert raised.value.exit_code == 130
  assert saved_steps(tmp_path) == [stopped, steps]  # Not stopped at once.
  assert not graph_calls()


# End to end, in processes of their own.


def saved_steps(directory):
  return sorted(int(re.search(r"model\.ckpt-(\d+)\.index$", p).group(1))
                for p in glob.glob(os.path.join(str(directory),
                                                "model.ckpt-*[0-9].index")))


def cpu_seconds(process):
  """The CPU time (user and system, all threads) process has used so far,
  from /proc (Linux): the work it has done, however loaded the machine
  is."""
  with open("/proc/%d/stat" % process.pid) as f:
    fields = f.read().rsplit(")", 1)[1].split()
  return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def newest_saved(output_dir):
  """The step of the checkpoint the state file names (written last, so its
  save is complete), or 0."""
  path = output_dir / "checkpoint"
  match = path.exists() and re.search(
      r'^model_checkpoint_path: "model\.ckpt-(\d+)"', path.read_text(), re.M)
  return int(match.group(1)) if match else 0


def wait_for_save(output_dir, step, processes, deadline):
  """Waits until model.ckpt-step (or a later one) is saved, while all
  processes run."""
  while newest_saved(output_dir) < step:
    assert all(p.poll() is None for p in processes), (
        "exited before saving step %d" % step)
    assert time.time() < deadline, "timed out waiting for step %d" % step
    time.sleep(0.005)


def cpu_per_call(processes, target, output_dir, steps):
  """The CPU seconds processes[target] spends on its second graph call
  (steps / 3 to 2 * steps / 3) and that call's save, read as the
  checkpoints are saved."""
  deadline = time.time() + 300
  wait_for_save(output_dir, steps // 3, processes, deadline)
  started = cpu_seconds(processes[target])
  wait_for_save(output_dir, 2 * steps // 3, processes, deadline)
  return cpu_seconds(processes[target]) - started


def start(cmd, log_path, **env):
  return conftest.popen(cmd, conftest.script_env(**env),
                        stderr_path=str(log_path))


def finish(processes, deadline):
  """Waits for all processes, killing any still running at deadline.

  Returns:
    list of exit statuses (None for a process that had to be killed).
  """
  statuses = []
  for process in processes:
    try:
      statuses.append(process.wait(timeout=max(deadline - time.time(), 1)))
    except subprocess.TimeoutExpired:
      statuses.append(None)
  for process in processes:
    if process.poll() is None:
      process.kill()
      process.wait()
  return statuses


def last_line(log_path):
  return open(log_path).read().strip().splitlines()[-1]


def interrupted_line(log_path):
  """The last "Interrupted: ..." line of a worker's log. A worker may log
  gRPC's complaints after it, when the chief exits first and the worker's
  channel to it closes while the worker shuts down (harmless: both exit
  with the signal's status)."""
  lines = [line for line in open(log_path).read().splitlines()
           if line.startswith("Interrupted: ")]
  assert lines, open(log_path).read()[-3000:]
  return lines[-1]


# Three graph calls, a third of the steps each, ended by the checkpoints
# (iterations_per_loop is larger): the signal is sent during the second, at
# a random moment. Before, it took effect when that call ended.
STEPS = 450

LONG_LOOP = dict(do_eval="false", num_train_steps=str(STEPS),
                 iterations_per_loop="1000",
                 save_checkpoints_steps=str(STEPS // 3))


def signal_in_second_call(processes, output_dir, steps, call_cpu, signum,
                          target, seed):
  """Sends signum to processes[target] at a random moment of the second
  graph call: once the first call's checkpoint is saved, after the process
  has spent 10% to 40% of call_cpu, the CPU seconds of that call
  uninterrupted (cpu_per_call). Its own CPU time, not the clock: however
  loaded the machine is, the moment falls within the call. Waits for all
  processes.

  Returns:
    list of exit statuses (None: still running 120 s later, killed).
  """
  deadline = time.time() + 300
  wait_for_save(output_dir, steps // 3, processes, deadline)
  moment = cpu_seconds(processes[target]) + random.Random(seed).uniform(
      0.1, 0.4) * call_cpu
  while cpu_seconds(processes[target]) < moment:
    assert all(p.poll() is None for p in processes), "exited before the signal"
    assert time.time() < deadline, "timed out before the signal"
    time.sleep(0.002)
  processes[target].send_signal(signum)
  return finish(processes, time.time() + 120)


@pytest.mark.slow
def test_sigterm_mid_loop_saves_that_step_and_the_rerun_matches(data,
                                                                tmp_path):
  straight = start(pretraining_test.command(data, tmp_path / "straight",
                                            **LONG_LOOP),
                   tmp_path / "straight.log")
  call_cpu = cpu_per_call([straight], 0, tmp_path / "straight", STEPS)
  assert finish([straight], time.time() + 300) == [0], open(
      tmp_path / "straight.log").read()[-3000:]
  output_dir = tmp_path / "stopped"
  cmd = pretraining_test.command(data, output_dir, **LONG_LOOP)
  log_path = tmp_path / "stopped.log"
  statuses = signal_in_second_call(
      [start(cmd, log_path)], output_dir, STEPS, call_cpu, signal.SIGTERM, 0,
      3)
  assert statuses == [143], open(log_path).read()[-3000:]
  saved = saved_steps(output_dir)
  assert len(saved) == 2 and saved[0] == STEPS // 3, saved
  stopped = saved[1]
  assert STEPS // 3 < stopped < 2 * STEPS // 3, saved
  assert last_line(log_path) == (
      "Interrupted: SIGTERM at step %d of %d; saved model.ckpt-%d. Run the "
      "same command again to resume." % (stopped, STEPS, stopped))
  resumed = pretraining_test.run(cmd)
  assert resumed.returncode == 0, resumed.stderr[-3000:]
  assert "Resuming from %s at step %d" % (
      output_dir / ("model.ckpt-%d" % stopped), stopped) in resumed.stderr
  resume_test.assert_same_weights(
      output_dir / ("model.ckpt-%d" % STEPS),
      tmp_path / "straight" / ("model.ckpt-%d" % STEPS))


WORKER_STEPS = 240

TWO_WORKERS = dict(do_eval="false", num_train_steps=str(WORKER_STEPS),
                   iterations_per_loop="1000",
                   save_checkpoints_steps=str(WORKER_STEPS // 3),
                   strategy="multi_worker_mirrored")


def start_workers(data, output_dir, log_dir):
  """Two workers on loopback sharing output_dir, as a cluster shares its
  storage; worker 0 is the chief.

  Returns:
    processes, log paths.
  """
  addresses = ["127.0.0.1:%d" % pretraining_test.free_port()
               for _ in range(2)]
  processes, log_paths = [], []
  for index in range(2):
    tf_config = json.dumps({"cluster": {"worker": addresses},
                            "task": {"type": "worker", "index": index}})
    log_paths.append(log_dir / ("worker%d.log" % index))
    processes.append(start(pretraining_test.command(data, output_dir,
                                                    **TWO_WORKERS),
                           log_paths[-1], TF_CONFIG=tf_config))
  return processes, log_paths


def run_workers(data, output_dir, log_dir, measured=None):
  """Runs both workers to the end.

  Returns:
    with measured (a worker's index), the CPU seconds that worker spent on
    the second graph call (cpu_per_call); else None.
  """
  processes, log_paths = start_workers(data, output_dir, log_dir)
  call_cpu = None if measured is None else cpu_per_call(
      processes, measured, output_dir, WORKER_STEPS)
  statuses = finish(processes, time.time() + 600)
  for status, path in zip(statuses, log_paths):
    assert status == 0, open(path).read()[-3000:]
  return call_cpu


# The worker signalled below.
TARGET = 1


@pytest.fixture(scope="module")
def two_workers_straight(data, tmp_path_factory):
  """An uninterrupted two-worker run: its output_dir, and the CPU seconds
  worker TARGET spent on its second graph call."""
  directory = tmp_path_factory.mktemp("straight")
  call_cpu = run_workers(data, directory / "out", directory, measured=TARGET)
  return directory / "out", call_cpu


@pytest.mark.slow
def test_a_signal_to_one_worker_stops_both_after_the_same_step(
    data, tmp_path, two_workers_straight):
  # To the worker that is not the chief, which saves: the harder case
  # (SIGINT's exit status and its agreement are checked in process above).
  signum, target = signal.SIGTERM, TARGET
  straight, call_cpu = two_workers_straight
  output_dir = tmp_path / "out"
  processes, log_paths = start_workers(data, output_dir, tmp_path)
  statuses = signal_in_second_call(processes, output_dir, WORKER_STEPS,
                                   call_cpu, signum, target, signum)
  # Both, the worker that got no signal too: they agreed.
  assert statuses == [128 + signum] * 2, [
      open(p).read()[-3000:] for p in log_paths]
  saved = saved_steps(output_dir)
  assert len(saved) == 2 and saved[0] == WORKER_STEPS // 3, saved
  stopped = saved[1]
  assert WORKER_STEPS // 3 < stopped < 2 * WORKER_STEPS // 3, saved
  name = signal.Signals(signum).name
  assert [interrupted_line(p) for p in log_paths] == [
      "Interrupted: %s%s at step %d of %d; %s. Run the same command again "
      "to resume." % (name, "" if index == target else " to another worker",
                      stopped, WORKER_STEPS, what)
      for index, what in enumerate(["saved model.ckpt-%d" % stopped,
                                    "the chief saves the checkpoint"])]
  (tmp_path / "rerun").mkdir()
  run_workers(data, output_dir, tmp_path / "rerun")
  resume_test.assert_same_weights(
      output_dir / ("model.ckpt-%d" % WORKER_STEPS),
      straight / ("model.ckpt-%d" % WORKER_STEPS))
