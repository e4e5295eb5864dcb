"""tests/script_server.py: a forked run behaves as `python ...` would."""

import contextlib
import json
import os
import signal
import subprocess
import sys
import time

import pytest

from tests import conftest
from tests import script_server

# Prints what a process can see of how it was started, then ends as its
# first argument says.
PROBE = r"""
import json, os, sys
import numpy as np
print(json.dumps({
    "argv": sys.argv, "cwd": os.getcwd(), "pid": os.getpid(),
    "path0": sys.path[0], "value": os.environ.get("BERT_PROBE_VALUE"),
    "main": __name__, "numpy": int(np.random.randint(1 << 30)),
    "tensorflow": "tensorflow" in sys.modules}), flush=True)
sys.stderr.write("to stderr\n")
how = sys.argv[1]
if how == "raise":
  raise ValueError("raised here")
if how == "wait":
  import time
  time.sleep(60)
sys.exit(int(how))
"""


def probe(tmp_path, how, **kwargs):
  script = tmp_path / "probe.py"
  script.write_text(PROBE)
  return conftest.run([sys.executable, str(script), how, "x y"], **kwargs)


def test_argv_cwd_environment_outputs_and_exit_code(tmp_path):
  env = conftest.script_env(BERT_PROBE_VALUE="v")
  result = probe(tmp_path, "3", cwd=str(tmp_path), env=env)
  assert result.returncode == 3
  seen = json.loads(result.stdout)
  assert seen["argv"] == [str(tmp_path / "probe.py"), "3", "x y"]
  assert seen["cwd"] == str(tmp_path)
  assert seen["path0"] == str(tmp_path)  # The script's folder, as python's.
  assert seen["value"] == "v"
  assert seen["main"] == "__main__"
  assert seen["pid"] != os.getpid()
  assert result.stderr == "to stderr\n"
  # A fork of the server has TensorFlow imported, unasked.
  forked = os.environ.get("BERT_TESTS_FRESH_INTERPRETERS") != "1"
  assert seen["tensorflow"] == forked, conftest._scripts[0].differences(env)  # pylint: disable=protected-access


def test_an_uncaught_exception_is_a_traceback_and_exit_1(tmp_path):
  result = probe(tmp_path, "raise")
  assert result.returncode == 1
  assert result.stderr.splitlines()[-1] == "ValueError: raised here"
  assert "Traceback (most recent call last):" in result.stderr


def test_each_run_has_its_own_numpy_seed(tmp_path):
  draws = {json.loads(probe(tmp_path, "0").stdout)["numpy"] for _ in range(3)}
  assert len(draws) == 3


def test_a_signal_reaches_the_script_and_is_its_status(tmp_path):
  script = tmp_path / "probe.py"
  script.write_text(PROBE)
  log = tmp_path / "stderr.txt"
  process = conftest.popen([sys.executable, str(script), "wait"],
                           stderr_path=str(log))
  deadline = time.time() + 60
  while not log.exists() or "to stderr" not in log.read_text():
    assert process.poll() is None and time.time() < deadline
    time.sleep(0.01)
  assert process.poll() is None
  process.send_signal(signal.SIGTERM)
  stdout, _ = process.communicate(timeout=60)
  assert process.returncode == -signal.SIGTERM
  assert json.loads(stdout)["pid"] == process.pid


def test_code_with_c_runs_in_its_working_directory(tmp_path):
  (tmp_path / "local_module.py").write_text("VALUE = 7\n")
  result = conftest.run(
      [sys.executable, "-c", "import sys, local_module; "
       "print(sys.argv, local_module.VALUE)", "a"], cwd=str(tmp_path))
  assert (result.returncode, result.stdout) == (0, "['-c', 'a'] 7\n")


