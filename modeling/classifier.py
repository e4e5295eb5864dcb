"""BertClassifier: BertModel with run_classifier's layer on the pooled
output."""

import tensorflow as tf
import tf_keras as keras

from modeling import bert_model
from modeling import heads


class BertClassifier(keras.Model):
  """BertModel plus the classification layer on the pooled output."""

  def __init__(self, config, num_labels, use_one_hot_embeddings=False,
               seed=None, name="classifier_model", **kwargs):
    """Creates the model and all its weights.

    Args:
      config: a BertConfig.
      num_labels: int, classes (1: a regression score).
      use_one_hot_embeddings: bool, passed to BertModel.
      seed: int or None, passed to BertModel.
      name: Keras name.
      **kwargs: passed to keras.Model.
    """
    super().__init__(name=name, **kwargs)
    self.config = config
    self.bert = bert_model.BertModel(config, use_one_hot_embeddings, seed)
    self.classifier = heads.ClassifierHead(num_labels, config.hidden_size,
                                           seed=(seed or 0) + 7919)
    self.call({"input_ids": tf.zeros([1, 1], tf.int32)}, training=False)

  def call(self, inputs, training=None):
    """Returns float [B, num_labels] logits for BertModel's inputs."""
    pooled = self.bert(inputs, training=training)["pooled_output"]
    return self.classifier(pooled, training=training)
