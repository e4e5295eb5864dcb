"""BERT fine-tuning on GLUE and XNLI sentence(-pair) classification.

The original command line works unchanged, e.g. the README's MRPC example:

  python run_classifier.py --task_name=MRPC --do_train=true --do_eval=true \
    --data_dir=$GLUE_DIR/MRPC --vocab_file=$BERT_BASE_DIR/vocab.txt \
    --bert_config_file=$BERT_BASE_DIR/bert_config.json \
    --init_checkpoint=$BERT_BASE_DIR/bert_model.ckpt --max_seq_length=128 \
    --train_batch_size=32 --learning_rate=2e-5 --num_train_epochs=3.0 \
    --output_dir=/tmp/mrpc_output/

Tasks: cola, mnli (mnli-mm for the mismatched dev set), mrpc, sst-2, sts-b
(regression), qqp, qnli, rte, wnli, xnli.

--long_text=windows (beyond the original) reads a text_a longer than
max_seq_length as several windows and averages their logits
(runner_lib/classifier/windows.py).
"""

import os

if __name__ == "__main__":
  # TensorFlow would import Keras 3 as it starts (~1.2 s); Keras here is
  # tf_keras, so tf.keras may be too (docs/contributing.md, Keras).
  os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")
# pylint: disable=g-import-not-at-top

from absl import flags

from runner_lib.classifier import data
from runner_lib.classifier import features
from runner_lib.classifier import options
from runner_lib.classifier import predictions
from runner_lib.classifier import task as classifier_task
from runner_lib.core.cli import flags as runner_flags
from runner_lib.core.cli import runner
from runner_lib.core.training import distribute

FLAGS = flags.FLAGS

# Required.
flags.DEFINE_string("data_dir", None,
                    "Required. The input data dir: the task's .tsv files.")
flags.DEFINE_string("task_name", None, "Required. The name of the task.")
runner_flags.define_model_flags()
runner_flags.define_finetuning_flags()
runner_flags.define_tpu_flags()
options.define_long_text_flags()


def main(_):
  strategy = distribute.get_strategy(**runner_flags.tpu_flag_values())
  per_replica = runner_flags.check_finetuning_flags(strategy)
  processor = data.get_processor(FLAGS.task_name)
  windows = options.windows_from_flags(pair=processor.COLUMNS[1] is not None)
  config, tokenizer = runner_flags.config_and_tokenizer()
  task = classifier_task.ClassificationTask(
      config, FLAGS.max_seq_length, processor.get_labels(), processor.METRICS,
      max_windows=windows and windows.max_windows)
  train_examples = (processor.get_train_examples(FLAGS.data_dir)
                    if FLAGS.do_train else [])
  trainer = runner.finetuning_trainer(strategy, task,
                                      len(train_examples))

  if FLAGS.do_train:
    train_file = os.path.join(FLAGS.output_dir, "train.tf_record")
    features.write_features(train_examples, task.label_list,
                            FLAGS.max_seq_length, tokenizer, train_file,
                            windows=windows)
    runner.train_on_records(trainer, task, train_file,
                            len(train_examples), per_replica)

  if FLAGS.do_eval:
    eval_examples = processor.get_dev_examples(FLAGS.data_dir)
    eval_file = os.path.join(FLAGS.output_dir, "eval.tf_record")
    count = features.write_features(eval_examples, task.label_list,
                                    FLAGS.max_seq_length, tokenizer,
                                    eval_file, FLAGS.eval_batch_size,
                                    windows)
    outputs = runner.predict_on_records(
        trainer, task, eval_file, count, FLAGS.eval_batch_size, "evaluation")
    runner.write_eval_results(trainer, task.eval_results(outputs))

  if FLAGS.do_predict:
    test_examples = processor.get_test_examples(FLAGS.data_dir)
    predict_file = os.path.join(FLAGS.output_dir, "predict.tf_record")
    count = features.write_features(test_examples, task.label_list,
                                    FLAGS.max_seq_length, tokenizer,
                                    predict_file, FLAGS.predict_batch_size,
                                    windows)
    outputs = runner.predict_on_records(
        trainer, task, predict_file, count, FLAGS.predict_batch_size)
    if trainer.chief:
      predictions.write_predictions(
          FLAGS.output_dir,
          predictions.probabilities(outputs["logits"], task.regression),
          task.label_list, processor.SUBMISSION_NAME)

if __name__ == "__main__":
  flags.mark_flags_as_required(["data_dir", "task_name", "vocab_file",
                                "bert_config_file", "output_dir"])
  runner.run(main)
