"""The tf-models-official side of the training benchmarks: its AdamW with
the original's settings, and one training step of one of its models."""

import tensorflow as tf

from official.nlp import optimization as mg_optimization


def _optimizer(learning_rate):
  """AdamW as the original's (weight decay 0.01 off LayerNorm and biases,
  epsilon 1e-6, global norm clipped to 1)."""
  return mg_optimization.AdamWeightDecay(
      learning_rate=learning_rate, weight_decay_rate=0.01, epsilon=1e-6,
      exclude_from_weight_decay=["LayerNorm", "layer_norm", "bias"],
      global_clipnorm=1.0)


def _inputs(batch, extra_inputs):
  """The model's inputs from a batch in our names."""
  inputs = {"input_word_ids": batch["input_ids"],
            "input_mask": batch["input_mask"],
            "input_type_ids": batch["segment_ids"]}
  inputs.update({name: batch[name] for name in extra_inputs})
  return inputs


def train_step(model, batch, loss_fn, learning_rate, jit_compile,
               extra_inputs=()):
  """A tf.function running one step of `model` on a fixed batch.

  Args:
    model: a Model Garden Keras model taking input_word_ids, input_mask,
      input_type_ids (plus extra_inputs).
    batch: dict of Tensors in our names (input_ids, input_mask,
      segment_ids, ...).
    loss_fn: function (model outputs) -> scalar loss.
    learning_rate: float or a Keras schedule.
    jit_compile: bool, XLA.
    extra_inputs: names in batch passed to the model unchanged.

  Returns:
    function () -> loss Tensor, one AdamW update (_optimizer) per call.
  """
  optimizer = _optimizer(learning_rate)
  inputs = _inputs(batch, extra_inputs)

  @tf.function(jit_compile=jit_compile)
  def step():
    with tf.GradientTape() as tape:
      loss = loss_fn(model(inputs, training=True))
    variables = model.trainable_variables
    optimizer.apply_gradients(zip(tape.gradient(loss, variables), variables))
    return loss

  return step


def batch_step(model, loss_fn, learning_rate, jit_compile, extra_inputs=()):
  """train_step for a stream of batches of one shape.

  Args:
    loss_fn: function (model outputs, batch) -> scalar loss.
    Others: as train_step's.

  Returns:
    function (batch: dict of Tensors in our names) -> loss Tensor, one
    update per call, traced once per batch shape.
  """
  optimizer = _optimizer(learning_rate)

  @tf.function(jit_compile=jit_compile)
  def step(batch):
    with tf.GradientTape() as tape:
      loss = loss_fn(model(_inputs(batch, extra_inputs), training=True),
                     batch)
    variables = model.trainable_variables
    optimizer.apply_gradients(zip(tape.gradient(loss, variables), variables))
    return loss

  return step
