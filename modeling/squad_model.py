"""BertSquadModel: BertModel with run_squad's span layer on the sequence
output."""

import tensorflow as tf
import tf_keras as keras

from modeling import bert_model
from modeling import heads


class BertSquadModel(keras.Model):
  """BertModel plus the SQuAD span layer on the sequence output."""

  def __init__(self, config, use_one_hot_embeddings=False, seed=None,
               name="squad_model", **kwargs):
    """Creates the model and all its weights.

    Args:
      config: a BertConfig.
      use_one_hot_embeddings: bool, passed to BertModel.
      seed: int or None, passed to BertModel.
      name: Keras name.
      **kwargs: passed to keras.Model.
    """
    super().__init__(name=name, **kwargs)
    self.config = config
    self.bert = bert_model.BertModel(config, use_one_hot_embeddings, seed)
    self.squad = heads.SquadHead(config.hidden_size)
    self.call({"input_ids": tf.zeros([1, 1], tf.int32)}, training=False)

  def call(self, inputs, training=None):
    """Returns (start_logits, end_logits), float [B, T] each, for
    BertModel's inputs."""
    sequence = self.bert(inputs, training=training)["sequence_output"]
    return self.squad(sequence)
