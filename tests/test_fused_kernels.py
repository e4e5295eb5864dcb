"""modeling/fused_kernels.py: the fused CPU kernels of training against
their references (the GELU against the original's formula in float64, the
dropout bit for bit against tf.nn.experimental.stateless_dropout and
float32 training without it), where they are used and where not, and what
happens without them."""

import math
import os
import tempfile

import numpy as np
import pytest
import tensorflow as tf
import tf_keras as keras

from modeling import fused_kernels
from modeling import layers
from runner_lib.classifier import task as classifier_task
from runner_lib.core import optimization
from runner_lib.core import precision
from runner_lib.core import training
from tests.test_modeling import padded_pair_batch
from tests.test_modeling import tiny_config


@pytest.fixture(scope="module")
def kernels():
  """The loaded kernels, built first where `make setup` has not (skips,
  with the compiler's message, where g++ cannot build them)."""
  if not fused_kernels.available():
    problem = fused_kernels.build()
    if problem:
      pytest.skip("the fused kernel cannot be built here: " + problem)
    fused_kernels._loaded.clear()  # pylint: disable=protected-access
  assert fused_kernels.available()
  return fused_kernels.ops()


@pytest.fixture
def reset_layers():
  yield
  layers.set_matmul_dtype(tf.float32)
  layers.set_fused_kernels(False)


def gelu_float64(x, exact=False):
  """The original's formula (or with exact the erf form, x * Phi(x)) and
  its derivative, in float64 NumPy."""
  if exact:
    phi = 0.5 * (1.0 + np.vectorize(math.erf)(x / np.sqrt(2.0)))
    return x * phi, phi + x * np.exp(-0.5 * x * x) / np.sqrt(2.0 * np.pi)
  c = np.sqrt(2.0 / np.pi)
  t = np.tanh(c * (x + 0.044715 * x ** 3))
  return 0.5 * x * (1.0 + t), 0.5 * (1.0 + t) + 0.5 * x * (1.0 - t * t) * c * (
      1.0 + 3.0 * 0.044715 * x * x)


@pytest.mark.parametrize("exact", [False, True], ids=["tanh", "erf"])
def test_values_and_gradient_are_the_gelus(kernels, exact):
  del kernels
  x = np.concatenate([np.linspace(-30.0, 30.0, 60001),
                      np.random.RandomState(0).randn(10000) * 3.0])
  upstream = np.random.RandomState(1).randn(x.size)
  want, slope = gelu_float64(x, exact)
  tensor = tf.constant(x, tf.float32)
  with tf.GradientTape(persistent=True) as tape:
    tape.watch(tensor)
    fused = fused_kernels.gelu(tensor, exact)
    composite = (layers.gelu_exact if exact else layers.gelu)(tensor)
  got_grad = tape.gradient(fused, tensor, upstream.astype(np.float32))
  composite_grad = tape.gradient(composite, tensor,
                                 upstream.astype(np.float32))
  # As close to the float64 truth as TensorFlow's float32 composite is.
  fused_error = np.abs(fused.numpy() - want)
  composite_error = np.abs(composite.numpy() - want)
  assert fused_error.max() <= 2 * composite_error.max() + 1e-6
  np.testing.assert_allclose(fused.numpy(), want, rtol=1e-5, atol=2e-6)
  np.testing.assert_allclose(got_grad.numpy(), upstream * slope, rtol=1e-4,
                             atol=2e-5)
  np.testing.assert_allclose(got_grad.numpy(), composite_grad.numpy(),
                             rtol=1e-4, atol=2e-5)
  # Shapes of any rank, and the tails are exact: 0 and x.
  assert fused_kernels.gelu(tf.zeros([2, 3, 4]), exact).shape == [2, 3, 4]
  np.testing.assert_array_equal(
      fused_kernels.gelu(tf.constant([-30.0, 0.0, 30.0]), exact).numpy(),
      [0.0, 0.0, 30.0])


def test_bias_add_between_bfloat16_matmuls(kernels):
  """x + bias of bfloat16 products x, as casting x to float32, adding and
  casting back (ties to even included), bit for bit; the gradient: x's
  the upstream one, bias's the column sums in float32."""
  del kernels
  rng = np.random.RandomState(19)
  rows, width = 300, 37
  x = tf.cast(tf.constant(rng.randn(rows, width) * 3.0, tf.float32),
              tf.bfloat16)
  # Some sums exactly halfway between two bfloat16 values.
  bias = tf.constant(np.float32(2.0 ** -9) * rng.randint(-3, 4, width) +
                     np.float32(rng.randn(width) * (rng.rand(width) < 0.5)),
                     tf.float32)
  dy = tf.cast(tf.constant(rng.randn(rows, width), tf.float32), tf.bfloat16)
  with tf.GradientTape() as tape:
    tape.watch([x, bias])
    y = fused_kernels.bias_add(x, bias)
  dx, dbias = tape.gradient(y, [x, bias], dy)
  assert y.dtype == dx.dtype == tf.bfloat16 and dbias.dtype == tf.float32
  np.testing.assert_array_equal(
      tf.bitcast(y, tf.uint16).numpy(),
      tf.bitcast(tf.cast(tf.cast(x, tf.float32) + bias, tf.bfloat16),
                 tf.uint16).numpy())
  np.testing.assert_array_equal(tf.bitcast(dx, tf.uint16).numpy(),
                                tf.bitcast(dy, tf.uint16).numpy())
  np.testing.assert_allclose(
      dbias.numpy(), tf.cast(dy, tf.float64).numpy().sum(0), rtol=1e-6,
      atol=1e-5)
  with pytest.raises(tf.errors.InvalidArgumentError,
                     match=r"bias must be \[width\]"):
    fused_kernels.bias_add(x, bias[:-1])


