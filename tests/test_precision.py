"""--precision=bfloat16: every matmul and its gradients in bfloat16, the rest
and the weights in float32, outputs close to float32's on real weights; its
warning on CPUs without bfloat16 units, from /proc/cpuinfo files as Linux
writes them."""

import os

from absl import logging
import numpy as np
import tensorflow as tf
import tf_keras

import modeling
from modeling import options as options_lib
from runner_lib.core.training import precision
from runner_lib.pretraining import task as pretraining
from tests import test_convert_checkpoint as convert_test
from tests import test_training
from tests.test_modeling import tiny_config
import tokenization

# The first lines of a real /proc/cpuinfo processor block (a Sapphire Rapids
# Xeon), flags cut to a few; and the same without the bfloat16 flags.
_XEON = """processor\t: 0
vendor_id\t: GenuineIntel
model name\t: Intel(R) Xeon(R) Platinum 8480+
flags\t\t: fpu vme sse sse2 avx2 avx512f avx512_bf16 amx_bf16 amx_tile
bugs\t\t: spectre_v1
"""
_OLD = _XEON.replace(" avx512_bf16 amx_bf16 amx_tile", "")
_ARM = "processor\t: 0\nFeatures\t: fp asimd evtstrm bf16\n"


def _write(tmp_path, text):
  path = tmp_path / "cpuinfo"
  path.write_text(text)
  return str(path)


def test_cpu_flags_read_the_flags_line(tmp_path):
  assert precision.cpu_flags(_write(tmp_path, _XEON)) == {
      "fpu", "vme", "sse", "sse2", "avx2", "avx512f", "avx512_bf16",
      "amx_bf16", "amx_tile"}
  assert "bf16" in precision.cpu_flags(_write(tmp_path, _ARM))
  assert precision.cpu_flags(str(tmp_path / "absent")) is None


def test_warns_only_without_bf16_units(tmp_path, monkeypatch):
  warnings = []
  monkeypatch.setattr(logging, "warning",
                      lambda msg, *args: warnings.append(msg % args))
  assert not tf.config.list_physical_devices("GPU")
  assert not precision.warn_without_bf16_units(_write(tmp_path, _XEON))
  assert not precision.warn_without_bf16_units(_write(tmp_path, _ARM))
  assert warnings == []
  assert precision.warn_without_bf16_units(_write(tmp_path, _OLD))
  assert len(warnings) == 1
  assert "avx512_bf16 nor amx_bf16" in warnings[0]
  assert "about --precision=float32's speed or slower" in warnings[0]
  # Unreadable flags (not Linux): nothing is claimed.
  assert not precision.warn_without_bf16_units(str(tmp_path / "absent"))
  assert len(warnings) == 1


_MATMULS = ("MatMul", "BatchMatMulV2", "BatchMatMulV3", "Einsum")


def _matmul_dtypes(graph):
  """The T attribute of every matmul op in graph and in the functions it
  calls (gradients are inlined; Keras layers may be functions), but the
  segment embeddings' one-hot product: a lookup in a [2, H] table, exact in
  float32, which bfloat16 would round (for no speed)."""
  found = []
  graph_def = graph.as_graph_def()
  nodes = list(graph_def.node) + [
      node for function in graph_def.library.function
      for node in function.node_def]
  for node in nodes:
    if node.op in _MATMULS and "embeddings/" not in node.name:
      found.append(tf.as_dtype(node.attr["T"].type).name)
  return found


def test_bfloat16_runs_every_matmul_forward_and_backward_there():
  config = tiny_config()
  task = pretraining.PretrainingTask(config, 8, 2)
  model = task.build_model(modeling.ComputeOptions(tf.bfloat16))
  batch = test_training.pretraining_batch(config)

  @tf.function
  def loss_and_grads():
    with tf.GradientTape() as tape:
      loss = task.loss(model, batch, True)
    return loss, tape.gradient(loss, model.trainable_variables)

  graph = loss_and_grads.get_concrete_function().graph
  dtypes = _matmul_dtypes(graph)
  # Per layer 6 dense + 2 attention products, 3 ops each with the
  # gradients; the heads' too.
  assert len(dtypes) >= 3 * 8 * config.num_hidden_layers, dtypes
  assert set(dtypes) == {"bfloat16"}, dtypes
  # Weights and what the model returns stay float32.
  assert {v.dtype for v in model.variables if v.dtype.is_floating} == {
      tf.float32}
  loss, grads = loss_and_grads()
  assert loss.dtype == tf.float32 and np.isfinite(loss.numpy())
  assert all(g is None or g.dtype == tf.float32 for g in grads)


def test_float32_runs_no_matmul_in_bfloat16():
  config = tiny_config()
  model = modeling.BertModel(config)
  graph = tf.function(lambda ids: model({"input_ids": ids})).get_concrete_function(
      tf.TensorSpec([2, 8], tf.int32)).graph
  dtypes = _matmul_dtypes(graph)
  assert dtypes and set(dtypes) == {"float32"}


