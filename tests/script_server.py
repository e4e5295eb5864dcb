"""Runs the tests' script processes from a process that has already
imported TensorFlow: each run is a fork of it, so a run skips the ~3.5 s
of CPU that `import tensorflow` costs a fresh interpreter (the suite
starts about 170 script processes).

A run is still a process of its own, as `python SCRIPT ARGS` would be:
its own pid (the tests' signals reach the script itself), argv, working
directory, environment, stdout and stderr, fresh flags and TensorFlow
runtime (the server imports TensorFlow but never runs an op, so no
runtime state is forked), and the exit status a fresh interpreter gives
(the script's sys.exit code, 1 with a traceback on an uncaught
exception, -N when a signal N ends it). What differs: the modules the
server imported are not imported again, and their objects are frozen out
of the cyclic garbage collector (gc.freeze: live module state it would
never free); the hash seed is the server's.
A run gets a fresh interpreter instead, with a warning that says why, where
a fork could differ from one or hang: its environment differs from the
server's in a variable not known to be read only at run time (is_run_time:
any other may be read as TensorFlow or its libraries load, such as
OPENBLAS_NUM_THREADS or GLIBC_TUNABLES), or the server has more than one
thread (a fork copies only the forking thread: a lock another thread held
stays held in the child). The server's environment keeps its imports to one
thread (SINGLE_THREAD_ENV).

The server (this file run as a program) listens on a Unix socket. For a
request it forks a monitor, the monitor forks the script process, sends
its pid, waits for it and sends the exit status; the monitor is the
server's own child, so the server never waits on a script.

Client side: Client(env).popen(argv, env, cwd) -> a subprocess.Popen-like
object (pid, poll, wait, communicate, send_signal, terminate, kill).
Shell scripts (the docs' commands, tests/quickstarts.py) use the relay
instead: `python script_server.py --relay SOCKET ARGV...` stands for
`python ARGV...`, giving the script its own stdout and stderr (whatever
they are: a pipe, a file), relaying signals and ending with its exit
status; where the environment differs from the server's in a load-time
variable it becomes `python ARGV...` itself.
"""

import fcntl
import gc
import importlib
import json
import os
import runpy
import select
import shutil
import signal
import site
import socket
import subprocess
import sys
import tempfile
import threading
import types
import warnings

# Environment variables known to be read only when used, never as a library
# loads: a run may differ from the server in these and still fork. TF_CONFIG
# (tf.distribute reads it when a strategy is made), the shell's own, the
# project's (BERT_*, DEMO_*) and the data folders of the docs' commands
# (GLUE_DIR, SQUAD_DIR, ...). Any other variable may be read as TensorFlow,
# oneDNN, OpenMP, a BLAS or the C library loads.
# GCE_METADATA_IP: the TPU client reads it when it looks a TPU up;
# SHARED_DATA: where the project's data sets live (tests/test_demo.py
# points it at an empty folder).
_RUN_TIME = ("TF_CONFIG", "GCE_METADATA_IP", "SHARED_DATA", "PWD", "OLDPWD",
             "SHLVL", "_")
_RUN_TIME_PREFIXES = ("BERT_", "DEMO_")
_RUN_TIME_SUFFIXES = ("_DIR",)

# What the server's imports read as they load, set so that none starts a
# thread: NumPy's and SciPy's OpenBLAS start a pool of their own, and
# pyarrow's jemalloc (TensorFlow imports pandas) a background thread. The
# tests' script processes get the same (conftest.script_env), forked or
# not.
SINGLE_THREAD_ENV = {"OPENBLAS_NUM_THREADS": "1",
                     "JE_ARROW_MALLOC_CONF": "background_thread:false"}


def is_run_time(name):
  """Whether the environment variable name is known to be read only when
  used (a run that changes it can still be a fork)."""
  return (name in _RUN_TIME or name.startswith(_RUN_TIME_PREFIXES) or
          name.endswith(_RUN_TIME_SUFFIXES))


def is_load_time(name):
  """Whether the environment variable name may be read as libraries load."""
  return not is_run_time(name)


