"""Classification examples as the original's features and records."""

import dataclasses
import tensorflow as tf

from runner_lib.core.inputs import packing
from runner_lib.core.inputs import tfrecord
from runner_lib.core.inputs import tfrecord_writer


@dataclasses.dataclass(eq=False)
class InputFeatures:
  """An example as model input; is_real_example is 0 for batch padding."""

  input_ids: list
  input_mask: list
  segment_ids: list
  label_id: object
  is_real_example: bool = True

def convert_single_example(example, label_list, max_seq_length, tokenizer):
  """Tokenizes one example into [CLS] A [SEP] B [SEP], truncated, padded.

  Args:
    example: data.InputExample (label None for test examples).
    label_list: list of str, or None for regression.
    max_seq_length: int.
    tokenizer: tokenization.FullTokenizer.

  Returns:
    InputFeatures; label_id is the label's index (0 for test examples), or
    the float score for regression.
  """
  _, input_ids, input_mask, segment_ids = packing.encode_pair(
      tokenizer, example.text_a, example.text_b, max_seq_length)
  if label_list is None:
    label_id = float(example.label) if example.label is not None else 0.0
  else:
    label_id = label_list.index(example.label) if example.label else 0
  return InputFeatures(input_ids, input_mask, segment_ids, label_id)


def padding_features(max_seq_length, regression):
  """A fake example filling the last batch (is_real_example 0)."""
  zeros = [0] * max_seq_length
  return InputFeatures(zeros, zeros, zeros, 0.0 if regression else 0, False)


def name_to_features(max_seq_length, regression):
  """The original's record schema (a float label for regression)."""
  seq = tf.io.FixedLenFeature([max_seq_length], tf.int64)
  return {"input_ids": seq, "input_mask": seq, "segment_ids": seq,
          "label_ids": tf.io.FixedLenFeature(
              [], tf.float32 if regression else tf.int64),
          "is_real_example": tf.io.FixedLenFeature([], tf.int64)}


def serialize(feature, regression):
  """The original's record (plus a float label for regression)."""
  label = (tfrecord.float_feature([feature.label_id]) if regression else
           tfrecord.int_feature([feature.label_id]))
  return tf.train.Example(features=tf.train.Features(feature={
      "input_ids": tfrecord.int_feature(feature.input_ids),
      "input_mask": tfrecord.int_feature(feature.input_mask),
      "segment_ids": tfrecord.int_feature(feature.segment_ids),
      "label_ids": label,
      "is_real_example": tfrecord.int_feature(
          [int(feature.is_real_example)]),
  })).SerializeToString(deterministic=True)


def write_features(examples, label_list, max_seq_length, tokenizer, path,
                   batch_size=None):
  """Writes examples as records at path (atomically).

  Args:
    examples: list of data.InputExample.
    label_list: list of str, or None for regression.
    max_seq_length: int.
    tokenizer: tokenization.FullTokenizer.
    path: str.
    batch_size: int or None; if given, fake examples (is_real_example 0)
      fill the last batch, the layout the original gives eval and predict
      records on TPU. Prediction reads only the real ones back (the core
      pads batches itself: core/training/predict.py).

  Returns:
    int, the number of real examples written.
  """
  regression = label_list is None
  features = [convert_single_example(e, label_list, max_seq_length, tokenizer)
              for e in examples]
  if batch_size:
    padding = padding_features(max_seq_length, regression)
    features += [padding] * (-len(features) % batch_size)
  with tfrecord_writer.RoundRobinWriter([path]) as writer:
    for feature in features:
      writer.write(serialize(feature, regression))
  return len(examples)
