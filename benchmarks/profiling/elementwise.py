"""What the training step's elementwise work costs, and what fusing it
could save: each piece forward and backward at the step's shapes, as the
model computes it today and in fused forms (XLA on the piece alone, fewer
ops, and the C++ kernels of training on CPUs, modeling/fused_kernels.py,
one pass each way).

Times are medians of alternated calls; "passes" divides each by the time
of one elementwise op over the same tensor (y = 2x: read once, write
once), the unit a fused kernel is counted in (a fused GELU reads x and
writes y forward, reads x and dy and writes dx backward: about 2.5).

Pieces (rows = batch x sequence: 1024 for the pre-training step at batch
8, 4096 for the fine-tuning step at batch 32; BERT-Base widths):
  gelu         [rows, 3072]: the feed-forward's bias add and activation
               in float32.
  gelu_exact   [rows, 3072]: its erf form (converted HuggingFace models).
  bias_gelu    [rows, 3072]: between the feed-forward's two bfloat16
               matmuls: the products cast to float32, the bias added, the
               GELU, the cast back to bfloat16 for the next matmul.
  layer_norm   [rows, 768]: residual add, then LayerNorm (epsilon 1e-12).
  dropout      [rows, 3072]: rate 0.1, a mask drawn each call.
  attention_softmax  [rows / 128, 12, 128, 128]: from the bfloat16 scores
               to the bfloat16 probabilities (scale, mask, softmax,
               dropout), between the attention's two matmuls; passes
               counted on the float32 scores.
  cast         [rows, 3072]: float32 -> bfloat16 -> float32 (the bfloat16
               matmuls' operand and product casts).

  .venv/bin/python benchmarks/profiling/elementwise.py [--rows=1024,4096]
      [--repeats=20]

The kernels' rows are left out where `make setup` could not build them.
"""

import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
sys.path.insert(0, os.path.abspath(os.path.join(__file__, "../../..")))

from absl import app  # pylint: disable=g-import-not-at-top
from absl import flags
import numpy as np
import tensorflow as tf

from benchmarks.lib import results
from benchmarks.lib import timing
from modeling import fused_kernels
from modeling import layers

FLAGS = flags.FLAGS
flags.DEFINE_string("rows", "1024,4096", "Comma-separated row counts.")
flags.DEFINE_integer("repeats", 20, "Timed calls of each variant.")
results.define_flags()

HIDDEN, INTERMEDIATE = 768, 3072
RATE = 0.1
SQRT_2_OVER_PI = float(np.sqrt(2.0 / np.pi))
CUBIC = 0.044715
COLUMNS = ["piece", "rows", "variant", "ms", "passes",
           "TensorFlow's ops / variant"]


def gelu_sigmoid(x):
  """The tanh-form GELU as x * sigmoid(2u) (the same function, fewer ops)."""
  return x * tf.sigmoid((2.0 * SQRT_2_OVER_PI) * (x + CUBIC * (x * x * x)))


@tf.custom_gradient
def gelu_hand_gradient(x):
  """The tanh-form GELU with its derivative written out (tanh kept)."""
  t = tf.tanh(SQRT_2_OVER_PI * (x + CUBIC * (x * x * x)))

  def grad(dy):
    return dy * (0.5 * (1.0 + t) + (0.5 * SQRT_2_OVER_PI) * x *
                 (1.0 - t * t) * (1.0 + (3.0 * CUBIC) * (x * x)))

  return 0.5 * x * (1.0 + t), grad


def layer_norm_moments(x, gamma, beta):
  mean, variance = tf.nn.moments(x, [-1], keepdims=True)
  return (x - mean) * tf.math.rsqrt(variance + layers.LAYER_NORM_EPSILON) * (
      gamma) + beta


def dropout_bits(x, seed):
  """Inverted dropout from 32 random bits per element (no float uniform)."""
  bits = tf.random.stateless_uniform(tf.shape(x), seed, minval=None,
                                     maxval=None, dtype=tf.uint32)
  keep = bits >= tf.constant(int(RATE * 2 ** 32), tf.uint32)
  return tf.where(keep, x * (1.0 / (1.0 - RATE)), 0.0)