def _load_time(env):
  return {k: v for k, v in env.items() if is_load_time(k)}


def differences(server_env, env):
  """{name: (the server's value, env's)} of the variables that may be read
  as libraries load in which env differs from server_env (None: unset)."""
  ours, theirs = _load_time(server_env), _load_time(env)
  return {k: (ours.get(k), theirs.get(k)) for k in set(ours) | set(theirs)
          if ours.get(k) != theirs.get(k)}


def _why_fresh(server_env, env):
  """Why a run with env cannot be a fork of a server started with
  server_env, or None where it can."""
  changed = differences(server_env, env)
  if changed:
    return ("its environment differs from the server's in %s (not known to "
            "be read only at run time)" % ", ".join(sorted(changed)))
  return None


def _threads():
  """The names of this process's threads, the OS's (native ones too)."""
  names = []
  for task in sorted(os.listdir("/proc/self/task")):
    try:
      with open("/proc/self/task/%s/comm" % task) as f:
        names.append(f.read().strip())
    except OSError:
      pass  # it ended
  return names


def _receive_line(conn, fds=None):
  """A JSON line; file descriptors sent with it are appended to fds."""
  data = b""
  while not data.endswith(b"\n"):
    if fds is None:
      chunk = conn.recv(4096)
    else:
      chunk, received, _, _ = socket.recv_fds(conn, 4096, 3)
      fds.extend(received)
    if not chunk:
      raise EOFError("connection closed")
    data += chunk
  return json.loads(data)


def _send_line(conn, message, fds=()):
  data = json.dumps(message).encode() + b"\n"
  if fds:
    socket.send_fds(conn, [data], list(fds))
  else:
    conn.sendall(data)


# Server side.


def _serve(listener, parent_pipe):
  """Accepts requests until the parent's pipe closes.

  Returns only in a script process (a fork), with its request: a dict
  with argv, env, cwd, stdout and stderr (file paths).
  """
  while True:
    readable, _, _ = select.select([listener, parent_pipe], [], [], 5.0)
    while True:  # Reaps the monitors that have finished.
      try:
        pid, _ = os.waitpid(-1, os.WNOHANG)
      except ChildProcessError:
        break
      if not pid:
        break
    if parent_pipe in readable and not os.read(parent_pipe, 1):
      sys.exit(0)  # The tests' process is gone.
    if listener not in readable:
      continue
    conn, _ = listener.accept()
    threads = _threads()
    if len(threads) > 1:
      # No fork: the client runs the script in a fresh interpreter.
      _refuse(conn, "the script server has %d threads (%s), and a fork "
              "copies only one" % (len(threads), ", ".join(threads)))
      continue
    if os.fork():
      conn.close()
      continue
    # The monitor: forks the script process, reports its pid and status.
    listener.close()
    os.close(parent_pipe)
    try:
      fds = []
      request = _receive_line(conn, fds)
      request["fds"] = fds  # The relay's stdin, stdout and stderr, if sent.
      why = request.get("relay") and _why_fresh(_SERVER_ENV, request["env"])
      if why:
        _send_line(conn, {"fresh": why})
        os._exit(0)  # pylint: disable=protected-access
      pid = os.fork()
    except BaseException:  # pylint: disable=broad-except
      os._exit(1)  # pylint: disable=protected-access
    if not pid:
      conn.close()
      return request
    for fd in fds:
      os.close(fd)
    try:
      _send_line(conn, {"pid": pid})
      _, status = os.waitpid(pid, 0)
      _send_line(conn, {"returncode": os.waitstatus_to_exitcode(status)})
    finally:
      os._exit(0)  # pylint: disable=protected-access


def _refuse(conn, reason):
  """Answers a request without forking: reads it whole first (a reply
  before the client has sent it would break its pipe), closes the
  descriptors it brought, and says why."""
  fds = []
  conn.settimeout(10)
  try:
    _receive_line(conn, fds)
    _send_line(conn, {"fresh": reason})
  except (OSError, EOFError, ValueError):
    pass  # the client is gone: nothing to answer
  finally:
    for fd in fds:
      os.close(fd)
    conn.close()


