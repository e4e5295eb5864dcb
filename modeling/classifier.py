"""BertClassifier: BertModel with run_classifier's layer on the pooled
output, on one sequence per example or on an example's windows."""

import tensorflow as tf

from modeling import heads
from modeling import task_model


class BertClassifier(task_model.BertTaskModel):
  """BertModel plus the classification layer on the pooled output.

  Called on [B, T] inputs it is the original's model. Called on [B, W, T]
  inputs, W windows of one long example each (run_classifier's
  --long_text=windows, beyond the original), it scores every window as
  a sequence of its own and gives each example the mean of its real
  windows' logits: the same variables, so a checkpoint trained either way
  loads into the other.
  """

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
    self.num_labels = num_labels
    self.classifier = heads.ClassifierHead(num_labels, config.hidden_size,
                                           seed=self.bert.head_seed,
                                           options=self.bert.options)
    self.build_weights()

  def call(self, inputs, training=None):
    """Returns float [B, num_labels] logits for BertModel's inputs, or
    float32 [B, num_labels] for windows (call_windows)."""
    if tf.convert_to_tensor(inputs["input_ids"]).shape.rank == 3:
      return self.call_windows(inputs, training)
    pooled = self.bert(inputs, training=training)["pooled_output"]
    return self.classifier(pooled, training=training)

  def call_windows(self, inputs, training=None):
    """The mean logits of each example's windows.

    Where the encoder skips padding (BertModel.skip_padding: the run allows
    shapes known only at run time), a window of padding alone is left out
    before the encoder, so it costs a gather and a scatter; else it is
    computed and its logits ignored.

    Args:
      inputs: dict with "input_ids" and optional "input_mask",
        "segment_ids", int [B, W, T], and "window_mask", int [B, W], 1 for
        an example's windows (default: those with a real token); an
        example with no window (batch padding) gets logits 0.
      training: bool, whether dropout is active.

    Returns:
      float32 [B, num_labels].
    """
    flat = task_model.flat_sequences(inputs)  # [B*W, T]
    ids_shape = tf.shape(inputs["input_ids"])
    window_mask = inputs.get("window_mask")
    if window_mask is None:
      window_mask = tf.reduce_max(
          inputs.get("input_mask", tf.ones(ids_shape, tf.int32)), axis=-1)
    real = tf.reshape(tf.cast(window_mask, tf.bool), [-1])  # [B*W]
    if self.bert.skip_padding:
      rows = tf.where(real)  # [N, 1]
      pooled = self.bert({key: tf.gather_nd(value, rows)
                          for key, value in flat.items()},
                         training=training)["pooled_output"]  # [N, H]
      logits = tf.scatter_nd(
          rows, tf.cast(self.classifier(pooled, training=training),
                        tf.float32),
          [tf.size(real), self.num_labels])  # [B*W, K]
    else:
      pooled = self.bert(flat, training=training)["pooled_output"]
      logits = tf.cast(self.classifier(pooled, training=training),
                       tf.float32)  # [B*W, K]
    weights = tf.reshape(tf.cast(real, tf.float32), ids_shape[:2])  # [B, W]
    logits = tf.reshape(logits, tf.concat([ids_shape[:2], [-1]], 0))
    total = tf.reduce_sum(logits * weights[:, :, tf.newaxis], axis=1)
    count = tf.maximum(tf.reduce_sum(weights, axis=1), 1.0)
    return total / count[:, tf.newaxis]  # [B, K]
