"""Extract pre-computed feature vectors from BERT.

The original command line works unchanged:

  python extract_features.py --input_file=input.txt --output_file=out.jsonl \
    --vocab_file=$BERT_BASE_DIR/vocab.txt \
    --bert_config_file=$BERT_BASE_DIR/bert_config.json \
    --init_checkpoint=$BERT_BASE_DIR/bert_model.ckpt \
    --layers=-1,-2,-3,-4 --max_seq_length=128 --batch_size=8

Each input line is one example; "A ||| B" is a sentence pair. Each output
line is JSON: {"linex_index": i, "features": [{"token": ..., "layers":
[{"index": -1, "values": [...]}, ...]}, ...]} with values rounded to 6
decimals, for every token of [CLS] A [SEP] (B [SEP]).
"""

import collections
import json
import re

from absl import app
from absl import flags
from absl import logging
import numpy as np
import tensorflow as tf

import modeling
from runner_lib import distribute
from runner_lib import errors
from runner_lib import features as features_lib
from runner_lib import fileio
from runner_lib import flags as runner_flags
from runner_lib import model_inputs

FLAGS = flags.FLAGS

# Required.
flags.DEFINE_string("input_file", None,
                    "Required. Text file, one example per line; "
                    "'A ||| B' for a pair.")
flags.DEFINE_string("output_file", None, "Required. JSON lines output.")
runner_flags.define_model_flags()

# Optional.
flags.DEFINE_string("layers", "-1,-2,-3,-4",
                    "Comma-separated encoder layers to output; -1 is the last.")
flags.DEFINE_integer("batch_size", 32, "Batch size for predictions.")
runner_flags.define_tpu_flags()
flags.DEFINE_bool(
    "use_one_hot_embeddings", False,
    "If True, tf.one_hot will be used for embedding lookups, otherwise "
    "tf.gather. On TPUs, this should be True since it is much faster.")

# Examples tokenized and run per read of the input: bounds memory on large
# inputs (the original held the whole file).
_BATCHES_PER_CHUNK = 64


class InputExample(object):
  """One input line: text_a and an optional text_b."""

  def __init__(self, unique_id, text_a, text_b):
    self.unique_id = unique_id
    self.text_a = text_a
    self.text_b = text_b