@pytest.mark.parametrize("exact", [False, True], ids=["tanh", "erf"])
def test_bias_gelu_between_bfloat16_matmuls(kernels, exact):
  """gelu(x + bias) of bfloat16 products x, rounded to bfloat16; the
  gradient's dx rounded likewise and dbias summed in float32."""
  del kernels
  rng = np.random.RandomState(9)
  rows, width = 300, 37
  x = tf.cast(tf.constant(rng.randn(rows, width) * 3.0, tf.float32),
              tf.bfloat16)
  bias = tf.constant(rng.randn(width), tf.float32)
  dy = tf.cast(tf.constant(rng.randn(rows, width), tf.float32), tf.bfloat16)
  v = tf.cast(x, tf.float64).numpy() + bias.numpy().astype(np.float64)
  value, slope = gelu_float64(v, exact)
  g = tf.cast(dy, tf.float64).numpy() * slope
  with tf.GradientTape() as tape:
    tape.watch([x, bias])
    y = fused_kernels.bias_gelu(x, bias, exact)
  dx, dbias = tape.gradient(y, [x, bias], dy)
  assert y.dtype == dx.dtype == tf.bfloat16 and dbias.dtype == tf.float32
  # Rounded to bfloat16 from float32 values within 2e-6 (values) and
  # 2e-5 (slopes) of the truth, as the float32 kernel's: the truth rounded,
  # or a neighbour where it lies next to a rounding edge (or in the far
  # negative tail, where the float32 error is the whole value).
  for got, truth, atol in ((y, value, 2e-6), (dx, g, 2e-5 * 3)):
    got = tf.cast(got, tf.float64).numpy()
    rounded = tf.cast(tf.cast(truth, tf.float32), tf.bfloat16)
    rounded = tf.cast(rounded, tf.float64).numpy()
    large = np.abs(truth) > 1e-2
    assert large.mean() > 0.75
    assert np.mean(got[large] == rounded[large]) > 0.99
    assert np.all(np.abs(got - truth) <= 2.0 ** -8 * np.abs(truth) + atol)
  np.testing.assert_allclose(dbias.numpy(), g.sum(0), rtol=1e-5, atol=1e-4)
  # Where the GELU is the identity (x + bias >= 5), y is x + bias rounded
  # exactly as tf.cast rounds float32, ties to even included.
  big = tf.cast(tf.constant(rng.uniform(6, 40, [64, 8]), tf.float32),
                tf.bfloat16)
  ties = tf.constant(np.float32(2.0 ** -9) * rng.randint(-3, 4, 8),
                     tf.float32)
  np.testing.assert_array_equal(
      tf.bitcast(fused_kernels.bias_gelu(big, ties, exact), tf.uint16).numpy(),
      tf.bitcast(tf.cast(tf.cast(big, tf.float32) + ties, tf.bfloat16),
                 tf.uint16).numpy())


def layer_norm_float64(s, gamma, beta, dy, epsilon=1e-12):
  """LayerNorm over the last axis and its gradients, in float64 NumPy:
  (y, ds, dgamma, dbeta)."""
  mean = s.mean(-1, keepdims=True)
  rstd = 1.0 / np.sqrt(((s - mean) ** 2).mean(-1, keepdims=True) + epsilon)
  xhat = (s - mean) * rstd
  g = dy * gamma
  ds = rstd * (g - g.mean(-1, keepdims=True) -
               xhat * (g * xhat).mean(-1, keepdims=True))
  rows = tuple(range(s.ndim - 1))
  return (xhat * gamma + beta, ds, (dy * xhat).sum(rows), dy.sum(rows))


@pytest.mark.parametrize("shape,residual", [((7, 5, 768), True),
                                            ((300, 37), True),
                                            ((13, 32), False)])
def test_add_layer_norm_is_layer_norm_of_the_sum(kernels, shape, residual):
  del kernels
  rng = np.random.RandomState(7)
  x = rng.randn(*shape) * 3.0 + 1.0
  res = rng.randn(*shape) if residual else np.zeros(shape)
  gamma, beta = rng.randn(shape[-1]), rng.randn(shape[-1])
  dy = rng.randn(*shape)
  want = layer_norm_float64(x + res, gamma, beta, dy)
  tensors = [tf.constant(v, tf.float32) for v in (x, res, gamma, beta)]
  keras_norm = layers.layer_norm()
  keras_norm.build([None, shape[-1]])
  keras_norm.set_weights([gamma, beta])
  with tf.GradientTape(persistent=True) as tape:
    tape.watch(tensors)
    got = fused_kernels.add_layer_norm(
        tensors[0], tensors[1] if residual else None, tensors[2], tensors[3],
        layers.LAYER_NORM_EPSILON)
    composite = keras_norm(tensors[0] + tensors[1])
  grads = tape.gradient(got, tensors, tf.constant(dy, tf.float32))
  keras_grads = tape.gradient(composite, [tensors[0]] + keras_norm.weights,
                              tf.constant(dy, tf.float32))
  # As close to the float64 truth as Keras' float32 composite is.
  for fused, reference, truth in [(got, composite, want[0]),
                                  (grads[0], keras_grads[0], want[1]),
                                  (grads[2], keras_grads[1], want[2]),
                                  (grads[3], keras_grads[2], want[3])]:
    scale = np.abs(truth).max()
    fused_error = np.abs(fused.numpy() - truth).max() / scale
    assert fused_error < 1e-6
    assert fused_error <= 4 * np.abs(reference.numpy() - truth).max() / scale
  if residual:
    np.testing.assert_array_equal(grads[1].numpy(), grads[0].numpy())
  else:
    assert grads[1] is None
  with pytest.raises(tf.errors.InvalidArgumentError, match="gamma must be"):
    fused_kernels.add_layer_norm(tensors[0], None, tensors[2][:-1],
                                 tensors[3][:-1], 1e-12)


