"""extract_features' input: one example per line ("A ||| B" a pair), packed
as [CLS] A [SEP] (B [SEP]); and the --layers it outputs."""

import dataclasses
import re

from absl import logging
import numpy as np
import tensorflow as tf

from runner_lib.core import errors
from runner_lib.core.inputs import packing


@dataclasses.dataclass(eq=False)
class InputExample:
  """One input line: text_a and an optional text_b."""

  unique_id: int
  text_a: str
  text_b: object

@dataclasses.dataclass(eq=False)
class InputFeatures:
  """An example as model input; tokens are kept for the output."""

  unique_id: int
  tokens: list
  input_ids: list
  input_mask: list
  segment_ids: list

def read_examples(input_file):
  """Yields an InputExample per line of input_file.

  Args:
    input_file: str path.

  Yields:
    InputExample with unique_id = line number from 0.

  Raises:
    errors.InputError: a line is not UTF-8.
  """
  with tf.io.gfile.GFile(input_file, "rb") as reader:
    for unique_id, raw in enumerate(reader):
      try:
        line = raw.decode("utf-8").strip()
      except UnicodeDecodeError as e:
        raise errors.InputError("input_file %s, line %d is not UTF-8: %s" %
                                (input_file, unique_id + 1, e)) from None
      m = re.match(r"^(.*) \|\|\| (.*)$", line)
      if m is None:
        yield InputExample(unique_id, line, None)
      else:
        yield InputExample(unique_id, m.group(1), m.group(2))


def convert_example(example, seq_length, tokenizer):
  """Tokenizes, truncates and pads one example.

  Args:
    example: InputExample.
    seq_length: int, padded length.
    tokenizer: FullTokenizer.

  Returns:
    InputFeatures with int lists of length seq_length.
  """
  tokens, input_ids, input_mask, segment_ids = packing.encode_pair(
      tokenizer, example.text_a, example.text_b, seq_length)
  if example.unique_id < 5:
    logging.info("*** Example ***")
    logging.info("unique_id: %s", example.unique_id)
    logging.info("tokens: %s", " ".join(tokens))
    logging.info("input_ids: %s", " ".join(map(str, input_ids)))
    logging.info("input_mask: %s", " ".join(map(str, input_mask)))
    logging.info("segment_ids: %s", " ".join(map(str, segment_ids)))
  return InputFeatures(example.unique_id, tokens, input_ids, input_mask,
                       segment_ids)


def parse_layers(layers, num_hidden_layers):
  """Parses --layers into ints within [-L, L).

  Raises:
    errors.InputError: not a list of ints, or out of range.
  """
  try:
    indexes = [int(x) for x in layers.split(",")]
  except ValueError:
    raise errors.InputError(
        "--layers=%s must be comma-separated integers, e.g. -1,-2,-3,-4." %
        layers) from None
  for index in indexes:
    if not -num_hidden_layers <= index < num_hidden_layers:
      raise errors.InputError(
          "--layers=%s: layer %d does not exist in a model with "
          "num_hidden_layers=%d (valid: %d..%d)." %
          (layers, index, num_hidden_layers, -num_hidden_layers,
           num_hidden_layers - 1))
  return indexes


def chunks(iterable, size):
  """Yields lists of up to size consecutive items."""
  chunk = []
  for item in iterable:
    chunk.append(item)
    if len(chunk) == size:
      yield chunk
      chunk = []
  if chunk:
    yield chunk


def features_dataset(features):
  """A dataset of the features' model inputs, one example each (int32
  [seq_length]), in order."""
  return tf.data.Dataset.from_tensor_slices({
      "input_ids": np.array([f.input_ids for f in features], np.int32),
      "input_mask": np.array([f.input_mask for f in features], np.int32),
      "segment_ids": np.array([f.segment_ids for f in features], np.int32),
  })
