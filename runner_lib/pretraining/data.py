"""The pre-training record schema, for reading records with TensorFlow.

Records are made without TensorFlow: documents.py reads the text,
instances.py makes the instances.
"""

import tensorflow as tf


def pretraining_features(max_seq_length, max_predictions_per_seq):
  """The original pre-training record schema, for tf.io.parse_example.

  Args:
    max_seq_length: int, length of input_ids / input_mask / segment_ids.
    max_predictions_per_seq: int, length of the masked_lm_* features.

  Returns:
    dict name -> tf.io.FixedLenFeature.
  """
  seq = tf.io.FixedLenFeature([max_seq_length], tf.int64)
  predictions = tf.io.FixedLenFeature([max_predictions_per_seq], tf.int64)
  return {
      "input_ids": seq,
      "input_mask": seq,
      "segment_ids": seq,
      "masked_lm_positions": predictions,
      "masked_lm_ids": predictions,
      "masked_lm_weights": tf.io.FixedLenFeature([max_predictions_per_seq],
                                                 tf.float32),
      "next_sentence_labels": tf.io.FixedLenFeature([1], tf.int64),
  }


def unmasked_features(max_seq_length):
  """The schema of unmasked records (create_pretraining_data.py
  --dynamic_masking), for tf.io.parse_example: the original's without
  masked_lm_*, with masked_lm_candidates (instances.NEVER_MASKED,
  WORD_START, CONTINUATION per position).

  Args:
    max_seq_length: int.

  Returns:
    dict name -> tf.io.FixedLenFeature.
  """
  seq = tf.io.FixedLenFeature([max_seq_length], tf.int64)
  return {
      "input_ids": seq,
      "input_mask": seq,
      "segment_ids": seq,
      "masked_lm_candidates": seq,
      "next_sentence_labels": tf.io.FixedLenFeature([1], tf.int64),
  }
