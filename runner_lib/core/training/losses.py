"""Losses more than one task computes."""

import tensorflow as tf


def cross_entropy(logits, labels):
  """Each example's cross-entropy against its true class.

  Args:
    logits: float [B, N] (any float type; computed in float32).
    labels: int [B], classes in [0, N).

  Returns:
    float32 [B].
  """
  log_probs = tf.nn.log_softmax(tf.cast(logits, tf.float32), axis=-1)
  one_hot = tf.one_hot(tf.cast(labels, tf.int32), tf.shape(logits)[-1],
                       dtype=tf.float32)
  return -tf.reduce_sum(one_hot * log_probs, axis=-1)
