"""The pre-training task: masked LM + next sentence, and the paper's ablations.

Objectives:
- "mlm_nsp": the original (masked LM + next-sentence prediction).
- "mlm": masked LM only (the paper's "No NSP" ablation).
- "ltr": a left-to-right LM (the paper's "LTR & No NSP"): causal attention,
  every position predicts the next token. Its inputs are the records' texts
  with the masked positions put back to their original tokens.
"""

import tensorflow as tf

import modeling
from runner_lib.core.training import task
from runner_lib.pretraining import data

OBJECTIVES = ("mlm_nsp", "mlm", "ltr")


def masked_lm_loss(logits, label_ids, label_weights):
  """The original masked LM loss: weighted mean cross-entropy.

  Args:
    logits: float [B, P, V].
    label_ids: int [B, P].
    label_weights: float [B, P], 1 for real predictions, 0 for padding.

  Returns:
    (loss scalar, per-prediction loss [B, P]).
  """
  log_probs = tf.nn.log_softmax(tf.cast(logits, tf.float32), axis=-1)
  per_example = -tf.reduce_sum(
      log_probs * tf.one_hot(label_ids, tf.shape(logits)[-1]), axis=-1)
  weights = tf.cast(label_weights, tf.float32)
  # The original's 1e-5 keeps a batch without predictions at loss 0.
  loss = tf.reduce_sum(weights * per_example) / (tf.reduce_sum(weights) +
                                                 1e-5)
  return loss, per_example


def next_sentence_loss(logits, labels):
  """Mean cross-entropy of [B, 2] logits against [B] or [B, 1] labels."""
  labels = tf.reshape(labels, [-1])
  log_probs = tf.nn.log_softmax(tf.cast(logits, tf.float32), axis=-1)
  per_example = -tf.reduce_sum(log_probs * tf.one_hot(labels, 2), axis=-1)
  return tf.reduce_mean(per_example), per_example


def restore_masked_tokens(batch):
  """input_ids with masked positions set back to masked_lm_ids, [B, T]."""
  ids = batch["input_ids"]
  positions = batch["masked_lm_positions"]
  real = batch["masked_lm_weights"] > 0
  rows = tf.broadcast_to(tf.range(tf.shape(ids)[0])[:, None],
                         tf.shape(positions))
  indices = tf.stack([tf.boolean_mask(rows, real),
                      tf.boolean_mask(positions, real)], axis=1)
  return tf.tensor_scatter_nd_update(
      ids, indices, tf.boolean_mask(batch["masked_lm_ids"], real))


def ltr_targets(batch):
  """Inputs and next-token targets of the left-to-right LM.

  Returns:
    (model inputs dict, positions [B, T-1], label ids [B, T-1], weights).
  """
  ids = restore_masked_tokens(batch)
  length = tf.shape(ids)[1]
  positions = tf.broadcast_to(tf.range(length - 1)[None],
                              [tf.shape(ids)[0], length - 1])
  inputs = {"input_ids": ids, "input_mask": batch["input_mask"],
            "segment_ids": batch["segment_ids"],
            "masked_lm_positions": positions}
  return (inputs, ids[:, 1:],
          tf.cast(batch["input_mask"][:, 1:], tf.float32))