def _become(request):
  """Makes this fork look like `python argv...` started in request's
  cwd with request's environment.

  Returns:
    argv less a leading -I: a script and its arguments, "-c", code and its
    arguments, or "-" and arguments.
  """
  if request["fds"]:
    # The relay's stdin, stdout and stderr; moved clear of 0-2 first, as
    # one may have arrived as 0 (the monitor closed its own stdin).
    moved = [fcntl.fcntl(fd, fcntl.F_DUPFD, 10) for fd in request["fds"]]
    for fd in request["fds"]:
      os.close(fd)
    for target, fd in zip((0, 1, 2), moved):
      os.dup2(fd, target)
      os.close(fd)
  else:
    with open(os.devnull, "rb") as null:
      os.dup2(null.fileno(), 0)
    for fd, path in ((1, request["stdout"]), (2, request["stderr"])):
      with open(path, "wb") as f:
        os.dup2(f.fileno(), fd)
  os.chdir(request["cwd"])
  os.environ.clear()
  os.environ.update(request["env"])
  argv = request["argv"]
  if argv[0] == "-I":
    # `python -I script`: sys.path holds neither the script's folder nor
    # PYTHONPATH's entries nor the user's site-packages (3.11's -I implies
    # -P), as _ISOLATED_PATH, found as the server started.
    argv = argv[1:]
    assert argv[0] not in ("-c", "-"), "-I with a script file only"
    sys.argv = list(argv)
    sys.path[:] = _ISOLATED_PATH
  elif argv[0] == "-c":
    sys.argv = ["-c"] + argv[2:]
    sys.path[0] = ""
  elif argv[0] == "-":
    sys.argv = list(argv)
    sys.path[0] = ""
  else:
    sys.argv = list(argv)
    sys.path[0] = os.path.dirname(os.path.abspath(argv[0]))
  # Python reseeds `random` in a fork; NumPy's global generator is the
  # server's until reseeded from the OS, as a fresh process's would be.
  if "numpy" in sys.modules:
    sys.modules["numpy"].random.seed()
  return argv


def _run(argv):
  """Runs argv's script, `-c` code or `-` (code on stdin) as __main__. An
  uncaught exception or SystemExit ends the process as it would end
  `python ...`: a traceback and exit 1, or the exit code."""
  if argv[0] not in ("-c", "-"):
    # As given: run_path makes it sys.argv[0], as python does.
    runpy.run_path(argv[0], run_name="__main__")
    return
  code, name = (argv[1], "<string>") if argv[0] == "-c" else (
      sys.stdin.read(), "<stdin>")
  main_module = types.ModuleType("__main__")
  sys.modules["__main__"] = main_module
  exec(compile(code, name, "exec"), main_module.__dict__)  # pylint: disable=exec-used


# What the server imports, once for all its runs: TensorFlow, the legacy
# Keras the scripts use, and run_ner.py's entity scorer (seqeval, which
# loads scikit-learn and SciPy: about 1.2 s a run on its own).
_PRELOADED = ("tensorflow", "tf_keras", "seqeval.metrics")

# The server's environment as it started, before its imports.
_SERVER_ENV = {}
# sys.path as `python -I` has it: the server's, less its script's folder,
# PYTHONPATH's entries and the user's site-packages.
_ISOLATED_PATH = []


def main(socket_path, preload=()):
  """Imports _PRELOADED and then preload (module names), then serves on
  socket_path until stdin closes. Prints "ready" on stdout once
  listening."""
  _SERVER_ENV.update(os.environ)
  excluded = set(os.environ.get("PYTHONPATH", "").split(os.pathsep))
  excluded.add(site.getusersitepackages())
  _ISOLATED_PATH.extend(p for p in sys.path[1:] if p not in excluded)
  for name in _PRELOADED:
    try:
      importlib.import_module(name)
    except ImportError:
      if name == "tensorflow":
        raise
  for name in preload:
    importlib.import_module(name)
  # The imports' objects out of the cyclic GC's reach in every run: a
  # run's full collections would walk them all (~385,000, 0.2-0.3 s each
  # time) to free nothing, copying the pages they touch from the server
  # (a forked run_classifier.py run: 6.6 s without, 5.4 s with).
  gc.collect()
  gc.freeze()
  listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
  listener.bind(socket_path)
  listener.listen(64)
  sys.stdout.write("ready\n")
  sys.stdout.flush()
  request = _serve(listener, sys.stdin.fileno())
  _run(_become(request))


