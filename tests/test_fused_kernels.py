"""modeling/fused_kernels.py: the fused CPU kernels of training against
their references (each against its formula in float64 with a stated
tolerance; the dropout's masks bit for bit against
tf.nn.experimental.stateless_dropout; the optimizer's update bit for bit
against the original's float32 ops), training with them against training
without them, which layers use them (modeling.ComputeOptions), and what
happens without them."""

import math
import os
import tempfile

import numpy as np
import pytest
import tensorflow as tf
import tf_keras as keras

import modeling
from modeling import fused_kernels
from modeling import layers
from modeling import options as options_lib
from runner_lib.classifier import task as classifier_task
from runner_lib.core import training
from runner_lib.core.training import optimization
from runner_lib.core.training import precision
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
    fused_kernels._load.cache_clear()  # pylint: disable=protected-access
  assert fused_kernels.available()
  return fused_kernels.ops()


ALL = frozenset(options_lib.KERNELS)


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


def bias_gelu_and_gradients(x, bias, dy, exact):
  """fused_kernels.bias_gelu(x, bias) and its gradients for dy, and the
  composite's (modeling.layers' GELU of tf.nn.bias_add), in float32:
  ((y, dx, dbias) fused, (y, dx, dbias) composite) as float64 NumPy."""
  tensors = [tf.constant(v, tf.float32) for v in (x, bias)]
  gelu = layers.gelu_exact if exact else layers.gelu
  with tf.GradientTape(persistent=True) as tape:
    tape.watch(tensors)
    fused = fused_kernels.bias_gelu(*tensors, exact)
    composite = gelu(tf.nn.bias_add(*tensors))
  upstream = tf.constant(dy, tf.float32)
  return [[t.numpy().astype(np.float64)
           for t in [y] + tape.gradient(y, tensors, upstream)]
          for y in (fused, composite)]


@pytest.mark.parametrize("exact", [False, True], ids=["tanh", "erf"])
def test_float32_bias_gelu_against_float64(kernels, exact):
  """gelu(x + bias) in float32 over [-30, 30] and random rows: values
  within 2e-6 and slopes within 2e-5 (plus 1e-5 and 1e-4 relative) of the
  formula in float64, as close as TensorFlow's float32 composite is; the
  tails exactly 0 and x; the bias gradient the rows' sum."""
  del kernels
  x = np.concatenate([np.linspace(-30.0, 30.0, 60001),
                      np.random.RandomState(0).randn(10000) * 3.0])[:, None]
  dy = np.random.RandomState(1).randn(*x.shape)
  (y, dx, dbias), (ref_y, ref_dx, _) = bias_gelu_and_gradients(
      x, np.zeros(1), dy, exact)
  want, slope = gelu_float64(np.float32(x).astype(np.float64), exact)
  fused_error, composite_error = np.abs(y - want), np.abs(ref_y - want)
  assert fused_error.max() <= 2 * composite_error.max() + 1e-6
  np.testing.assert_allclose(y, want, rtol=1e-5, atol=2e-6)
  np.testing.assert_allclose(dx, dy * slope, rtol=1e-4, atol=2e-5)
  np.testing.assert_allclose(dx, ref_dx, rtol=1e-4, atol=2e-5)
  np.testing.assert_allclose(dbias, [np.sum(dy * slope)], rtol=1e-5)
  np.testing.assert_array_equal(y[[0, 30000, 60000], 0], [0.0, 0.0, 30.0])
  # Rows of 37 with a bias: the sum in float32, each bias's column summed.
  rng = np.random.RandomState(2)
  x, bias, dy = rng.randn(300, 37) * 3.0, rng.randn(37), rng.randn(300, 37)
  (y, dx, dbias), _ = bias_gelu_and_gradients(x, bias, dy, exact)
  v = np.float32(x).astype(np.float64) + np.float32(bias)
  want, slope = gelu_float64(v, exact)
  np.testing.assert_allclose(y, want, rtol=1e-5, atol=2e-6)
  np.testing.assert_allclose(dx, dy * slope, rtol=1e-4, atol=2e-5)
  np.testing.assert_allclose(dbias, (dy * slope).sum(0), rtol=1e-5,
                             atol=1e-4)
  with pytest.raises(tf.errors.InvalidArgumentError,
                     match=r"bias must be \[width\]"):
    fused_kernels.bias_gelu(tf.zeros([3, 4]), tf.zeros([3]))


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
  upstream dy, in float64 NumPy from scores [B, N, F, T] and a mask
  [B, 1 or F, T]; the keep mask from stateless_uniform, as
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


