"""The training library: losses, metrics, optimizer, schedule, checkpoints."""

import numpy as np
import pytest
import tensorflow as tf
import tf_keras

import modeling
from runner_lib.core import training
from runner_lib.core.training import optimization
from runner_lib.pretraining import task as pretraining
from tests import reference
from tests.test_modeling import tiny_config


def np_log_softmax(x):
  x = x - x.max(-1, keepdims=True)
  return x - np.log(np.exp(x).sum(-1, keepdims=True))


def test_masked_lm_and_next_sentence_losses_match_numpy():
  rng = np.random.RandomState(0)
  logits = rng.randn(3, 4, 11).astype(np.float32)
  ids = rng.randint(0, 11, [3, 4])
  weights = np.array([[1, 1, 0, 0], [1, 1, 1, 1], [1, 0, 0, 0]], np.float32)
  loss, per_example = pretraining.masked_lm_loss(logits, ids, weights)
  ce = -np.take_along_axis(np_log_softmax(logits.astype(np.float64)),
                           ids[..., None], -1)[..., 0]
  np.testing.assert_allclose(per_example, ce, rtol=1e-5)
  np.testing.assert_allclose(loss, (ce * weights).sum() / (weights.sum() +
                                                           1e-5), rtol=1e-5)
  nsp_logits = rng.randn(5, 2).astype(np.float32)
  labels = np.array([[0], [1], [1], [0], [1]])
  loss, _ = pretraining.next_sentence_loss(nsp_logits, labels)
  want = -np.take_along_axis(np_log_softmax(nsp_logits), labels, -1).mean()
  np.testing.assert_allclose(loss, want, rtol=1e-5)
  # A batch with no real prediction costs 0, not NaN (the 1e-5).
  loss, _ = pretraining.masked_lm_loss(logits, ids, np.zeros_like(weights))
  assert float(loss) == 0.0


class FixedLogits(tf_keras.Model):
  """A stand-in model returning given logits."""

  def __init__(self, mlm, nsp):
    super().__init__()
    self.mlm, self.nsp = tf.constant(mlm), tf.constant(nsp)

  def call(self, inputs, training=None):
    return {"masked_lm_logits": self.mlm, "next_sentence_logits": self.nsp}


def test_metrics_on_a_constructed_batch():
  # Two sequences, three prediction slots; argmax of each logit row marked.
  mlm = np.full([2, 3, 4], -5.0, np.float32)
  for (b, p), token in {(0, 0): 1, (0, 1): 2, (0, 2): 3, (1, 0): 0,
                        (1, 1): 1, (1, 2): 2}.items():
    mlm[b, p, token] = 5.0
  nsp = np.array([[3.0, -3.0], [-1.0, 1.0]], np.float32)
  batch = {"masked_lm_ids": np.array([[1, 0, 3], [0, 3, 0]], np.int32),
           "masked_lm_weights": np.array([[1, 1, 1], [1, 1, 0]], np.float32),
           "next_sentence_labels": np.array([[0], [0]], np.int32)}
  task = pretraining.PretrainingTask(tiny_config(), 8, 3)
  metrics = {k: (float(v), float(w)) for k, (v, w) in
             task.metrics(FixedLogits(mlm, nsp), batch).items()}
  # Real predictions: (0,0) right, (0,1) wrong, (0,2) right, (1,0) right,
  # (1,1) wrong; (1,2) is padding and does not count: 3 of 5.
  assert metrics["masked_lm_accuracy"] == (3.0, 5.0)
  assert metrics["next_sentence_accuracy"] == (1.0, 2.0)
  log_p = np_log_softmax(mlm.astype(np.float64))
  ce = [-log_p[0, 0, 1], -log_p[0, 1, 0], -log_p[0, 2, 3], -log_p[1, 0, 0],
        -log_p[1, 1, 3]]
  np.testing.assert_allclose(metrics["masked_lm_loss"][0], sum(ce), rtol=1e-5)
  nsp_ce = -np_log_softmax(nsp.astype(np.float64))[:, 0]
  np.testing.assert_allclose(metrics["next_sentence_loss"][0], nsp_ce.sum(),
                             rtol=1e-5)
  np.testing.assert_allclose(metrics["loss"][0],
                             sum(ce) / (5 + 1e-5) + nsp_ce.mean(), rtol=1e-5)


