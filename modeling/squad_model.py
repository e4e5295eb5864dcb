"""BertSquadModel: BertModel with run_squad's span layer on the sequence
output."""

from modeling import heads
from modeling import task_model


class BertSquadModel(task_model.BertTaskModel):
  """BertModel plus the SQuAD span layer on the sequence output."""

  def __init__(self, config, use_one_hot_embeddings=False, seed=None,
               name="squad_model", **kwargs):
    """Creates the model and all its weights.

    Args:
      config: a BertConfig.
      use_one_hot_embeddings: bool, passed to BertModel.
      seed: int or None, passed to BertModel.
      name: Keras name.
      **kwargs: passed to BertTaskModel (options, a
        modeling.ComputeOptions) and keras.Model.
    """
    super().__init__(config, use_one_hot_embeddings, seed, name, **kwargs)
    self.squad = heads.SquadHead(config.hidden_size,
                                 options=self.bert.options)
    self.build_weights()

  def call(self, inputs, training=None):
    """Returns (start_logits, end_logits), float [B, T] each, for
    BertModel's inputs."""
    sequence = self.bert(inputs, training=training)["sequence_output"]
    return self.squad(sequence)
