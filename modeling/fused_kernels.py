"""Fused CPU kernels for training on CPUs, built from source.

Each does in one pass over memory what TensorFlow's composite of it does
in several (one pass per op), with its own float32 arithmetic, tested
against the formula in float64 with a stated tolerance
(tests/test_fused_kernels.py); none reproduces TensorFlow's rounding:
- modeling/kernels/gelu.cc: the feed-forward's bias add and GELU (the
  original's tanh form, or the erf form of gelu_exact), forward and
  gradient, float32 or bfloat16 in and out (between two bfloat16 matmuls);
  and the bias add alone between bfloat16 matmuls.
- modeling/kernels/attention_softmax.cc: the attention's scale, mask,
  softmax and dropout (stateless_dropout's masks), forward and gradient,
  float32 or bfloat16 in and out.
- modeling/kernels/layer_norm.cc: residual add and LayerNorm, forward and
  gradient, float32.
- modeling/kernels/dropout.cc: inverted dropout with exactly the masks of
  tf.nn.experimental.stateless_dropout (its values and gradients are the
  composite's: one multiply per kept element).
- modeling/kernels/adamw.cc: the original optimizer's update
  (AdamWeightDecay), weight and slots in one pass: its formula op by op
  in float32 without contraction, which is the original's update to the
  bit.

`make setup` builds them into one library with g++ against the installed
TensorFlow (fused_kernels.main()); where that fails (no compiler)
everything runs through TensorFlow's own ops, with one warning. Only
training on CPUs uses them, where --fused_kernels (default true) leaves
them on (layers.ComputeOptions, from runner_lib.core.training.precision), never
under XLA (which cannot compile a custom op), and exported SavedModels
never hold them (they must load where this library is absent).
"""

import functools
import glob
import os
import subprocess
import tempfile

from absl import logging
import tensorflow as tf

KERNELS_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)),
                           "kernels")
LIBRARY = os.path.join(KERNELS_DIR, "_fused_ops.so")


def sources(kernels_dir=None):
  """The kernels' C++ files: (list of .cc, list of .cc and .h)."""
  kernels_dir = kernels_dir or KERNELS_DIR
  compiled = sorted(glob.glob(os.path.join(kernels_dir, "*.cc")))
  return compiled, compiled + sorted(
      glob.glob(os.path.join(kernels_dir, "*.h")))


# Sources whose float32 arithmetic is the formula op by op: compiled
# without -ffast-math and without contracting a * b + c (but without
# errno, which would keep sqrt from vectorizing; IEEE's vector sqrt rounds
# as the scalar one).
EXACT_SOURCES = ("adamw.cc",)


def build(library=LIBRARY, kernels_dir=None):
  """Compiles the kernels into library (written whole, then renamed in
  place).

  Args:
    library: str, the shared library's path.
    kernels_dir: str, the folder of the sources (KERNELS_DIR if None).

  Returns:
    None on success, else str: why not (the compiler's last lines).
  """
  tf_flags = tf.sysconfig.get_compile_flags()
  directory = os.path.dirname(os.path.abspath(library))
  with tempfile.TemporaryDirectory(dir=directory) as scratch:
    objects = []
    for source in sources(kernels_dir)[0]:
      if os.path.basename(source) in EXACT_SOURCES:
        math = ["-ffp-contract=off", "-fno-math-errno"]
      else:
        # Lets the loops vectorize (exp, erf, the reductions); the
        # dropout's arithmetic is integer and a comparison, unaffected.
        math = ["-ffast-math"]
      objects.append(os.path.join(scratch, "%d.o" % len(objects)))
      problem = _compile(["g++", "-w", "-c", "-fPIC", "-O3", "-fopenmp-simd"] +
                         math + [source] + tf_flags + ["-o", objects[-1]])
      if problem:
        return problem
    partial = os.path.join(scratch, "library.so")
    problem = _compile(["g++", "-shared"] + objects +
                       tf.sysconfig.get_link_flags() + ["-o", partial])
    if problem:
      return problem
    os.replace(partial, library)
  return None


def _compile(command):
  """Runs g++; None, or why it failed (its last lines)."""
  try:
    result = subprocess.run(command, capture_output=True, text=True,
                            check=False)
  except OSError as e:
    return "cannot run g++: %s" % e
  if result.returncode:
    return "g++ failed:\n" + "\n".join(
        result.stderr.strip().splitlines()[-10:])
  return None


# Called from layers' call(), which AutoGraph converts: not this (plain
# Python, run once while tracing).
@tf.autograph.experimental.do_not_convert
def ops():
  """The loaded kernels (fused_bias_gelu, fused_bias_add, fused_dropout,
  fused_attention_softmax, fused_add_layer_norm and their gradients,
  fused_adam_weight_decay), or
  None where the library is missing or stale (older than a source) or
  fails to load (warned about once)."""
  return _load()