@pytest.mark.parametrize("step,want", [(0, 0.0), (5, 0.5e-3), (9, 0.9e-3),
                                       (10, 1e-3 * 0.9), (55, 1e-3 * 0.45),
                                       (100, 0.0), (150, 0.0)])
def test_learning_rate_schedule(step, want):
  got = optimization.learning_rate_at(tf.constant(step), 1e-3, 100, 10)
  np.testing.assert_allclose(float(got), want, rtol=1e-6, atol=1e-12)


def test_schedule_without_warmup():
  got = optimization.learning_rate_at(tf.constant(25), 2e-5, 100, 0)
  np.testing.assert_allclose(float(got), 2e-5 * 0.75, rtol=1e-6)


@pytest.mark.parametrize("examples, batch, epochs, warmup, want", [
    # MRPC at the README's recipe: 3668 / 32 * 3 = 343.9 -> 343 steps.
    (3668, 32, 3.0, 0.1, (343, 34)),
    (100, 32, 1.0, 0.1, (3, 0)),
    # Fewer examples than a batch still trains a step.
    (10, 32, 1.0, 0.5, (1, 0)),
])
def test_finetuning_steps(examples, batch, epochs, warmup, want):
  assert optimization.finetuning_steps(examples, batch, epochs,
                                       warmup) == want


def numpy_adam_step(w, m, v, grad, lr, t, decay, corrected):
  """One update in float64: the original's AdamWeightDecay, or (corrected)
  PyTorch's documented AdamW, weight decay first, then the bias-corrected
  step with eps added to sqrt(v) / sqrt(1 - b2^t). Returns (w, m, v)."""
  m = 0.9 * m + 0.1 * grad
  v = 0.999 * v + 0.001 * grad ** 2
  if not corrected:
    update = m / (np.sqrt(v) + 1e-6)  # no bias correction
    return w - lr * (update + (0.01 * w if decay else 0.0)), m, v
  if decay:
    w = w * (1.0 - lr * 0.01)
  denominator = np.sqrt(v) / np.sqrt(1.0 - 0.999 ** t) + 1e-6
  return w - lr / (1.0 - 0.9 ** t) * m / denominator, m, v


@pytest.mark.parametrize("name,corrected,fused", [
    ("adamw", False, False), ("adamw_corrected", True, False),
    # --precision=bfloat16's fused kernel: the same update, rounded otherwise.
    ("adamw", False, True)])
def test_optimizer_matches_numpy(name, corrected, fused):
  rng = np.random.RandomState(0)
  w0 = {"bert/x/kernel": rng.randn(3, 2).astype(np.float32),
        "bert/x/bias": rng.randn(2).astype(np.float32),
        "bert/x/LayerNorm/gamma": rng.randn(2).astype(np.float32)}
  variables = {k: tf.Variable(v) for k, v in w0.items()}
  optimizer = optimization.OPTIMIZERS[name](
      variables, update="fused" if fused else "exact")
  np_w = {k: v.astype(np.float64) for k, v in w0.items()}
  m = {k: 0.0 for k in w0}
  v = {k: 0.0 for k in w0}
  for step in range(5):
    grads = {k: rng.randn(*w0[k].shape) for k in w0}
    lr = 0.05 * (step + 1)
    optimizer.apply_gradients([tf.constant(grads[k], tf.float32)
                               for k in optimizer.names], tf.constant(lr),
                              tf.constant(step))
    for k in w0:
      # LayerNorm and bias get no decay.
      np_w[k], m[k], v[k] = numpy_adam_step(
          np_w[k], m[k], v[k], grads[k], lr, step + 1,
          k == "bert/x/kernel", corrected)
    for k in w0:
      # The fused kernel takes 1 - b2 in float32 from b2 = 0.999 (float32):
      # 0.000999987, 1.3e-5 off 0.001, so each update (here up to 0.5)
      # moves by up to 6.4e-6 of itself (float32's own rounding: 6e-8).
      np.testing.assert_allclose(variables[k].numpy(), np_w[k], rtol=1e-5,
                                 atol=3e-5 if fused else 1e-6,
                                 err_msg=(k, step))
  assert sorted(optimizer.slot_variables()) == sorted(
      [k + "/adam_m" for k in w0] + [k + "/adam_v" for k in w0])


