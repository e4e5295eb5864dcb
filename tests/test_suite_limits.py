"""The suite's time limit per test (pytest.ini, conftest.py): a test that
hangs fails on its own, with every thread's stack, instead of holding CI
until its 90 minutes run out."""

import os
import subprocess
import sys
import textwrap
import time

import pytest

from tests import conftest

# A test that waits on a lock nobody releases (as a thread left waiting
# for a graph call would), below a function whose name the stack shows.
_HANGING = textwrap.dedent('''
    import threading

    def wait_for_nothing():
      threading.Event().wait()

    def test_hangs():
      wait_for_nothing()

    def test_passes():
      assert True
    ''')


@pytest.mark.slow
def test_a_hung_test_fails_within_its_limit_with_its_stack(tmp_path):
  (tmp_path / "test_hanging.py").write_text(_HANGING)
  started = time.time()
  # The suite's pytest.ini and conftest.py (as a plugin: the file is not
  # under tests/), on two workers as make test runs them, with the limit
  # lowered to 5 s.
  result = subprocess.run(
      [sys.executable, "-m", "pytest", "-c",
       os.path.join(conftest.REPO_ROOT, "pytest.ini"), "--rootdir",
       str(tmp_path), "-p", "tests.conftest", "-n", "2", "-o", "timeout=5",
       str(tmp_path / "test_hanging.py")],
      cwd=str(tmp_path), capture_output=True, text=True, timeout=120,
      env=conftest.script_env(PYTHONPATH=conftest.REPO_ROOT))
  elapsed = time.time() - started
  output = result.stdout + result.stderr
  assert result.returncode == 1, output[-3000:]
  assert elapsed < 60, (elapsed, output[-3000:])
  assert "Timeout: test_hanging.py::test_hangs ran past its limit of 5 s" in (
      output), output[-3000:]
  # The hung test's stack, down to the wait.
  assert "wait_for_nothing" in output, output[-3000:]
  assert "test_hanging.py::test_hangs" in output, output[-3000:]
  assert "1 failed, 1 passed" in output, output[-3000:]


def test_every_test_has_a_limit(request):
  """pytest.ini's default for quick tests, conftest.py's for slow ones."""
  assert request.config.getini("timeout") == str(conftest.QUICK_TEST_SECONDS)
  assert request.config.getini("timeout_method") == "thread"
  slow = [item for item in request.session.items
          if item.get_closest_marker("slow")]
  assert slow
  for item in slow:
    marker = item.get_closest_marker("timeout")
    assert marker is not None and marker.args[0] >= (
        conftest.SLOW_TEST_SECONDS), item.nodeid
