"""Run masked LM / next sentence masked_lm pre-training for BERT.

The original command line works unchanged:

  python run_pretraining.py --input_file=/tmp/tf_examples.tfrecord \
    --output_dir=/tmp/pretraining_output --do_train=True --do_eval=True \
    --bert_config_file=$BERT_BASE_DIR/bert_config.json \
    --init_checkpoint=$BERT_BASE_DIR/bert_model.ckpt \
    --train_batch_size=32 --max_seq_length=128 --max_predictions_per_seq=20 \
    --num_train_steps=20 --num_warmup_steps=10 --learning_rate=2e-5

Run again with the same output_dir to resume from its latest checkpoint.

With --dynamic_masking it reads the unmasked records of
create_pretraining_data.py --dynamic_masking and draws the masks as it
reads each example (runner_lib/pretraining/masking.py), new ones on every
pass over the records:

  python run_pretraining.py --dynamic_masking --input_file=... \
    --vocab_file=$BERT_BASE_DIR/vocab.txt --masked_lm_prob=0.15 ...
"""

import os

if __name__ == "__main__":
  # TensorFlow would import Keras 3 as it starts (~1.2 s); Keras here is
  # tf_keras, so tf.keras may be too (docs/contributing.md, Keras).
  os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")
# pylint: disable=g-import-not-at-top

from absl import flags
from absl import logging

import modeling
from runner_lib.core import errors
from runner_lib.core.cli import flags as runner_flags
from runner_lib.core.cli import runner
from runner_lib.core.files import fileio
from runner_lib.core.inputs import input_pipeline
from runner_lib.core.inputs import text_input
from runner_lib.core.training import distribute
from runner_lib.pretraining import documents as pretraining_documents
from runner_lib.pretraining import masking
from runner_lib.pretraining import task as pretraining_task
from tokenization import wordpiece

FLAGS = flags.FLAGS

# Required.
flags.DEFINE_string("bert_config_file", None,
                    "Required. The config json file corresponding to the "
                    "pre-trained BERT model.")
flags.DEFINE_string("input_file", None,
                    "Required. Input TF example files (comma-separated "
                    "globs).")
runner_flags.define_training_flags()

# Optional, as the original.
flags.DEFINE_string("init_checkpoint", None,
                    "Initial checkpoint (usually from a pre-trained BERT "
                    "model), cls/ heads included.")
flags.DEFINE_integer("max_seq_length", 128,
                     "The maximum total input sequence length; must match "
                     "the data.")
flags.DEFINE_integer("max_predictions_per_seq", 20,
                     "Maximum number of masked LM predictions per sequence; "
                     "must match the data.")
flags.DEFINE_integer("num_train_steps", 100000, "Number of training steps.")
flags.DEFINE_integer("num_warmup_steps", 10000, "Number of warmup steps.")
flags.DEFINE_integer("max_eval_steps", 100, "Maximum number of eval steps.")
runner_flags.define_tpu_flags()

# Optional, new here.
flags.DEFINE_enum("objective", "mlm_nsp", list(pretraining_task.OBJECTIVES),
                  "mlm_nsp: the original. mlm: masked LM only (the paper's "
                  "No NSP ablation). ltr: left-to-right LM with causal "
                  "attention, no NSP (the paper's LTR & No NSP).")
flags.DEFINE_bool(
    "skip_padding", True,
    "The encoder's projections, feed-forward layers and LayerNorms compute "
    "on the records' real tokens only (no pre-training loss reads a "
    "padding position): the same losses and gradients as the padded step "
    "to float32 rounding, faster where instances are short (each "
    "document's last one; docs/training.md, Unpadded pre-training). Off "
    "with --use_xla and on TPU, which need static shapes. false: every "
    "position computed, as the original.")
flags.DEFINE_bool("dynamic_masking", False,
                  "Read unmasked records (create_pretraining_data.py "
                  "--dynamic_masking) and mask each example as it is read, "
                  "by the original's rules, with new masks on every pass "
                  "(keyed by --seed and the example's number in the "
                  "stream, so reproducible and the same on resume). Eval "
                  "masks with a fixed seed. Needs --vocab_file.")
flags.DEFINE_string("vocab_file", None,
                    "With --dynamic_masking: the vocab the records were made "
                    "with, for the id of [MASK] and the range of random "
                    "replacement ids.")
flags.DEFINE_float("masked_lm_prob", 0.15,
                   "With --dynamic_masking: the masked LM probability.")
flags.DEFINE_bool("do_whole_word_mask", False,
                  "With --dynamic_masking: mask all WordPieces of a word "
                  "together.")

# Flags that only --dynamic_masking reads.
DYNAMIC_MASKING_FLAGS = ("vocab_file", "masked_lm_prob", "do_whole_word_mask")