def bits(tensor):
  return np.asarray(tensor).view(np.uint32)


@pytest.fixture
def composite_kernels(kernels):
  if not fused_kernels.composite_kernels_available():
    pytest.skip("the float32 kernels exist on x86-64 only")
  return kernels


def value_and_gradients(fn, inputs, upstream, scope="model"):
  """fn(*inputs) in name scope scope and its gradients for upstream, in a
  tf.function (where grappler rewrites the composites), as NumPy bits."""

  @tf.function
  def run(*inputs):
    with tf.GradientTape() as tape:
      tape.watch(inputs)
      with tf.name_scope(scope):
        y = fn(*inputs)
    grads = tape.gradient(y, list(inputs) + fn_weights, upstream)
    return [y] + [tf.zeros([0]) if g is None else g for g in grads]

  fn_weights = getattr(fn, "weights", [])
  return [bits(v) for v in run(*inputs)]


@pytest.mark.parametrize("shape,units", [
    ((8, 128, 768), 3072), ((3, 11, 32), 800), ((10, 100, 32), 40),
    ((100, 100, 8), 4), ((3, 11, 32), 37)])
@pytest.mark.parametrize("scope", ["classifier_model", "pretrainer"])
def test_float32_feed_forward_gelu_kernel_is_the_composite_bit_for_bit(
    composite_kernels, reset_layers, shape, units, scope):
  """The feed-forward's Dense layer (matmul, bias add, GELU) without the
  kernels in a tf.function is the reference, the context the kernel
  repeats grappler's rewrites of (products of tensors of known shape
  above 100 KiB; below, as 33 x 37, the composite runs), in a model scope
  whose names sort before the gradient's and one after: the output and
  the gradients of the input, kernel and bias (BiasAddGrad's sums, in
  row order) bit-equal; products past tanh's clamp included."""
  del composite_kernels, reset_layers
  rng = np.random.RandomState(11)
  x = tf.constant(rng.randn(*shape).astype(np.float32))
  upstream = tf.constant(rng.randn(*shape[:-1], units).astype(np.float32))
  weights = [rng.randn(shape[-1], units).astype(np.float32) * 3.0 /
             np.sqrt(shape[-1]), rng.randn(units).astype(np.float32)]
  results, kernel_used = [], []
  for fused in (False, True):
    layers.set_fused_kernels(fused)
    dense = layers.Dense(units, activation=layers.gelu,
                         output_feeds_matmul=True, name="intermediate")
    dense.build([None, shape[-1]])
    dense.set_weights(weights)
    apply = lambda x, dense=dense: dense(x)
    apply.weights = dense.trainable_weights
    results.append(value_and_gradients(apply, [x], upstream, scope))
    kernel_used.append("CompositeBiasGelu" in graph_op_types(dense, x))
  big = np.prod(shape[:-1]) * units * 4 > 100 * 1024
  assert kernel_used == [False, big]
  assert np.abs(results[0][0].view(np.float32)).max() > 8.0  # clamped
  assert len(results[1]) == 4
  for got, want in zip(results[1], results[0]):
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("shape", [(8, 12, 128, 128), (3, 2, 7, 37),
                                   (2, 4, 16, 16)])
@pytest.mark.parametrize("scope", ["classifier_model", "pretrainer"])
def test_float32_scaled_softmax_gradient_is_the_composite_bit_for_bit(
    composite_kernels, shape, scope):
  """The attention's softmax(product * scale + adder) in a tf.function is
  the reference, in a model scope whose names sort before the gradient's
  and one after (a scale not a power of two, as MiniLM's 1 / sqrt(32),
  where it pairs with the probabilities or with the difference as
  grappler orders them): the probabilities and the product's gradient
  bit-equal."""
  del composite_kernels
  rng = np.random.RandomState(13)
  product = tf.constant((rng.randn(*shape) * 8.0).astype(np.float32))
  adder = tf.constant(np.where(rng.rand(shape[0], 1, 1, shape[3]) < 0.2,
                               -10000.0, 0.0).astype(np.float32))
  upstream = tf.constant(rng.randn(*shape).astype(np.float32))
  scale = 1.0 / math.sqrt(32.0)

  def composite(product):
    scores = product * scale
    scores += adder
    return tf.nn.softmax(scores)

  want = value_and_gradients(composite, [product], upstream, scope)
  got = value_and_gradients(
      lambda p: fused_kernels.scaled_softmax(p, scale, adder), [product],
      upstream, scope)
  for got_bits, want_bits in zip(got, want):
    np.testing.assert_array_equal(got_bits, want_bits)


