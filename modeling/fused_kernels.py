"""Fused CPU kernels for training on CPUs, built from source.

Each does in one pass over memory what TensorFlow's composite of it does
in several (one pass per op):
- modeling/kernels/gelu.cc: the original's GELU (tanh form; or the erf
  form of gelu_exact), forward and gradient, in float32 or with the bias
  add between two bfloat16 matmuls. Rounds differently from the
  composite (~1e-6): bfloat16 training only.
- modeling/kernels/gelu_float32.cc: the bias add and the original's GELU
  in float32, forward and gradient (the bias's too), bit-identical to
  TensorFlow's graph of the composite (the same roundings, grappler's
  rewrites included), so float32 training uses it too.
- modeling/kernels/softmax_float32.cc: the gradient of the attention's
  scaled, masked softmax in float32, bit-identical to TensorFlow's graph
  of it: float32 training's attention.
- modeling/kernels/attention_softmax.cc: the attention's scale, mask,
  softmax and dropout (stateless_dropout's masks) between its two
  bfloat16 matmuls, forward and gradient: bfloat16 training only.
- modeling/kernels/layer_norm.cc: residual add and LayerNorm, forward
  and gradient. Rounds differently from Keras' (~1e-7): bfloat16
  training only.
- modeling/kernels/layer_norm_float32.cc: the same in float32,
  bit-identical to TensorFlow's graph of Keras' LayerNormalization (its
  sums in Eigen's order, its rsqrt the CPU's), so float32 training uses
  it too.
- modeling/kernels/adamw.cc: the original optimizer's update
  (AdamWeightDecay), weight and slots in one pass, bit-identical to its
  op-by-op float32 arithmetic: both precisions.
- modeling/kernels/dropout.cc: inverted dropout with exactly the masks of
  tf.nn.experimental.stateless_dropout; outputs and gradients are
  bit-identical to the composite's, so float32 training uses it too.
- modeling/kernels/transpose.cc: a matrix's transpose as an op that
  grappler cannot fold into a MatMul: the float32 feed-forward's input
  gradient multiplies by its kernel transposed (oneDNN's faster kernel
  there) where that has MatMul's own bits (matmul_transposed_gradient).
The float32 ones that round as the composites (GELU, LayerNorm, softmax
gradient) repeat TensorFlow 2.20's x86-64 build (AVX, no FMA) and exist
on x86-64 only (composite_kernels_available).

`make setup` builds them into one library with g++ against the installed
TensorFlow (fused_kernels.main()); where that fails (no compiler)
everything runs as before, through TensorFlow's composite ops, with one
warning. Only training on CPUs uses them (layers.set_fused_kernels, from
runner_lib.core.precision.set_policy), never under XLA (which cannot
compile a custom op), and exported SavedModels never hold them (they
must load where this library is absent).
"""

import glob
import os
import subprocess
import tempfile

from absl import logging
import tensorflow as tf

KERNELS_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)),
                           "kernels")
LIBRARY = os.path.join(KERNELS_DIR, "_fused_ops.so")

_loaded = []  # [ops module or None], once loaded or found missing.


def sources(kernels_dir=None):
  """The kernels' C++ files: (list of .cc, list of .cc and .h)."""
  kernels_dir = kernels_dir or KERNELS_DIR
  compiled = sorted(glob.glob(os.path.join(kernels_dir, "*.cc")))
  return compiled, compiled + sorted(
      glob.glob(os.path.join(kernels_dir, "*.h")))


# Sources whose float32 arithmetic must round as TensorFlow's ops do, op
# by op: compiled without -ffast-math and without contracting a * b + c
# (but without errno, which would keep sqrt from vectorizing; IEEE's
# vector sqrt rounds as the scalar one).
EXACT_SOURCES = ("adamw.cc", "gelu_float32.cc", "layer_norm_float32.cc",
                 "softmax_float32.cc")


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
        # Lets the loops vectorize (the GELU's exp and division); the
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
  """The loaded kernels (fused_gelu, fused_bias_gelu, fused_bias_add,
  composite_bias_gelu, fused_dropout, fused_attention_softmax,
  fused_add_layer_norm and their gradients, transpose_matrix,
  fused_adam_weight_decay), or
  None where the library is missing or stale (older than a source) or
  fails to load (warned about once)."""
  if not _loaded:
    module, problem = None, None
    if not os.path.exists(LIBRARY):
      problem = "%s is missing" % LIBRARY
    elif os.path.getmtime(LIBRARY) < max(
        os.path.getmtime(path) for path in sources()[1]):
      problem = "%s is older than its sources" % LIBRARY
    else:
      try:
        module = tf.load_op_library(LIBRARY)
      except (tf.errors.NotFoundError, OSError) as e:
        problem = "%s does not load (%s)" % (LIBRARY, e)
    if problem:
      logging.warning(
          "The fused CPU kernels are not used: %s; `make setup` builds "
          "them. Training runs TensorFlow's composite ops instead (slower, "
          "the same functions).", problem)
    _loaded.append(module)
  return _loaded[0]