@functools.cache
def _load():
  """ops(), looked for once per process (_load.cache_clear() looks
  again)."""
  if not os.path.exists(LIBRARY):
    problem = "%s is missing" % LIBRARY
  elif os.path.getmtime(LIBRARY) < max(
      os.path.getmtime(path) for path in sources()[1]):
    problem = "%s is older than its sources" % LIBRARY
  else:
    try:
      return tf.load_op_library(LIBRARY)
    except (tf.errors.NotFoundError, OSError) as e:
      problem = "%s does not load (%s)" % (LIBRARY, e)
  logging.warning(
      "The fused CPU kernels are not used: %s; `make setup` builds "
      "them. Training runs TensorFlow's own ops instead (slower, "
      "the same functions).", problem)
  return None


def available():
  """Whether the kernels are built and load."""
  return ops() is not None


def bias_gelu(x, bias, exact=False):
  """gelu(x + bias) through the fused kernel (gradient included): the bias
  add and the GELU in float32, the result of x's type (bfloat16 rounded to
  nearest even).

  Args:
    x: float32 or bfloat16 Tensor [..., W], on the CPU: a matmul's
      products.
    bias: float32 [W] Tensor or variable.
    exact: bool, the erf form of the GELU (layers.gelu_exact) instead of
      the original's tanh form (layers.gelu).

  Returns:
    Tensor like x. Its gradient: x's of x's type (float32 arithmetic),
    bias's summed over the rows in float32.
  """

  @tf.custom_gradient
  def fused(x, bias):
    kernels = ops()

    def grad(dy):
      return kernels.fused_bias_gelu_grad(tf.cast(dy, x.dtype), x, bias,
                                          exact=exact)

    return kernels.fused_bias_gelu(x, bias, exact=exact), grad

  return fused(x, tf.convert_to_tensor(bias))


def bias_add(x, bias):
  """x + bias between two bfloat16 matmuls, through the fused kernel
  (gradient included): the add in float32, the sum rounded to bfloat16 as
  tf.cast rounds (the values of casting x to float32, adding the bias and
  casting back, in one pass).

  Args:
    x: bfloat16 Tensor [..., W], on the CPU: a matmul's products.
    bias: float32 [W] Tensor or variable.

  Returns:
    bfloat16 Tensor like x. Its gradient: x's the upstream one, bias's
    summed over the rows in float32.
  """

  @tf.custom_gradient
  def fused(x, bias):
    kernels = ops()

    def grad(dy):
      dy = tf.cast(dy, tf.bfloat16)
      return dy, kernels.fused_bias_add_grad(dy, bias)

    return kernels.fused_bias_add(x, bias), grad

  return fused(x, tf.convert_to_tensor(bias))


def dropout(x, rate, seed, rows=None):
  """tf.nn.experimental.stateless_dropout(x, rate, seed), bit for bit,
  through the fused kernel (gradient included).

  Args:
    x: float32 Tensor, on the CPU: of any shape, or with rows, [N, W].
    rate: float in (0, 1), the share dropped.
    seed: int64 [2], the stateless op seed.
    rows: None, or int64 [N]: x's rows are rows rows[0..N-1] of a
      [R, W] tensor (R > max(rows)), dropped as stateless_dropout drops
      that tensor (RealTokens: the real positions of a [B, T, W] batch,
      flat index b * T + t).

  Returns:
    float32 Tensor like x.
  """
  key, counter = tf.raw_ops.StatelessRandomGetKeyCounter(seed=seed)
  if rows is None:
    rows = tf.zeros([0], tf.int64)
  # As stateless_dropout: keep where uniform >= float32(rate), scale by
  # float32(1 / (1 - rate)) computed in double.
  attrs = dict(rate=float(rate), scale=float(1.0 / (1.0 - rate)))

  @tf.custom_gradient
  def fused(x):
    kernels = ops()
    y, keep = kernels.fused_dropout(x, key, counter, rows, **attrs)
    # keep: uint8, one bit per element of x (1/32 of its size) kept for
    # the gradient.
    return y, lambda dy: kernels.fused_dropout_grad(dy, keep,
                                                    scale=attrs["scale"])

  return fused(x)


