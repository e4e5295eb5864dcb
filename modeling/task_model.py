"""BertTaskModel: what every fine-tuning model shares, a BertModel held as
`.bert` (where modeling/checkpoint.py looks for it) with heads on top."""

import tensorflow as tf
import tf_keras as keras

from modeling import bert_model


class BertTaskModel(keras.Model):
  """A BertModel plus the heads a subclass adds after __init__."""

  def __init__(self, config, use_one_hot_embeddings=False, seed=None,
               name=None, options=None, **kwargs):
    """Creates the BertModel (its weights first, as the original's graph).

    Args:
      config: a BertConfig.
      use_one_hot_embeddings: bool, passed to BertModel.
      seed: int or None, passed to BertModel.
      name: Keras name.
      options: a modeling.ComputeOptions or None, passed to BertModel; the
        heads take BertModel's (self.bert.options).
      **kwargs: passed to keras.Model.
    """
    super().__init__(name=name, **kwargs)
    self.config = config
    self.bert = bert_model.BertModel(config, use_one_hot_embeddings, seed,
                                     options=options)

  def build_weights(self, input_shape=(1, 1)):
    """Runs the model once on zero ids so every weight exists before a
    checkpoint is loaded into it.

    Args:
      input_shape: shape of the int32 input_ids the model's call takes.
    """
    self.call({"input_ids": tf.zeros(input_shape, tf.int32)}, training=False)


def flat_sequences(inputs):
  """Several sequences per example as one batch of sequences, for the
  models that score each (multiple choice, windows).

  Args:
    inputs: dict with "input_ids" and optional "input_mask",
      "segment_ids", int [B, C, T] (other keys are left out).

  Returns:
    dict of the same keys, int [B*C, T], in example then sequence order.
  """
  length = tf.shape(inputs["input_ids"])[-1]
  return {key: tf.reshape(inputs[key], [-1, length])  # [B*C, T]
          for key in ("input_ids", "input_mask", "segment_ids")
          if key in inputs}