def test_an_isolated_run_sees_the_path_of_python_dash_i(tmp_path):
  """`python -I script`: a fork's sys.path is a fresh `python -I`'s (no
  script folder, no PYTHONPATH, no user site-packages), so the project's
  modules cannot be imported, even from the repo root."""
  script = tmp_path / "paths.py"
  script.write_text(
      "import json, sys\n"
      "try:\n"
      "  import modeling\n"
      "  found = True\n"
      "except ImportError:\n"
      "  found = False\n"
      "print(json.dumps({'path': sys.path, 'modeling': found, "
      "'tensorflow': 'tensorflow' in sys.modules}))\n")
  env = conftest.script_env()
  env.pop("PYTHONPATH", None)
  seen = []
  for fresh in (False, True):
    result = conftest.run([sys.executable, "-I", str(script)], env=env,
                          cwd=conftest.REPO_ROOT, fresh=fresh)
    assert result.returncode == 0, result.stderr[-2000:]
    seen.append(json.loads(result.stdout))
  forked, fresh = seen
  assert forked["path"] == fresh["path"]
  assert not forked["modeling"] and not fresh["modeling"]
  assert str(tmp_path) not in forked["path"]
  assert forked["tensorflow"] == (
      os.environ.get("BERT_TESTS_FRESH_INTERPRETERS") != "1" and
      conftest._client().supports(env))  # pylint: disable=protected-access

def test_a_load_time_variable_gets_a_fresh_interpreter(tmp_path):
  # TF_ENABLE_ONEDNN_OPTS is read as TensorFlow loads: a fork of a server
  # that loaded it otherwise would not honour it. The other value than the
  # suite's own (a suite run with TF_ENABLE_ONEDNN_OPTS=0 has a server
  # started with it, which may serve that value).
  other = "1" if os.environ.get("TF_ENABLE_ONEDNN_OPTS") == "0" else "0"
  result = probe(tmp_path, "0",
                 env=conftest.script_env(TF_ENABLE_ONEDNN_OPTS=other))
  assert result.returncode == 0
  assert not json.loads(result.stdout)["tensorflow"]
  result = probe(tmp_path, "0", fresh=True)
  assert not json.loads(result.stdout)["tensorflow"]


def test_load_time_variables_set_inside_this_process_do_not_leak(
    tmp_path, monkeypatch):
  # As OpenCV's import does to LD_LIBRARY_PATH: the scripts get the
  # session's starting value, as from a user's shell, and still fork.
  monkeypatch.setenv("LD_LIBRARY_PATH", "/injected/by/an/import")
  script = tmp_path / "env.py"
  script.write_text("import os, sys\n"
                    "print(os.environ.get('LD_LIBRARY_PATH'), "
                    "'tensorflow' in sys.modules)\n")
  result = conftest.run([sys.executable, str(script)])
  assert result.returncode == 0, result.stderr
  value, tensorflow = result.stdout.split()
  assert value != "/injected/by/an/import"
  assert tensorflow == str(os.environ.get("BERT_TESTS_FRESH_INTERPRETERS")
                           != "1")


