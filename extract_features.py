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

import os

if __name__ == "__main__":
  # TensorFlow would import Keras 3 as it starts (~1.2 s); Keras here is
  # tf_keras, so tf.keras may be too (docs/contributing.md, Keras).
  os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")
# pylint: disable=g-import-not-at-top

from absl import flags
from absl import logging
import tensorflow as tf

import modeling
from runner_lib.core import errors
from runner_lib.core.cli import flags as runner_flags
from runner_lib.core.cli import runner
from runner_lib.core.files import fileio
from runner_lib.core.training import distribute
from runner_lib.core.training import precision
from runner_lib.core.training import predict
from runner_lib.extraction import data
from runner_lib.extraction import jsonl

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
runner_flags.define_trim_flag()
runner_flags.define_inference_precision_flag()
flags.DEFINE_bool(
    "use_one_hot_embeddings", False,
    "If True, tf.one_hot will be used for embedding lookups, otherwise "
    "tf.gather. On TPUs, this should be True since it is much faster.")

# Examples tokenized and run per read of the input: bounds memory on large
# inputs (the original held the whole file).
_BATCHES_PER_CHUNK = 64


def check_flags():
  """Validates flags and inputs before any slow work.

  Returns:
    (bert_config, tokenizer, layer_indexes).

  Raises:
    errors.InputError (errors.OutputError: --output_file cannot be
      written), modeling.ConfigError, modeling.CheckpointError.
  """
  config, tokenizer = runner_flags.config_and_tokenizer()
  runner_flags.check_positive(("batch_size",))
  layer_indexes = data.parse_layers(FLAGS.layers, config.num_hidden_layers)
  modeling.resolve_checkpoint_path(FLAGS.init_checkpoint)
  if not tf.io.gfile.exists(FLAGS.input_file):
    raise errors.InputError("input_file %s does not exist." %
                            FLAGS.input_file)
  if not tf.io.gfile.stat(FLAGS.input_file).length:
    raise errors.InputError("input_file %s is empty: no lines to extract "
                            "features of." % FLAGS.input_file)
  fileio.check_output_file(FLAGS.output_file)
  return config, tokenizer, layer_indexes


def main(_):
  config, tokenizer, layer_indexes = check_flags()
  strategy = distribute.get_strategy(**runner_flags.tpu_flag_values())
  if FLAGS.batch_size % strategy.num_replicas_in_sync:
    raise errors.InputError(
        "--batch_size=%d must be a multiple of the %d replicas." %
        (FLAGS.batch_size, strategy.num_replicas_in_sync))
  options = precision.prediction_options(FLAGS.precision)
  with strategy.scope():
    # Only real tokens' values are written: with trimmed batches the
    # encoder can skip the padding.
    model = modeling.BertModel(
        config, use_one_hot_embeddings=FLAGS.use_one_hot_embeddings,
        skip_padding=runner.trims(strategy), options=options)
  # The flag, not the prefix check_flags found: in a directory, a damaged
  # newest data file falls back to the checkpoint before it.
  modeling.load_checkpoint(model, FLAGS.init_checkpoint)

  def predict_fn(batch):
    outputs = model(batch, training=False)["all_encoder_layers"]
    return [outputs[i] for i in layer_indexes]

  run_prediction = predict.predictor(strategy, predict_fn)
  # Only each example's own tokens are written, so a batch can stop after
  # its longest (in input order: the lines are written as they come).
  trim = (("input_ids", "input_mask", "segment_ids")
          if runner.trims(strategy) else ())
  examples = data.read_examples(FLAGS.input_file)
  num_written = 0
  with fileio.atomic_output(FLAGS.output_file) as writer:
    for chunk in data.chunks(examples, FLAGS.batch_size * _BATCHES_PER_CHUNK):
      features = [data.convert_example(example, FLAGS.max_seq_length,
                                       tokenizer) for example in chunk]
      # Outputs come in input order, padding rows dropped.
      rows = iter(features)
      for layers in run_prediction(predict.pad_and_batch(
          data.features_dataset(features), FLAGS.batch_size, trim)):
        for row in range(len(layers[0])):
          writer.write(jsonl.to_json_line(next(rows), layer_indexes,
                                          [layer[row] for layer in layers]))
          num_written += 1
  logging.info("Wrote %d examples to %s", num_written, FLAGS.output_file)


if __name__ == "__main__":
  flags.mark_flags_as_required(["input_file", "output_file", "vocab_file",
                                "bert_config_file", "init_checkpoint"])
  errors.run(main)
