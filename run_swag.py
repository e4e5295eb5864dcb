"""BERT fine-tuning on SWAG, the paper's multiple-choice benchmark.

The original release had no SWAG runner; this one takes run_classifier.py's
flags (without --task_name) and the paper's recipe as defaults:

  python run_swag.py --do_train=true --do_eval=true \
    --data_dir=$SWAG_DIR --vocab_file=$BERT_BASE_DIR/vocab.txt \
    --bert_config_file=$BERT_BASE_DIR/bert_config.json \
    --init_checkpoint=$BERT_BASE_DIR/bert_model.ckpt --max_seq_length=128 \
    --train_batch_size=16 --learning_rate=2e-5 --num_train_epochs=3.0 \
    --output_dir=/tmp/swag_output/

--data_dir holds the SWAG release's train.csv, val.csv (--do_eval) and
test.csv (--do_predict). Each example is four sequences [CLS] sent1 [SEP]
sent2 ending_i [SEP]; the model scores each from its pooled output and a
softmax over the four picks the ending.
"""

import os

from absl import flags
from absl import logging

from runner_lib.core import distribute
from runner_lib.core import errors
from runner_lib.core import fileio
from runner_lib.core import flags as runner_flags
from runner_lib.core import metrics
from runner_lib.core import model_inputs
from runner_lib.core import predict
from runner_lib.swag import data
from runner_lib.swag import features
from runner_lib.swag import predictions
from runner_lib.swag import task as swag_task

FLAGS = flags.FLAGS

flags.DEFINE_string("data_dir", None, "Required. The input data dir: the "
                    "SWAG release's train.csv, val.csv and test.csv.")
runner_flags.define_model_flags()
runner_flags.define_finetuning_flags()
runner_flags.define_tpu_flags()
# The paper's SWAG recipe (section 4.4): batch 16, learning rate 2e-5,
# 3 epochs.
FLAGS.set_default("train_batch_size", 16)
FLAGS.set_default("learning_rate", 2e-5)


def predict_examples(strategy, model, task, examples, tokenizer, path,
                     batch_size):
  """Writes examples to path as records and runs the model over them.

  Returns:
    dict of numpy arrays, task.predict's outputs, one row per example.
  """
  count = features.write_features(examples, task.max_seq_length, tokenizer,
                                  path)
  return predict.predict_records(
      strategy, lambda batch: task.predict(model, batch), path,
      task.name_to_features(False), batch_size, num_records=count)


def main(_):
  strategy = distribute.get_strategy(**runner_flags.tpu_flag_values())
  per_replica = runner_flags.check_finetuning_flags(strategy)
  config, tokenizer = model_inputs.load_config_and_tokenizer(
      FLAGS.bert_config_file, FLAGS.vocab_file, FLAGS.do_lower_case,
      FLAGS.init_checkpoint, FLAGS.max_seq_length)
  task = swag_task.SwagTask(config, FLAGS.max_seq_length)
  # Read every input before the first output, so that bad data stops the
  # run before it writes anything.
  train_examples = (data.get_train_examples(FLAGS.data_dir)
                    if FLAGS.do_train else [])
  eval_examples = (data.get_dev_examples(FLAGS.data_dir)
                   if FLAGS.do_eval else [])
  test_examples = (data.get_test_examples(FLAGS.data_dir)
                   if FLAGS.do_predict else [])
  trainer = runner_flags.finetuning_trainer(strategy, task,
                                            len(train_examples))

  if FLAGS.do_train:
    train_file = os.path.join(FLAGS.output_dir, "train.tf_record")
    features.write_features(train_examples, FLAGS.max_seq_length, tokenizer,
                            train_file)
    runner_flags.train_on_records(trainer, task, train_file,
                                  len(train_examples), per_replica)

  if FLAGS.do_eval:
    logging.info("***** Running evaluation *****")
    logging.info("  Num examples = %d", len(eval_examples))
    outputs = predict_examples(
        strategy, trainer.model, task, eval_examples, tokenizer,
        os.path.join(FLAGS.output_dir, "eval.tf_record"),
        FLAGS.eval_batch_size)
    results = task.eval_results(outputs)
    results["global_step"] = trainer.step
    if trainer.chief:
      fileio.write_eval_results(
          os.path.join(FLAGS.output_dir, "eval_results.txt"), results)

  if FLAGS.do_predict:
    logging.info("***** Running prediction *****")
    logging.info("  Num examples = %d", len(test_examples))
    outputs = predict_examples(
        strategy, trainer.model, task, test_examples, tokenizer,
        os.path.join(FLAGS.output_dir, "predict.tf_record"),
        FLAGS.predict_batch_size)
    if trainer.chief:
      predictions.write_predictions(FLAGS.output_dir, test_examples,
                                    metrics.softmax(outputs["logits"]))


if __name__ == "__main__":
  flags.mark_flags_as_required(["data_dir", "vocab_file", "bert_config_file",
                                "output_dir"])
  errors.run(main)
