"""Token tagging (NER) on BertModel: fine-tuned (BertTokenClassifier) and
on a frozen BERT's features (BertFeatureTagger), the paper's two ways."""

import tensorflow as tf

from modeling import heads
from modeling import task_model

EMBEDDINGS = "embeddings"


class BertTokenClassifier(task_model.BertTaskModel):
  """BertModel plus a classifier layer at every position of the sequence
  output."""

  def __init__(self, config, num_labels, use_one_hot_embeddings=False,
               seed=None, name="token_classifier_model", **kwargs):
    """Creates the model and all its weights.

    Args:
      config: a BertConfig.
      num_labels: int, tags.
      use_one_hot_embeddings: bool, passed to BertModel.
      seed: int or None, passed to BertModel.
      name: Keras name.
      **kwargs: passed to BertTaskModel (options, a
        modeling.ComputeOptions) and keras.Model.
    """
    super().__init__(config, use_one_hot_embeddings, seed, name, **kwargs)
    self.tagger = heads.TokenClassifierHead(num_labels, config.hidden_size,
                                            seed=self.bert.head_seed,
                                            options=self.bert.options)
    self.build_weights()

  def call(self, inputs, training=None):
    """Returns float [B, T, num_labels] logits for BertModel's inputs."""
    sequence = self.bert(inputs, training=training)["sequence_output"]
    return self.tagger(sequence, training=training)


def resolve_layers(feature_layers, num_hidden_layers):
  """Turns layer names into indexes of [embedding output, layer 0, ...,
  layer L-1].

  Args:
    feature_layers: list of str or int: EMBEDDINGS, or an encoder layer as
      extract_features.py's --layers counts them (0 the first, -1 the
      last).
    num_hidden_layers: int L.

  Returns:
    list of int in [0, L].

  Raises:
    ValueError: a layer the model does not have, or the same twice.
  """
  indexes = []
  for layer in feature_layers:
    if layer == EMBEDDINGS:
      indexes.append(0)
      continue
    index = int(layer)
    if not -num_hidden_layers <= index < num_hidden_layers:
      raise ValueError("Layer %d does not exist: the model has %d layers "
                       "(0..%d, or -1..-%d from the top)." %
                       (index, num_hidden_layers, num_hidden_layers - 1,
                        num_hidden_layers))
    indexes.append(index % num_hidden_layers + 1)
  if len(set(indexes)) != len(indexes):
    raise ValueError("A layer is named twice in %s." % (feature_layers,))
  return indexes


class BertFeatureTagger(task_model.BertTaskModel):
  """The paper's feature-based NER: a frozen BertModel (never trained, run
  without dropout) whose chosen layers feed FeatureTaggerHead."""

  def __init__(self, config, num_labels, feature_layers=(-1, -2, -3, -4),
               weighted_sum=False, lstm_units=768,
               use_one_hot_embeddings=False, seed=None,
               name="feature_tagger_model", **kwargs):
    """Creates the model and all its weights.

    Args:
      config: a BertConfig.
      num_labels: int, tags.
      feature_layers: the layers feeding the tagger, see resolve_layers;
        the default is the paper's best, the last four concatenated.
      weighted_sum: bool, mix the layers by learned weights instead of
        concatenating them.
      lstm_units: int, per direction of each LSTM layer.
      use_one_hot_embeddings: bool, passed to BertModel.
      seed: int or None, passed to BertModel.
      name: Keras name.
      **kwargs: passed to BertTaskModel (options, a
        modeling.ComputeOptions) and keras.Model.

    Raises:
      ValueError: see resolve_layers.
    """
    super().__init__(config, use_one_hot_embeddings, seed, name, **kwargs)
    self.layer_indexes = tuple(resolve_layers(feature_layers,
                                              config.num_hidden_layers))
    self.bert.trainable = False
    self.tagger = heads.FeatureTaggerHead(
        num_labels, len(self.layer_indexes), lstm_units, weighted_sum,
        seed=self.bert.head_seed, options=self.bert.options)
    self.build_weights()

  def call(self, inputs, training=None):
    """Returns float [B, T, num_labels] logits for BertModel's inputs."""
    outputs = self.bert(inputs, training=False)
    hidden = [outputs["embedding_output"]] + outputs["all_encoder_layers"]
    input_mask = inputs.get("input_mask")
    if input_mask is None:
      input_mask = tf.ones_like(inputs["input_ids"])
    return self.tagger([hidden[i] for i in self.layer_indexes], input_mask,
                       training=training)
