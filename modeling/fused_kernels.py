"""Fused CPU kernels for the bfloat16 training path, built from source.

modeling/kernels/fused_gelu.cc holds the original's GELU (tanh form),
forward and gradient, each in one pass over memory. `make setup` builds it
with g++ against the installed TensorFlow (fused_kernels.main()); where that fails (no compiler) everything runs
as before, through TensorFlow's composite ops, with one warning.

Only the bfloat16 training path on CPUs uses it (layers.set_fused_kernels,
from runner_lib.core.precision.set_policy): float32 keeps the original's
composite op for op, and exported SavedModels never hold the custom op
(they must load where this library is absent).
"""

import os
import subprocess
import tempfile

from absl import logging
import tensorflow as tf

KERNELS_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)),
                           "kernels")
SOURCE = os.path.join(KERNELS_DIR, "fused_gelu.cc")
LIBRARY = os.path.join(KERNELS_DIR, "_fused_gelu.so")

_loaded = []  # [ops module or None], once loaded or found missing.


def build(library=LIBRARY):
  """Compiles SOURCE into library (written whole, then renamed in place).

  Returns:
    None on success, else str: why not (the compiler's last lines).
  """
  command = (["g++", "-w", "-shared", "-fPIC", "-O3", "-ffast-math",
              "-fopenmp-simd", SOURCE] + tf.sysconfig.get_compile_flags() +
             tf.sysconfig.get_link_flags())
  directory = os.path.dirname(os.path.abspath(library))
  fd, partial = tempfile.mkstemp(suffix=".so", dir=directory)
  os.close(fd)
  try:
    try:
      result = subprocess.run(command + ["-o", partial], capture_output=True,
                              text=True, check=False)
    except OSError as e:
      return "cannot run g++: %s" % e
    if result.returncode:
      return "g++ failed:\n" + "\n".join(
          result.stderr.strip().splitlines()[-10:])
    os.replace(partial, library)
    return None
  finally:
    if os.path.exists(partial):
      os.unlink(partial)


def ops():
  """The loaded kernels (fused_gelu, fused_gelu_grad), or None where the
  library is missing or stale (older than SOURCE) or fails to load
  (warned about once)."""
  if not _loaded:
    module, problem = None, None
    if not os.path.exists(LIBRARY):
      problem = "%s is missing" % LIBRARY
    elif os.path.getmtime(LIBRARY) < os.path.getmtime(SOURCE):
      problem = "%s is older than its source" % LIBRARY
    else:
      try:
        module = tf.load_op_library(LIBRARY)
      except (tf.errors.NotFoundError, OSError) as e:
        problem = "%s does not load (%s)" % (LIBRARY, e)
    if problem:
      logging.warning(
          "The fused GELU kernel is not used: %s; `make setup` builds it. bfloat16 training "
          "runs TensorFlow's composite ops instead (slower, same "
          "function).", problem)
    _loaded.append(module)
  return _loaded[0]


def available():
  """Whether the kernels are built and load."""
  return ops() is not None


@tf.custom_gradient
def gelu(x):
  """The original's GELU (modeling.layers.gelu) through the fused kernel.

  Args:
    x: float32 Tensor of any shape, on the CPU.

  Returns:
    float32 Tensor like x; its gradient is the fused gradient kernel's.
  """
  kernels = ops()
  return kernels.fused_gelu(x), lambda dy: kernels.fused_gelu_grad(dy, x)


def main():
  """Builds LIBRARY (make setup); a warning, not an error, where it fails."""
  problem = build()
  if problem:
    # Not an error: everything runs without the kernel, only slower.
    print("Warning: the fused GELU kernel was not built (bfloat16 "
          "training will use TensorFlow's composite ops): %s" % problem)
  else:
    print("Built %s" % LIBRARY)

