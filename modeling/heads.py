"""Head layers: what each task puts on top of BertModel.

A head is a Keras layer holding the task's new weights under the original's
names (modeling/checkpoint.py maps each head class to them). The task models
that join a BertModel to its heads are beside this file: pretrainer.py,
classifier.py, squad_model.py, multiple_choice.py, token_classifier.py.
"""

import tensorflow as tf
import tf_keras as keras

from modeling import layers
from modeling import options as options_lib


def gather_indexes(sequence_tensor, positions):
  """Picks the vectors at given positions of each sequence.

  Args:
    sequence_tensor: float [B, T, H].
    positions: int [B, P] positions into T.

  Returns:
    float [B, P, H].
  """
  return tf.gather(sequence_tensor, tf.cast(positions, tf.int32), batch_dims=1)


def dense_transposed(x, weights, bias, dtype=tf.float32):
  """x times the transpose of weights, plus bias, over the last axis.

  One 2-D matmul on x flattened to [rows, H]. tf.matmul of [B, P, H] with a
  shared [N, H] matrix would be a batched matmul that broadcasts it: its
  gradient for the weights is then B products [N, H], summed afterwards
  (for the masked LM's vocab-sized table, 32 x 30522 x 256 floats written
  and reduced every step) instead of a single one.

  Args:
    x: float [..., H].
    weights: float [N, H] (the original stores output layers transposed).
    bias: float [N].
    dtype: the matmul's compute type (layers.matmul).

  Returns:
    float [..., N].
  """
  weights = tf.cast(weights, x.dtype)
  flat = tf.reshape(x, [-1, x.shape[-1]])
  logits = tf.nn.bias_add(layers.matmul(flat, weights, dtype,
                                        transpose_b=True),
                          tf.cast(bias, x.dtype))
  outputs = tf.reshape(logits, tf.concat([tf.shape(x)[:-1],
                                          tf.shape(weights)[:1]], 0))
  outputs.set_shape(x.shape[:-1].concatenate(weights.shape[:1]))
  return outputs


class MaskedLMHead(keras.layers.Layer):
  """Scope cls/predictions: transform, then logits on the tied word table."""

  def __init__(self, embedding_table, hidden_act, initializer_range,
               name="predictions", options=None, **kwargs):
    """Creates the head.

    Args:
      embedding_table: the BertModel's word embedding variable [V, H]; the
        output projection is its transpose (weights tied as in the original).
      hidden_act: str, activation of the transform (the config's hidden_act).
      initializer_range: float, stddev of the truncated-normal initializer.
      name: Keras name.
      options: a modeling.ComputeOptions (BertModel's), or None for the
        default.
      **kwargs: passed to keras.layers.Layer.
    """
    super().__init__(name=name, **kwargs)
    options = options_lib.resolve(options)
    self.embedding_table = embedding_table
    vocab_size, hidden_size = embedding_table.shape
    self.transform = layers.Dense(
        hidden_size, activation=layers.get_activation(hidden_act),
        kernel_initializer=layers.create_initializer(initializer_range),
        name="transform", options=options)
    self.layer_norm = layers.layer_norm(options=options)
    self.output_bias = self.add_weight(
        "output_bias", shape=[vocab_size], initializer="zeros")
    self.matmul_dtype = options.matmul_dtype

  def call(self, sequence_output, masked_lm_positions):
    """Scores every vocabulary entry at the masked positions.

    Args:
      sequence_output: float [B, T, H], BertModel's last layer.
      masked_lm_positions: int [B, P], positions to predict.

    Returns:
      float [B, P, V] logits.
    """
    hidden = gather_indexes(sequence_output, masked_lm_positions)
    hidden = self.layer_norm(self.transform(hidden))
    return dense_transposed(hidden, self.embedding_table, self.output_bias,
                            self.matmul_dtype)


class OutputLayer(keras.layers.Layer):
  """The original's task layers: output_weights [num_outputs, H] (stored
  transposed, so logits use the transpose) and output_bias [num_outputs]."""

  def __init__(self, num_outputs, hidden_size, initializer_range, name,
               options=None, **kwargs):
    """Args: num_outputs: int; hidden_size: int H; initializer_range:
    float, stddev of the truncated-normal initializer; name: Keras name;
    options: a modeling.ComputeOptions (BertModel's), or None for the
    default (self.options)."""
    super().__init__(name=name, **kwargs)
    self.options = options_lib.resolve(options)
    self.output_weights = self.add_weight(
        "output_weights", shape=[num_outputs, hidden_size],
        initializer=layers.create_initializer(initializer_range))
    self.output_bias = self.add_weight(
        "output_bias", shape=[num_outputs], initializer="zeros")
    self.matmul_dtype = self.options.matmul_dtype

  def logits(self, hidden):
    """Maps float [..., H] to float [..., num_outputs]."""
    return dense_transposed(hidden, self.output_weights, self.output_bias,
                            self.matmul_dtype)


class NextSentenceHead(OutputLayer):
  """Scope cls/seq_relationship: is B the real next segment? (0 = yes)."""

  def __init__(self, hidden_size, initializer_range, name="seq_relationship",
               **kwargs):
    """Creates the head.

    Args:
      hidden_size: int H.
      initializer_range: float, stddev of the truncated-normal initializer.
      name: Keras name.
      **kwargs: passed to keras.layers.Layer.
    """
    super().__init__(2, hidden_size, initializer_range, name, **kwargs)

  def call(self, pooled_output):
    """Maps pooled [B, H] to float [B, 2] logits."""
    return self.logits(pooled_output)