def available():
  """Whether the kernels are built and load."""
  return ops() is not None


def composite_kernels_available():
  """Whether the float32 kernels that round as TensorFlow's composites
  (composite_bias_gelu, add_layer_norm's composite, scaled_softmax) are
  built and load: on x86-64 only."""
  return available() and hasattr(ops(), "composite_bias_gelu")


def gelu(x, exact=False):
  """The original's GELU (modeling.layers.gelu), or with exact the erf form
  (modeling.layers.gelu_exact), through the fused kernel.

  Args:
    x: float32 Tensor of any shape, on the CPU.
    exact: bool, the erf form instead of the tanh form.

  Returns:
    float32 Tensor like x; its gradient is the fused gradient kernel's.
  """

  @tf.custom_gradient
  def fused(x):
    kernels = ops()
    return kernels.fused_gelu(x, exact=exact), (
        lambda dy: kernels.fused_gelu_grad(dy, x, exact=exact))

  return fused(tf.convert_to_tensor(x))


# grappler's kMaxConstantSize: at or below it (or of unknown shape) grappler
# associates the GELU gradient's products otherwise (kernels/gelu_float32.cc).
_GRAPPLER_MAX_CONSTANT_BYTES = 100 * 1024


def _composite_applies(x):
  """What every kernel that rounds as a composite needs of its input x: a
  float32 Tensor of fully known shape, in a tf.function (where grappler
  rewrites the composite), with the float32 kernels built."""
  return (x.dtype == tf.float32 and x.shape.is_fully_defined() and
          not tf.executing_eagerly() and composite_kernels_available())


def composite_bias_gelu_applies(x):
  """Whether composite_bias_gelu rounds as the composite for x: also above
  100 KiB."""
  return (_composite_applies(x) and
          4 * x.shape.num_elements() > _GRAPPLER_MAX_CONSTANT_BYTES)


# Eigen sums a row of at most 8 * 1024 floats in one run
# (kernels/eigen_sum.h): the LayerNorm and softmax kernels' widths.
_EIGEN_ROW_SUM_MAX = 8192


def composite_layer_norm_applies(x):
  """Whether add_layer_norm with composite rounds as Keras' graph for x: also
  at most 8192 wide."""
  return _composite_applies(x) and x.shape[-1] <= _EIGEN_ROW_SUM_MAX


def scaled_softmax_applies(product):
  """Whether scaled_softmax's gradient rounds as the composite's for
  product: also at most 8192 positions attended to."""
  return (_composite_applies(product) and
          product.shape[-1] <= _EIGEN_ROW_SUM_MAX)


def _sorts_before_gradient(forward_name, gradient_name):
  """Whether grappler orders a forward tensor before the gradient's tensors
  in a product, so that a constant pushed down it pairs with the forward
  one: it orders the two factors by op name, the greater first (for the
  op named forward_name in the current name scope, against the tape's
  gradient_name, gradient_tape/<scope>/...; pinned by
  tests/test_fused_kernels.py in scopes on both sides)."""
  scope = tf.get_current_name_scope()
  scope = scope + "/" if scope else ""
  return scope + forward_name < "gradient_tape/" + scope + gradient_name


# (m, k, n) -> whether matmul_transposed_gradient's input gradient has
# the bits of MatMul's own (transposed_gradient_applies).
_SAME_BITS_TRANSPOSED = {}