def forward_backward(fn, x, weights=()):
  """A blocking call: fn(x) forward, then the gradient of sum(y * dy) with
  respect to x (and weights) for a fixed random dy."""
  upstream = tf.constant(np.random.RandomState(1).randn(
      *x.shape).astype(np.float32))

  @tf.function
  def step():
    with tf.GradientTape() as tape:
      tape.watch(x)
      y = fn(x)
      # (The cast of a constant is folded: no pass at run time.)
      loss = tf.reduce_sum(y * tf.cast(upstream, y.dtype))
    grads = tape.gradient(loss, [x] + list(weights))
    return tf.add_n([tf.cast(tf.reshape(g, [-1])[0], tf.float32)
                     for g in grads])

  return lambda: float(step())


def forward_only(fn, x):
  step = tf.function(lambda: tf.reshape(fn(x), [-1])[0])
  return lambda: float(step())


def pieces(rows, fused):
  """dict piece -> (dict variant -> blocking call, the one-pass call); the
  first variant of each is TensorFlow's ops (--nofused_kernels)."""
  rng = np.random.RandomState(0)
  wide = tf.constant(rng.randn(rows, INTERMEDIATE).astype(np.float32))
  narrow = tf.constant(rng.randn(rows, HIDDEN).astype(np.float32))
  residual = tf.constant(rng.randn(rows, HIDDEN).astype(np.float32))
  one_pass = {
      INTERMEDIATE: forward_only(lambda x: x * 2.0, wide),
      HIDDEN: forward_only(lambda x: x * 2.0, narrow)}

  bias = tf.Variable(rng.randn(INTERMEDIATE).astype(np.float32))

  def with_bias(activation):
    return lambda x: activation(tf.nn.bias_add(x, bias))

  gelu = {"composite (TensorFlow's ops)": forward_backward(
              with_bias(layers.gelu), wide, [bias]),
          "composite, XLA": forward_backward(
              tf.function(with_bias(layers.gelu), jit_compile=True), wide,
              [bias]),
          "sigmoid form": forward_backward(with_bias(gelu_sigmoid), wide,
                                           [bias]),
          "sigmoid form, XLA": forward_backward(
              tf.function(with_bias(gelu_sigmoid), jit_compile=True), wide,
              [bias]),
          "hand-written gradient": forward_backward(
              with_bias(gelu_hand_gradient), wide, [bias])}
  if fused:
    gelu["fused kernel, one pass each way"] = forward_backward(
        lambda x: fused_kernels.bias_gelu(x, bias), wide, [bias])
  # The erf form (gelu_exact: all-MiniLM-L6-v2's, HuggingFace's "gelu").
  gelu_exact = {"composite (TensorFlow's ops)": forward_backward(
      with_bias(layers.gelu_exact), wide, [bias])}
  if fused:
    gelu_exact["fused kernel, one pass each way"] = forward_backward(
        lambda x: fused_kernels.bias_gelu(x, bias, exact=True), wide, [bias])

  products = tf.cast(wide, tf.bfloat16)

  def cast_bias_gelu(activation):
    return lambda x: tf.cast(activation(tf.nn.bias_add(
        tf.cast(x, tf.float32), bias)), tf.bfloat16)

  bias_gelu = {"cast, bias, GELU, cast (TensorFlow's ops)": forward_backward(
      cast_bias_gelu(layers.gelu), products, [bias])}
  if fused:
    bias_gelu["fused bias + GELU, bfloat16 in and out"] = forward_backward(
        lambda x: fused_kernels.bias_gelu(x, bias), products, [bias])

  keras_norm = layers.layer_norm()
  keras_norm.build([None, HIDDEN])
  gamma, beta = keras_norm.gamma, keras_norm.beta
  moments_xla = tf.function(layer_norm_moments, jit_compile=True)
  layer_norm = {
      "Keras LayerNormalization (TensorFlow's ops)": forward_backward(
          lambda x: keras_norm(x + residual), narrow, [gamma, beta]),
      "moments": forward_backward(
          lambda x: layer_norm_moments(x + residual, gamma, beta), narrow,
          [gamma, beta]),
      "moments, XLA": forward_backward(
          lambda x: moments_xla(x + residual, gamma, beta), narrow,
          [gamma, beta])}
  if fused:
    layer_norm["fused kernel, one pass each way"] = forward_backward(
        lambda x: fused_kernels.add_layer_norm(
            x, residual, gamma, beta, layers.LAYER_NORM_EPSILON), narrow,
        [gamma, beta])

  seed = tf.constant([1, 2], tf.int64)
  dropout = {
      "stateless_dropout (TensorFlow's ops)": forward_backward(
          lambda x: tf.nn.experimental.stateless_dropout(x, RATE, seed),
          wide),
      "integer bits": forward_backward(lambda x: dropout_bits(x, seed),
                                       wide)}
  if fused:
    dropout["fused kernel, the same masks"] = forward_backward(
        lambda x: fused_kernels.dropout(x, RATE, seed), wide)

  # The attention probabilities between the two bfloat16 matmuls, at
  # sequence 128 and BERT-Base's 12 heads: [rows / 128, 12, 128, 128].
  heads, length = 12, 128
  scores = tf.cast(tf.constant(rng.randn(
      rows // length, heads, length, length).astype(np.float32) * 4.0),
                   tf.bfloat16)
  mask = tf.constant((rng.rand(rows // length, 1, length) > 0.2).astype(
      np.float32))
  scale = 1.0 / np.sqrt(64.0)

  def composite_softmax(x):
    s = tf.cast(x, tf.float32) * scale
    s += ((1.0 - mask) * layers.MASK_ADDER)[:, tf.newaxis]
    probs = tf.nn.experimental.stateless_dropout(tf.nn.softmax(s), RATE,
                                                 seed)
    return tf.cast(probs, tf.bfloat16)

  softmax = {"cast, scale, mask, softmax, dropout, cast (TensorFlow's ops)":
                 forward_backward(composite_softmax, scores)}
  if fused:
    softmax["fused kernel, bfloat16 in and out"] = forward_backward(
        lambda x: fused_kernels.attention_softmax(x, mask, scale, RATE, seed),
        scores)
  one_pass["scores"] = forward_only(lambda x: x * 2.0,
                                    tf.cast(scores, tf.float32))

  cast = {"float32 -> bfloat16 -> float32": forward_only(
      lambda x: tf.cast(tf.cast(x, tf.bfloat16), tf.float32), wide)}
  return {"gelu": (gelu, one_pass[INTERMEDIATE]),
          "gelu_exact": (gelu_exact, one_pass[INTERMEDIATE]),
          "bias_gelu": (bias_gelu, one_pass[INTERMEDIATE]),
          "layer_norm": (layer_norm, one_pass[HIDDEN]),
          "dropout": (dropout, one_pass[INTERMEDIATE]),
          "attention_softmax": (softmax, one_pass["scores"]),
          "cast": (cast, one_pass[INTERMEDIATE])}


def main(argv):
  del argv
  # Each variant is its own tf.function: their tracings are not retraces.
  tf.get_logger().setLevel("ERROR")
  fused = fused_kernels.available()
  print("TensorFlow %s, %s, %d repeats (medians)" % (
      tf.__version__, results.device_name(), FLAGS.repeats))
  rows_out = []
  for rows in [int(r) for r in FLAGS.rows.split(",")]:
    for piece, (variants, one_pass) in pieces(rows, fused).items():
      medians = timing.alternated_medians(
          dict(variants, one_pass=one_pass), FLAGS.repeats)
      unit = medians.pop("one_pass")
      composite = medians[next(iter(variants))]
      for variant, seconds in medians.items():
        row = [piece, rows, variant, round(1000 * seconds, 2),
               round(seconds / unit, 1), round(composite / seconds, 2)]
        rows_out.append(row)
        print("%-10s rows=%-5d %-32s %7.2f ms %6.1f passes  TF/variant "
              "%.2f" % tuple(row))
  tables = [results.table(
      "Elementwise pieces, forward and backward (cast: forward only)",
      COLUMNS, rows_out)]
  if FLAGS.record:
    results.record("profile_elementwise", tables,
                   results.flag_settings(FLAGS))


if __name__ == "__main__":
  app.run(main)
