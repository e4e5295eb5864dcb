"""BERT fine-tuning and prediction on SQuAD v1.1 and v2.0.

The original command lines work unchanged, e.g. the README's SQuAD 1.1 run:

  python run_squad.py --vocab_file=$BERT_BASE_DIR/vocab.txt \
    --bert_config_file=$BERT_BASE_DIR/bert_config.json \
    --init_checkpoint=$BERT_BASE_DIR/bert_model.ckpt --do_train=True \
    --train_file=$SQUAD_DIR/train-v1.1.json --do_predict=True \
    --predict_file=$SQUAD_DIR/dev-v1.1.json --train_batch_size=12 \
    --learning_rate=3e-5 --num_train_epochs=2.0 --max_seq_length=384 \
    --doc_stride=128 --output_dir=/tmp/squad_base/

Writes predictions.json, nbest_predictions.json and, with
--version_2_with_negative, null_odds.json, as the original. When the predict
file holds answers (a dev set), also eval_results.txt with the official
exact match and F1 (for SQuAD 2.0 also the best --null_score_diff_threshold
and the scores it gives).
"""

import os
import random

if __name__ == "__main__":
  # TensorFlow would import Keras 3 as it starts (~1.2 s); Keras here is
  # tf_keras, so tf.keras may be too (docs/contributing.md, Keras).
  os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")
# pylint: disable=g-import-not-at-top

from absl import flags
from absl import logging

from runner_lib.core import errors
from runner_lib.core.cli import flags as runner_flags
from runner_lib.core.cli import runner
from runner_lib.core.files import fileio
from runner_lib.core.training import distribute
from runner_lib.core.training import optimization
from runner_lib.core.training import predict
from runner_lib.squad import data
from runner_lib.squad import features
from runner_lib.squad import options as squad_options
from runner_lib.squad import predictions
from runner_lib.squad import task as squad_task

FLAGS = flags.FLAGS

runner_flags.define_model_flags(max_seq_length=384)
runner_flags.define_finetuning_flags(modes=("train", "predict"))
flags.DEFINE_string("train_file", None,
                    "SQuAD json for training. E.g., train-v1.1.json")
flags.DEFINE_string(
    "predict_file", None,
    "SQuAD json for predictions. E.g., dev-v1.1.json or test-v1.1.json")
squad_options.define_window_flags()
squad_options.define_answer_flags()
runner_flags.define_tpu_flags()
flags.DEFINE_bool(
    "verbose_logging", False,
    "If true, all of the warnings related to data processing will be "
    "printed. A number of warnings are expected for a normal SQuAD "
    "evaluation.")
squad_options.define_version_2_flags()

# The original pre-shuffles training examples with this seed.
TRAIN_SHUFFLE_SEED = 12345


def check_flags():
  """Validates flags and inputs before any work; returns (config,
  tokenizer)."""
  if not FLAGS.do_train and not FLAGS.do_predict:
    raise errors.InputError(
        "At least one of `do_train` or `do_predict` must be True.")
  if FLAGS.do_train and not FLAGS.train_file:
    raise errors.InputError(
        "If `do_train` is True, then `train_file` must be specified.")
  if FLAGS.do_predict and not FLAGS.predict_file:
    raise errors.InputError(
        "If `do_predict` is True, then `predict_file` must be specified.")
  runner_flags.check_positive(runner_flags.POSITIVE_TRAINING_FLAGS)
  runner_flags.check_learning_flags()
  runner_flags.check_trim_flags()
  config, tokenizer = runner_flags.config_and_tokenizer()
  squad_options.check_flags()
  fileio.check_output_dir(FLAGS.output_dir)
  return config, tokenizer


def read_examples(path, is_training, version_2_with_negative):
  """(the file's data list, its SquadExamples).

  Raises:
    errors.InputError: see data.read_squad_examples; or no usable question.
  """
  squad_json = data.read_squad_json(path)
  examples, _ = data.read_squad_examples(path, is_training,
                                         version_2_with_negative, squad_json)
  if not examples:
    raise errors.InputError("%s holds no usable questions." % path)
  return squad_json, examples


