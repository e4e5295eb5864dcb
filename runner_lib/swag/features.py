"""SWAG examples as model input: four [CLS] context [SEP] ending [SEP]
sequences per example, all in one record."""

import tensorflow as tf

from runner_lib.core.inputs import packing
from runner_lib.core.inputs import tfrecord
from runner_lib.core.inputs import tfrecord_writer
from runner_lib.swag import data


class InputFeatures(object):
  """An example's choices as model input.

  Attributes:
    input_ids, input_mask, segment_ids: NUM_CHOICES lists of
      max_seq_length ints each, one per choice.
    label_id: int, the right choice (0 for test examples).
  """

  def __init__(self, input_ids, input_mask, segment_ids, label_id):
    self.input_ids = input_ids
    self.input_mask = input_mask
    self.segment_ids = segment_ids
    self.label_id = label_id


def convert_single_example(example, max_seq_length, tokenizer):
  """Lays out each choice as [CLS] sent1 [SEP] sent2 + " " + ending [SEP].

  The pair is truncated as the original's classifier truncates (the longer
  side loses its last token first); segment ids are 0 for [CLS] sent1
  [SEP] and 1 for the rest, as sentence A and B in pre-training.

  Args:
    example: data.SwagExample.
    max_seq_length: int >= 3.
    tokenizer: tokenization.FullTokenizer.

  Returns:
    InputFeatures.
  """
  context = tokenizer.tokenize(example.context_sentence)
  features = InputFeatures([], [], [], example.label or 0)
  for ending in example.endings:
    tokens, segment_ids = packing.pair_layout(
        context, tokenizer.tokenize(example.start_ending + " " + ending),
        max_seq_length)
    input_ids, input_mask, segment_ids = packing.pad_features(
        tokenizer.convert_tokens_to_ids(tokens), segment_ids, max_seq_length)
    features.input_ids.append(input_ids)
    features.input_mask.append(input_mask)
    features.segment_ids.append(segment_ids)
  return features


def name_to_features(max_seq_length):
  """The record schema: every choice's ids [NUM_CHOICES, max_seq_length]
  and the label."""
  choices = tf.io.FixedLenFeature([data.NUM_CHOICES, max_seq_length],
                                  tf.int64)
  return {"input_ids": choices, "input_mask": choices,
          "segment_ids": choices,
          "label_ids": tf.io.FixedLenFeature([], tf.int64)}


def serialize(feature):
  """One tf.train.Example, the choices' ids concatenated in choice order."""

  def flat(rows):
    return tfrecord.int_feature([value for row in rows for value in row])

  return tf.train.Example(features=tf.train.Features(feature={
      "input_ids": flat(feature.input_ids),
      "input_mask": flat(feature.input_mask),
      "segment_ids": flat(feature.segment_ids),
      "label_ids": tfrecord.int_feature([feature.label_id]),
  })).SerializeToString(deterministic=True)


def write_features(examples, max_seq_length, tokenizer, path):
  """Writes examples as records at path (atomically).

  Args:
    examples: list of data.SwagExample.
    max_seq_length: int.
    tokenizer: tokenization.FullTokenizer.
    path: str.

  Returns:
    int, the number of records written.
  """
  with tfrecord_writer.RoundRobinWriter([path]) as writer:
    for example in examples:
      writer.write(serialize(convert_single_example(example, max_seq_length,
                                                    tokenizer)))
  return len(examples)
