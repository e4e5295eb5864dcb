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

if __name__ == "__main__":
  # TensorFlow would import Keras 3 as it starts (~1.2 s); Keras here is
  # tf_keras, so tf.keras may be too (docs/contributing.md, Keras).
  os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")
# pylint: disable=g-import-not-at-top

from absl import flags

from runner_lib.core.cli import flags as runner_flags
from runner_lib.core.cli import runner
from runner_lib.core.training import distribute
from runner_lib.core.training import metrics
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


def main(_):
  strategy = distribute.get_strategy(**runner_flags.tpu_flag_values())
  per_replica = runner_flags.check_finetuning_flags(strategy)
  config, tokenizer = runner_flags.config_and_tokenizer()
  task = swag_task.SwagTask(config, FLAGS.max_seq_length)
  # Read every input before the first output, so that bad data stops the
  # run before it writes anything.
  train_examples = (data.get_train_examples(FLAGS.data_dir)
                    if FLAGS.do_train else [])
  eval_examples = (data.get_dev_examples(FLAGS.data_dir)
                   if FLAGS.do_eval else [])
  test_examples = (data.get_test_examples(FLAGS.data_dir)
                   if FLAGS.do_predict else [])
  trainer = runner.finetuning_trainer(strategy, task,
                                      len(train_examples))

  if FLAGS.do_train:
    train_file = os.path.join(FLAGS.output_dir, "train.tf_record")
    features.write_features(train_examples, FLAGS.max_seq_length, tokenizer,
                            train_file)
    runner.train_on_records(trainer, task, train_file,
                            len(train_examples), per_replica)

  if FLAGS.do_eval:
    eval_file = os.path.join(FLAGS.output_dir, "eval.tf_record")
    count = features.write_features(eval_examples, FLAGS.max_seq_length,
                                    tokenizer, eval_file)
    outputs = runner.predict_on_records(
        trainer, task, eval_file, count, FLAGS.eval_batch_size, "evaluation")
    runner.write_eval_results(trainer, task.eval_results(outputs))

  if FLAGS.do_predict:
    predict_file = os.path.join(FLAGS.output_dir, "predict.tf_record")
    count = features.write_features(test_examples, FLAGS.max_seq_length,
                                    tokenizer, predict_file)
    outputs = runner.predict_on_records(
        trainer, task, predict_file, count, FLAGS.predict_batch_size)
    if trainer.chief:
      predictions.write_predictions(FLAGS.output_dir, test_examples,
                                    metrics.softmax(outputs["logits"]))

if __name__ == "__main__":
  flags.mark_flags_as_required(["data_dir", "vocab_file", "bert_config_file",
                                "output_dir"])
  runner.run(main)
