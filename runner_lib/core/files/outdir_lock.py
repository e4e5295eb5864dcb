"""One training run per output_dir: a lock file held while training.

Two runs writing checkpoints to one directory would interleave them (and
prune each other's), so the second is refused. The lock is an advisory
`fcntl.flock` on `output_dir/training.lock`, which the kernel releases when
its process ends, even by SIGKILL: a lock file left behind by a dead run is
recognized as stale because nobody holds it, and taken over, whatever PID
it names (PIDs are reused). The file names its holder's PID and host, for
the refusal's message. Runs on other output_dirs are never affected.

flock needs a local (or NFSv4) file system; where output_dir is not one
(gs://, hdfs://), nothing is locked.
"""

import atexit
import fcntl
import os
import socket

from absl import logging

from runner_lib.core import errors

LOCK_FILE = "training.lock"


class OutputDirLockedError(errors.InputError):
  """Another live run trains in output_dir."""


class OutputDirLock(object):
  """An exclusive lock on a directory, held until release() or exit."""

  def __init__(self, output_dir):
    """Args:
      output_dir: str, an existing directory.
    """
    self.path = os.path.join(output_dir, LOCK_FILE)
    self._fd = None

  def acquire(self):
    """Takes the lock; a stale one is taken over with a log line.

    Returns:
      bool, False where output_dir is not on a local file system (nothing
      locked).

    Raises:
      OutputDirLockedError: naming the holder's PID and host.
    """
    if "://" in self.path:
      logging.info("Not locking %s (not a local file system).", self.path)
      return False
    while True:
      fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
      try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
      except BlockingIOError:
        holder = _read(fd)
        os.close(fd)
        raise OutputDirLockedError(
            "--output_dir %s is in use by another training run (%s, lock "
            "file %s); wait for it to end or use another --output_dir." %
            (os.path.dirname(self.path), holder or "PID unknown", self.path))
      # The holder may have removed the file between our open and flock:
      # then we hold a lock on a deleted file, and must lock the new one.
      try:
        same = os.fstat(fd).st_ino == os.stat(self.path).st_ino
      except FileNotFoundError:
        same = False
      if same:
        break
      os.close(fd)
    previous = _read(fd)
    if previous:
      logging.warning("Taking over the stale lock %s of a run that ended "
                      "without releasing it (%s).", self.path, previous)
    os.ftruncate(fd, 0)
    os.lseek(fd, 0, os.SEEK_SET)
    os.write(fd, ("PID %d on %s\n" % (os.getpid(),
                                      socket.gethostname())).encode())
    os.fsync(fd)
    self._fd = fd
    logging.info("Locked %s", self.path)
    return True

  def release(self):
    """Removes the lock file and unlocks; does nothing if not held."""
    if self._fd is None:
      return
    # Removed before unlocking, so that nobody locks the file just before
    # it disappears (acquire checks that the file it locked is still there).
    try:
      os.remove(self.path)
    except FileNotFoundError:
      pass
    os.close(self._fd)  # Releases the flock.
    self._fd = None


def _read(fd):
  """The lock file's content, one line, or "" if empty."""
  os.lseek(fd, 0, os.SEEK_SET)
  return os.read(fd, 200).decode("utf-8", "replace").strip()


# Locks this process holds, by directory: a second lock_until_exit on one
# directory (a second Trainer in one process) keeps the first.
_HELD = {}


def lock_until_exit(output_dir):
  """Locks output_dir until this process exits (atexit releases it; after
  SIGKILL the kernel does, leaving a stale file the next run takes over).

  Returns:
    bool, whether output_dir is locked (not on a remote file system).

  Raises:
    OutputDirLockedError: another run holds it.
  """
  key = os.path.realpath(output_dir)
  if key not in _HELD:
    lock = OutputDirLock(output_dir)
    if not lock.acquire():
      return False
    _HELD[key] = lock
    atexit.register(lock.release)
  return True


def release_all():
  """Releases every lock this process holds, before its exit: a failed
  run's clean-up must see output_dir without the lock file, to remove a
  directory the run created and left empty."""
  for lock in _HELD.values():
    lock.release()
  _HELD.clear()