@pytest.mark.parametrize("dtype", [tf.float32, tf.bfloat16],
                         ids=["float32", "bfloat16"])
@pytest.mark.parametrize("mask_rows", [1, 7])
@pytest.mark.parametrize("rate", [0.0, 0.1])
def test_attention_softmax_against_float64(kernels, dtype, mask_rows, rate):
  """Scale, mask, softmax and stateless_dropout's masks from scores to
  probabilities, and the gradient back, of the scores' type, against the
  formulas in float64 (T = 7: rows not a multiple of Philox's 4)."""
  del kernels
  rng = np.random.RandomState(12)
  shape = (2, 3, 7, 7)
  scores = tf.cast(tf.constant(rng.randn(*shape) * 8.0, tf.float32), dtype)
  mask = (rng.rand(2, mask_rows, 7) > 0.3).astype(np.float32)
  mask[:, :, 0] = 1.0
  dy = tf.cast(tf.constant(rng.randn(*shape), tf.float32), dtype)
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
  assert got.dtype == grad.dtype == dtype
  # Rounded once to the type (bfloat16: 8 bits, half a step 2^-9; float32:
  # 24), plus float32's arithmetic: ~1e-6 of the row's largest.
  relative = 2.0 ** -8 if dtype == tf.bfloat16 else 1e-6
  for value, truth in ((got, want), (grad, want_grad)):
    value = tf.cast(value, tf.float64).numpy()
    tolerance = relative * np.abs(truth) + 1e-6 * np.abs(truth).max()
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


def test_attention_softmax_draws_the_uniforms_of_a_layout(kernels):
  """With uniform_layout, the scores of one example's real tokens drop
  what stateless_dropout drops at their places in the padded [B, N, T, T]
  probabilities: example 1 of 3, real positions 0, 2, 3 and 6 of T = 9
  (a span not a multiple of Philox's 4, a gap), against float64."""
  del kernels
  rng = np.random.RandomState(5)
  heads, padded, example, rate = 2, 9, 1, 0.4
  positions = np.array([0, 2, 3, 6])
  width = len(positions)
  scores = tf.constant(rng.randn(1, heads, width, width) * 4.0, tf.float32)
  dy = rng.randn(1, heads, width, width)
  seed = tf.constant([7, 11], tf.int64)
  scale = 0.25
  # The padded batch's uniforms at the example's rows and columns.
  uniform = tf.random.stateless_uniform([3, heads, padded, padded],
                                        seed).numpy()
  keep = uniform[example][:, positions][:, :, positions] >= np.float32(rate)
  mask = np.ones([1, 1, width], np.float32)
  s = scores.numpy().astype(np.float64) * np.float32(scale)
  e = np.exp(s - s.max(-1, keepdims=True))
  p = e / e.sum(-1, keepdims=True)
  kept = np.float32(1.0 / (1.0 - rate)) * keep[None]
  want = p * kept
  dp = dy * kept
  want_grad = p * (dp - (dp * p).sum(-1, keepdims=True)) * np.float32(scale)
  row_starts = ((example * heads + np.arange(heads)[:, None]) * padded +
                positions[None, :]) * padded
  with tf.GradientTape() as tape:
    tape.watch(scores)
    got = fused_kernels.attention_softmax(
        scores, tf.constant(mask), scale, rate, seed,
        uniform_layout=(row_starts.reshape(-1), positions))
  grad = tape.gradient(got, scores, tf.constant(dy, tf.float32))
  np.testing.assert_array_equal(got.numpy() == 0, want == 0)
  assert 0 < np.count_nonzero(want == 0) < want.size
  for value, truth in ((got, want), (grad, want_grad)):
    tolerance = 1e-6 * np.abs(truth) + 1e-6 * np.abs(truth).max()
    assert np.all(np.abs(value.numpy() - truth) <= tolerance)
  with pytest.raises(tf.errors.InvalidArgumentError,
                     match=r"columns must increase: columns\[1\] is 0"):
    fused_kernels.attention_softmax(
        scores, tf.constant(mask), scale, rate, seed,
        uniform_layout=(row_starts.reshape(-1), positions[[2, 0, 1, 3]]))
  with pytest.raises(tf.errors.InvalidArgumentError,
                     match="one element per row of scores"):
    fused_kernels.attention_softmax(
        scores, tf.constant(mask), scale, rate, seed,
        uniform_layout=(row_starts.reshape(-1)[1:], positions))