def transposed_gradient_applies(x, kernel):
  """Whether matmul_transposed_gradient(x, kernel) may stand for
  tf.matmul over x's last axis: x [..., K] and kernel [K, N] float32 of
  known shapes, with the float32 kernels built, K < N (a widening layer,
  whose input gradient sums over the wider N), and the input gradient's
  bits equal to MatMul's own at this shape (M = x's rows) on this
  machine: tried once per shape, on random matrices (a different
  summation order shows in nearly every element; oneDNN's choice of
  kernel depends on the shape and the CPU, not on the values)."""
  if not (_composite_applies(x) and x.shape.rank >= 2 and
          kernel.shape.is_fully_defined() and
          kernel.shape[0] < kernel.shape[1]):
    return False
  k, n = kernel.shape
  m = x.shape.num_elements() // k
  if (m, k, n) not in _SAME_BITS_TRANSPOSED:
    with tf.init_scope():
      rng = tf.random.Generator.from_seed(m * 7919 + k * 31 + n)
      dy = rng.normal([m, n])
      w = rng.normal([k, n])
      # In a graph, as training runs them (oneDNN's rewrites included).
      folded = tf.function(lambda dy, w: tf.matmul(dy, w, transpose_b=True))
      plain = tf.function(_times_transposed)
      _SAME_BITS_TRANSPOSED[(m, k, n)] = bool(tf.reduce_all(tf.equal(
          tf.bitcast(folded(dy, w), tf.int32),
          tf.bitcast(plain(dy, w), tf.int32))))
  return _SAME_BITS_TRANSPOSED[(m, k, n)]


def _times_transposed(dy, kernel):
  """dy [M, N] times kernel [K, N] transposed beforehand: [M, K]."""
  return tf.matmul(dy, ops().transpose_matrix(kernel))


def matmul_transposed_gradient(x, kernel):
  """tf.matmul over x's last axis (Keras' Dense: reshaped to rows and
  back), whose gradient for x multiplies by kernel transposed beforehand
  (a kernel of its own, which grappler cannot fold back into the MatMul)
  instead of by kernel with transpose_b: oneDNN's float32 kernel for that
  is up to 1.3x slower where the sums run over a wide N (the
  feed-forward's input gradient, [T, 3072] x [3072, 768]: 168 vs 216
  GFLOP/s on Zen 4). The same bits where transposed_gradient_applies(x,
  kernel); the kernel's gradient is MatMul's own.

  Args:
    x: float32 [..., K] Tensor of known shape.
    kernel: float32 [K, N] Tensor or variable.

  Returns:
    float32 [..., N] Tensor.
  """

  @tf.custom_gradient
  def product(rows, kernel):

    def grad(dy):
      return (_times_transposed(dy, kernel),
              tf.matmul(rows, dy, transpose_a=True))

    return tf.matmul(rows, kernel), grad

  kernel = tf.convert_to_tensor(kernel)
  rows = x if x.shape.rank == 2 else tf.reshape(x, [-1, x.shape[-1]])
  outputs = product(rows, kernel)
  if x.shape.rank == 2:
    return outputs
  return tf.reshape(outputs, x.shape[:-1].concatenate(kernel.shape[1:]))


def composite_bias_gelu(x, bias):
  """modeling.layers.gelu(tf.nn.bias_add(x, bias)) (the original's tanh
  form) in float32 in one pass each way, value and gradients (bias's
  included) bit for bit as TensorFlow's graph of the composite computes
  them in the current name scope (kernels/gelu_float32.cc), where
  composite_bias_gelu_applies(x).

  Args:
    x: float32 Tensor [..., W], on the CPU: a matmul's products.
    bias: float32 [W] Tensor or variable.

  Returns:
    float32 Tensor like x; its gradients are the kernel's.
  """
  # The composite's BiasAdd against its gradient's Square of it.
  input_first = _sorts_before_gradient("BiasAdd", "Pow/Pow")

  @tf.custom_gradient
  def fused(x, bias):
    kernels = ops()

    def grad(dy):
      return kernels.composite_bias_gelu_grad(dy, x, bias,
                                              input_first=input_first)

    return kernels.composite_bias_gelu(x, bias, input_first=input_first), grad

  return fused(x, tf.convert_to_tensor(bias))


def scaled_softmax(product, scale, adder):
  """tf.nn.softmax(product * scale + adder) over the last axis, the
  attention's probabilities, through TensorFlow's own ops, whose gradient
  with respect to product is kernels/softmax_float32.cc: one pass, bit for
  bit as TensorFlow's graph of the composite's gradient in the current
  name scope, where scaled_softmax_applies(product) (of an unknown shape
  grappler leaves the scale after the softmax's gradient).

  Args:
    product: float32 Tensor [B, N, F, T], the queries' and keys' products,
      on the CPU.
    scale: float, 1 / sqrt(size per head).
    adder: float32 Tensor broadcast to product's shape (0 where attending
      is allowed, a large negative where not); no gradient.

  Returns:
    float32 Tensor like product.
  """

  # The composite's Softmax against its gradient's difference.
  scale_on_probs = _sorts_before_gradient("Softmax", "sub")

  @tf.custom_gradient
  def fused(product):
    scores = product * scale
    scores += adder
    probs = tf.nn.softmax(scores)
    return probs, lambda dy: ops().composite_softmax_grad(
        dy, probs, scale=scale, scale_on_probs=scale_on_probs)

  return fused(product)