def test_first_update_is_larger_than_bias_corrected_adams():
  # With no bias correction the first step moves a weight by about
  # lr * 0.1 / sqrt(0.001) = 3.16 lr, not lr: the original's behaviour.
  # With the correction (adamw_corrected), by lr.
  for name, moved in (("adamw", 3.16227766), ("adamw_corrected", 1.0)):
    variable = tf.Variable([1.0])
    optimizer = optimization.OPTIMIZERS[name]({"bert/b/bias": variable})
    optimizer.apply_gradients([tf.constant([2.0])], tf.constant(0.01),
                              tf.constant(0))
    np.testing.assert_allclose(variable.numpy(), [1.0 - 0.01 * moved],
                               rtol=1e-4, err_msg=name)


def test_trainer_init_from_google_checkpoint_keeps_its_weights(tmp_path):
  config = tiny_config()
  weights = reference.random_weights(config, seed=4)
  prefix = reference.write_tf1_checkpoint(str(tmp_path / "g" /
                                              "bert_model.ckpt"), weights)
  task = pretraining.PretrainingTask(config, 16, 4)
  trainer = training.Trainer(
      tf.distribute.get_strategy(), task.build_model, task.loss,
      training.TrainingConfig(
          output_dir=str(tmp_path / "out"), learning_rate=1e-4,
          num_train_steps=10, num_warmup_steps=1))
  assert trainer.initialize(prefix) == 0
  for name, variable in modeling.variable_map(trainer.model).items():
    np.testing.assert_array_equal(variable.numpy(), weights[name])
  # Saved in the original layout: weights, adam slots, global_step.
  saved = dict(tf.train.list_variables(trainer.checkpoint.save(0)))
  assert saved["bert/encoder/layer_1/output/dense/kernel/adam_m"] == [37, 32]
  assert saved["cls/predictions/output_bias/adam_v"] == [97]
  assert saved["global_step"] == []


def test_lamb_matches_model_gardens_lamb():
  from official.modeling.optimization import lamb as mg_lamb
  rng = np.random.RandomState(3)
  w0 = {"bert/x/kernel": rng.randn(4, 3).astype(np.float32),
        "bert/x/bias": rng.randn(3).astype(np.float32)}
  ours = {k: tf.Variable(v) for k, v in w0.items()}
  theirs = {k: tf.Variable(v, name=k) for k, v in w0.items()}
  optimizer = optimization.Lamb(ours)
  reference_optimizer = mg_lamb.LAMB(
      learning_rate=0.01, weight_decay_rate=0.01, epsilon=1e-6,
      exclude_from_weight_decay=["LayerNorm", "layer_norm", "bias"])
  names = optimizer.names
  for step in range(3):
    grads = [rng.randn(*w0[k].shape).astype(np.float32) for k in names]
    optimizer.apply_gradients([tf.constant(g) for g in grads],
                              tf.constant(0.01), tf.constant(step))
    reference_optimizer.apply_gradients(
        [(tf.constant(g), theirs[k]) for g, k in zip(grads, names)])
  for k in names:
    np.testing.assert_allclose(ours[k].numpy(), theirs[k].numpy(), rtol=1e-5,
                               atol=1e-6, err_msg=k)
  assert "bert/x/kernel/lamb_m" in optimizer.slot_variables()