@pytest.mark.parametrize("shape,residual", [
    ((8, 128, 768), True), ((8, 128, 768), False), ((40, 37), True),
    ((7, 384), True), ((1023, 64), False), ((15, 16), True)])
@pytest.mark.parametrize("scope", ["classifier_model", "pretrainer"])
def test_float32_layer_norm_kernel_is_the_composite_bit_for_bit(
    composite_kernels, reset_layers, shape, residual, scope):
  """Keras' LayerNormalization after the residual add in a tf.function is
  the reference: the output and the gradients of x, the residual, gamma
  and beta bit-equal, for widths with a scalar tail (37), rows with one
  (1023, 7) and fewer than 16 rows (whose column sums run in order), in
  model scopes on both sides of the gradient's names."""
  del composite_kernels, reset_layers
  rng = np.random.RandomState(12)
  x, res, upstream = [tf.constant((rng.randn(*shape) * 2.0 + 0.5).astype(
      np.float32)) for _ in range(3)]
  gamma, beta = rng.randn(2, shape[-1]).astype(np.float32)
  results, op_types = [], []
  for composite in (False, True):
    layers.set_fused_kernels(composite)
    norm = layers.layer_norm()
    norm.build([None, shape[-1]])
    norm.set_weights([gamma, beta])
    apply = lambda x, r, norm=norm: norm(x, r if residual else None)
    apply.weights = norm.weights
    results.append(value_and_gradients(apply, [x, res], upstream, scope))
    op_types.append(graph_op_types(lambda t, apply=apply: apply(t, res), x))
  assert "CompositeAddLayerNorm" not in op_types[0]
  assert "CompositeAddLayerNorm" in op_types[1]
  for got, want in zip(results[1], results[0]):
    np.testing.assert_array_equal(got, want)


def test_float32_layer_norm_kernel_waits_for_a_known_shape(
    composite_kernels, reset_layers):
  """Of unknown rows grappler divides the gradient by W instead of
  multiplying by 1/W: the composite runs there, and eagerly (no grappler
  at all)."""
  del composite_kernels, reset_layers
  layers.set_fused_kernels(True)
  norm = layers.layer_norm()
  norm.build([None, 8])
  known = tf.function(norm).get_concrete_function(tf.TensorSpec([4, 8]))
  unknown = tf.function(norm).get_concrete_function(
      tf.TensorSpec([None, 8]))
  assert "CompositeAddLayerNorm" in {op.type for op in
                                     known.graph.get_operations()}
  assert "CompositeAddLayerNorm" not in {op.type for op in
                                         unknown.graph.get_operations()}
  x = tf.constant(np.random.RandomState(3).randn(4, 8), tf.float32)
  layers.set_fused_kernels(False)
  plain = layers.layer_norm()
  plain.build([None, 8])
  plain.set_weights(norm.get_weights())
  np.testing.assert_array_equal(bits(norm(x)), bits(plain(x)))


@pytest.mark.parametrize("shape", [(13,), (3, 5, 7), (2, 1031), (4, 3, 17, 17)])
@pytest.mark.parametrize("rate,seed", [(0.1, [7, 123456789012]),
                                       (0.5, [-3, 2 ** 62 + 5])])
def test_dropout_is_stateless_dropout_bit_for_bit(kernels, shape, rate, seed):
  del kernels
  seed = tf.constant(seed, tf.int64)
  x = tf.constant(np.random.RandomState(3).randn(*shape).astype(np.float32))
  upstream = tf.constant(np.random.RandomState(4).randn(*shape), tf.float32)
  with tf.GradientTape(persistent=True) as tape:
    tape.watch(x)
    want = tf.nn.experimental.stateless_dropout(x, rate, seed)
    got = fused_kernels.dropout(x, rate, seed)
  np.testing.assert_array_equal(bits(got), bits(want))
  # Some dropped, some kept (the comparison above is not of zeros).
  assert 0 < np.count_nonzero(got.numpy()) < got.numpy().size
  np.testing.assert_array_equal(
      bits(tape.gradient(got, x, upstream)),
      bits(tape.gradient(want, x, upstream)))


# The larger: kept bits of rows that span the shards' words.
@pytest.mark.parametrize("batch,length,width", [(4, 9, 6), (8, 128, 37)])
def test_dropout_of_gathered_rows_drops_them_as_the_whole_tensor(
    kernels, batch, length, width):
  """RealTokens' rows: row b * T + t of a [B, T, W] tensor drawn whole."""
  del kernels
  full = np.random.RandomState(5).randn(batch, length, width).astype(
      np.float32)
  real = np.random.RandomState(6).rand(batch, length) > 0.3
  seed = tf.constant([11, 12], tf.int64)
  want = tf.nn.experimental.stateless_dropout(full, 0.1, seed).numpy()[real]
  tokens = layers.RealTokens(tf.constant(real))
  rows = tf.constant(full[real])
  upstream = tf.constant(np.random.RandomState(7).randn(*rows.shape),
                         tf.float32)
  with tf.GradientTape() as tape:
    tape.watch(rows)
    got = fused_kernels.dropout(rows, 0.1, seed, tokens.flat_rows)
  np.testing.assert_array_equal(bits(got), bits(want))
  # The gradient from the kept bits: the upstream scaled where kept.
  kept = (tf.random.stateless_uniform([batch, length, width], seed).numpy()
          >= np.float32(0.1))[real]
  assert 0 < np.count_nonzero(~kept)
  np.testing.assert_array_equal(
      bits(tape.gradient(got, rows, upstream)),
      bits(tf.where(kept, upstream * np.float32(1 / 0.9), 0.0)))
  # The layer's composite path for gathered rows draws the same masks.
  layer = layers.Dropout(0.1, 0)
  layer.build(None)
  layer.fused_kernel = False
  np.testing.assert_array_equal(
      bits(layer(tf.constant(full[real]), training=True, real_tokens=tokens,
                 seed=seed)), bits(want))
  with pytest.raises(tf.errors.InvalidArgumentError,
                     match=r"with rows, x must be \[len\(rows\), width\]"):
    fused_kernels.dropout(tf.constant(full[real][:-1]), 0.1, seed,
                          tokens.flat_rows)