# Client side.


class Client(object):
  """A server started on first use, for one process of tests.

  Args:
    env: dict, the environment the server imports TensorFlow under.
    fresh: bool, run everything in fresh interpreters (no server).
    preload: module names the server imports after _PRELOADED.
  """

  def __init__(self, env, fresh=False, preload=()):
    self._env = dict(env)
    self._fresh = fresh
    self._preload = list(preload)
    self._lock = threading.Lock()  # Tests start runs from threads too.
    self._process = None
    self._folder = tempfile.mkdtemp(prefix="script_server_")
    self._socket = os.path.join(self._folder, "socket")

  def supports(self, env):
    """Whether a run with env can be a fork of this server (as far as its
    environment goes: the server also refuses while it has threads)."""
    return not self.differences(env)

  def differences(self, env):
    """differences() between the server's environment and env."""
    return differences(self._env, env)

  def _start(self):
    with self._lock:
      self._start_locked()

  @property
  def socket_path(self):
    return self._socket

  def start_for_relay(self):
    """Starts the server for relays (script_server.relay); False where
    this client runs everything in fresh interpreters."""
    if self._fresh:
      return False
    self._start()
    return True

  def _start_locked(self):
    if self._process is not None and self._process.poll() is None:
      return
    if os.path.exists(self._socket):
      os.unlink(self._socket)
    self._process = subprocess.Popen(
        [sys.executable, os.path.abspath(__file__), self._socket] +
        self._preload,
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=self._env)
    line = self._process.stdout.readline()
    if line != b"ready\n":
      raise RuntimeError("the script server did not start (%r)" % line)

  def popen(self, argv, env, cwd=None, stderr_path=None, fresh=False):
    """Starts `python argv...`: a fork of the server where
    self.supports(env) (and fresh interpreters are not asked for), else a
    fresh interpreter.

    Args:
      argv: list of str, a script and its arguments (after -I for an
        isolated Python) or "-c", code and its arguments (no interpreter).
      env: dict, the run's environment.
      cwd: str or None (this process's working directory).
      stderr_path: str, a file for stderr (kept), or None for one of
        this client's own.
      fresh: bool, a fresh interpreter whatever env is.

    Returns:
      ScriptProcess.
    """
    fork = not (fresh or self._fresh)
    if fork and not self.supports(env):
      fork = False
      warnings.warn("script_server: %s runs in a fresh interpreter: %s." % (
          " ".join(argv[:2]), _why_fresh(self._env, env)), stacklevel=2)
    if fork:
      self._start()
    return ScriptProcess(self._socket if fork else None, argv, env,
                         os.path.abspath(cwd or os.getcwd()), self._folder,
                         stderr_path)

  def close(self):
    if self._process is not None:
      self._process.stdin.close()  # The server exits at EOF.
      try:
        self._process.wait(timeout=60)
      except subprocess.TimeoutExpired:
        self._process.kill()
        self._process.wait(timeout=60)
      self._process = None
    shutil.rmtree(self._folder, ignore_errors=True)