class ClassifierHead(OutputLayer):
  """The original run_classifier layer: dropout 0.1, then output_weights
  [num_labels, H] and output_bias [num_labels] at the checkpoint's root."""

  def __init__(self, num_labels, hidden_size, seed=0, name="classifier",
               **kwargs):
    """Args: num_labels: int (1 for regression); hidden_size: int H;
    seed: int, of the dropout masks."""
    super().__init__(num_labels, hidden_size, 0.02, name, **kwargs)
    # A fixed 0.1 in the original, not the config's hidden_dropout_prob.
    self.dropout = layers.Dropout(0.1, seed, self.options)

  def call(self, pooled_output, training=None):
    """Maps pooled [B, H] to float [B, num_labels] logits."""
    return self.logits(self.dropout(pooled_output, training=training))


class MultipleChoiceHead(ClassifierHead):
  """The SWAG layer, scope cls/swag: the classifier layer with one output,
  a score per choice (output_weights [1, H], output_bias [1]); the softmax
  runs over an example's choices."""

  def __init__(self, hidden_size, seed=0, name="swag", **kwargs):
    """Args: hidden_size: int H; seed: int, of the dropout masks."""
    super().__init__(1, hidden_size, seed, name, **kwargs)


class TokenClassifierHead(ClassifierHead):
  """The NER layer, scope cls/ner: the classifier layer (dropout 0.1,
  output_weights [num_labels, H], output_bias [num_labels]) applied at every
  position of the sequence output."""

  def __init__(self, num_labels, hidden_size, seed=0, name="ner", **kwargs):
    """Args: num_labels: int; hidden_size: int H; seed: int, of the
    dropout masks."""
    super().__init__(num_labels, hidden_size, seed, name, **kwargs)


class FeatureTaggerHead(keras.layers.Layer):
  """The paper's feature-based NER tagger, scope cls/ner_features: hidden
  layers of a frozen BERT, concatenated or mixed by a learned weighted sum,
  then a 2-layer bidirectional LSTM and a linear layer at every position.
  """

  NUM_LSTM_LAYERS = 2

  def __init__(self, num_labels, num_features, lstm_units,
               weighted_sum=False, seed=0, name="ner_features", options=None,
               **kwargs):
    """Creates the head.

    Args:
      num_labels: int.
      num_features: int, how many BERT layers feed it.
      lstm_units: int, units per direction of each LSTM layer (768 in the
        paper).
      weighted_sum: bool, mix the layers by softmax-normalized learned
        weights (layer_weights [num_features], starting equal) instead of
        concatenating them.
      seed: int, of the dropout masks.
      name: Keras name.
      options: a modeling.ComputeOptions (BertModel's), or None for the
        default.
      **kwargs: passed to keras.layers.Layer.
    """
    super().__init__(name=name, **kwargs)
    self.layer_weights = None
    if weighted_sum:
      self.layer_weights = self.add_weight(
          "layer_weights", shape=[num_features], initializer="zeros")
    self.lstms = [
        keras.layers.Bidirectional(
            keras.layers.LSTM(lstm_units, return_sequences=True),
            name="lstm_%d" % i) for i in range(self.NUM_LSTM_LAYERS)]
    self.dropout = layers.Dropout(0.1, seed, options)
    self.output_layer = OutputLayer(num_labels, 2 * lstm_units, 0.02,
                                    name="output", options=options)

  def call(self, features, input_mask, training=None):
    """Tags every position.

    Args:
      features: list of num_features float [B, T, H], BERT's layers.
      input_mask: int [B, T], 1 for real tokens; the LSTMs skip the rest.
      training: bool, whether dropout is active.

    Returns:
      float [B, T, num_labels] logits.
    """
    if self.layer_weights is None:
      hidden = tf.concat(features, axis=-1)  # [B, T, H * num_features]
    else:
      weights = tf.nn.softmax(tf.cast(self.layer_weights, features[0].dtype))
      hidden = tf.add_n([w * f for w, f in
                         zip(tf.unstack(weights), features)])  # [B, T, H]
    mask = tf.cast(input_mask, tf.bool)
    for lstm in self.lstms:
      hidden = lstm(hidden, mask=mask, training=training)  # [B, T, 2 units]
    return self.output_layer.logits(self.dropout(hidden, training=training))


class SquadHead(OutputLayer):
  """The original run_squad layer, scope cls/squad: one start and one end
  vector (output_weights [2, H], output_bias [2]) scored against every
  position of the sequence output. No dropout, as the original."""

  def __init__(self, hidden_size, initializer_range=0.02, name="squad",
               **kwargs):
    """Args: hidden_size: int H; initializer_range: float, stddev of the
    truncated-normal initializer (0.02 in the original, whatever the
    config says)."""
    super().__init__(2, hidden_size, initializer_range, name, **kwargs)

  def call(self, sequence_output):
    """Maps float [B, T, H] to (start_logits, end_logits), each [B, T]."""
    logits = self.logits(sequence_output)
    return logits[:, :, 0], logits[:, :, 1]
