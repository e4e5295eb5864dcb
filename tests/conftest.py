"""Test setup: quiet TensorFlow, CPU only, shared fixtures."""

import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
os.environ.setdefault("CUDA_VISIBLE_DEVICES", "")

import pytest  # pylint: disable=g-import-not-at-top

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SHARED_DATA = os.path.join(os.path.dirname(REPO_ROOT), "shared", "data")


@pytest.fixture
def shared_data():
  """Path of ../shared/data; skips the test where it is absent."""
  if not os.path.isdir(SHARED_DATA):
    pytest.skip("../shared/data is absent (real data sets live there)")
  return SHARED_DATA
