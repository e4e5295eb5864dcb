"""Faults of training state: damaged checkpoints, a lost state file, two runs
on one output_dir, Ctrl-C / SIGTERM, and SIGKILL at random moments."""

import ctypes
import logging
import os
import random
import select
import signal
import socket
import struct
import subprocess
import sys
import time

import numpy as np
import pytest
import tensorflow as tf

import modeling
from modeling import checkpoint_dir
from runner_lib.core import errors
from runner_lib.core.files import outdir_lock
from runner_lib.core.training import checkpointing
from runner_lib.core.training import interrupt
from tests import conftest
from tests import reference
from tests import test_run_classifier as classifier_test
from tests import test_run_pretraining as pretraining_test
from tests.conftest import REPO_ROOT
from tests.test_modeling import tiny_config

data = pretraining_test.data  # The records fixture (a tiny corpus).

SHAPE = (3, 4)


def variables():
  """Fresh variables to save and restore: a weight and global_step."""
  return {"bert/w": tf.Variable(np.zeros(SHAPE, np.float32)),
          "global_step": tf.Variable(0, dtype=tf.int64)}


def saved_dir(directory, steps=(1, 2, 3, 4)):
  """Checkpoints at `steps` whose weight is filled with the step."""
  saver = variables()
  checkpoint = checkpointing.TrainingCheckpoint(str(directory), saver)
  for step in steps:
    saver["bert/w"].assign(np.full(SHAPE, step, np.float32))
    saver["global_step"].assign(step)
    checkpoint.save(step)
  return directory


def resume(directory):
  """(prefix restore_latest returned, the weight's value, global_step)."""
  restored = variables()
  prefix = checkpointing.TrainingCheckpoint(str(directory),
                                            restored).restore_latest()
  return (prefix, float(restored["bert/w"].numpy()[0, 0]),
          int(restored["global_step"].numpy()))


def warnings(caplog):
  return [r.getMessage() for r in caplog.records
          if r.levelno == logging.WARNING]


def data_file(directory, step):
  return str(directory / ("model.ckpt-%d.data-00000-of-00001" % step))


def flip_byte(path, offset=40):
  content = bytearray(open(path, "rb").read())
  content[offset] ^= 0xFF
  open(path, "wb").write(bytes(content))


def test_state_file_holds_base_names_that_tools_read(tmp_path):
  saved_dir(tmp_path)
  state = (tmp_path / "checkpoint").read_text()
  assert 'model_checkpoint_path: "model.ckpt-4"' in state
  assert str(tmp_path) not in state
  assert tf.train.latest_checkpoint(str(tmp_path)) == str(
      tmp_path / "model.ckpt-4")
  assert resume(tmp_path) == (str(tmp_path / "model.ckpt-4"), 4.0, 4)


def test_empty_output_dir_starts_fresh(tmp_path):
  assert resume(tmp_path) == (None, 0.0, 0)


@pytest.mark.parametrize("state", ["deleted", "garbage", "empty", "other"])
def test_without_a_readable_state_file_the_files_are_scanned(
    tmp_path, caplog, state):
  saved_dir(tmp_path)
  path = tmp_path / "checkpoint"
  if state == "deleted":
    path.unlink()
  else:
    path.write_bytes({"garbage": b"garbage \x00 ###\n", "empty": b"",
                      "other": b'model_checkpoint_path: "bert_model"\n'}[
                          state])
  assert resume(tmp_path) == (str(tmp_path / "model.ckpt-4"), 4.0, 4)
  message = ("No state file %s beside 4 checkpoint(s)" if state == "deleted"
             else "State file %s is unreadable") % path
  assert any(w.startswith(message) for w in warnings(caplog)), caplog.text


def cut(path, size):
  with open(path, "r+b") as f:
    f.truncate(size)


DAMAGES = {
    # What an interrupted copy, a full disk or a bad sector leaves.
    "data truncated": (lambda d: cut(data_file(d, 4), 20),
                       "cannot read bert/w from %s (Read less bytes than "
                       "requested)", "data"),
    "data empty": (lambda d: cut(data_file(d, 4), 0), "cannot read", "data"),
    "data corrupted": (lambda d: flip_byte(data_file(d, 4), 2),
                       "Checksum does not match", "data"),
    "data missing": (lambda d: os.remove(data_file(d, 4)), "cannot read",
                     "data"),
    "index truncated": (lambda d: cut(d / "model.ckpt-4.index", 30),
                        "cannot read %s.index", "prefix"),
    "index corrupted": (lambda d: flip_byte(d / "model.ckpt-4.index", 0),
                        "cannot read %s.index", "prefix"),
    "index missing": (lambda d: os.remove(d / "model.ckpt-4.index"),
                      "has no index file %s.index", "prefix"),
}