class ScriptProcess(object):
  """A script run, with subprocess.Popen's methods that the tests use;
  stdout and stderr go to files, read as text by communicate.

  Args:
    socket_path: str, the server's socket, or None for a fresh
      interpreter.
    argv, env, cwd, stderr_path: as Client.popen's.
    folder: str, where the outputs' files go.
  """

  def __init__(self, socket_path, argv, env, cwd, folder, stderr_path=None):
    self.args = [sys.executable] + list(argv)
    self.returncode = None
    self._output = tempfile.mkdtemp(dir=folder)
    self._stdout = os.path.join(self._output, "stdout")
    self._stderr = os.path.abspath(
        stderr_path or os.path.join(self._output, "stderr"))
    self._popen = self._conn = None
    if socket_path is None:
      self._start_fresh(env, cwd)
      return
    self._conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    self._conn.connect(socket_path)
    _send_line(self._conn, {
        "argv": list(argv), "env": dict(env), "cwd": cwd,
        "stdout": self._stdout, "stderr": self._stderr})
    reply = _receive_line(self._conn)
    if "fresh" in reply:  # the server refused to fork
      self._conn.close()
      self._conn = None
      warnings.warn("script_server: %s runs in a fresh interpreter: %s." % (
          " ".join(argv[:2]), reply["fresh"]))
      self._start_fresh(env, cwd)
      return
    self.pid = reply["pid"]

  def _start_fresh(self, env, cwd):
    with open(self._stdout, "wb") as out, open(self._stderr, "wb") as err:
      self._popen = subprocess.Popen(self.args, stdout=out, stderr=err,
                                     stdin=subprocess.DEVNULL, cwd=cwd,
                                     env=env)
    self.pid = self._popen.pid

  def poll(self):
    if self.returncode is None:
      if self._popen is not None:
        self.returncode = self._popen.poll()
      elif select.select([self._conn], [], [], 0)[0]:
        self._finish()
    return self.returncode

  def wait(self, timeout=None):
    if self.returncode is None:
      if self._popen is not None:
        self.returncode = self._popen.wait(timeout)
        return self.returncode
      if not select.select([self._conn], [], [], timeout)[0]:
        raise subprocess.TimeoutExpired(self.args, timeout)
      self._finish()
    return self.returncode

  def _finish(self):
    self.returncode = _receive_line(self._conn)["returncode"]
    self._conn.close()

  def communicate(self, timeout=None):
    """Waits for the end (killing the process past timeout, then raising
    subprocess.TimeoutExpired); returns (stdout, stderr) as text."""
    try:
      self.wait(timeout)
    except subprocess.TimeoutExpired:
      self.kill()
      self.wait(60)  # A killed process ends at once.
      raise
    outputs = []
    for path in (self._stdout, self._stderr):
      with open(path, encoding="utf-8", errors="replace") as f:
        outputs.append(f.read())
    shutil.rmtree(self._output, ignore_errors=True)
    return tuple(outputs)

  def send_signal(self, signum):
    if self.returncode is None:
      try:
        os.kill(self.pid, signum)
      except ProcessLookupError:
        pass

  def terminate(self):
    self.send_signal(signal.SIGTERM)

  def kill(self):
    self.send_signal(signal.SIGKILL)


def relay(socket_path, argv):
  """Runs `python argv...` as a fork of the server at socket_path, with
  this process's stdout, stderr, working directory and environment; exits
  as it does (a signal that ends it ends this process the same way). A
  SIGINT or SIGTERM to this process goes to it; argv may be a script,
  "-c" and code, or "-" (code read from stdin). Where the server cannot
  run it (an environment it cannot fork for, or threads in the server),
  becomes `python argv...`, saying why on stderr."""
  conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
  conn.connect(socket_path)
  _send_line(conn, {"argv": argv, "env": dict(os.environ),
                    "cwd": os.getcwd(), "relay": True}, fds=(0, 1, 2))
  reply = _receive_line(conn)
  if reply.get("fresh"):
    conn.close()
    sys.stderr.write("script_server: a fresh interpreter: %s.\n" %
                     reply["fresh"])
    sys.stderr.flush()
    os.execv(sys.executable, [sys.executable] + argv)
  pid = reply["pid"]
  for signum in (signal.SIGINT, signal.SIGTERM):
    signal.signal(signum, lambda signum, _: os.kill(pid, signum))
  returncode = _receive_line(conn)["returncode"]
  if returncode < 0:
    signal.signal(-returncode, signal.SIG_DFL)
    os.kill(os.getpid(), -returncode)
  sys.exit(returncode)


if __name__ == "__main__":
  if sys.argv[1] == "--relay":
    relay(sys.argv[2], sys.argv[3:])
  else:
    main(sys.argv[1], sys.argv[2:])
