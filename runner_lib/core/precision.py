"""--precision: Keras' mixed-precision policy, and a warning where bfloat16
has no hardware to run on."""

from absl import logging
import tensorflow as tf
import tf_keras

CPUINFO = "/proc/cpuinfo"
# The flags of bfloat16 arithmetic: x86's AVX512-BF16 (Cooper Lake, Zen 4
# and later) and AMX (Sapphire Rapids and later), Arm's BF16 (Neoverse V1,
# Graviton3 and later; its "Features" line).
BF16_CPU_FLAGS = ("avx512_bf16", "amx_bf16", "bf16")


def cpu_flags(path=CPUINFO):
  """The CPU's feature flags, or None where they cannot be read (not Linux).

  Returns:
    set of str, e.g. {"avx512f", "amx_bf16", ...}, or None.
  """
  try:
    with open(path, encoding="utf-8", errors="replace") as f:
      for line in f:
        key, _, value = line.partition(":")
        if key.strip() in ("flags", "Features"):
          return set(value.split())
  except OSError:
    return None
  return None


def warn_without_bf16_units(path=CPUINFO):
  """Warns when bfloat16 will run on a CPU without bfloat16 units.

  There TensorFlow emulates it in float32 arithmetic with conversions on
  top, so a step is slower than in float32. Nothing is said on a GPU or
  TPU, or where the CPU's flags cannot be read.

  Returns:
    bool, whether it warned.
  """
  if tf.config.list_physical_devices("GPU") or tf.config.list_physical_devices(
      "TPU"):
    return False
  found = cpu_flags(path)
  if found is None or found.intersection(BF16_CPU_FLAGS):
    return False
  logging.warning(
      "--precision=bfloat16 on a CPU without bfloat16 units (its flags "
      "have neither %s): TensorFlow emulates bfloat16 there, so this runs "
      "slower than --precision=float32.", " nor ".join(BF16_CPU_FLAGS))
  return True


def set_policy(precision):
  """Sets Keras' global policy for --precision.

  Args:
    precision: "float32", "bfloat16" or "float16"; the latter two run
      matmuls and activations in that type over float32 weights (Keras'
      mixed_bfloat16 / mixed_float16).
  """
  if precision == "float32":
    return
  if precision == "bfloat16":
    warn_without_bf16_units()
  tf_keras.mixed_precision.set_global_policy("mixed_" + precision)