@pytest.mark.parametrize("damage", sorted(DAMAGES))
def test_damaged_newest_falls_back_to_the_one_before(tmp_path, caplog,
                                                     damage):
  saved_dir(tmp_path)
  damage_fn, message, culprit = DAMAGES[damage]
  damage_fn(tmp_path)
  assert resume(tmp_path) == (str(tmp_path / "model.ckpt-3"), 3.0, 3)
  named = data_file(tmp_path, 4) if culprit == "data" else str(
      tmp_path / "model.ckpt-4")
  want = ("Checkpoint %s is damaged" % (tmp_path / "model.ckpt-4")
          if "has no index" not in message else "Checkpoint %s" %
          (tmp_path / "model.ckpt-4"))
  found = [w for w in warnings(caplog) if w.startswith(want)]
  assert found, caplog.text
  assert (message % named if "%s" in message else message) in found[0]
  assert "Falling back" in found[0]


def test_several_damaged_fall_back_to_the_newest_intact(tmp_path, caplog):
  saved_dir(tmp_path)
  cut(data_file(tmp_path, 4), 10)
  cut(tmp_path / "model.ckpt-3.index", 10)
  os.remove(tmp_path / "checkpoint")
  assert resume(tmp_path) == (str(tmp_path / "model.ckpt-2"), 2.0, 2)
  assert any("newer checkpoint(s) damaged: %s, %s" %
             (tmp_path / "model.ckpt-4", tmp_path / "model.ckpt-3") in w
             for w in warnings(caplog)), caplog.text


def test_none_readable_is_refused_naming_them_and_nothing_assigned(tmp_path):
  saved_dir(tmp_path, steps=(5, 10))
  for step in (5, 10):
    cut(data_file(tmp_path, step), 3)
  restored = variables()
  restored["bert/w"].assign(np.full(SHAPE, 7.0, np.float32))
  with pytest.raises(modeling.CheckpointError) as raised:
    checkpointing.TrainingCheckpoint(str(tmp_path), restored).restore_latest()
  assert str(raised.value) == (
      "No intact checkpoint in %s to resume from; damaged: model.ckpt-10, "
      "model.ckpt-5. Move them away (or use another --output_dir) to start "
      "over." % tmp_path)
  np.testing.assert_array_equal(restored["bert/w"].numpy(), 7.0)
  assert int(restored["global_step"].numpy()) == 0


def test_data_without_any_index_is_not_a_silent_restart(tmp_path):
  saved_dir(tmp_path, steps=(6,))
  os.remove(tmp_path / "model.ckpt-6.index")
  os.remove(tmp_path / "checkpoint")
  with pytest.raises(modeling.CheckpointError, match="damaged: model.ckpt-6"):
    resume(tmp_path)


def test_state_file_pointing_back_is_obeyed(tmp_path):
  # Rolling back by editing the state file, a known TensorFlow idiom.
  saved_dir(tmp_path)
  (tmp_path / "checkpoint").write_text('model_checkpoint_path: '
                                       '"model.ckpt-2"\n')
  assert resume(tmp_path) == (str(tmp_path / "model.ckpt-2"), 2.0, 2)


def test_moved_output_dir_reads_and_prunes_only_its_own_files(tmp_path):
  old = saved_dir(tmp_path / "old")
  # As the original (and this project before) wrote it: absolute paths.
  (old / "checkpoint").write_text(
      'model_checkpoint_path: "%s/model.ckpt-4"\n' % old + "".join(
          'all_model_checkpoint_paths: "%s/model.ckpt-%d"\n' % (old, s)
          for s in (1, 2, 3, 4)))
  new = tmp_path / "new"
  new.mkdir()
  for path in old.iterdir():
    (new / path.name).write_bytes(path.read_bytes())
  flip_byte(data_file(old, 4), 2)  # Reading the old place would fall back.
  assert resume(new) == (str(new / "model.ckpt-4"), 4.0, 4)
  saver = variables()
  checkpoint = checkpointing.TrainingCheckpoint(str(new), saver,
                                                keep_checkpoint_max=2)
  checkpoint.save(5)
  assert sorted(p.name for p in new.glob("*[0-9].index")) == [
      "model.ckpt-4.index", "model.ckpt-5.index"]
  assert len(list(old.glob("*[0-9].index"))) == 4