class InputFeatures(object):
  """An example as model input; tokens are kept for the output."""

  def __init__(self, unique_id, tokens, input_ids, input_mask, segment_ids):
    self.unique_id = unique_id
    self.tokens = tokens
    self.input_ids = input_ids
    self.input_mask = input_mask
    self.segment_ids = segment_ids


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
  tokens, input_ids, input_mask, segment_ids = features_lib.encode_pair(
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


def to_json_line(feature, layer_indexes, layer_outputs):
  """Formats one example as the original's JSON line.

  Args:
    feature: InputFeatures.
    layer_indexes: list of int, as given in --layers.
    layer_outputs: list (per layer index) of float32 [T, H] arrays.

  Returns:
    str, one JSON object and a newline.
  """
  all_features = []
  for i, token in enumerate(feature.tokens):
    all_layers = [
        collections.OrderedDict([
            ("index", layer_index),
            # float(x) of a float32 then round(): exactly the original.
            ("values", [round(x, 6) for x in output[i].tolist()]),
        ]) for layer_index, output in zip(layer_indexes, layer_outputs)
    ]
    all_features.append(
        collections.OrderedDict([("token", token), ("layers", all_layers)]))
  output = collections.OrderedDict([("linex_index", feature.unique_id),
                                    ("features", all_features)])
  return json.dumps(output) + "\n"


def batches_dataset(chunk, batch_size, seq_length):
  """Makes fixed-size batches of a list of InputFeatures.

  The last batch is filled with padding examples (unique_id -1), so every
  batch has the static shape a TPU needs; they are dropped on output.
  """
  padding = -len(chunk) % batch_size
  rows = [(f.unique_id, f.input_ids, f.input_mask, f.segment_ids)
          for f in chunk] + [(-1, [0] * seq_length, [0] * seq_length,
                              [0] * seq_length)] * padding
  unique_ids, input_ids, input_mask, segment_ids = zip(*rows)
  return tf.data.Dataset.from_tensor_slices({
      "unique_ids": np.array(unique_ids, np.int32),
      "input_ids": np.array(input_ids, np.int32),
      "input_mask": np.array(input_mask, np.int32),
      "segment_ids": np.array(segment_ids, np.int32),
  }).batch(batch_size, drop_remainder=True)


def chunks(iterable, size):
  chunk = []
  for item in iterable:
    chunk.append(item)
    if len(chunk) == size:
      yield chunk
      chunk = []
  if chunk:
    yield chunk


def check_flags():
  """Validates flags and inputs before any slow work.

  Returns:
    (bert_config, tokenizer, layer_indexes, checkpoint prefix).

  Raises:
    errors.InputError, modeling.ConfigError, modeling.CheckpointError.
  """
  config, tokenizer = model_inputs.load_config_and_tokenizer(
      FLAGS.bert_config_file, FLAGS.vocab_file, FLAGS.do_lower_case,
      FLAGS.init_checkpoint, FLAGS.max_seq_length)
  if FLAGS.batch_size < 1:
    raise errors.InputError("--batch_size must be positive, got %d." %
                            FLAGS.batch_size)
  layer_indexes = parse_layers(FLAGS.layers, config.num_hidden_layers)
  checkpoint = modeling.resolve_checkpoint_path(FLAGS.init_checkpoint)
  if not tf.io.gfile.exists(FLAGS.input_file):
    raise errors.InputError("input_file %s does not exist." %
                            FLAGS.input_file)
  return config, tokenizer, layer_indexes, checkpoint


def main(argv):
  if len(argv) > 1:
    raise app.UsageError("Unexpected arguments: %s" % " ".join(argv[1:]))
  config, tokenizer, layer_indexes, checkpoint = check_flags()
  strategy = distribute.get_strategy(**runner_flags.tpu_flag_values())
  if FLAGS.batch_size % strategy.num_replicas_in_sync:
    raise errors.InputError(
        "--batch_size=%d must be a multiple of the %d replicas." %
        (FLAGS.batch_size, strategy.num_replicas_in_sync))
  with strategy.scope():
    model = modeling.BertModel(
        config, use_one_hot_embeddings=FLAGS.use_one_hot_embeddings)
  modeling.load_checkpoint(model, checkpoint)

  def predict_fn(batch):
    outputs = model(batch, training=False)["all_encoder_layers"]
    return {"unique_ids": batch["unique_ids"],
            "layers": [outputs[i] for i in layer_indexes]}

  run_prediction = distribute.predictor(strategy, predict_fn)
  examples = read_examples(FLAGS.input_file)
  num_written = 0
  with fileio.atomic_output(FLAGS.output_file) as writer:
    for chunk in chunks(examples, FLAGS.batch_size * _BATCHES_PER_CHUNK):
      by_id = {}
      for example in chunk:
        feature = convert_example(example, FLAGS.max_seq_length, tokenizer)
        by_id[feature.unique_id] = feature
      dataset = batches_dataset(list(by_id.values()), FLAGS.batch_size,
                                FLAGS.max_seq_length)
      for result in run_prediction(dataset):
        for row, unique_id in enumerate(result["unique_ids"]):
          if unique_id < 0:
            continue
          writer.write(to_json_line(by_id[unique_id], layer_indexes,
                                    [layer[row] for layer in result["layers"]]))
          num_written += 1
  logging.info("Wrote %d examples to %s", num_written, FLAGS.output_file)


if __name__ == "__main__":
  flags.mark_flags_as_required(["input_file", "output_file", "vocab_file",
                                "bert_config_file", "init_checkpoint"])
  errors.run(main)