@pytest.mark.slow
def test_loss_scaling_skips_overflowing_steps(tmp_path):
  config = tiny_config()
  task = pretraining.PretrainingTask(config, 8, 2)
  overflow = tf.Variable(True)

  def loss_fn(model, batch, training):
    loss = task.loss(model, batch, training)
    # 1e35 * 2^15 overflows float32 in the backward pass.
    return tf.where(overflow, loss * 1e35, loss)

  trainer = training.Trainer(
      tf.distribute.get_strategy(), task.build_model, loss_fn,
      training.TrainingConfig(
          output_dir=str(tmp_path), learning_rate=1e-3, num_train_steps=10,
          num_warmup_steps=0, loss_scaling=True))
  batch = {"input_ids": tf.constant([[2, 5, 6, 3, 7, 3, 0, 0]]),
           "input_mask": tf.constant([[1, 1, 1, 1, 1, 1, 0, 0]]),
           "segment_ids": tf.constant([[0, 0, 0, 0, 1, 1, 0, 0]]),
           "masked_lm_positions": tf.constant([[1, 4]]),
           "masked_lm_ids": tf.constant([[5, 7]]),
           "masked_lm_weights": tf.constant([[1.0, 1.0]]),
           "next_sentence_labels": tf.constant([[0]])}
  step = tf.function(lambda: trainer.train_step(batch))
  before = trainer.trainable[0].numpy()
  step()
  assert trainer.step == 0 and float(trainer.loss_scale) == 2.0**14
  np.testing.assert_array_equal(trainer.trainable[0].numpy(), before)
  overflow.assign(False)
  step()
  assert trainer.step == 1 and float(trainer.loss_scale) == 2.0**14
  assert np.abs(trainer.trainable[0].numpy() - before).max() > 0


def test_clipping_counts_repeated_embedding_rows_one_by_one():
  # The original's tf.clip_by_global_norm takes an IndexedSlices' norm over
  # its rows, one per position, before the optimizer sums them by id. Two
  # rows of the same id with |a|^2 = 0.3 and a dense 0.3: the rows' norm^2
  # is 0.9 (no clipping); summing first would give 1.5 (clipped).
  a = np.array([0.3, -0.4, 0.2, 0.1, 0.0], np.float32)
  a *= np.sqrt(0.3 / np.sum(a.astype(np.float64) ** 2))
  dense = np.full([3], np.sqrt(0.1), np.float32)
  rows = tf.IndexedSlices(tf.constant(np.stack([a, a])),
                          tf.constant([2, 2]), tf.constant([4, 5]))
  word, other = training.clip_gradients([rows, tf.constant(dense)])
  want = np.zeros([4, 5], np.float32)
  want[2] = 2 * a
  np.testing.assert_allclose(word.numpy(), want, rtol=1e-6)
  np.testing.assert_allclose(other.numpy(), dense, rtol=1e-6)

  # Above the clip norm: every row and tensor scaled by 1 / norm.
  rows = tf.IndexedSlices(tf.constant(np.stack([a, 3 * a, a])),
                          tf.constant([0, 3, 0]), tf.constant([4, 5]))
  norm = np.sqrt(11 * 0.3 + 0.3)
  word, other, none = training.clip_gradients([rows, tf.constant(dense),
                                               None])
  want = np.zeros([4, 5], np.float64)
  want[0], want[3] = 2 * a / norm, 3 * a / norm
  np.testing.assert_allclose(word.numpy(), want, rtol=1e-5)
  np.testing.assert_allclose(other.numpy(), dense / norm, rtol=1e-5)
  assert none is None


@pytest.mark.parametrize("norm_scale", [0.5, 7.0, np.inf])
def test_clipping_left_to_the_update_gives_clip_by_global_norms_numbers(
    norm_scale):
  # clip_gradients(leave_scale=True) returns the dense gradients unscaled
  # with the scale the optimizer multiplies them by: that product must be
  # tf.clip_by_global_norm's own, bit for bit (below and above the clip
  # norm, and NaN everywhere for an infinite gradient); the IndexedSlices
  # come scaled and summed as before, with no scale left.
  rng = np.random.RandomState(3)
  dense = [rng.randn(*shape).astype(np.float32) for shape in
           [(5, 7), (7,), (33,)]]
  total = np.sqrt(sum(np.sum(d.astype(np.float64) ** 2) for d in dense))
  dense = [d * np.float32(norm_scale / total) for d in dense]
  rows = tf.IndexedSlices(
      tf.constant(0.01 * rng.randn(3, 4).astype(np.float32)),
      tf.constant([1, 0, 1]), tf.constant([6, 4]))
  grads = [rows, tf.constant(dense[0]), None, tf.constant(dense[1]),
           tf.constant(dense[2])]
  want, _ = tf.clip_by_global_norm(grads, training.CLIP_NORM)
  got, scales = training.clip_gradients(grads, leave_scale=True)
  assert got[2] is None and scales[0] is None and scales[2] is None
  np.testing.assert_array_equal(got[0].numpy(),
                                tf.convert_to_tensor(want[0]).numpy())
  for i in (1, 3, 4):
    product = (got[i] * scales[i]).numpy()
    if np.isfinite(norm_scale):
      np.testing.assert_array_equal(product.view(np.int32),
                                    want[i].numpy().view(np.int32))
    else:
      assert np.isnan(product).all() and np.isnan(want[i].numpy()).all()
  assert (float(scales[1]) == 1.0) == (norm_scale < training.CLIP_NORM)


