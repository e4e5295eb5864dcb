"""Test setup: quiet TensorFlow, CPU only, shared fixtures."""

import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
os.environ.setdefault("CUDA_VISIBLE_DEVICES", "")

import subprocess  # pylint: disable=g-import-not-at-top
import sys  # pylint: disable=g-import-not-at-top

import pytest  # pylint: disable=g-import-not-at-top

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SHARED_DATA = os.path.join(os.path.dirname(REPO_ROOT), "shared", "data")


@pytest.fixture
def shared_data():
  """Path of ../shared/data; skips the test where it is absent."""
  if not os.path.isdir(SHARED_DATA):
    pytest.skip("../shared/data is absent (real data sets live there)")
  return SHARED_DATA


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
  if isinstance(args, dict):
    args = ["--%s=%s" % item for item in args.items()]
  return subprocess.run(
      [sys.executable, os.path.join(REPO_ROOT, script)] + list(args),
      cwd=cwd, capture_output=True, text=True, timeout=timeout,
      env=dict(os.environ, CUDA_VISIBLE_DEVICES="", TF_CPP_MIN_LOG_LEVEL="2"))


def read_results(path):
  """eval_results.txt `key = value` lines as a dict of floats."""
  with open(path) as f:
    return {k: float(v) for k, v in (line.strip().split(" = ") for line in f)}
