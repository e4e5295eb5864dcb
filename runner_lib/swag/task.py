"""The SWAG task: four-choice model, loss, predict outputs and accuracy."""

import tensorflow as tf

import modeling
from runner_lib.core.training import losses
from runner_lib.core.training import metrics
from runner_lib.core.training import task
from runner_lib.swag import data
from runner_lib.swag import features


@task.register("swag")
class SwagTask(task.Task):
  """Fine-tuning on SWAG: which of four endings follows the context."""

  HEADS = (modeling.MultipleChoiceHead,)
  # Reads each choice's [CLS] position only.
  SKIP_PADDING = True

  def build_model(self, options=None):
    """BertMultipleChoice over NUM_CHOICES choices."""
    return modeling.BertMultipleChoice(self.config, data.NUM_CHOICES,
                                       options=options)

  def name_to_features(self, is_training):
    """The same records for training, evaluation and prediction."""
    del is_training
    return features.name_to_features(self.max_seq_length)

  def loss(self, model, batch, training):
    """Mean cross-entropy of the softmax over each example's choices."""
    logits = model(batch, training=training)
    return tf.reduce_mean(losses.cross_entropy(logits, batch["label_ids"]))

  def predict(self, model, batch):
    """Logits [B, NUM_CHOICES], the labels and each example's loss."""
    logits = tf.cast(model(batch, training=False), tf.float32)
    return {"logits": logits, "label_ids": batch["label_ids"],
            "per_example_loss": losses.cross_entropy(logits,
                                                     batch["label_ids"])}

  def eval_results(self, outputs):
    """eval_results.txt values from predict outputs over val.csv.

    Args:
      outputs: dict of numpy arrays, predict()'s keys.

    Returns:
      dict with eval_accuracy, and eval_loss and loss (both the mean
      example loss).
    """
    loss = float(outputs["per_example_loss"].mean())
    return {"eval_accuracy": metrics.accuracy(
        outputs["label_ids"], outputs["logits"].argmax(-1)),
            "eval_loss": loss, "loss": loss}
