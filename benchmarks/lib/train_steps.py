"""Fixed batches and training steps the training benchmarks share: ours and
Model Garden's BertPretrainerV2 with the same config, masked-LM +
next-sentence losses and AdamW with global-norm clipping; a sentence-pair
classification batch."""

import tempfile

import numpy as np
import tensorflow as tf
import tf_keras

from official.modeling import tf_utils
from official.nlp.modeling import layers as mg_layers
from official.nlp.modeling import models

from benchmarks.lib import model_garden
import modeling
from modeling import options as options_lib
from runner_lib.classifier import task as classifier
from runner_lib.core import training
from runner_lib.core.training import precision
from runner_lib.pretraining import task as pretraining
from tests import reference


# (config fields, batch, seq length, predictions per sequence).
SHAPES = {
    "small": (dict(vocab_size=30522, hidden_size=256, num_hidden_layers=4,
                   num_attention_heads=4, intermediate_size=1024,
                   type_vocab_size=2), 32, 128, 20),
    "base": (dict(vocab_size=30522, hidden_size=768, num_hidden_layers=12,
                  num_attention_heads=12, intermediate_size=3072,
                  type_vocab_size=2), 8, 128, 20),
}


def step_flops(config, batch_size, seq_length, predictions):
  """The model arithmetic of one pre-training step, forward and backward.

  Matmuls only (everything else is a few percent): per token and layer
  the Q, K, V and output projections (4 H^2 multiply-adds) and the
  feed-forward (2 H I), attention scores and contexts against T positions
  (2 T H); per predicted position the masked-LM transform (H^2) and
  logits (V H). A multiply-add is 2 FLOPs, and the backward pass costs
  twice the forward (gradients for inputs and for weights).

  Returns:
    float, FLOPs.
  """
  hidden, intermediate = config.hidden_size, config.intermediate_size
  per_token = config.num_hidden_layers * (
      4 * hidden ** 2 + 2 * hidden * intermediate + 2 * seq_length * hidden)
  per_prediction = hidden ** 2 + config.vocab_size * hidden
  forward = 2.0 * (batch_size * seq_length * per_token +
                   batch_size * predictions * per_prediction)
  return 3.0 * forward