@pytest.mark.parametrize("causal", [False, True],
                         ids=["bidirectional", "causal"])
def test_attention_by_example_drops_what_the_padded_batch_drops(kernels,
                                                                causal):
  """The encoder skipping padding with a known batch size attends over
  each example's real tokens alone (SelfAttention._attend_by_example):
  with every kernel and dropout on, the padded encoder's outputs at real
  positions and its gradients (test_modeling's tolerance, which says
  why), where dropout moves the outputs by more than 1e-2."""
  del kernels
  config = tiny_config(hidden_dropout_prob=0.3,
                       attention_probs_dropout_prob=0.2)
  batch = padded_pair_batch(config)
  real = batch["input_mask"].astype(bool)
  prefix = os.path.join(tempfile.mkdtemp(), "bert_model.ckpt")
  results, attended = [], []
  for skip_padding in (False, True):
    model = modeling.BertModel(
        config, seed=5, causal_attention=causal,
        options=options_lib.ComputeOptions(kernels=ALL,
                                           skip_padding=skip_padding))
    model(batch)
    if not skip_padding:
      model.save_weights(prefix)
    model.load_weights(prefix)
    attention = model.encoder_layers[0].attention
    # The per-example path is the one taken (a batch of known size).
    calls = []
    attend = attention._attend_by_example  # pylint: disable=protected-access
    attention._attend_by_example = lambda *a, f=attend: calls.append(1) or f(
        *a)
    with tf.GradientTape() as tape:
      outputs = model(batch, training=True)["sequence_output"]
      loss = tf.reduce_sum(outputs ** 2 * tf.cast(
          batch["input_mask"], tf.float32)[:, :, None])
    grads = [tf.convert_to_tensor(g).numpy() for g in
             tape.gradient(loss, model.trainable_variables) if g is not None]
    attended.append(len(calls))
    inference = model(batch)["sequence_output"].numpy()[real]
    assert np.abs(outputs.numpy()[real] - inference).max() > 1e-2
    results.append((outputs.numpy()[real], grads))
  assert attended[0] == 0 and attended[1] > 0
  (padded, padded_grads), (skipped, skipped_grads) = results
  np.testing.assert_allclose(skipped, padded, atol=1e-5)
  floor = 2 ** -20 * max(np.abs(w).max() for w in padded_grads)
  for g, w in zip(skipped_grads, padded_grads):
    np.testing.assert_allclose(g, w, rtol=0,
                               atol=2 ** -13 * np.abs(w).max() + floor)


def three_steps(kernels, matmul_dtype, skip_padding):
  """Three AdamW steps of a tiny classifier with dropout 0.1 built with
  the fused kernels named or none (the same initial weights and dropout
  seeds either way).

  Returns:
    (losses, weights before, weights after, the step's op types).
  """
  config = tiny_config(hidden_dropout_prob=0.1,
                       attention_probs_dropout_prob=0.1)
  batch = padded_pair_batch(config)
  batch["label_ids"] = tf.constant([0, 1, 0])
  task = classifier_task.ClassificationTask(config, 11, ["0", "1"])
  keras.utils.set_random_seed(8)
  options = modeling.ComputeOptions(matmul_dtype, kernels)
  trainer = training.Trainer(
      tf.distribute.get_strategy(),
      task.model_builder(skip_padding, options=options), task.loss,
      training.TrainingConfig(
          output_dir=tempfile.mkdtemp(), learning_rate=1e-2,
          num_train_steps=10, num_warmup_steps=1,
          # The optimizer's kernel where the options hold it, as a run's.
          update=precision.optimizer_update(options, "float32")))
  start = [w.numpy() for w in trainer.model.weights]
  step = tf.function(lambda: trainer.train_step(batch))
  losses = [float(step()) for _ in range(3)]
  graph = step.get_concrete_function().graph.as_graph_def()
  ops = {node.op for node in graph.node} | {
      node.op for function in graph.library.function
      for node in function.node_def}
  return losses, start, [w.numpy() for w in trainer.model.weights], ops