def softmax_float64(scores, mask, scale, rate, seed, dy):
  """The attention probabilities after dropout, and d(scores) for the
  upstream dy, in float64 NumPy from bfloat16 scores [B, N, F, T] and a
  mask [B, 1 or F, T]; the keep mask from stateless_uniform, as
  stateless_dropout draws it."""
  s = (scores * np.float32(scale) + (1.0 - mask[:, None]) * -10000.0)
  e = np.exp(s - s.max(-1, keepdims=True))
  p = e / e.sum(-1, keepdims=True)
  keep = np.ones(p.shape, bool)
  if rate:
    keep = tf.random.stateless_uniform(p.shape, seed).numpy() >= np.float32(
        rate)
  kept = np.float32(1.0 / (1.0 - rate)) * keep
  dp = dy * kept
  ds = p * (dp - (dp * p).sum(-1, keepdims=True)) * np.float32(scale)
  return p * kept, ds


@pytest.mark.parametrize("mask_rows", [1, 7])
@pytest.mark.parametrize("rate", [0.0, 0.1])
def test_attention_softmax_against_float64(kernels, mask_rows, rate):
  """Scale, mask, softmax and stateless_dropout's masks from bfloat16
  scores to bfloat16 probabilities, and the gradient back, against the
  formulas in float64 (T = 7: rows not a multiple of Philox's 4)."""
  del kernels
  rng = np.random.RandomState(12)
  shape = (2, 3, 7, 7)
  scores = tf.cast(tf.constant(rng.randn(*shape) * 8.0, tf.float32),
                   tf.bfloat16)
  mask = (rng.rand(2, mask_rows, 7) > 0.3).astype(np.float32)
  mask[:, :, 0] = 1.0
  dy = tf.cast(tf.constant(rng.randn(*shape), tf.float32), tf.bfloat16)
  seed = tf.constant([3, 2 ** 40 + 9], tf.int64)
  scale = 1.0 / math.sqrt(64.0)
  want, want_grad = softmax_float64(
      tf.cast(scores, tf.float64).numpy(), mask, scale, rate, seed,
      tf.cast(dy, tf.float64).numpy())
  with tf.GradientTape() as tape:
    tape.watch(scores)
    got = fused_kernels.attention_softmax(scores, tf.constant(mask), scale,
                                          rate, seed if rate else None)
  grad = tape.gradient(got, scores, dy)
  assert got.dtype == grad.dtype == tf.bfloat16
  for value, truth in ((got, want), (grad, want_grad)):
    value = tf.cast(value, tf.float64).numpy()
    # Rounded to bfloat16 once (8 bits): within half a bfloat16 step of
    # the truth, plus float32's error; zeros exactly where dropped.
    tolerance = 2.0 ** -8 * np.abs(truth) + 1e-6 * np.abs(truth).max()
    assert np.all(np.abs(value - truth) <= tolerance)
  np.testing.assert_array_equal(got.numpy() == 0, want == 0)
  if rate:
    assert 0 < np.count_nonzero(want == 0) < want.size / 2
  # Masked positions get nothing.
  assert np.all(tf.cast(got, tf.float32).numpy()[
      np.broadcast_to(mask[:, None] == 0, shape)] == 0)
  with pytest.raises(tf.errors.InvalidArgumentError,
                     match=r"mask must be \[batch, 1 or from, to\]"):
    fused_kernels.attention_softmax(scores, tf.constant(mask[:, :, :6]),
                                    scale)


@pytest.mark.parametrize("shape", [(37, 70), (1, 5), (0, 3), (64, 32),
                                   (65, 71), (100, 1)])
def test_transpose_matrix_is_the_transpose(kernels, shape):
  del kernels
  x = np.random.RandomState(12).randn(*shape).astype(np.float32)
  np.testing.assert_array_equal(
      fused_kernels.ops().transpose_matrix(tf.constant(x)).numpy(), x.T)
  with pytest.raises(tf.errors.InvalidArgumentError,
                     match=r"x must be a matrix, not \[2,3,4\]"):
    fused_kernels.ops().transpose_matrix(tf.zeros([2, 3, 4]))


# Widening shapes [M, K] x [K, N]: the feed-forward's of BERT-Base at 8 x
# 128 tokens, few tokens, and tiny ones.
@pytest.mark.parametrize("m,k,n", [(1024, 768, 3072), (8, 768, 3072),
                                   (33, 16, 800), (128, 1024, 4096)])
