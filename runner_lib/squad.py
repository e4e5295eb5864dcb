"""The SQuAD task: feature records, model, loss and per-feature logits."""

import tensorflow as tf

import modeling
from runner_lib import tfrecord

# Names run_squad.py gives the new layer in checkpoints.
NEW_VARIABLES = ("cls/squad/output_weights", "cls/squad/output_bias")


def name_to_features(max_seq_length, is_training):
  """The original's record schema (what a training step or prediction
  reads of it)."""
  seq = tf.io.FixedLenFeature([max_seq_length], tf.int64)
  features = {"unique_ids": tf.io.FixedLenFeature([], tf.int64),
              "input_ids": seq, "input_mask": seq, "segment_ids": seq}
  if is_training:
    features["start_positions"] = tf.io.FixedLenFeature([], tf.int64)
    features["end_positions"] = tf.io.FixedLenFeature([], tf.int64)
  return features


def serialize(feature, is_training):
  """A squad_data.InputFeatures as the original's tf.train.Example bytes
  (training records also carry start/end positions and is_impossible)."""
  values = {"unique_ids": tfrecord.int_feature([feature.unique_id]),
            "input_ids": tfrecord.int_feature(feature.input_ids),
            "input_mask": tfrecord.int_feature(feature.input_mask),
            "segment_ids": tfrecord.int_feature(feature.segment_ids)}
  if is_training:
    values["start_positions"] = tfrecord.int_feature([feature.start_position])
    values["end_positions"] = tfrecord.int_feature([feature.end_position])
    values["is_impossible"] = tfrecord.int_feature(
        [int(bool(feature.is_impossible))])
  return tf.train.Example(features=tf.train.Features(
      feature=values)).SerializeToString(deterministic=True)


def padding_record(max_seq_length):
  """A record filling the last prediction batch: unique_id 0, which no
  feature has (they start at squad_data.FIRST_UNIQUE_ID)."""
  zeros = tfrecord.int_feature([0] * max_seq_length)
  return tf.train.Example(features=tf.train.Features(feature={
      "unique_ids": tfrecord.int_feature([0]), "input_ids": zeros,
      "input_mask": zeros, "segment_ids": zeros,
  })).SerializeToString(deterministic=True)


def span_loss(logits, positions):
  """Mean cross-entropy of position logits.

  Args:
    logits: float [B, T].
    positions: int [B], the true positions.

  Returns:
    float32 scalar.
  """
  log_probs = tf.nn.log_softmax(tf.cast(logits, tf.float32), axis=-1)
  one_hot = tf.one_hot(tf.cast(positions, tf.int32), tf.shape(logits)[-1],
                       dtype=tf.float32)
  return -tf.reduce_mean(tf.reduce_sum(one_hot * log_probs, axis=-1))


class SquadTask(object):
  """Model, loss and outputs of fine-tuning on SQuAD."""

  def __init__(self, config):
    self.config = config

  def build_model(self):
    return modeling.BertSquadModel(self.config)

  def loss(self, model, batch, training):
    """The original: the mean of the start and end cross-entropies."""
    start_logits, end_logits = model(batch, training=training)
    return (span_loss(start_logits, batch["start_positions"]) +
            span_loss(end_logits, batch["end_positions"])) / 2.0

  def predict(self, model, batch):
    """Per-replica logits for a prediction batch, with the feature ids."""
    start_logits, end_logits = model(batch, training=False)
    return {"unique_ids": batch["unique_ids"],
            "start_logits": tf.cast(start_logits, tf.float32),
            "end_logits": tf.cast(end_logits, tf.float32)}