# What training with the kernels may differ by from training without
# them, three steps on: float32 rounds each kernel's sums otherwise (a few
# 1e-7 relative, carried through Adam's normalised steps); bfloat16 also
# rounds the fused bias add's and GELU's outputs once instead of twice.
TOLERANCE = {tf.float32: dict(loss=1e-5, rtol=1e-4, atol=1e-6),
             tf.bfloat16: dict(loss=1e-3, rtol=1e-2, atol=1e-4)}


@pytest.mark.parametrize("matmul_dtype", [tf.float32, tf.bfloat16],
                         ids=["float32", "bfloat16"])
@pytest.mark.parametrize("skip_padding", [False, True])
def test_training_with_them_follows_it_without(kernels, matmul_dtype,
                                               skip_padding):
  """Three steps with every fused kernel against the same steps through
  TensorFlow's own ops: each kernel in the step, none without; the same
  losses and weights within TOLERANCE, and every weight moved by the step
  (gradients reach the fused ops' variables)."""
  del kernels
  losses, start, weights, ops = three_steps((), matmul_dtype, skip_padding)
  fused_losses, fused_start, fused_weights, fused_ops = three_steps(
      ALL, matmul_dtype, skip_padding)
  used = {"FusedBiasGelu", "FusedBiasGeluGrad", "FusedAddLayerNorm",
          "FusedAddLayerNormGrad", "FusedDropout", "FusedDropoutGrad",
          "FusedAttentionSoftmax", "FusedAttentionSoftmaxGrad",
          "FusedAdamWeightDecay"}
  if matmul_dtype == tf.bfloat16:
    used |= {"FusedBiasAdd", "FusedBiasAddGrad"}
  assert used <= fused_ops
  assert not {op for op in ops if op.startswith("Fused")}
  tolerance = TOLERANCE[matmul_dtype]
  np.testing.assert_allclose(fused_losses, losses, rtol=tolerance["loss"])
  assert len(weights) == len(fused_weights) > 10
  for before, after, fused_before, fused_after in zip(start, weights,
                                                      fused_start,
                                                      fused_weights):
    np.testing.assert_array_equal(fused_before, before)
    if after.size > 1:  # (Not the optimizer's step counter.)
      assert not np.array_equal(fused_after, fused_before)
    np.testing.assert_allclose(fused_after, after, rtol=tolerance["rtol"],
                               atol=tolerance["atol"])


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
    optimizer = optimization.AdamWeightDecay(
        weights, update="kernel" if fused_kernel else "exact")
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


def dense(matmul_dtype, kernels, activation=layers.gelu, units=16, **kwargs):
  """A built layers.Dense [..., 8] -> [..., units] made with the options."""
  made = layers.Dense(units, activation=activation,
                      options=modeling.ComputeOptions(matmul_dtype, kernels),
                      **kwargs)
  made.build([None, 8])
  made.set_weights([np.random.RandomState(3).randn(8, units) * 0.5,
                    np.random.RandomState(4).randn(units)])
  return made


