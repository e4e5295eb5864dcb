"""BertMultipleChoice: BertModel scoring each choice of an example (SWAG),
one score per choice from the pooled output."""

import tensorflow as tf

from modeling import heads
from modeling import task_model


class BertMultipleChoice(task_model.BertTaskModel):
  """BertModel plus the multiple-choice layer on the pooled output.

  An example's C choices are C input sequences; they run through BertModel
  as one [B*C, T] batch, and each gets a score. A softmax over the C scores
  of an example gives the choice probabilities (the paper's SWAG set-up).
  """

  def __init__(self, config, num_choices=4, use_one_hot_embeddings=False,
               seed=None, name="multiple_choice_model", **kwargs):
    """Creates the model and all its weights.

    Args:
      config: a BertConfig.
      num_choices: int C, choices per example (4 in SWAG).
      use_one_hot_embeddings: bool, passed to BertModel.
      seed: int or None, passed to BertModel.
      name: Keras name.
      **kwargs: passed to BertTaskModel (options, a
        modeling.ComputeOptions) and keras.Model.
    """
    super().__init__(config, use_one_hot_embeddings, seed, name, **kwargs)
    self.num_choices = num_choices
    self.choice_scores = heads.MultipleChoiceHead(config.hidden_size,
                                                  seed=self.bert.head_seed,
                                                  options=self.bert.options)
    self.build_weights((1, num_choices, 1))

  def call(self, inputs, training=None):
    """Scores every choice.

    Args:
      inputs: dict with "input_ids" and optional "input_mask",
        "segment_ids", int [B, C, T] (other keys are ignored).
      training: bool, whether dropout is active.

    Returns:
      float [B, C] logits.
    """
    flat = task_model.flat_sequences(inputs)  # [B*C, T]
    pooled = self.bert(flat, training=training)["pooled_output"]  # [B*C, H]
    scores = self.choice_scores(pooled, training=training)  # [B*C, 1]
    return tf.reshape(scores, [-1, self.num_choices])
