"""--precision: what models compute in (bfloat16 matmuls on CPUs, Keras'
mixed policies elsewhere), and a warning where bfloat16 has no hardware to
run on."""

import contextlib

from absl import logging
import tensorflow as tf
import tf_keras

import modeling
from modeling import options as options_lib

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

  There TensorFlow emulates it: each bfloat16 matmul converts its operands
  to float32 and rounds its result back, so bfloat16 gains little or
  nothing over float32 (docs/training.md's table, from bench_classifier:
  on an AVX2-only EPYC, ours in bfloat16 ran a MiniLM fine-tuning step at
  about float32's speed, where Keras' mixed_bfloat16 policy, all of it in
  emulated bfloat16, ran one 20x slower) and rounds as bfloat16 does.
  Nothing is said on a GPU or TPU, or where the CPU's flags cannot be
  read. The runners call it once.

  Returns:
    bool, whether it warned.
  """
  if _accelerated():
    return False
  found = cpu_flags(path)
  if found is None or found.intersection(BF16_CPU_FLAGS):
    return False
  logging.warning(
      "--precision=bfloat16 on a CPU without bfloat16 units (its flags "
      "have neither %s): TensorFlow emulates bfloat16 there, so this runs "
      "at about --precision=float32's speed or slower (docs/training.md, "
      "Precision), with bfloat16's rounding.", " nor ".join(BF16_CPU_FLAGS))
  return True


def _accelerated():
  """Whether a GPU or TPU is visible."""
  return bool(tf.config.list_physical_devices("GPU") or
              tf.config.list_physical_devices("TPU"))


def prediction_options(precision):
  """What a model built for prediction or serving computes in.

  Args:
    precision: "float32", or "bfloat16": its matmuls in bfloat16 (warned
      about on CPUs without bfloat16 units), everything else and every
      output float32, on any device the model later runs on (an exported
      SavedModel's graph holds the casts).

  Returns:
    modeling.ComputeOptions, never with a fused kernel: a SavedModel must
    load where the kernels' library is absent.
  """
  if precision == "bfloat16":
    warn_without_bf16_units()
    return modeling.ComputeOptions(tf.bfloat16)
  return modeling.ComputeOptions()


def training_options(precision, jit_compile=False, fused_kernels=True):
  """What --precision and --fused_kernels train in: the options of the
  models to build (Task.model_builder builds them under its Keras policy;
  nothing global is set).

  Weights, optimizer state and checkpoints stay float32 whatever it is.

  Args:
    precision: "float32" (the original's arithmetic); "bfloat16": on a
      CPU, the matmuls (and their gradients) only, over bfloat16 copies of
      their operands, with everything elementwise in float32
      (modeling.ComputeOptions' matmul_dtype): TensorFlow's bfloat16
      elementwise kernels run at half the speed of its float32 ones on
      CPUs, and Keras' mixed_bfloat16 policy, which runs those in
      bfloat16 too, made a pre-training step 1.11x (BERT-Base) to 1.22x
      (L=4) slower (benchmarks/speed/bench_pretraining.py); on a GPU or TPU,
      where bfloat16 elementwise work is native and halves the memory
      traffic, Keras' mixed_bfloat16 policy; "float16": Keras'
      mixed_float16 (with the Trainer's loss scaling).
    jit_compile: bool, whether the step is compiled with XLA, which cannot
      compile the fused kernels (a custom op): none then.
    fused_kernels: bool, --fused_kernels: on a CPU without XLA, every
      fused kernel (modeling.options.KERNELS) where the library is built;
      False: TensorFlow's own ops only.

  Returns:
    modeling.ComputeOptions.
  """
  if precision in ("float32", "bfloat16") and not _accelerated():
    kernels = options_lib.KERNELS if fused_kernels and not jit_compile else ()
    if precision == "bfloat16":
      warn_without_bf16_units()
      return modeling.ComputeOptions(tf.bfloat16, kernels)
    return modeling.ComputeOptions(tf.float32, kernels)
  if precision != "float32":
    # No bfloat16 warning here: a GPU or TPU has the units.
    return modeling.ComputeOptions(keras_policy="mixed_" + precision)
  return modeling.ComputeOptions()


def optimizer_update(options, precision, fused_kernels=True):
  """step.TrainingConfig.update for a run: "kernel" where the options use
  the optimizer's fused CPU kernel (the original's rounding, bit for bit);
  else "fused" (TensorFlow's ApplyAdam: faster, rounded otherwise) where
  the run is not float32 and may fuse; else "exact", the original's ops.

  Args:
    options: the run's modeling.ComputeOptions (training_options).
    precision: --precision.
    fused_kernels: bool, --fused_kernels.
  """
  if options.uses("adam_weight_decay"):
    return "kernel"
  if precision != "float32" and fused_kernels:
    return "fused"
  return "exact"


@contextlib.contextmanager
def keras_policy(name):
  """Keras' global dtype policy set to name within, as it was after: the
  layers made within take it (a layer reads the policy when it is made)."""
  previous = tf_keras.mixed_precision.global_policy()
  tf_keras.mixed_precision.set_global_policy(name)
  try:
    yield
  finally:
    tf_keras.mixed_precision.set_global_policy(previous)


def computes_in_float32(options):
  """Whether a model built with options computes in float32 throughout:
  no bfloat16 matmuls, no Keras mixed policy."""
  return (options.matmul_dtype == tf.float32 and
          options.keras_policy == "float32")
