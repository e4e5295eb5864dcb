"""The NER tasks: fine-tuned BERT (ner) and the paper's feature-based
tagger on a frozen BERT (ner_features); loss and predictions over the
labelled word-pieces."""

import tensorflow as tf

import modeling
from runner_lib.core.inputs import input_pipeline
from runner_lib.core.training import losses
from runner_lib.core.training import task
from runner_lib.ner import features


@task.register("ner")
class NerTask(task.Task):
  """Fine-tuning on token tagging: a tag at each word's first piece."""

  HEADS = (modeling.TokenClassifierHead,)
  # The loss and the tags read word-piece positions only.
  SKIP_PADDING = True

  def __init__(self, config, max_seq_length, label_list):
    """Args:
      config: modeling.BertConfig.
      max_seq_length: int, the records' sequence length.
      label_list: list of str, the tags in the head's order.
    """
    super().__init__(config, max_seq_length)
    self.label_list = list(label_list)

  def build_model(self, options=None):
    """BertTokenClassifier with one output per tag."""
    return modeling.BertTokenClassifier(self.config, len(self.label_list),
                                        options=options)

  def name_to_features(self, is_training):
    """The same records for training, evaluation and prediction."""
    del is_training
    return features.name_to_features(self.max_seq_length)

  def _losses(self, logits, batch):
    """(sum of the labelled pieces' cross-entropies [B], their count
    [B]), float32."""
    mask = tf.cast(batch["label_mask"], tf.float32)
    shape = tf.shape(logits)
    per_piece = tf.reshape(losses.cross_entropy(
        tf.reshape(logits, [-1, shape[-1]]),
        tf.reshape(batch["label_ids"], [-1])), shape[:2])  # [B, T]
    return (tf.reduce_sum(per_piece * mask, axis=-1),
            tf.reduce_sum(mask, axis=-1))

  def loss(self, model, batch, training):
    """Mean cross-entropy over the batch's labelled pieces."""
    loss_sum, count = self._losses(model(batch, training=training), batch)
    return tf.reduce_sum(loss_sum) / tf.maximum(tf.reduce_sum(count), 1.0)

  def predict(self, model, batch):
    """The tag argmax at every position [B, T], and each sequence's loss
    sum and labelled-piece count [B] (for eval_loss)."""
    logits = tf.cast(model(batch, training=False), tf.float32)
    loss_sum, count = self._losses(logits, batch)
    predictions = tf.argmax(logits, axis=-1, output_type=tf.int32)
    return {"predictions": input_pipeline.restore_length(
        predictions, self.max_seq_length),
            "loss_sum": loss_sum, "label_count": count}

  def eval_results(self, outputs):
    """eval_results.txt values from the dev set's tags.

    Args:
      outputs: dict: "gold" and "predicted", lists (per sentence) of lists
        of IOB2 tags; "eval_loss", float, the mean loss over the labelled
        pieces.

    Returns:
      dict: evaluation.eval_results' entity scores, and eval_loss.
    """
    # Here, not at the top: seqeval loads scikit-learn and SciPy (about a
    # second), which the exports that build this task never use.
    from runner_lib.ner import evaluation  # pylint: disable=g-import-not-at-top
    results = evaluation.eval_results(outputs["gold"], outputs["predicted"],
                                      self.label_list)
    results["eval_loss"] = outputs["eval_loss"]
    return results


@task.register("ner_features")
class FeatureBasedNerTask(NerTask):
  """The paper's feature-based NER: BERT frozen, its layers into a 2-layer
  BiLSTM tagger (BertFeatureTagger)."""

  HEADS = (modeling.FeatureTaggerHead,)

  def __init__(self, config, max_seq_length, label_list,
               feature_layers=(-1, -2, -3, -4), weighted_sum=False,
               lstm_units=768):
    """Args: as NerTask, and feature_layers, weighted_sum, lstm_units as
    modeling.BertFeatureTagger takes them."""
    super().__init__(config, max_seq_length, label_list)
    self.feature_layers = list(feature_layers)
    self.weighted_sum = weighted_sum
    self.lstm_units = lstm_units

  def build_model(self, options=None):
    """BertFeatureTagger; BERT's variables are not trainable."""
    return modeling.BertFeatureTagger(
        self.config, len(self.label_list), self.feature_layers,
        self.weighted_sum, self.lstm_units, options=options)
