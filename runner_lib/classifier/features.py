"""Classification examples as the original's features and records, or
(--long_text=windows) as several windows each (windows.py)."""

import dataclasses

from absl import logging
import tensorflow as tf

from runner_lib.classifier import windows as windows_lib
from runner_lib.core.inputs import packing
from runner_lib.core.inputs import tfrecord
from runner_lib.core.inputs import tfrecord_writer


@dataclasses.dataclass(eq=False)
class InputFeatures:
  """An example as model input; is_real_example is 0 for batch padding.

  input_ids, input_mask and segment_ids are max_seq_length ints, or with
  windows max_windows such lists (all 0 past the example's windows), and
  window_mask then max_windows ints, 1 for the example's windows.
  """

  input_ids: list
  input_mask: list
  segment_ids: list
  label_id: object
  is_real_example: bool = True
  window_mask: list = None

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
  return InputFeatures(input_ids, input_mask, segment_ids,
                       _label_id(example, label_list))


def _label_id(example, label_list):
  """The label's index (0 for test examples), or the float score for
  regression."""
  if label_list is None:
    return float(example.label) if example.label is not None else 0.0
  return label_list.index(example.label) if example.label else 0


def convert_windowed_example(example, label_list, max_seq_length, tokenizer,
                             windows):
  """Tokenizes one example into its windows (windows.window_layouts),
  each padded, and pads the windows to windows.max_windows.

  Args:
    example: data.InputExample.
    label_list: list of str, or None for regression.
    max_seq_length: int.
    tokenizer: tokenization.FullTokenizer.
    windows: windows.Windows.

  Returns:
    (InputFeatures with window_mask, cut): cut is whether max_windows
    dropped some of the example's windows.
  """
  tokens_a = tokenizer.tokenize(example.text_a)
  tokens_b = tokenizer.tokenize(example.text_b) if example.text_b else None
  layouts, cut = windows_lib.window_layouts(tokens_a, tokens_b,
                                            max_seq_length, windows)
  feature = padding_features(max_seq_length, label_list is None,
                             windows.max_windows)
  feature.label_id = _label_id(example, label_list)
  feature.is_real_example = True
  for i, (tokens, segment_ids) in enumerate(layouts):
    (feature.input_ids[i], feature.input_mask[i],
     feature.segment_ids[i]) = packing.pad_features(
         tokenizer.convert_tokens_to_ids(tokens), segment_ids, max_seq_length)
    feature.window_mask[i] = 1
  return feature, cut


def padding_features(max_seq_length, regression, max_windows=None):
  """A fake example filling the last batch (is_real_example 0); with
  max_windows, of that many windows, none real (window_mask all 0)."""
  if max_windows is None:
    zeros = [0] * max_seq_length
    return InputFeatures(zeros, zeros, zeros, 0.0 if regression else 0,
                         False)
  zeros = lambda: [[0] * max_seq_length for _ in range(max_windows)]
  return InputFeatures(zeros(), zeros(), zeros(), 0.0 if regression else 0,
                       False, [0] * max_windows)


def name_to_features(max_seq_length, regression, max_windows=None):
  """The original's record schema (a float label for regression); with
  max_windows, each sequence feature [max_windows, max_seq_length] and a
  window_mask [max_windows]."""
  shape = ([max_seq_length] if max_windows is None else
           [max_windows, max_seq_length])
  seq = tf.io.FixedLenFeature(shape, tf.int64)
  schema = {"input_ids": seq, "input_mask": seq, "segment_ids": seq,
            "label_ids": tf.io.FixedLenFeature(
                [], tf.float32 if regression else tf.int64),
            "is_real_example": tf.io.FixedLenFeature([], tf.int64)}
  if max_windows is not None:
    schema["window_mask"] = tf.io.FixedLenFeature([max_windows], tf.int64)
  return schema


def serialize(feature, regression):
  """The original's record (plus a float label for regression); windows
  concatenated in window order, and their window_mask."""
  label = (tfrecord.float_feature([feature.label_id]) if regression else
           tfrecord.int_feature([feature.label_id]))

  def ints(values):
    if feature.window_mask is not None:
      values = [value for row in values for value in row]
    return tfrecord.int_feature(values)

  features = {
      "input_ids": ints(feature.input_ids),
      "input_mask": ints(feature.input_mask),
      "segment_ids": ints(feature.segment_ids),
      "label_ids": label,
      "is_real_example": tfrecord.int_feature(
          [int(feature.is_real_example)]),
  }
  if feature.window_mask is not None:
    features["window_mask"] = tfrecord.int_feature(feature.window_mask)
  return tf.train.Example(features=tf.train.Features(
      feature=features)).SerializeToString(deterministic=True)


def to_features(examples, label_list, max_seq_length, tokenizer,
                windows=None):
  """Every example's InputFeatures: the original's, or with windows
  (windows.Windows) their windows, warning with the count of examples
  max_windows cut."""
  if windows is None:
    return [convert_single_example(e, label_list, max_seq_length, tokenizer)
            for e in examples]
  converted = [convert_windowed_example(e, label_list, max_seq_length,
                                        tokenizer, windows)
               for e in examples]
  cut = sum(c for _, c in converted)
  if cut:
    logging.warning(
        "%d of %d examples have more than --max_windows=%d windows: the "
        "text of each past its first %d windows is left out.", cut,
        len(examples), windows.max_windows, windows.max_windows)
  return [f for f, _ in converted]


def write_features(examples, label_list, max_seq_length, tokenizer, path,
                   batch_size=None, windows=None):
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
    windows: windows.Windows, or None for the original's one truncated
      sequence per example.

  Returns:
    int, the number of real examples written.
  """
  regression = label_list is None
  features = to_features(examples, label_list, max_seq_length, tokenizer,
                         windows)
  if batch_size:
    padding = padding_features(max_seq_length, regression,
                               windows and windows.max_windows)
    features += [padding] * (-len(features) % batch_size)
  with tfrecord_writer.RoundRobinWriter([path]) as writer:
    for feature in features:
      writer.write(serialize(feature, regression))
  return len(examples)