def check_flags():
  """Validates flags before any slow work; returns the config and files."""
  if not FLAGS.do_train and not FLAGS.do_eval:
    raise errors.InputError("At least one of --do_train or --do_eval must be "
                            "True.")
  config = modeling.BertConfig.from_json_file(FLAGS.bert_config_file)
  if FLAGS.max_seq_length > config.max_position_embeddings:
    raise errors.InputError(
        "--max_seq_length=%d exceeds max_position_embeddings=%d of %s." %
        (FLAGS.max_seq_length, config.max_position_embeddings,
         FLAGS.bert_config_file))
  runner_flags.check_positive(runner_flags.POSITIVE_TRAINING_FLAGS +
                              ("num_train_steps", "max_eval_steps"))
  if FLAGS.num_warmup_steps < 0:
    raise errors.InputError("--num_warmup_steps must be >= 0.")
  runner_flags.check_learning_flags()
  if FLAGS.do_train:
    runner_flags.warn_long_warmup(FLAGS.num_train_steps,
                                  FLAGS.num_warmup_steps)
  maskers = check_dynamic_masking_flags(config)
  files = text_input.expand_globs(FLAGS.input_file)
  task = pretraining_task.PretrainingTask(config, FLAGS.max_seq_length,
                                          FLAGS.max_predictions_per_seq,
                                          FLAGS.objective,
                                          FLAGS.dynamic_masking)
  input_pipeline.check_record_files(
      files, task.name_to_features(True),
      {"input_ids": "max_seq_length", "input_mask": "max_seq_length",
       "segment_ids": "max_seq_length",
       "masked_lm_candidates": "max_seq_length",
       "masked_lm_positions": "max_predictions_per_seq",
       "masked_lm_ids": "max_predictions_per_seq",
       "masked_lm_weights": "max_predictions_per_seq"},
      missing_hints={
          masking.CANDIDATES: "masked records: run without "
                              "--dynamic_masking, or make unmasked ones with "
                              "create_pretraining_data.py --dynamic_masking",
          "masked_lm_positions": "unmasked records "
                                 "(create_pretraining_data.py "
                                 "--dynamic_masking)? Pass --dynamic_masking "
                                 "to mask them as they are read"})
  if FLAGS.init_checkpoint:
    modeling.resolve_checkpoint_path(FLAGS.init_checkpoint)
  fileio.check_output_dir(FLAGS.output_dir)
  return task, files, maskers


def check_dynamic_masking_flags(config):
  """The masking flags' checks; with --dynamic_masking the functions that
  mask training and eval examples (masking.example_masker and
  masking.eval_masker), else Nones.

  Raises:
    errors.InputError: naming the flag.
  """
  if not FLAGS.dynamic_masking:
    given = [name for name in DYNAMIC_MASKING_FLAGS if FLAGS[name].present]
    if given:
      raise errors.InputError(
          "%s: for --dynamic_masking only (masked records carry their "
          "masks)." % ", ".join("--" + name for name in given))
    return None, None
  if not FLAGS.vocab_file:
    raise errors.InputError(
        "--dynamic_masking needs --vocab_file: the id of [MASK] and the "
        "range of random replacement ids come from it.")
  if not 0.0 < FLAGS.masked_lm_prob < 1.0:
    raise errors.InputError("--masked_lm_prob must be in (0, 1), got %s." %
                            FLAGS.masked_lm_prob)
  try:
    tokens = wordpiece.read_vocab_tokens(FLAGS.vocab_file)
    wordpiece.check_vocab_tokens(tokens, FLAGS.vocab_file)
  except wordpiece.VocabError as e:
    raise errors.InputError(str(e)) from None
  vocab = pretraining_documents.masking_vocab(
      {token: index for index, token in enumerate(tokens)}, FLAGS.vocab_file)
  if vocab.size > config.vocab_size:
    raise errors.InputError(
        "--vocab_file %s has %d tokens but vocab_size=%d in %s." %
        (FLAGS.vocab_file, vocab.size, config.vocab_size,
         FLAGS.bert_config_file))
  # Random replacements are drawn over the vocab file's ids, as the
  # original draws over its tokens (not over a config's padded vocab_size).
  options = (FLAGS.masked_lm_prob, FLAGS.max_predictions_per_seq,
             FLAGS.do_whole_word_mask, vocab.mask_id, vocab.size)
  return (masking.example_masker(FLAGS.seed, *options),
          masking.eval_masker(*options))


def main(_):
  # First: multi-worker collectives must be set up before any TF op runs.
  strategy = distribute.get_strategy(**runner_flags.tpu_flag_values())
  task, files, (train_masker, eval_masker) = check_flags()
  train_batch = runner_flags.per_replica_batch("train_batch_size", strategy)
  eval_batch = runner_flags.per_replica_batch("eval_batch_size", strategy)
  trainer = runner.trainer_from_flags(
      strategy, task, FLAGS.num_train_steps, FLAGS.num_warmup_steps)
  trainer.initialize(FLAGS.init_checkpoint)
  if FLAGS.do_train:
    logging.info("***** Running training *****")
    logging.info("  Batch size = %d", FLAGS.train_batch_size)
    trainer.train(input_pipeline.training_dataset_fn(
        files, task.name_to_features(True), train_batch, FLAGS.seed,
        per_example=train_masker),
                  FLAGS.train_batch_size, FLAGS.max_seq_length)
  if FLAGS.do_eval:
    logging.info("***** Running evaluation *****")
    logging.info("  Batch size = %d", FLAGS.eval_batch_size)
    runner.write_eval_results(trainer, task.eval_results(trainer.evaluate(
        input_pipeline.eval_dataset_fn(files, task.name_to_features(False),
                                       eval_batch, per_example=eval_masker),
        task.metrics, FLAGS.max_eval_steps)))


if __name__ == "__main__":
  flags.mark_flags_as_required(["input_file", "bert_config_file",
                                "output_dir"])
  runner.run(main)