def test_transposed_gradient_is_used_only_with_matmuls_bits(kernels, m, k,
                                                             n):
  """matmul_transposed_gradient's input gradient has MatMul's own bits
  wherever transposed_gradient_applies says so, and where it says not,
  the two differ (on other matrices than those it tried): its verdict
  holds both ways. Forward and kernel gradient are MatMul's always."""
  del kernels
  rng = np.random.RandomState(m + k + n)
  x = tf.constant(rng.randn(m, k).astype(np.float32))
  kernel = tf.constant(rng.randn(k, n).astype(np.float32))
  dy = tf.constant(rng.randn(m, n).astype(np.float32))

  @tf.function
  def both(x, kernel):
    with tf.GradientTape(persistent=True) as tape:
      tape.watch([x, kernel])
      want = tf.matmul(x, kernel)
      got = fused_kernels.matmul_transposed_gradient(x, kernel)
    return (want, got, tape.gradient(want, [x, kernel], dy),
            tape.gradient(got, [x, kernel], dy))

  want, got, want_grads, got_grads = both(x, kernel)
  np.testing.assert_array_equal(bits(got), bits(want))
  np.testing.assert_array_equal(bits(got_grads[1]), bits(want_grads[1]))
  applies = tf.function(
      lambda x: fused_kernels.transposed_gradient_applies(x, kernel))(x)
  same = np.array_equal(bits(got_grads[0]), bits(want_grads[0]))
  assert same == applies
  if applies:
    assert np.abs(got_grads[0].numpy()).max() > 1.0  # (Not of zeros.)
  # Narrowing layers never (their input gradient sums over the narrow N).
  assert not tf.function(lambda x: fused_kernels.transposed_gradient_applies(
      tf.zeros([m, n]), tf.transpose(kernel)))(x)


def three_steps(fused, matmul_dtype, skip_padding, intermediate_size=37):
  """Three AdamW steps of a tiny classifier with dropout 0.1 built with the
  fused kernels switched on or off (the same initial weights and dropout
  seeds either way).

  Returns:
    (losses, weights before, weights after, the step's op types).
  """
  config = tiny_config(hidden_dropout_prob=0.1,
                       attention_probs_dropout_prob=0.1,
                       intermediate_size=intermediate_size)
  batch = padded_pair_batch(config)
  batch["label_ids"] = tf.constant([0, 1, 0])
  task = classifier_task.ClassificationTask(config, 11, ["0", "1"])
  layers.set_matmul_dtype(matmul_dtype)
  layers.set_fused_kernels(fused)
  keras.utils.set_random_seed(8)
  trainer = training.Trainer(tf.distribute.get_strategy(),
                             task.model_builder(skip_padding), task.loss,
                             tempfile.mkdtemp(), 1e-2, 10, 1)
  start = [w.numpy() for w in trainer.model.weights]
  step = tf.function(lambda: trainer.train_step(batch))
  losses = [float(step()) for _ in range(3)]
  graph = step.get_concrete_function().graph.as_graph_def()
  ops = {node.op for node in graph.node} | {
      node.op for function in graph.library.function
      for node in function.node_def}
  return losses, start, [w.numpy() for w in trainer.model.weights], ops


@pytest.mark.parametrize("skip_padding,intermediate_size",
                         [(False, 37), (True, 37), (False, 800)])
def test_float32_training_with_them_is_bit_identical(
    kernels, reset_layers, skip_padding, intermediate_size):
  """float32 training with and without the fused kernels (the dropout, the
  feed-forward's bias add and GELU above 100 KiB (33 tokens x 800), the
  LayerNorms and the attention softmax's gradient where shapes are known,
  and the optimizer's update are the ones float32 uses): every loss and
  weight bit-equal."""
  del kernels, reset_layers
  losses, _, weights, ops = three_steps(False, tf.float32, skip_padding,
                                        intermediate_size)
  fused_losses, _, fused_weights, fused_ops = three_steps(
      True, tf.float32, skip_padding, intermediate_size)
  used = {"FusedDropout", "FusedAdamWeightDecay"}
  if fused_kernels.composite_kernels_available():
    used.add("CompositeAddLayerNorm")  # (the embeddings' at least)
    if not skip_padding:
      used.add("CompositeSoftmaxGrad")
    if intermediate_size == 800:
      used.add("CompositeBiasGelu")
  assert not ops & used
  assert used <= fused_ops
  assert intermediate_size == 800 or "CompositeBiasGelu" not in fused_ops
  assert not fused_ops & {"FusedGelu", "FusedBiasGelu", "FusedAddLayerNorm",
                          "FusedAttentionSoftmax"}
  assert losses == fused_losses
  assert len(weights) == len(fused_weights) > 10
  for weight, fused_weight in zip(weights, fused_weights):
    np.testing.assert_array_equal(bits(fused_weight), bits(weight))


@pytest.mark.parametrize("skip_padding", [False, True])
def test_bfloat16_training_with_them_follows_it_without(kernels, reset_layers,
                                                        skip_padding):
  """Three steps of bfloat16 training (fused GELU with the bias, residual +
  LayerNorm, dropout, update) against the same steps through TensorFlow's
  composites: the same losses and weights up to rounding, and every
  weight moved by the step (gradients reach the fused ops' variables)."""
  del kernels, reset_layers
  losses, start, weights, _ = three_steps(False, tf.bfloat16, skip_padding)
  fused_losses, fused_start, fused_weights, ops = three_steps(
      True, tf.bfloat16, skip_padding)
  assert {"FusedBiasGelu", "FusedBiasAdd", "FusedBiasAddGrad",
          "FusedAddLayerNorm", "FusedDropout", "FusedDropoutGrad",
          "FusedAttentionSoftmax", "FusedAttentionSoftmaxGrad",
          "FusedAdamWeightDecay"} <= ops
  np.testing.assert_allclose(fused_losses, losses, rtol=1e-3)
  for before, after, fused_before, fused_after in zip(start, weights,
                                                      fused_start,
                                                      fused_weights):
    np.testing.assert_array_equal(fused_before, before)
    if after.size > 1:  # (Not the optimizer's step counter.)
      assert not np.array_equal(fused_after, fused_before)
    np.testing.assert_allclose(fused_after, after, rtol=1e-2, atol=1e-4)