def dense_float64(made, x, activation):
  """What made computes, in float64 NumPy: activation(x W + b). A
  bfloat16 product is TensorFlow's (its rounding is the matmul's, not the
  path's): the path's bias add and activation are what is checked."""
  kernel, bias = made.get_weights()
  if made.matmul_dtype == tf.bfloat16:
    product = tf.matmul(tf.cast(x.reshape(-1, 8), tf.bfloat16),
                        tf.cast(kernel, tf.bfloat16))
    product = tf.cast(product, tf.float64).numpy().reshape(
        x.shape[:-1] + kernel.shape[1:])
  else:
    product = x.astype(np.float64) @ kernel.astype(np.float64)
  return activation(product + bias)


# Dense's paths (layers.Dense.epilogue), each chosen by its options alone:
# (matmul_dtype, kernels, activation, output_feeds_matmul) -> the path and
# the output's dtype.
DENSE_PATHS = [
    (tf.float32, (), "gelu", False, None, tf.float32),
    (tf.float32, ALL, "relu", False, None, tf.float32),
    (tf.float32, ALL, "gelu", True, "fused_bias_gelu", tf.float32),
    (tf.bfloat16, (), "gelu", True, "bias_activation", tf.float32),
    (tf.bfloat16, ALL, "gelu", False, "fused_bias_gelu", tf.float32),
    (tf.bfloat16, ALL, "gelu", True, "fused_bias_gelu", tf.bfloat16),
    (tf.bfloat16, ALL, "gelu_exact", True, "fused_bias_gelu", tf.bfloat16),
    (tf.bfloat16, ALL, "linear", True, "fused_bias_add", tf.bfloat16),
    (tf.bfloat16, ALL, "linear", False, "bias_activation", tf.float32),
]
ACTIVATIONS = {"gelu": (layers.gelu, lambda v: gelu_float64(v)[0]),
               "gelu_exact": (layers.gelu_exact,
                              lambda v: gelu_float64(v, True)[0]),
               "relu": (tf.nn.relu, lambda v: np.maximum(v, 0.0)),
               "linear": (None, lambda v: v)}


@pytest.mark.parametrize(
    "matmul_dtype,chosen,activation,feeds_matmul,path,out_dtype",
    DENSE_PATHS, ids=["%s-%s-%s%s-%s" % (
        dtype.name, "kernels" if chosen else "no_kernels", activation,
        "-feeds_matmul" if feeds else "", path or "keras")
                      for dtype, chosen, activation, feeds, path, _
                      in DENSE_PATHS])
def test_each_dense_path_against_float64(kernels, matmul_dtype, chosen,
                                         activation, feeds_matmul, path,
                                         out_dtype):
  del kernels
  keras_activation, activation_float64 = ACTIVATIONS[activation]
  made = dense(matmul_dtype, chosen, keras_activation,
               output_feeds_matmul=feeds_matmul)
  assert (made.epilogue and made.epilogue.__name__) == path
  x = np.random.RandomState(2).randn(2, 3, 8).astype(np.float32)
  got = made(tf.constant(x))
  assert got.dtype == out_dtype and got.shape == [2, 3, 16]
  want = dense_float64(made, x, activation_float64)
  # float32 out: float32's arithmetic (1e-5 relative); bfloat16 out: one
  # rounding (at most 2^-8 relative: 8 significant bits).
  relative = 1e-5 if out_dtype == tf.float32 else 2.0 ** -8
  np.testing.assert_allclose(tf.cast(got, tf.float64).numpy(), want,
                             rtol=relative, atol=1e-6)


def test_layers_use_the_kernels_their_options_name(kernels):
  del kernels
  x = tf.constant(np.random.RandomState(2).randn(6, 8), tf.float32)
  for dtype in (tf.float32, tf.bfloat16):
    assert "FusedBiasGelu" in graph_op_types(dense(dtype, ALL), x)
    assert "FusedBiasGelu" in graph_op_types(dense(dtype, {"bias_gelu"}), x)
    assert "FusedBiasGelu" not in graph_op_types(
        dense(dtype, ALL - {"bias_gelu"}), x)
    for chosen, used in ((ALL, True), ({"dropout"}, False)):
      norm = layers.layer_norm(options=modeling.ComputeOptions(dtype,
                                                               chosen))
      norm.build([None, 8])
      assert ("FusedAddLayerNorm" in graph_op_types(norm, x)) == used
  # The default: the original's float32 arithmetic through TensorFlow's ops.
  assert not {op for op in graph_op_types(layers.Dense(4), x)
              if op.startswith("Fused")}
  with pytest.raises(ValueError, match=r"Unknown fused kernels \['gelu'\]"):
    modeling.ComputeOptions(tf.float32, {"gelu"})