def predict_features(strategy, model, task, path, batch_size):
  """Start and end logits of every feature in the records at path.

  Returns:
    list of predictions.RawResult, in file order.
  """
  outputs = predict.predict_records(
      strategy, lambda batch: task.predict(model, batch), path,
      task.name_to_features(False), batch_size,
      trim=runner.trim_features(task, strategy, False))
  return [predictions.RawResult(int(unique_id), start, end)
          for unique_id, start, end in zip(outputs["unique_ids"],
                                           outputs["start_logits"],
                                           outputs["end_logits"])]


def main(_):
  strategy = distribute.get_strategy(**runner_flags.tpu_flag_values())
  config, tokenizer = check_flags()
  per_replica = runner_flags.per_replica_batch("train_batch_size", strategy)
  runner_flags.per_replica_batch("predict_batch_size", strategy)
  # Read (and check) both files before spending time on either.
  train_examples, num_train_steps, num_warmup_steps = None, 1, 0
  if FLAGS.do_train:
    _, train_examples = read_examples(FLAGS.train_file, True,
                                      FLAGS.version_2_with_negative)
    num_train_steps, num_warmup_steps = optimization.finetuning_steps(
        len(train_examples), FLAGS.train_batch_size, FLAGS.num_train_epochs,
        FLAGS.warmup_proportion)
    # The original's pre-shuffle, so records are not in paragraph order.
    random.Random(TRAIN_SHUFFLE_SEED).shuffle(train_examples)
  if FLAGS.do_predict:
    predict_data, eval_examples = read_examples(
        FLAGS.predict_file, False, FLAGS.version_2_with_negative)

  task = squad_task.SquadTask(config, FLAGS.max_seq_length)
  trainer = runner.trainer_from_flags(strategy, task, num_train_steps,
                                     num_warmup_steps)
  trainer.initialize(FLAGS.init_checkpoint, new_variables=task.new_variables)

  if FLAGS.do_train:
    train_file = os.path.join(FLAGS.output_dir, "train.tf_record")
    logging.info("***** Running training *****")
    num_train_records, _ = features.write_features(
        train_examples, tokenizer, FLAGS.max_seq_length, FLAGS.doc_stride,
        FLAGS.max_query_length, True, train_file)
    logging.info("  Batch size = %d", FLAGS.train_batch_size)
    logging.info("  Num steps = %d", num_train_steps)
    del train_examples
    trainer.train(runner.training_dataset_fn(
        task, strategy, train_file, per_replica, num_train_records),
                  FLAGS.train_batch_size, FLAGS.max_seq_length)

  if FLAGS.do_predict:
    eval_file = os.path.join(FLAGS.output_dir, "eval.tf_record")
    logging.info("***** Running predictions *****")
    _, eval_features = features.write_features(
        eval_examples, tokenizer, FLAGS.max_seq_length, FLAGS.doc_stride,
        FLAGS.max_query_length, False, eval_file)
    logging.info("  Batch size = %d", FLAGS.predict_batch_size)
    results = predict_features(strategy, trainer.model, task, eval_file,
                               FLAGS.predict_batch_size)
    if not trainer.chief:
      return
    answers = predictions.compute_predictions(
        eval_examples, eval_features, results, FLAGS.n_best_size,
        FLAGS.max_answer_length, FLAGS.do_lower_case,
        FLAGS.version_2_with_negative, FLAGS.null_score_diff_threshold,
        FLAGS.verbose_logging)
    predictions.write_predictions(FLAGS.output_dir, answers,
                                  FLAGS.version_2_with_negative)
    scores = task.eval_results({
        "data": predict_data, "predictions": answers,
        "version_2_with_negative": FLAGS.version_2_with_negative})
    if scores is None:
      logging.info("%s has no answers to score against: no evaluation.",
                    FLAGS.predict_file)
    else:
      logging.info("***** Eval results *****")
      runner.write_eval_results(trainer, scores)


if __name__ == "__main__":
  flags.mark_flags_as_required(["vocab_file", "bert_config_file",
                                "output_dir"])
  runner.run(main)