def test_adam_weight_decay_is_the_originals_update_bit_for_bit(kernels):
  """Four updates of weights with and without decay (odd sizes, tiny and
  huge gradients, a zero one), through AdamWeightDecay's float32 ops on
  gradients scaled beforehand (as tf.clip_by_global_norm scales them), and
  through the composite and the kernel given the scale (grad_scales):
  weights and slots bit-equal."""
  del kernels
  rng = np.random.RandomState(10)
  shapes = {"bert/encoder/layer_0/output/dense/kernel": (37, 29),
            "bert/encoder/layer_0/output/LayerNorm/gamma": (1031,)}
  clip_scales = [tf.constant(s, tf.float32) for s in (1.0, 0.3712, 1.0, 2e-3)]
  results = []
  for fused_kernel, scaled_by_update in ((False, False), (False, True),
                                         (True, True)):
    weights = {name: tf.Variable(np.random.RandomState(11).randn(*shape)
                                 .astype(np.float32))
               for name, shape in shapes.items()}
    optimizer = optimization.AdamWeightDecay(weights,
                                             fused_kernel=fused_kernel)
    step = tf.function(optimizer.apply_gradients)
    for i, scale in enumerate((1.0, 1e-8, 0.0, 1e4)):
      grads = [tf.constant(rng.randn(*shape).astype(np.float32) * scale)
               for shape in shapes.values()]
      learning_rate = tf.constant(1e-3 * (i + 1), tf.float32)
      if scaled_by_update:
        step(grads, learning_rate, grad_scales=[clip_scales[i]] * 2)
      else:
        step([g * clip_scales[i] for g in grads], learning_rate)
    results.append([w.numpy() for w in weights.values()] +
                   [s.numpy() for s in optimizer.slot_variables().values()])
    ops = {op.type for op in step.get_concrete_function(
        grads, tf.constant(1e-3)).graph.get_operations()}
    assert ("FusedAdamWeightDecay" in ops) == fused_kernel
    rng = np.random.RandomState(10)
  for scaled_first, composite, fused in zip(*results):
    np.testing.assert_array_equal(bits(composite), bits(scaled_first))
    np.testing.assert_array_equal(bits(fused), bits(scaled_first))
  assert len(results[0]) == 6


@pytest.mark.parametrize("bad", ["learning_rate", "grad_scale"])
def test_adam_weight_decay_names_an_input_that_is_not_a_scalar(kernels, bad):
  del kernels
  slots = [tf.Variable(tf.zeros([3])) for _ in range(3)]
  vector = tf.constant([1e-3, 1.0])
  with pytest.raises(tf.errors.InvalidArgumentError,
                     match="%s must be a scalar, not \\[2\\]" % bad):
    fused_kernels.adam_weight_decay(
        *slots, tf.ones([3]),
        vector if bad == "learning_rate" else tf.constant(1e-3), 0.9,
        0.999, 1e-6, 0.01, vector if bad == "grad_scale" else None)
  assert not slots[0].numpy().any()  # nothing written

def graph_op_types(layer, inputs):
  function = tf.function(lambda x: layer(x)).get_concrete_function(  # pylint: disable=unnecessary-lambda
      tf.TensorSpec(inputs.shape, tf.float32))
  return {op.type for op in function.graph.get_operations()}


def test_only_bfloat16_layers_made_with_the_switch_use_it(kernels,
                                                          reset_layers):
  del kernels, reset_layers
  x = tf.constant(np.random.RandomState(2).randn(6, 8), tf.float32)

  def dense(matmul_dtype, fused, activation=layers.gelu):
    layers.set_matmul_dtype(matmul_dtype)
    layers.set_fused_kernels(fused)
    made = layers.Dense(16, activation=activation)
    made.build([None, 8])
    return made

  used = dense(tf.bfloat16, True)
  assert "FusedGelu" in graph_op_types(used, x)
  norm = layers.layer_norm()
  norm.build([None, 8])
  assert "FusedAddLayerNorm" in graph_op_types(norm, x)
  plain = dense(tf.bfloat16, False)
  plain.set_weights(used.get_weights())
  assert "FusedGelu" not in graph_op_types(plain, x)
  np.testing.assert_allclose(used(x), plain(x), atol=1e-5)
  # float32 (the original's arithmetic) and other activations never.
  assert "FusedGelu" not in graph_op_types(dense(tf.float32, True), x)
  norm = layers.layer_norm()  # (Made under float32 matmuls.)
  norm.build([None, 8])
  assert "FusedAddLayerNorm" not in graph_op_types(norm, x)
  assert "FusedGelu" not in graph_op_types(
      dense(tf.bfloat16, True, tf.nn.relu), x)
  # The erf form through the kernel's exact attribute, its own function.
  exact = dense(tf.bfloat16, True, layers.gelu_exact)
  assert "FusedGelu" in graph_op_types(exact, x)
  exact_plain = dense(tf.bfloat16, False, layers.gelu_exact)
  for made in (exact, exact_plain):
    made.set_weights(used.get_weights())
  wide = 4.0 * x  # Products near |2.7|, where the two forms differ most.
  np.testing.assert_allclose(exact(wide), exact_plain(wide), atol=2e-5)
  assert np.abs(exact(wide) - used(wide)).max() > 1e-4