def test_bfloat16_encodes_real_sentences_as_float32_does(minilm_google_dir):
  google_dir = minilm_google_dir
  tokenizer = tokenization.FullTokenizer(
      os.path.join(google_dir, "vocab.txt"), do_lower_case=True)
  ids = [tokenizer.convert_tokens_to_ids(
      ["[CLS]"] + tokenizer.tokenize(text) + ["[SEP]"])
         for text in convert_test.MINILM_SENTENCES]
  length = max(len(i) for i in ids)
  batch = {"input_ids": np.array([i + [0] * (length - len(i)) for i in ids],
                                 np.int32),
           "input_mask": np.array([[1] * len(i) + [0] * (length - len(i))
                                   for i in ids], np.int32)}
  real = batch["input_mask"].astype(bool)
  _, model = convert_test.load_google(google_dir)
  want = model(batch, training=False)
  _, model = convert_test.load_google(
      google_dir, lambda config: modeling.BertModel(
          config, options=modeling.ComputeOptions(tf.bfloat16)))
  got = model(batch, training=False)
  for layer, (actual, expected) in enumerate(zip(
      got["all_encoder_layers"], want["all_encoder_layers"])):
    actual, expected = actual.numpy()[real], expected.numpy()[real]
    assert actual.dtype == np.float32
    relative = (np.linalg.norm(actual - expected, axis=-1) /
                np.linalg.norm(expected, axis=-1))
    rms, bound = np.sqrt(np.mean(relative**2)), bfloat16_bound(layer + 1)
    assert rms < bound, (layer, rms, bound)
    assert relative.max() < MAX_OVER_RMS * bound, (layer, relative.max(),
                                                   bound)
  # The pooler: one more matmul (and a tanh, whose slope is at most 1).
  pooled, expected = got["pooled_output"].numpy(), want["pooled_output"].numpy()
  relative = (np.linalg.norm(pooled - expected, axis=-1) /
              np.linalg.norm(expected, axis=-1))
  assert relative.max() < MAX_OVER_RMS * bfloat16_bound(
      len(got["all_encoder_layers"]) + 1), relative


# Where the bfloat16 bounds come from. bfloat16 keeps 8 significant bits
# (7 stored): rounding to nearest moves a value by at most half a step,
# 2^-8 of itself (u), and by u / sqrt(3) on average (root mean square)
# over values whose error is spread evenly over [-u, u].
BFLOAT16_U = 2.0**-8
# In one encoder layer a hidden state passes through six matmuls one after
# another (query/key/value, scores, context, attention output, intermediate,
# output), each rounding its two operands and its result: 18 roundings.
# (A matmul that rounds its partial sums too, as TensorFlow's Eigen kernels
# do on CPUs without bfloat16 units, adds a few more; the measured errors
# below stay at half the bound.)
ROUNDINGS_PER_LAYER = 18
# Errors of independent roundings add in quadrature; over layers they add
# at most linearly (the residual path carries each layer's error on, and a
# layer's own adds to it, at worst in the same direction).
MAX_OVER_RMS = 3  # a token's error against the mean over tokens


def bfloat16_bound(layers):
  """The root mean square, over tokens, of the relative error that
  bfloat16 matmuls leave in a hidden state after `layers` encoder layers
  (see above): layers * sqrt(R / 3) * u. For 1 layer 0.96%; measured on
  all-MiniLM-L6-v2's sentences 0.48% on an AVX2-only CPU (Eigen kernels),
  less on one with bfloat16 units; after 6, 1.5% against 5.7%.
  """
  return layers * np.sqrt(ROUNDINGS_PER_LAYER / 3.0) * BFLOAT16_U


def test_training_options_on_a_cpu():
  assert not tf.config.list_physical_devices("GPU")
  kernels = frozenset(options_lib.KERNELS)
  # bfloat16 matmuls, Keras' float32 policy: the rest stays float32.
  assert precision.training_options("bfloat16") == modeling.ComputeOptions(
      tf.bfloat16, kernels)
  assert precision.training_options("bfloat16", fused_kernels=False) == (
      modeling.ComputeOptions(tf.bfloat16))
  assert precision.training_options("float16") == modeling.ComputeOptions(
      keras_policy="mixed_float16")
  assert precision.training_options("float32") == modeling.ComputeOptions(
      tf.float32, kernels)
  # XLA cannot compile a custom op.
  assert precision.training_options("float32", jit_compile=True) == (
      modeling.ComputeOptions())
  # Nothing global is set: the policy is the model builder's, in a scope.
  assert tf_keras.mixed_precision.global_policy().name == "float32"


def test_a_mixed_policy_is_the_models_not_the_processes():
  config = modeling.BertConfig(
      vocab_size=30, hidden_size=8, num_hidden_layers=1,
      num_attention_heads=2, intermediate_size=16,
      max_position_embeddings=16)
  task = pretraining.PretrainingTask(config, 16, 4)
  model = task.model_builder(False, options=precision.training_options(
      "float16"))()
  assert tf_keras.mixed_precision.global_policy().name == "float32"
  assert model.bert.encoder_layers[0].compute_dtype == "float16"
  assert model.bert.encoder_layers[0].dtype == "float32"  # the weights
  assert not precision.computes_in_float32(model.bert.options)


def test_the_optimizer_update_of_a_run():
  kernels = modeling.ComputeOptions(kernels=options_lib.KERNELS)
  plain = modeling.ComputeOptions()
  assert precision.optimizer_update(plain, "float32") == "exact"
  assert precision.optimizer_update(plain, "bfloat16") == "fused"
  assert precision.optimizer_update(plain, "bfloat16",
                                    fused_kernels=False) == "exact"
  assert precision.optimizer_update(kernels, "float32") == (
      "kernel" if kernels.kernels else "exact")
