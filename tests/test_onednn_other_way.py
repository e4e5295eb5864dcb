"""The fused kernels' checks with oneDNN the other way round: TensorFlow
runs oneDNN's kernels on CPUs with AVX512-VNNI, AVX512-BF16 or AMX and its
Eigen kernels elsewhere (AVX2-only CPUs), unless TF_ENABLE_ONEDNN_OPTS says
otherwise. The suite runs the checks in the state this CPU gets; this runs
them again in a fresh process with the other one, so that every machine
covers both paths."""

import subprocess
import sys

import pytest

from benchmarks.lib import results
from tests import conftest

# The checks that compare the kernels with float64 and training with them
# against TensorFlow's own ops, through matmuls and the allocator that
# oneDNN replaces; not those of XLA (which compiles its own kernels), of a
# missing library or of the compiler. The whole training steps once per
# precision, padding kept (skip_padding False): the skipped case varies
# what the kernels' own checks cover.
_CHECKS = ("tests/test_fused_kernels.py", "-k",
           "not xla and not without_the_library and not failed_build and "
           "not (training_with_them and True)")

# Prints TensorFlow's own word on oneDNN in the fresh process, then runs
# the checks there.
_RUN = """
import sys
from tensorflow.python.util import _pywrap_util_port
print("oneDNN", _pywrap_util_port.IsMklEnabled(), flush=True)
import pytest
sys.exit(pytest.main(sys.argv[1:]))
"""


@pytest.mark.slow
def test_the_fused_kernel_checks_pass_with_onednn_the_other_way():
  other = not results.machine()["onednn"]
  env = conftest.script_env(TF_ENABLE_ONEDNN_OPTS="1" if other else "0")
  result = subprocess.run(
      [sys.executable, "-c", _RUN, "-q", "-p", "no:cacheprovider", "-x",
       "-o", "addopts="] + list(_CHECKS),
      cwd=conftest.REPO_ROOT, capture_output=True, text=True, timeout=800,
      env=env)
  output = result.stdout + result.stderr
  assert result.stdout.startswith("oneDNN %s\n" % other), output[-3000:]
  assert result.returncode == 0, output[-5000:]
  assert " passed" in result.stdout and " failed" not in result.stdout, (
      output[-3000:])
