"""BertClassifier: BertModel with run_classifier's layer on the pooled
output."""

from modeling import heads
from modeling import task_model


class BertClassifier(task_model.BertTaskModel):
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
      **kwargs: passed to BertTaskModel (options, a
        modeling.ComputeOptions) and keras.Model.
    """
    super().__init__(config, use_one_hot_embeddings, seed, name, **kwargs)
    self.classifier = heads.ClassifierHead(num_labels, config.hidden_size,
                                           seed=self.bert.head_seed,
                                           options=self.bert.options)
    self.build_weights()

  def call(self, inputs, training=None):
    """Returns float [B, num_labels] logits for BertModel's inputs."""
    pooled = self.bert(inputs, training=training)["pooled_output"]
    return self.classifier(pooled, training=training)