def test_dense_takes_bfloat16_inputs_and_keras_policies_still_autocast(
    kernels, reset_layers):
  del kernels, reset_layers
  x = tf.constant(np.random.RandomState(2).randn(6, 8), tf.float32)
  layers.set_matmul_dtype(tf.bfloat16)
  layers.set_fused_kernels(True)
  intermediate = layers.Dense(16, activation=layers.gelu,
                              output_feeds_matmul=True)
  output = layers.Dense(8)
  hidden = intermediate(x)
  assert hidden.dtype == tf.bfloat16
  assert output(hidden).dtype == tf.float32  # Taken as it came.
  # Under a Keras mixed policy (GPUs, TPUs) Keras casts inputs as before.
  layers.set_matmul_dtype(tf.float32)
  keras.mixed_precision.set_global_policy("mixed_bfloat16")
  try:
    mixed = layers.Dense(4)
    assert mixed(x).dtype == tf.bfloat16
  finally:
    keras.mixed_precision.set_global_policy("float32")


def test_training_sets_it_and_xla_and_serving_do_not(reset_layers,
                                                     monkeypatch):
  del reset_layers
  monkeypatch.setattr(precision, "_accelerated", lambda: False)
  precision.set_policy("bfloat16")
  assert layers._FUSED_KERNELS[0]  # pylint: disable=protected-access
  precision.set_policy("bfloat16", jit_compile=True)
  assert not layers._FUSED_KERNELS[0]  # pylint: disable=protected-access
  precision.set_policy("bfloat16")
  precision.set_matmul_precision("bfloat16")  # export_saved_model.py's
  assert not layers._FUSED_KERNELS[0]  # pylint: disable=protected-access
  precision.set_policy("float32")  # The dropout only (bit-identical).
  assert layers._FUSED_KERNELS[0]  # pylint: disable=protected-access
  precision.set_policy("float32", jit_compile=True)
  assert not layers._FUSED_KERNELS[0]  # pylint: disable=protected-access
  for name in ("float32", "bfloat16"):  # --fused_kernels=false
    precision.set_policy(name, fused_kernels=False)
    assert not layers._FUSED_KERNELS[0]  # pylint: disable=protected-access
  monkeypatch.setattr(precision, "_accelerated", lambda: True)
  for name in ("float32", "bfloat16"):
    precision.set_policy(name)
    assert not layers._FUSED_KERNELS[0]  # pylint: disable=protected-access
  precision.set_policy("float32")


def test_a_step_xla_compiles_is_built_without_them(kernels, reset_layers):
  del kernels, reset_layers
  config = tiny_config()
  batch = padded_pair_batch(config)
  batch["label_ids"] = tf.constant([0, 1, 0])
  task = classifier_task.ClassificationTask(config, 11, ["0", "1"])
  layers.set_matmul_dtype(tf.bfloat16)
  layers.set_fused_kernels(True)
  for jit_compile, used in ((True, False), (False, True)):
    trainer = training.Trainer(tf.distribute.get_strategy(), task.build_model,
                               task.loss, tempfile.mkdtemp(), 1e-3, 10, 1,
                               jit_compile=jit_compile)
    step = tf.function(lambda t=trainer: t.train_step(batch),
                       jit_compile=jit_compile)
    assert np.isfinite(float(step()))
    graph = step.get_concrete_function().graph.as_graph_def()
    ops = {node.op for node in graph.node} | {
        node.op for function in graph.library.function
        for node in function.node_def}
    fused_ops = {"FusedBiasGelu", "FusedAddLayerNorm", "FusedDropout"}
    assert (ops & fused_ops) == (fused_ops if used else set())
  assert layers.fused_kernels_enabled()  # As set_policy left it.


def test_without_the_library_the_composite_runs_with_one_warning(
    tmp_path, monkeypatch, reset_layers, caplog):
  del reset_layers
  monkeypatch.setattr(fused_kernels, "LIBRARY", str(tmp_path / "none.so"))
  monkeypatch.setattr(fused_kernels, "_loaded", [])
  layers.set_matmul_dtype(tf.bfloat16)
  layers.set_fused_kernels(True)
  made = layers.Dense(4, activation=layers.gelu)
  made.build([None, 3])
  x = tf.constant([[1.0, -2.0, 0.5]])
  assert "FusedGelu" not in graph_op_types(made, x)
  made(x)
  warnings = [r for r in caplog.records
              if "fused CPU kernels are not used" in r.getMessage()]
  assert len(warnings) == 1
  assert "none.so is missing; `make setup` builds them" in (
      warnings[0].getMessage())


def test_a_failed_build_says_why_and_leaves_nothing(tmp_path):
  source = tmp_path / "broken.cc"
  source.write_text("this is not C++\n")
  library = tmp_path / "out" / "lib.so"
  library.parent.mkdir()
  problem = fused_kernels.build(str(library), str(tmp_path))
  if problem.startswith("cannot run g++"):
    pytest.skip(problem)
  assert problem.startswith("g++ failed:\n") and "broken.cc" in problem
  assert os.listdir(library.parent) == []