def attention_softmax(scores, attention_mask, scale, rate=0.0, seed=None,
                      uniform_layout=None):
  """The attention probabilities from the scores, through the fused kernel
  (gradient included): softmax(scores * scale + (1 - mask) * -10000),
  dropped as tf.nn.experimental.stateless_dropout(probs, rate, seed) drops
  them, of the scores' type (the context matmul's operand).

  Args:
    scores: float32 or bfloat16 Tensor [B, N, F, T], on the CPU: Q K^T.
    attention_mask: float Tensor [B, F or 1, T]; 1 where attending is
      allowed.
    scale: float, 1 / sqrt(size per head).
    rate: float in [0, 1), the share dropped.
    seed: int64 [2], the dropout's op seed, or None to drop nothing.
    uniform_layout: None, where stateless_dropout on scores draws each
      score's uniform (element r * T + j of row r of [B * N * F, T]); or
      (row_starts int64 [B * N * F], columns int64 [T], increasing): the
      score at row r, column j draws element row_starts[r] + columns[j],
      its place in a larger (padded) tensor that stateless_dropout would
      drop.

  Returns:
    Tensor like scores. Its gradient: the scores' of their type (float32
    arithmetic); the mask has none.
  """
  if seed is None:
    rate = 0.0
    key, counter = tf.zeros([1], tf.uint64), tf.zeros([2], tf.uint64)
  else:
    key, counter = tf.raw_ops.StatelessRandomGetKeyCounter(seed=seed)
  if seed is None or uniform_layout is None:
    row_starts = columns = tf.zeros([0], tf.int64)
  else:
    row_starts, columns = [tf.cast(x, tf.int64) for x in uniform_layout]
  mask = tf.cast(attention_mask, tf.float32)
  # As the composite: the scale and dropout's 1 / (1 - rate) are Python
  # floats (computed in double) rounded to float32.
  attrs = dict(scale=float(scale), rate=float(rate),
               keep_scale=float(1.0 / (1.0 - rate)))

  @tf.custom_gradient
  def fused(scores):
    kernels = ops()
    probs, dropped = kernels.fused_attention_softmax(
        scores, mask, key, counter, row_starts, columns, **attrs)

    def grad(dy):
      return kernels.fused_attention_softmax_grad(
          tf.cast(dy, scores.dtype), probs, scale=attrs["scale"],
          keep_scale=attrs["keep_scale"])

    return dropped, grad

  return fused(scores)


def add_layer_norm(x, residual, gamma, beta, epsilon):
  """LayerNorm over the last axis of x + residual, through the fused
  kernel (gradient included).

  Args:
    x: float32 Tensor [..., W], on the CPU.
    residual: float32 Tensor like x, or None (LayerNorm of x alone).
    gamma, beta: float32 [W] Tensors or variables, the scale and offset.
    epsilon: float, added to the variance.

  Returns:
    float32 Tensor like x.
  """
  if residual is None:
    residual = tf.zeros([0], tf.float32)

  @tf.custom_gradient
  def fused(x, residual, gamma, beta):
    kernels = ops()
    y, mean, rstd = kernels.fused_add_layer_norm(x, residual, gamma, beta,
                                                 epsilon=epsilon)

    def grad(dy):
      ds, dgamma, dbeta = kernels.fused_add_layer_norm_grad(
          dy, x, residual, gamma, mean, rstd)
      # An empty residual (none) has an empty gradient.
      return (ds, ds if residual.shape.num_elements() != 0 else None,
              dgamma, dbeta)

    return y, grad

  return fused(x, residual, tf.convert_to_tensor(gamma),
               tf.convert_to_tensor(beta))


def adam_weight_decay(variable, m, v, grad, learning_rate, beta_1, beta_2,
                      epsilon, weight_decay_rate, grad_scale=None):
  """The original optimizer's update of one weight, in place, through the
  fused kernel: g = grad * grad_scale; m = b1 m + (1 - b1) g;
  v = b2 v + (1 - b2) g^2; w -= lr * (m / (sqrt(v) + eps) +
  weight_decay_rate * w), op by op in float32 as
  runner_lib.core.training.optimization.AdamWeightDecay's ops compute it.

  Args:
    variable, m, v: float32 resource variables of one shape, on the CPU.
    grad: float32 Tensor of that shape.
    learning_rate: float32 scalar Tensor.
    beta_1, beta_2, epsilon: floats.
    weight_decay_rate: float, or None for no decay term.
    grad_scale: float32 scalar Tensor (tf.clip_by_global_norm's scale,
      applied as the gradient is read), or None for 1.

  Returns:
    The update op (None when executing eagerly).
  """
  return ops().fused_adam_weight_decay(
      variable.handle, m.handle, v.handle, grad,
      tf.cast(learning_rate, tf.float32),
      tf.constant(1.0) if grad_scale is None else grad_scale,
      # The coefficients as the ops take them: Python's floats (1 - b
      # computed in double) rounded to float32.
      beta_1=beta_1, one_minus_beta_1=1.0 - beta_1, beta_2=beta_2,
      one_minus_beta_2=1.0 - beta_2, epsilon=epsilon,
      weight_decay_rate=weight_decay_rate or 0.0,
      decay=weight_decay_rate is not None)


def main():
  """Builds LIBRARY (make setup); a warning, not an error, where it fails."""
  problem = build()
  if problem:
    # Not an error: everything runs without the kernels, only slower.
    print("Warning: the fused CPU kernels were not built (training will "
          "use TensorFlow's composite ops): %s" % problem)
  else:
    print("Built %s" % LIBRARY)

