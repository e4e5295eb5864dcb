"""modeling/fused_kernels.py: the fused GELU kernel of bfloat16 training
on CPUs against the original's formula, where it is used and where not,
and what happens without it."""

import os
import tempfile

import numpy as np
import pytest
import tensorflow as tf

from modeling import fused_kernels
from modeling import layers
from runner_lib.classifier import task as classifier_task
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


def gelu_float64(x):
  """The original's formula and its derivative, in float64 NumPy."""
  c = np.sqrt(2.0 / np.pi)
  t = np.tanh(c * (x + 0.044715 * x ** 3))
  return 0.5 * x * (1.0 + t), 0.5 * (1.0 + t) + 0.5 * x * (1.0 - t * t) * c * (
      1.0 + 3.0 * 0.044715 * x * x)


def test_values_and_gradient_are_the_originals_gelu(kernels):
  del kernels
  x = np.concatenate([np.linspace(-30.0, 30.0, 60001),
                      np.random.RandomState(0).randn(10000) * 3.0])
  upstream = np.random.RandomState(1).randn(x.size)
  want, slope = gelu_float64(x)
  tensor = tf.constant(x, tf.float32)
  with tf.GradientTape(persistent=True) as tape:
    tape.watch(tensor)
    fused = fused_kernels.gelu(tensor)
    composite = layers.gelu(tensor)
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
  assert fused_kernels.gelu(tf.zeros([2, 3, 4])).shape == [2, 3, 4]
  np.testing.assert_array_equal(
      fused_kernels.gelu(tf.constant([-30.0, 0.0, 30.0])).numpy(),
      [0.0, 0.0, 30.0])


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
  plain = dense(tf.bfloat16, False)
  plain.set_weights(used.get_weights())
  assert "FusedGelu" not in graph_op_types(plain, x)
  np.testing.assert_allclose(used(x), plain(x), atol=1e-5)
  # float32 (the original's arithmetic) and other activations never.
  assert "FusedGelu" not in graph_op_types(dense(tf.float32, True), x)
  assert "FusedGelu" not in graph_op_types(
      dense(tf.bfloat16, True, layers.gelu_exact), x)


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
  precision.set_policy("float32")
  assert not layers._FUSED_KERNELS[0]  # pylint: disable=protected-access


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
    assert ("FusedGelu" in ops) == used
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
              if "fused GELU kernel is not used" in r.getMessage()]
  assert len(warnings) == 1
  assert "none.so is missing; `make setup` builds it" in (
      warnings[0].getMessage())


def test_a_failed_build_says_why_and_leaves_nothing(tmp_path, monkeypatch):
  source = tmp_path / "broken.cc"
  source.write_text("this is not C++\n")
  monkeypatch.setattr(fused_kernels, "SOURCE", str(source))
  library = tmp_path / "out" / "lib.so"
  library.parent.mkdir()
  problem = fused_kernels.build(str(library))
  if problem.startswith("cannot run g++"):
    pytest.skip(problem)
  assert problem.startswith("g++ failed:\n") and "broken.cc" in problem
  assert os.listdir(library.parent) == []
