"""The SQuAD task: span model, loss and per-feature logits."""

import tensorflow as tf

import modeling
from runner_lib.core.training import losses
from runner_lib.core.training import task
from runner_lib.squad import evaluation
from runner_lib.squad import features


def span_loss(logits, positions):
  """Mean cross-entropy of position logits.

  Args:
    logits: float [B, T].
    positions: int [B], the true positions.

  Returns:
    float32 scalar.
  """
  return tf.reduce_mean(losses.cross_entropy(logits, positions))


@task.register("squad")
class SquadTask(task.Task):
  """Fine-tuning on SQuAD v1.1 / v2.0: start and end of the answer span."""

  HEADS = (modeling.SquadHead,)

  def build_model(self, options=None):
    """BertSquadModel."""
    return modeling.BertSquadModel(self.config, options=options)

  def name_to_features(self, is_training):
    """Training records carry start/end positions; prediction records the
    unique ids their logits are matched back by."""
    return features.name_to_features(self.max_seq_length, is_training)

  def sequence_features(self, is_training):
    """Training batches are trimmed (the loss reads real positions only);
    prediction batches are not: the original's n-best search ranks every
    position's logits, padding's too, and a padded position among a
    window's n_best_size best can push out a valid span (3 of 810 answers
    changed with a random head), so prediction computes them as the
    original did."""
    if not is_training:
      return ()
    return super().sequence_features(is_training)

  def loss(self, model, batch, training):
    """The original: the mean of the start and end cross-entropies."""
    start_logits, end_logits = model(batch, training=training)
    return (span_loss(start_logits, batch["start_positions"]) +
            span_loss(end_logits, batch["end_positions"])) / 2.0

  def predict(self, model, batch):
    """Per-replica logits for a prediction batch, with the feature ids."""
    start_logits, end_logits = model(batch, training=False)
    return {"unique_ids": batch["unique_ids"],
            "start_logits": tf.cast(start_logits, tf.float32),
            "end_logits": tf.cast(end_logits, tf.float32)}

  def eval_results(self, outputs):
    """The official scores of the answers (evaluation.evaluate).

    Args:
      outputs: dict: "data", the SQuAD file's "data" list; "predictions",
        predictions.Predictions; "version_2_with_negative", bool.

    Returns:
      dict of scores, or None where the file has no answers (a test set).
    """
    return evaluation.evaluate(outputs["data"], outputs["predictions"],
                               outputs["version_2_with_negative"])