def make_batch(config, batch_size, seq_length, predictions):
  rng = np.random.RandomState(0)
  ids = rng.randint(1000, config.vocab_size, [batch_size, seq_length])
  positions = np.sort(np.stack([rng.choice(np.arange(1, seq_length - 1),
                                           predictions, replace=False)
                                for _ in range(batch_size)]), axis=1)
  return {
      "input_ids": tf.constant(ids, tf.int32),
      "input_mask": tf.ones([batch_size, seq_length], tf.int32),
      "segment_ids": tf.constant((np.arange(seq_length) >= seq_length // 2)
                                 [None].repeat(batch_size, 0), tf.int32),
      "masked_lm_positions": tf.constant(positions, tf.int32),
      "masked_lm_ids": tf.constant(
          np.take_along_axis(ids, positions, 1), tf.int32),
      "masked_lm_weights": tf.ones([batch_size, predictions], tf.float32),
      "next_sentence_labels": tf.constant(rng.randint(0, 2, [batch_size, 1]),
                                          tf.int32),
  }


def _task_step(task, batch, jit_compile, matmul_dtype, kernels, schedule,
               skip_padding=False):
  """task's training step on batch as the runners build it on a CPU
  (_trainer's arguments); a function of no arguments."""
  trainer = _trainer(task, jit_compile, matmul_dtype, kernels, schedule,
                     skip_padding)
  return tf.function(lambda: trainer.train_step(batch))


def _trainer(task, jit_compile, matmul_dtype, kernels, schedule,
             skip_padding):
  """task's Trainer as the runners build it on a CPU:
  matmul_dtype as modeling.ComputeOptions' (the model built under the
  Keras policy that is global as it is called: a benchmark's mixed
  variants set it), the optimizer's update as a run's
  (precision.optimizer_update); without XLA every fused CPU kernel, or
  those named by kernels; schedule: (learning rate, train steps, warm-up
  steps); skip_padding: the encoder on real tokens only
  (Task.model_builder)."""
  if kernels is None:
    kernels = () if jit_compile else options_lib.KERNELS
  learning_rate, num_train_steps, num_warmup_steps = schedule
  options = modeling.ComputeOptions(
      matmul_dtype, kernels,
      keras_policy=tf_keras.mixed_precision.global_policy().name)
  trainer = training.Trainer(
      tf.distribute.get_strategy(), task.model_builder(
          skip_padding, options=options),
      task.loss, training.TrainingConfig(
          output_dir=tempfile.mkdtemp(), learning_rate=learning_rate,
          num_train_steps=num_train_steps, num_warmup_steps=num_warmup_steps,
          jit_compile=jit_compile, update=precision.optimizer_update(
              options, "float32" if matmul_dtype == tf.float32 else
              "bfloat16")))
  return trainer


def ours_step(config, batch, seq_length, predictions, jit_compile,
              matmul_dtype=tf.float32, kernels=None):
  """Our pre-training step (see _task_step)."""
  task = pretraining.PretrainingTask(config, seq_length, predictions)
  return _task_step(task, batch, jit_compile, matmul_dtype, kernels,
                    (1e-4, 100000, 1000))


def pretraining_batch_step(config, seq_length, predictions, skip_padding,
                           matmul_dtype=tf.float32):
  """Our pre-training step as run_pretraining.py builds it without XLA,
  the encoder on real tokens only (its --skip_padding) or not.

  Returns:
    function (batch: dict of Tensors, pretraining_features' parsed) ->
    loss Tensor, one update per call.
  """
  task = pretraining.PretrainingTask(config, seq_length, predictions)
  trainer = _trainer(task, False, matmul_dtype, None, (1e-4, 100000, 1000),
                     skip_padding)
  return tf.function(trainer.train_step)


def classifier_step(config, batch, jit_compile, matmul_dtype=tf.float32,
                    kernels=None, skip_padding=False):
  """Our fine-tuning step, a 2-class classifier on batch (from
  classifier_batch), as run_classifier.py builds it (see _task_step)."""
  task = classifier.ClassificationTask(config, batch["input_ids"].shape[1],
                                       ["0", "1"])
  return _task_step(task, batch, jit_compile, matmul_dtype, kernels,
                    (2e-5, 10000, 100), skip_padding)


def _model_garden_pretrainer(config):
  """Model Garden's BertPretrainerV2 with a next-sentence head."""
  return models.BertPretrainerV2(
      encoder_network=reference.model_garden_encoder(config),
      mlm_activation=tf_utils.get_activation(config.hidden_act),
      mlm_initializer=tf_keras.initializers.TruncatedNormal(stddev=0.02),
      classification_heads=[mg_layers.ClassificationHead(
          inner_dim=config.hidden_size, num_classes=2, activation="tanh",
          name="next_sentence")])


def model_garden_step(config, batch, jit_compile):
  model = _model_garden_pretrainer(config)
  schedule = tf_keras.optimizers.schedules.PolynomialDecay(1e-4, 100000, 0.0)
  return model_garden.train_step(
      model, batch, lambda outputs: _model_garden_loss(outputs, batch),
      schedule, jit_compile, extra_inputs=("masked_lm_positions",))


def _model_garden_loss(outputs, batch):
  """Masked LM + next sentence, our losses on Model Garden's outputs."""
  mlm, _ = pretraining.masked_lm_loss(outputs["mlm_logits"],
                                      batch["masked_lm_ids"],
                                      batch["masked_lm_weights"])
  nsp, _ = pretraining.next_sentence_loss(outputs["next_sentence"],
                                          batch["next_sentence_labels"])
  return mlm + nsp


def model_garden_pretraining_batch_step(config):
  """model_garden_step for a stream of batches (model_garden.batch_step),
  without XLA.

  Returns:
    function (batch) -> loss Tensor.
  """
  return model_garden.batch_step(
      _model_garden_pretrainer(config), _model_garden_loss,
      tf_keras.optimizers.schedules.PolynomialDecay(
          1e-4, 100000, 0.0), False, extra_inputs=("masked_lm_positions",))


def classifier_batch(batch_size, seq_length, min_length):
  """A fixed sentence-pair batch, lengths uniform in [min_length,
  seq_length], two labels.

  Returns:
    dict of int32 Tensors: input_ids, input_mask, segment_ids [B, T];
    label_ids [B].
  """
  rng = np.random.RandomState(0)
  lengths = rng.randint(min_length, seq_length + 1, [batch_size])
  mask = (np.arange(seq_length)[None] < lengths[:, None]).astype(np.int32)
  return {"input_ids": tf.constant(rng.randint(1000, 30000, mask.shape) *
                                   mask, tf.int32),
          "input_mask": tf.constant(mask),
          "segment_ids": tf.constant((np.arange(seq_length)[None] >=
                                      lengths[:, None] // 2) * mask,
                                     tf.int32),
          "label_ids": tf.constant(rng.randint(0, 2, [batch_size]),
                                   tf.int32)}