@pytest.mark.parametrize("one_hot", [False, True])
def test_embedding_gradients_have_the_originals_form(one_hot):
  # The original: words by tf.gather (an IndexedSlices gradient, a row per
  # position) unless use_one_hot_embeddings; segments by a one-hot matmul
  # and positions by a slice (dense gradients).
  config = tiny_config()
  model = modeling.BertModel(config, use_one_hot_embeddings=one_hot)
  ids = tf.constant([[5, 6, 5, 0], [7, 5, 0, 0]])
  with tf.GradientTape() as tape:
    loss = tf.reduce_sum(model({"input_ids": ids,
                                "input_mask": tf.cast(ids > 0, tf.int32),
                                "segment_ids": tf.constant([[0, 0, 1, 0],
                                                            [0, 1, 0, 0]])
                                })["pooled_output"])
  embeddings = model.embeddings
  word, segment, position = tape.gradient(loss, [
      embeddings.word_embeddings, embeddings.token_type_embeddings,
      embeddings.position_embeddings])
  if one_hot:
    assert isinstance(word, tf.Tensor)
  else:
    assert isinstance(word, tf.IndexedSlices)
    np.testing.assert_array_equal(word.indices, [5, 6, 5, 0, 7, 5, 0, 0])
  assert isinstance(segment, tf.Tensor)
  assert isinstance(position, tf.Tensor)


def pretraining_batch(config):
  """A fixed pre-training batch of 4 sequences of 8 ids, 2 predictions
  each."""
  rng = np.random.RandomState(5)
  ids = rng.randint(1, config.vocab_size, [4, 8])
  return {"input_ids": tf.constant(ids, tf.int32),
          "input_mask": tf.ones([4, 8], tf.int32),
          "segment_ids": tf.zeros([4, 8], tf.int32),
          "masked_lm_positions": tf.constant([[1, 4]] * 4),
          "masked_lm_ids": tf.constant(ids[:, [1, 4]], tf.int32),
          "masked_lm_weights": tf.ones([4, 2]),
          "next_sentence_labels": tf.constant([[0], [1], [1], [0]])}


def test_accumulated_micro_batches_equal_one_batch(tmp_path):
  config = tiny_config(hidden_dropout_prob=0.0,
                       attention_probs_dropout_prob=0.0)
  task = pretraining.PretrainingTask(config, 8, 2)
  batch = pretraining_batch(config)
  # Each micro-batch's mean loss, averaged: the whole batch's mean only if
  # every sequence has as many predictions, as here.
  weights = []
  for accumulation in (1, 2):
    tf_keras.utils.set_random_seed(3)
    trainer = training.Trainer(
        tf.distribute.get_strategy(), task.build_model, task.loss,
        training.TrainingConfig(
            output_dir=str(tmp_path / str(accumulation)), learning_rate=1e-2,
            num_train_steps=10, num_warmup_steps=0,
            gradient_accumulation_steps=accumulation))
    step = tf.function(lambda: trainer.train_step(batch))
    for _ in range(3):
      step()
    weights.append([v.numpy() for v in trainer.trainable])
  # Adam's m / sqrt(v) magnifies rounding where a gradient is tiny.
  for got, want in zip(*weights):
    np.testing.assert_allclose(got, want, atol=1e-5)