def test_temporaries_of_an_interrupted_write_are_removed(tmp_path, caplog):
  saved_dir(tmp_path, steps=(1,))
  stale = ["model.ckpt-2.data-00000-of-00001.tempstate8171294711212",
           "model.ckpt-2.index.tempstate45",
           "checkpoint.tmp0f3a9c2e5b7d41e6a8c9d0e1f2a3b4c5"]
  kept = ["model.ckpt-1.index", "model.ckpt-1.data-00000-of-00001",
          "checkpoint", "notes.tempstate.txt", "events.out.tfevents.1.x"]
  for name in stale + kept[3:]:
    (tmp_path / name).write_text("x")
  checkpointing.remove_temporaries(str(tmp_path))
  assert sorted(os.listdir(tmp_path)) == sorted(kept)
  assert sum("left by an interrupted checkpoint write" in w
             for w in warnings(caplog)) == 3


def test_damaged_init_checkpoint_is_named(tmp_path):
  model = modeling.BertModel(tiny_config())
  prefix = modeling.save_checkpoint(model, str(tmp_path / "bert_model.ckpt"))
  data_path = prefix + ".data-00000-of-00001"
  cut(data_path, os.path.getsize(data_path) // 2)
  fresh = modeling.BertModel(tiny_config())
  before = [v.numpy() for v in fresh.weights]
  with pytest.raises(modeling.DamagedCheckpointError) as raised:
    modeling.load_checkpoint(fresh, prefix)
  assert "\n" not in str(raised.value)
  assert str(raised.value).startswith("Checkpoint %s is damaged: cannot read "
                                      % prefix)
  assert "from %s (Read less bytes than requested)." % data_path in str(
      raised.value)
  for value, variable in zip(before, fresh.weights):
    np.testing.assert_array_equal(variable.numpy(), value)
  cut(prefix + ".index", 20)
  with pytest.raises(modeling.DamagedCheckpointError,
                     match=r"is damaged: cannot read .*bert_model.ckpt.index "
                     r"\(file is too short to be an sstable\)"):
    modeling.resolve_checkpoint_path(prefix)


HOLDER = """
import fcntl, os, sys, time
fd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT)
fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
os.write(fd, b"PID %d on elsewhere\\n" % os.getpid())
print("locked", flush=True)
time.sleep(60)
"""


def hold_lock(directory):
  """A process holding directory's lock (as a training run does)."""
  holder = subprocess.Popen(
      [sys.executable, "-c", HOLDER,
       str(directory / outdir_lock.LOCK_FILE)], stdout=subprocess.PIPE,
      text=True)
  assert holder.stdout.readline() == "locked\n"
  return holder


def test_lock_held_by_a_live_process_is_refused_naming_it(tmp_path):
  holder = hold_lock(tmp_path)
  try:
    with pytest.raises(outdir_lock.OutputDirLockedError) as raised:
      outdir_lock.OutputDirLock(str(tmp_path)).acquire()
    assert str(raised.value) == (
        "--output_dir %s is in use by another training run (PID %d on "
        "elsewhere, lock file %s/training.lock); wait for it to end or use "
        "another --output_dir." % (tmp_path, holder.pid, tmp_path))
  finally:
    holder.kill()
    holder.wait()
  # Its death released the flock: the file it left is stale.
  lock = outdir_lock.OutputDirLock(str(tmp_path))
  assert lock.acquire()
  assert (tmp_path / "training.lock").read_text() == "PID %d on %s\n" % (
      os.getpid(), socket.gethostname())
  lock.release()
  assert not (tmp_path / "training.lock").exists()


def test_stale_lock_is_taken_over_with_a_warning(tmp_path, caplog):
  (tmp_path / "training.lock").write_text("PID 4194301 on somewhere\n")
  lock = outdir_lock.OutputDirLock(str(tmp_path))
  assert lock.acquire()
  assert any(w.startswith("Taking over the stale lock %s/training.lock" %
                          tmp_path) and "(PID 4194301 on somewhere)" in w
             for w in warnings(caplog)), caplog.text
  lock.release()
  assert not (tmp_path / "training.lock").exists()


def test_lock_is_per_directory_and_once_per_process(tmp_path):
  first, second = tmp_path / "a", tmp_path / "b"
  first.mkdir()
  second.mkdir()
  assert outdir_lock.lock_until_exit(str(first))
  assert outdir_lock.lock_until_exit(str(first))  # A second Trainer.
  assert outdir_lock.lock_until_exit(str(second))
  holder_content = (first / "training.lock").read_text()
  assert holder_content.startswith("PID %d " % os.getpid())
  for lock in outdir_lock._HELD.values():  # pylint: disable=protected-access
    lock.release()
  outdir_lock._HELD.clear()  # pylint: disable=protected-access
  assert not (first / "training.lock").exists()


def send(signum):
  os.kill(os.getpid(), signum)
  time.sleep(0.01)  # Python runs the handler between bytecodes.


def test_signals_are_recorded_then_handlers_restored():
  before = {s: signal.getsignal(s) for s in interrupt.SIGNALS}
  with interrupt.StopRequests() as stop:
    send(signal.SIGINT)
    assert stop.signum == signal.SIGINT
  with interrupt.StopRequests() as stop:
    send(signal.SIGTERM)
    send(signal.SIGTERM)  # A scheduler may repeat it.
    assert stop.signum == signal.SIGTERM
    with pytest.raises(KeyboardInterrupt):  # Ctrl-C then stops at once.
      send(signal.SIGINT)
  assert {s: signal.getsignal(s) for s in interrupt.SIGNALS} == before
  assert errors.Interrupted("x", signal.SIGTERM).exit_code == 143


# End to end, in processes of their own.


def run(cmd):
  return conftest.run(cmd)


def one_line_error(result):
  """The "Error: ..." line, checking it is the last and no traceback."""
  assert result.returncode == 1, result.stderr[-3000:]
  assert "Traceback" not in result.stderr, result.stderr[-3000:]
  last = result.stderr.strip().splitlines()[-1]
  assert last.startswith("Error: "), result.stderr[-3000:]
  return last


@pytest.mark.slow
def test_cli_refuses_damaged_resume_damaged_init_and_a_second_run(data,
                                                                  tmp_path):
  # Unreadable indexes: refused before their variables are compared.
  damaged = saved_dir(tmp_path / "damaged", steps=(10, 20))
  for step in (10, 20):
    cut(damaged / ("model.ckpt-%d.index" % step), 30)
  before = sorted(os.listdir(damaged))
  init = tmp_path / "init"
  prefix = reference.write_tf1_checkpoint(
      str(init / "bert_model.ckpt"), reference.random_weights(
          modeling.BertConfig(**pretraining_test.CONFIG), seed=1))
  cut(prefix + ".data-00000-of-00001", 100)
  busy = tmp_path / "busy"
  busy.mkdir()
  holder = hold_lock(busy)
  try:
    cmds = [pretraining_test.command(data, damaged, do_eval="false"),
            pretraining_test.command(data, tmp_path / "out", do_eval="false",
                                     init_checkpoint=prefix),
            pretraining_test.command(data, busy, do_eval="false")]
    processes = [conftest.popen(c) for c in cmds]
    results = []
    for c, p in zip(cmds, processes):
      _, stderr = p.communicate(timeout=600)
      results.append(subprocess.CompletedProcess(c, p.returncode, "", stderr))
  finally:
    holder.kill()
    holder.wait()
  assert one_line_error(results[0]) == (
      "Error: No intact checkpoint in %s to resume from; damaged: "
      "model.ckpt-20, model.ckpt-10. Move them away (or use another "
      "--output_dir) to start over." % damaged)
  assert sorted(os.listdir(damaged)) == before  # Nothing written.
  assert one_line_error(results[1]).startswith(
      "Error: Checkpoint %s is damaged: cannot read " % prefix)
  assert one_line_error(results[1]).endswith(
      "from %s.data-00000-of-00001 (Read less bytes than requested)." %
      prefix)
  assert one_line_error(results[2]) == (
      "Error: --output_dir %s is in use by another training run (PID %d on "
      "elsewhere, lock file %s/training.lock); wait for it to end or use "
      "another --output_dir." % (busy, holder.pid, busy))
  assert os.listdir(busy) == ["training.lock"]
  assert not (tmp_path / "out" / "training.lock").exists()


def wait_for(path, process, deadline):
  while not os.path.exists(path):
    assert process.poll() is None, "exited before %s" % path
    assert time.time() < deadline, "timed out waiting for %s" % path
    time.sleep(0.005)


class Creations(object):
  """Names created in a directory, as inotify reports them (Linux)."""

  IN_CREATE = 0x100

  def __init__(self, directory):
    self._libc = ctypes.CDLL(None, use_errno=True)
    self._fd = self._libc.inotify_init1(os.O_NONBLOCK)
    assert self._fd >= 0 and self._libc.inotify_add_watch(
        self._fd, str(directory).encode(), self.IN_CREATE) >= 0

  def wait(self, predicate, process, deadline):
    """Returns as soon as a name satisfying predicate is created."""
    while process.poll() is None and time.time() < deadline:
      if not select.select([self._fd], [], [], 0.5)[0]:
        continue
      events = os.read(self._fd, 65536)
      while events:
        _, _, _, size = struct.unpack("iIII", events[:16])
        name = events[16:16 + size].rstrip(b"\0").decode()
        events = events[16 + size:]
        if predicate(name):
          return name
    raise AssertionError("no write seen (exit status %s)" % process.poll())

  def close(self):
    os.close(self._fd)


# The temporary files of a checkpoint write: data, then index, each renamed
# when complete. (The state file's `checkpoint.tmp*` lives for microseconds:
# the random moments and test_temporaries_of_an_interrupted_write_are_removed
# cover it.)
WRITES = (".data-00000-of-00001.tempstate", ".index.tempstate")


def signal_at(cmd, directory, step, signum, rng, during=None):
  """Runs cmd until directory holds model.ckpt-step, then sends signum: a
  random moment later (within about one step and its checkpoint write),
  or, with `during` (one of WRITES), in the middle of such a write: the
  process is stopped (SIGSTOP) as the file appears and signalled if the
  file is still there, else let go until the next write.

  Returns:
    subprocess.CompletedProcess (stderr only) and the temporary files left.
  """
  process = conftest.popen(cmd)
  deadline = time.time() + 300
  wait_for(str(directory / ("model.ckpt-%d.index" % step)), process,
           deadline)
  if during:
    creations = Creations(directory)
    while True:
      name = creations.wait(lambda n: during in n, process, deadline)
      process.send_signal(signal.SIGSTOP)
      if os.path.exists(directory / name):
        break
      process.send_signal(signal.SIGCONT)  # Renamed already: next write.
    creations.close()
  else:
    time.sleep(rng.uniform(0.0, 0.05))
  process.send_signal(signum)
  _, stderr = process.communicate(timeout=300)
  left = [n for n in os.listdir(directory)
          if ".tempstate" in n or n.startswith("checkpoint.tmp")]
  return subprocess.CompletedProcess(cmd, process.returncode, "", stderr), left


def assert_same_weights(got_prefix, want_prefix):
  want = pretraining_test.weights_of(str(want_prefix))
  got = pretraining_test.weights_of(str(got_prefix))
  assert sorted(got) == sorted(want)
  for name in want:
    np.testing.assert_array_equal(got[name], want[name], err_msg=name)


def saved_steps(directory):
  return checkpoint_dir.saved_steps(str(directory))


@pytest.mark.slow
def test_pretraining_killed_again_and_again_ends_with_the_same_weights(
    data, tmp_path):
  # A checkpoint after every step, of 8 MB (a vocab of 20000: the records
  # use its first ids): writes (data, index, state file, pruning) take most
  # of the time, so random moments often fall within one; two kills are
  # aimed at one. One layer: each of the six processes builds and traces
  # the model, which a second layer makes about 0.8 s of CPU longer.
  config = modeling.BertConfig(**dict(pretraining_test.CONFIG,
                                      vocab_size=20000, num_hidden_layers=1))
  (tmp_path / "bert_config.json").write_text(config.to_json_string())
  # The kills fall by about step 30 (the last is aimed at step 28 at the
  # latest); the last run resumes and trains the rest.
  steps = 50
  flags = dict(do_eval="false", num_train_steps=str(steps),
               save_checkpoints_steps="1", iterations_per_loop="1",
               keep_checkpoint_max="3",
               bert_config_file=str(tmp_path / "bert_config.json"))
  # The run to match saves only at its end: the chain's 50 saves, kills
  # and resumes must leave no trace in the weights.
  straight = run(pretraining_test.command(
      data, tmp_path / "straight",
      **dict(flags, save_checkpoints_steps=str(steps))))
  assert straight.returncode == 0, straight.stderr[-3000:]
  chain = tmp_path / "chain"
  cmd = pretraining_test.command(data, chain, **flags)
  rng = random.Random(17)
  step, left_behind, logs = 0, [], ""
  chain.mkdir()
  # A SIGKILL at a random moment, one within each of a checkpoint's writes
  # (the data file, then the index), then a SIGTERM (a preemption): that
  # run saves where it is and exits.
  stops = ([(signal.SIGKILL, None)] +
           [(signal.SIGKILL, write) for write in WRITES] +
           [(signal.SIGTERM, None)])
  for signum, during in stops:
    step += rng.randint(1, 7)
    result, left = signal_at(cmd, chain, step, signum, rng, during)
    if during:
      assert [n for n in left if during in n], left
    left_behind += left
    logs += result.stderr
    assert "Traceback" not in result.stderr, result.stderr[-3000:]
    if signum == signal.SIGKILL:
      assert result.returncode == -signal.SIGKILL
    else:
      assert result.returncode == 143, result.stderr[-3000:]
      last = result.stderr.strip().splitlines()[-1]
      stopped = int(last.split(" at step ")[1].split()[0])
      assert last == ("Interrupted: SIGTERM at step %d of %d; saved "
                      "model.ckpt-%d. Run the same command again to resume."
                      % (stopped, steps, stopped))
      assert saved_steps(chain)[-1] == stopped
      assert not (chain / "training.lock").exists()  # Released.
    step = max(step, saved_steps(chain)[-1])
  assert step < steps, "the chain finished before its last kill"
  finished = run(cmd)
  assert finished.returncode == 0, finished.stderr[-3000:]
  assert "Resuming from" in finished.stderr
  # Kills within writes left temporary files; each run removed them.
  for name in left_behind:
    assert "Removing %s, left by an interrupted checkpoint write." % (
        chain / name) in logs + finished.stderr
  assert not [n for n in os.listdir(chain)
              if ".tempstate" in n or n.startswith("checkpoint.tmp")]
  assert not (chain / "training.lock").exists()
  assert_same_weights(chain / ("model.ckpt-%d" % steps),
                      tmp_path / "straight" / ("model.ckpt-%d" % steps))


@pytest.mark.slow
def test_classifier_killed_and_interrupted_ends_with_the_same_weights(
    tmp_path):
  folder = classifier_test.mrpc_folder(tmp_path / "mrpc")
  # 256 examples, batch 16, 2 epochs: 32 steps.
  args = classifier_test.base_args(folder, tmp_path / "straight",
                                   do_train="true", num_train_epochs="2",
                                   save_checkpoints_steps="2",
                                   iterations_per_loop="1")

  def command(output_dir):
    args["output_dir"] = str(output_dir)
    return [sys.executable, os.path.join(REPO_ROOT, "run_classifier.py")] + [
        "--%s=%s" % kv for kv in args.items()]

  straight = run(command(tmp_path / "straight"))
  assert straight.returncode == 0, straight.stderr[-3000:]
  chain = tmp_path / "chain"
  rng = random.Random(5)
  killed, _ = signal_at(command(chain), chain, 6, signal.SIGKILL, rng)
  assert killed.returncode == -signal.SIGKILL
  assert (chain / "training.lock").exists()  # Stale: taken over below.
  interrupted, _ = signal_at(command(chain), chain, 16, signal.SIGINT, rng)
  assert "Taking over the stale lock" in interrupted.stderr
  assert interrupted.returncode == 130, interrupted.stderr[-3000:]
  last = interrupted.stderr.strip().splitlines()[-1]
  assert last.startswith("Interrupted: SIGINT at step ")
  assert "Traceback" not in interrupted.stderr
  finished = run(command(chain))
  assert finished.returncode == 0, finished.stderr[-3000:]
  assert_same_weights(chain / "model.ckpt-32",
                      tmp_path / "straight" / "model.ckpt-32")