def test_dense_takes_bfloat16_inputs_and_keras_policies_still_autocast(
    kernels):
  del kernels
  x = tf.constant(np.random.RandomState(2).randn(6, 8), tf.float32)
  options = modeling.ComputeOptions(tf.bfloat16, ALL)
  intermediate = layers.Dense(16, activation=layers.gelu,
                              output_feeds_matmul=True, options=options)
  output = layers.Dense(8, options=options)
  hidden = intermediate(x)
  assert hidden.dtype == tf.bfloat16
  assert output(hidden).dtype == tf.float32  # Taken as it came.
  # Under a Keras mixed policy (GPUs, TPUs) Keras casts inputs as before.
  keras.mixed_precision.set_global_policy("mixed_bfloat16")
  try:
    mixed = layers.Dense(4)
    assert mixed(x).dtype == tf.bfloat16
  finally:
    keras.mixed_precision.set_global_policy("float32")


def test_training_chooses_them_and_xla_serving_and_gpus_do_not(monkeypatch):
  monkeypatch.setattr(precision, "_accelerated", lambda: False)
  try:
    for name, dtype in (("float32", tf.float32), ("bfloat16", tf.bfloat16)):
      assert precision.training_options(name) == modeling.ComputeOptions(
          dtype, ALL)
      for off in (dict(jit_compile=True), dict(fused_kernels=False)):
        assert not precision.training_options(name, **off).kernels
      assert not precision.prediction_options(name).kernels  # Serving.
    monkeypatch.setattr(precision, "_accelerated", lambda: True)
    for name in ("float32", "bfloat16"):
      assert not precision.training_options(name).kernels
  finally:
    keras.mixed_precision.set_global_policy("float32")


def test_xla_refuses_a_model_with_them_and_runs_one_without(kernels):
  del kernels
  config = tiny_config()
  batch = padded_pair_batch(config)
  batch["label_ids"] = tf.constant([0, 1, 0])
  task = classifier_task.ClassificationTask(config, 11, ["0", "1"])
  with pytest.raises(ValueError, match="XLA cannot compile the fused CPU "
                     "kernels"):
    training.Trainer(
        tf.distribute.get_strategy(), task.model_builder(
            False, options=modeling.ComputeOptions(tf.bfloat16, ALL)),
        task.loss, training.TrainingConfig(
            output_dir=tempfile.mkdtemp(), learning_rate=1e-3,
            num_train_steps=10, num_warmup_steps=1, jit_compile=True))
  trainer = training.Trainer(
      tf.distribute.get_strategy(), task.model_builder(
          False, options=precision.training_options("bfloat16",
                                                    jit_compile=True)),
      task.loss, training.TrainingConfig(
          output_dir=tempfile.mkdtemp(), learning_rate=1e-3,
          num_train_steps=10, num_warmup_steps=1, jit_compile=True))
  step = tf.function(lambda: trainer.train_step(batch), jit_compile=True)
  assert np.isfinite(float(step()))


def test_without_the_library_tensorflows_ops_run_with_one_warning(
    tmp_path, monkeypatch, caplog):
  monkeypatch.setattr(fused_kernels, "LIBRARY", str(tmp_path / "none.so"))
  fused_kernels._load.cache_clear()  # pylint: disable=protected-access
  try:
    made = layers.Dense(4, activation=layers.gelu,
                        options=modeling.ComputeOptions(tf.bfloat16, ALL))
    made.build([None, 3])
    x = tf.constant([[1.0, -2.0, 0.5]])
    assert made.epilogue.__name__ == "bias_activation"
    assert "FusedBiasGelu" not in graph_op_types(made, x)
    made(x)
  finally:
    # The real library again for the tests after this one.
    fused_kernels._load.cache_clear()  # pylint: disable=protected-access
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