def test_the_relay_stands_for_python_in_a_shell_script(tmp_path):
  # As tests/quickstarts.py runs the docs' commands: the relay in bash,
  # with the shell's stdin, pipes and exit statuses.
  script = tmp_path / "probe.py"
  script.write_text(PROBE)
  relay = conftest.relay_command()
  forked = relay is not None
  python = " ".join(relay or [sys.executable])
  text = "\n".join([
      "cd %s" % tmp_path,
      # A script, its stdout into a pipe, its exit status through it.
      "set +e; %s probe.py 3 'x y' | cat > out.json; echo ${PIPESTATUS[0]} "
      "> status; set -e" % python,
      # Code on stdin (`python - <<EOF`), its output captured.
      "value=$(%s - a b <<'EOF'\nimport sys; print(sys.argv[1:])\nEOF\n)"
      % python,
      'echo "$value" > stdin.txt',
      # A load-time variable of its own: a fresh interpreter.
      "TF_PROBE=1 %s probe.py 0 > fresh.json 2> /dev/null" % python,
      # A signal that ends the script ends the relay the same way.
      "set +e; %s -c 'import os, signal; os.kill(os.getpid(), "
      "signal.SIGTERM)'; echo $? > killed; set -e" % python])
  result = subprocess.run(
      ["bash", "-eu", "-c", text], capture_output=True, text=True,
      timeout=300, env=conftest.script_env())
  assert result.returncode == 0, result.stderr[-3000:]
  seen = json.loads((tmp_path / "out.json").read_text())
  assert seen["argv"] == ["probe.py", "3", "x y"]
  assert seen["cwd"] == str(tmp_path)
  assert seen["tensorflow"] == forked
  assert result.stderr.count("to stderr\n") == 1
  assert (tmp_path / "status").read_text() == "3\n"
  assert (tmp_path / "stdin.txt").read_text() == "['a', 'b']\n"
  assert not json.loads((tmp_path / "fresh.json").read_text())["tensorflow"]
  assert (tmp_path / "killed").read_text() == "%d\n" % (128 + signal.SIGTERM)


# A module that starts a thread as it is imported (as gRPC, an op at import
# or a BLAS pool would), holding a lock: a fork would copy the lock held
# and no thread to release it.
THREAD_AT_IMPORT = r"""
import threading
LOCK = threading.Lock()
LOCK.acquire()
threading.Thread(target=threading.Event().wait, daemon=True).start()
"""


def test_a_server_with_a_thread_runs_scripts_in_fresh_interpreters(tmp_path):
  (tmp_path / "starts_a_thread.py").write_text(THREAD_AT_IMPORT)
  script = tmp_path / "probe.py"
  script.write_text(PROBE)
  env = conftest.script_env()
  client = script_server.Client(
      dict(env, PYTHONPATH=str(tmp_path)), preload=["starts_a_thread"])
  try:
    with pytest.warns(UserWarning, match=r"fresh interpreter: the script "
                      r"server has 2 threads"):
      process = client.popen([str(script), "0"], dict(
          env, PYTHONPATH=str(tmp_path)), cwd=str(tmp_path))
    stdout, _ = process.communicate(timeout=120)
    assert process.returncode == 0
    assert not json.loads(stdout)["tensorflow"]  # not a fork of the server
    # The relay, as the docs' commands use it: the same, said on stderr.
    result = subprocess.run(
        [sys.executable, script_server.__file__, "--relay",
         client.socket_path, str(script), "0"], cwd=str(tmp_path),
        env=dict(env, PYTHONPATH=str(tmp_path)), capture_output=True,
        text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert not json.loads(result.stdout)["tensorflow"]
    assert result.stderr.startswith(
        "script_server: a fresh interpreter: the script server has 2 threads")
  finally:
    client.close()


def test_an_unknown_variable_gets_a_fresh_interpreter_and_says_so(tmp_path):
  # OPENBLAS_NUM_THREADS is read as NumPy loads; the rule knows the few
  # variables read only when used, and forks for nothing else.
  assert not script_server.is_run_time("OPENBLAS_NUM_THREADS")
  assert not script_server.is_run_time("GLIBC_TUNABLES")
  assert script_server.is_run_time("TF_CONFIG")
  assert script_server.is_run_time("GLUE_DIR")
  env = conftest.script_env(GLIBC_TUNABLES="glibc.malloc.arena_max=1")
  # Where every run is a fresh interpreter, nothing is refused.
  refused = (contextlib.nullcontext()
             if os.environ.get("BERT_TESTS_FRESH_INTERPRETERS") == "1" else
             pytest.warns(UserWarning, match="differs from the server's in "
                          "GLIBC_TUNABLES"))
  with refused:
    result = probe(tmp_path, "0", env=env)
  assert result.returncode == 0
  assert not json.loads(result.stdout)["tensorflow"]