def bias_gelu(x, bias, exact=False):
  """gelu(x + bias) between two bfloat16 matmuls, through the fused kernel
  (gradient included): the bias add and the GELU in float32, the result
  rounded to bfloat16 as tf.cast rounds.

  Args:
    x: bfloat16 Tensor [..., W], on the CPU: a matmul's products.
    bias: float32 [W] Tensor or variable.
    exact: bool, the erf form of the GELU (as gelu's).

  Returns:
    bfloat16 Tensor like x. Its gradient: x's in bfloat16 (rounded from
    float32), bias's summed over the rows in float32.
  """

  @tf.custom_gradient
  def fused(x, bias):
    kernels = ops()

    def grad(dy):
      return kernels.fused_bias_gelu_grad(tf.cast(dy, tf.bfloat16), x, bias,
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


def attention_softmax(scores, attention_mask, scale, rate=0.0, seed=None):
  """The attention probabilities from the bfloat16 scores, through the
  fused kernel (gradient included): softmax(scores * scale + (1 - mask) *
  -10000), dropped as tf.nn.experimental.stateless_dropout(probs, rate,
  seed) drops them, rounded to bfloat16 (the context matmul's operand).

  Args:
    scores: bfloat16 Tensor [B, N, F, T], on the CPU: Q K^T.
    attention_mask: float Tensor [B, F or 1, T]; 1 where attending is
      allowed.
    scale: float, 1 / sqrt(size per head).
    rate: float in [0, 1), the share dropped.
    seed: int64 [2], the dropout's op seed, or None to drop nothing.

  Returns:
    bfloat16 Tensor [B, N, F, T]. Its gradient: the scores' in bfloat16
    (rounded from float32); the mask has none.
  """
  if seed is None:
    rate = 0.0
    key, counter = tf.zeros([1], tf.uint64), tf.zeros([2], tf.uint64)
  else:
    key, counter = tf.raw_ops.StatelessRandomGetKeyCounter(seed=seed)
  mask = tf.cast(attention_mask, tf.float32)
  # As the composite: the scale and dropout's 1 / (1 - rate) are Python
  # floats (computed in double) rounded to float32.
  attrs = dict(scale=float(scale), rate=float(rate),
               keep_scale=float(1.0 / (1.0 - rate)))

  @tf.custom_gradient
  def fused(scores):
    kernels = ops()
    probs, dropped = kernels.fused_attention_softmax(scores, mask, key,
                                                     counter, **attrs)

    def grad(dy):
      return kernels.fused_attention_softmax_grad(
          tf.cast(dy, tf.bfloat16), probs, scale=attrs["scale"],
          keep_scale=attrs["keep_scale"])

    return dropped, grad

  return fused(scores)


def add_layer_norm(x, residual, gamma, beta, epsilon, composite=False):
  """LayerNorm over the last axis of x + residual, through the fused
  kernel (gradient included).

  Args:
    x: float32 Tensor [..., W], on the CPU.
    residual: float32 Tensor like x, or None (LayerNorm of x alone).
    gamma, beta: float32 [W] Tensors or variables, the scale and offset.
    epsilon: float, added to the variance.
    composite: bool, through kernels/layer_norm_float32.cc: bit for bit
      as TensorFlow's graph of Keras' LayerNormalization (and the add
      before it), where composite_layer_norm_applies(x): x's shape fully
      known (an unknown one makes the gradient divide by W where grappler
      otherwise multiplies by 1/W), W at most 8192 (past which Eigen's
      sums split each row in two).

  Returns:
    float32 Tensor like x.
  """
  if residual is None:
    residual = tf.zeros([0], tf.float32)

  @tf.custom_gradient
  def fused(x, residual, gamma, beta):
    kernels = ops()
    forward, backward = (
        (kernels.composite_add_layer_norm,
         kernels.composite_add_layer_norm_grad) if composite else
        (kernels.fused_add_layer_norm, kernels.fused_add_layer_norm_grad))
    y, mean, rstd = forward(x, residual, gamma, beta, epsilon=epsilon)

    def grad(dy):
      ds, dgamma, dbeta = backward(dy, x, residual, gamma, mean, rstd)
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
  weight_decay_rate * w), rounded as
  runner_lib.core.optimization.AdamWeightDecay's float32 ops round it.

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