@task.register("pretraining")
class PretrainingTask(task.Task):
  """Model, losses and metrics of BERT pre-training.

  Its heads come with the pre-trained checkpoint (cls/predictions,
  cls/seq_relationship), so none is new: an init_checkpoint must hold them.

  No loss reads the encoder at a padding position (SKIP_PADDING): the
  masked LM gathers masked_lm_positions, real tokens (the records' unused
  prediction slots point at [CLS], weight 0); next-sentence prediction
  reads [CLS]; the left-to-right LM's predictions from padding positions
  have weight 0.
  """

  SKIP_PADDING = True

  def __init__(self, config, max_seq_length, max_predictions_per_seq,
               objective="mlm_nsp", dynamic_masking=False):
    """Args:
      config: modeling.BertConfig.
      max_seq_length: int, the records' sequence length.
      max_predictions_per_seq: int, the records' masked_lm_* length (with
        dynamic_masking, the batches').
      objective: one of OBJECTIVES.
      dynamic_masking: bool, the records are unmasked (masking.py masks
        them in the input pipeline, before batches reach the task).
    """
    if objective not in OBJECTIVES:
      raise ValueError("objective must be one of %s, got %r" %
                       (", ".join(OBJECTIVES), objective))
    super().__init__(config, max_seq_length)
    self.max_predictions_per_seq = max_predictions_per_seq
    self.objective = objective
    self.dynamic_masking = dynamic_masking

  def name_to_features(self, is_training):
    """The records' schema, for training and evaluation: the original's,
    or with dynamic_masking the unmasked records'."""
    del is_training  # the same records
    if self.dynamic_masking:
      return data.unmasked_features(self.max_seq_length)
    return data.pretraining_features(self.max_seq_length,
                                     self.max_predictions_per_seq)

  def sequence_features(self, is_training):
    """None: most instances fill max_seq_length, and the short ones (a
    document's last, short_seq_prob's) are spread over the batches, so
    a batch's longest is rarely short; the encoder skips their padding
    instead (SKIP_PADDING)."""
    del is_training
    return ()

  def build_model(self, options=None):
    """BertPretrainer; causal attention for "ltr", no NSP head but for
    "mlm_nsp"."""
    return modeling.BertPretrainer(
        self.config, causal_attention=self.objective == "ltr",
        next_sentence=self.objective == "mlm_nsp", options=options)

  def _outputs(self, model, batch, training):
    if self.objective == "ltr":
      inputs, label_ids, weights = ltr_targets(batch)
    else:
      inputs = batch
      label_ids, weights = batch["masked_lm_ids"], batch["masked_lm_weights"]
    return model(inputs, training=training), label_ids, weights

  def losses(self, model, batch, training):
    """The losses and what the metrics need of them.

    Returns:
      (total loss scalar, model outputs dict, masked LM label ids [B, P],
      their weights [B, P], per-prediction masked LM loss [B, P]).
    """
    outputs, label_ids, weights = self._outputs(model, batch, training)
    mlm, per_prediction = masked_lm_loss(outputs["masked_lm_logits"],
                                         label_ids, weights)
    total = mlm
    if self.objective == "mlm_nsp":
      nsp, _ = next_sentence_loss(outputs["next_sentence_logits"],
                                  batch["next_sentence_labels"])
      total += nsp
    return total, outputs, label_ids, weights, per_prediction

  def loss(self, model, batch, training):
    """The original total: masked LM loss (+ next-sentence loss)."""
    return self.losses(model, batch, training)[0]

  def metrics(self, model, batch):
    """Weighted sums as the original's tf.metrics accumulate them.

    Returns:
      dict name -> (sum, weight): masked_lm_accuracy and masked_lm_loss
      weighted by masked_lm_weights, next_sentence_accuracy and
      next_sentence_loss per example, loss per batch.
    """
    total, outputs, label_ids, weights, per_prediction = self.losses(
        model, batch, False)
    predictions = tf.argmax(outputs["masked_lm_logits"], -1,
                            output_type=tf.int32)
    correct = tf.cast(tf.equal(predictions, label_ids), tf.float32)
    result = {
        "loss": (total, tf.constant(1.0)),
        "masked_lm_accuracy": (tf.reduce_sum(correct * weights),
                               tf.reduce_sum(weights)),
        "masked_lm_loss": (tf.reduce_sum(per_prediction * weights),
                           tf.reduce_sum(weights)),
    }
    if self.objective == "mlm_nsp":
      labels = tf.reshape(batch["next_sentence_labels"], [-1])
      _, per_example = next_sentence_loss(outputs["next_sentence_logits"],
                                          labels)
      nsp_correct = tf.cast(tf.equal(tf.argmax(
          outputs["next_sentence_logits"], -1, output_type=tf.int32), labels),
                            tf.float32)
      count = tf.cast(tf.size(labels), tf.float32)
      result["next_sentence_accuracy"] = (tf.reduce_sum(nsp_correct), count)
      result["next_sentence_loss"] = (tf.reduce_sum(per_example), count)
    return result

  def eval_results(self, outputs):
    """eval_results.txt values: metrics()' means over the eval batches
    (Trainer.evaluate), as the original's Estimator reports them.

    Args:
      outputs: dict name -> float.

    Returns:
      dict name -> float, the same.
    """
    return dict(outputs)

