"""BertPretrainer: BertModel with the masked-LM and next-sentence heads."""

import tensorflow as tf
import tf_keras as keras

from modeling import bert_model
from modeling import heads


class BertPretrainer(keras.Model):
  """BertModel plus the masked-LM and next-sentence heads."""

  def __init__(self, config, use_one_hot_embeddings=False, seed=None,
               causal_attention=False, next_sentence=True, name="pretrainer",
               options=None, **kwargs):
    """Creates the model and all its weights.

    Args:
      config: a BertConfig.
      use_one_hot_embeddings: bool, passed to BertModel.
      seed: int or None, passed to BertModel.
      causal_attention: bool, passed to BertModel.
      next_sentence: bool, whether to have the next-sentence head.
      name: Keras name.
      options: a modeling.ComputeOptions or None, passed to BertModel and
        the heads.
      **kwargs: passed to keras.Model.
    """
    super().__init__(name=name, **kwargs)
    self.config = config
    self.bert = bert_model.BertModel(config, use_one_hot_embeddings, seed,
                                     causal_attention, options=options)
    self.masked_lm = heads.MaskedLMHead(self.bert.embedding_table,
                                        config.hidden_act,
                                        config.initializer_range,
                                        options=self.bert.options)
    self.next_sentence = None
    if next_sentence:
      self.next_sentence = heads.NextSentenceHead(
          config.hidden_size, config.initializer_range,
          options=self.bert.options)
    self.call({"input_ids": tf.zeros([1, 1], tf.int32),
               "masked_lm_positions": tf.zeros([1, 1], tf.int32)},
              training=False)

  def call(self, inputs, training=None):
    """Runs BERT and both heads.

    Args:
      inputs: dict with BertModel's keys plus "masked_lm_positions",
        int [B, P].
      training: bool, whether dropout is active.

    Returns:
      dict with BertModel's outputs plus
        "masked_lm_logits": float [B, P, V];
        "next_sentence_logits": float [B, 2], if the model has the head.
    """
    outputs = dict(self.bert(inputs, training=training))
    outputs["masked_lm_logits"] = self.masked_lm(
        outputs["sequence_output"], inputs["masked_lm_positions"])
    if self.next_sentence is not None:
      outputs["next_sentence_logits"] = self.next_sentence(
          outputs["pooled_output"])
    return outputs
