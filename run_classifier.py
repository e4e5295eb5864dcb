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
"""

import os

from absl import app
from absl import flags
from absl import logging
import tensorflow as tf

from runner_lib import classifier
from runner_lib import classifier_data
from runner_lib import distribute
from runner_lib import errors
from runner_lib import fileio
from runner_lib import flags as runner_flags
from runner_lib import input_pipeline
from runner_lib import model_inputs
from runner_lib import tfrecord

FLAGS = flags.FLAGS

# Required.
flags.DEFINE_string("data_dir", None,
                    "Required. The input data dir: the task's .tsv files.")
flags.DEFINE_string("task_name", None, "Required. The name of the task.")
runner_flags.define_model_flags()
runner_flags.define_training_flags()

# Optional, as the original.
flags.DEFINE_integer("predict_batch_size", 8, "Total batch size for predict.")
flags.DEFINE_bool("do_predict", False,
                  "Whether to run the model in inference mode on the test "
                  "set.")
flags.DEFINE_float("num_train_epochs", 3.0,
                   "Total number of training epochs to perform.")
flags.DEFINE_float("warmup_proportion", 0.1,
                   "Proportion of training to perform linear learning rate "
                   "warmup for. E.g., 0.1 = 10% of training.")
runner_flags.define_tpu_flags()

# Names run_classifier.py gives the new layer in checkpoints.
NEW_VARIABLES = ("output_weights", "output_bias")


def check_flags():
  """Validates flags and inputs; returns (processor, config, tokenizer)."""
  if not (FLAGS.do_train or FLAGS.do_eval or FLAGS.do_predict):
    raise errors.InputError("At least one of `do_train`, `do_eval` or "
                            "`do_predict' must be True.")
  processor = classifier_data.get_processor(FLAGS.task_name)
  config, tokenizer = model_inputs.load_config_and_tokenizer(
      FLAGS.bert_config_file, FLAGS.vocab_file, FLAGS.do_lower_case,
      FLAGS.init_checkpoint, FLAGS.max_seq_length)
  return processor, config, tokenizer


def write_features(examples, task, tokenizer, path, batch_size=None):
  """Writes examples as records, padded with fake ones to full batches."""
  features = [classifier.convert_single_example(
      e, task.label_list, FLAGS.max_seq_length, tokenizer) for e in examples]
  if batch_size:
    padding = classifier.padding_features(FLAGS.max_seq_length,
                                          task.regression)
    features += [padding] * (-len(features) % batch_size)
  with tfrecord.RoundRobinWriter([path]) as writer:
    for feature in features:
      writer.write(classifier.serialize(feature, task.regression))
  return len(features)


def predict_all(strategy, trainer, task, examples, tokenizer, path,
                batch_size):
  """Writes examples to path and runs the model over them.

  Returns:
    dict of numpy arrays over all records, fake padding ones included.
  """
  write_features(examples, task, tokenizer, path, batch_size)
  spec = classifier.name_to_features(FLAGS.max_seq_length, task.regression)
  dataset = input_pipeline.parse_and_batch(tf.data.TFRecordDataset(path),
                                           spec, batch_size)
  return distribute.predict_all(
      strategy, lambda batch: task.predict(trainer.model, batch), dataset)


def main(argv):
  if len(argv) > 1:
    raise app.UsageError("Unexpected arguments: %s" % " ".join(argv[1:]))
  strategy = distribute.get_strategy(**runner_flags.tpu_flag_values())
  processor, config, tokenizer = check_flags()
  task = classifier.ClassificationTask(config, processor.get_labels())
  task_name = FLAGS.task_name.lower()
  per_replica = runner_flags.per_replica_batch("train_batch_size", strategy)
  for name in ("eval_batch_size", "predict_batch_size"):
    runner_flags.per_replica_batch(name, strategy)

  train_examples, num_train_steps, num_warmup_steps = None, 1, 0
  if FLAGS.do_train:
    train_examples = processor.get_train_examples(FLAGS.data_dir)
    num_train_steps = max(1, int(len(train_examples) / FLAGS.train_batch_size
                                 * FLAGS.num_train_epochs))
    num_warmup_steps = int(num_train_steps * FLAGS.warmup_proportion)
  trainer = runner_flags.trainer_from_flags(strategy, task, num_train_steps,
                                           num_warmup_steps)
  trainer.initialize(FLAGS.init_checkpoint, new_variables=NEW_VARIABLES)

  if FLAGS.do_train:
    train_file = os.path.join(FLAGS.output_dir, "train.tf_record")
    write_features(train_examples, task, tokenizer, train_file)
    logging.info("***** Running training *****")
    logging.info("  Num examples = %d", len(train_examples))
    logging.info("  Batch size = %d", FLAGS.train_batch_size)
    logging.info("  Num steps = %d", num_train_steps)
    trainer.train(input_pipeline.training_dataset_fn(
        [train_file],
        classifier.name_to_features(FLAGS.max_seq_length, task.regression),
        per_replica, FLAGS.seed), FLAGS.train_batch_size)

  if FLAGS.do_eval:
    eval_examples = processor.get_dev_examples(FLAGS.data_dir)
    logging.info("***** Running evaluation *****")
    logging.info("  Num examples = %d", len(eval_examples))
    outputs = predict_all(
        strategy, trainer, task, eval_examples, tokenizer,
        os.path.join(FLAGS.output_dir, "eval.tf_record"),
        FLAGS.eval_batch_size)
    results = task.eval_results(outputs, task_name)
    results["global_step"] = trainer.step
    if trainer.chief:
      fileio.write_eval_results(
          os.path.join(FLAGS.output_dir, "eval_results.txt"), results)

  if FLAGS.do_predict:
    predict_examples = processor.get_test_examples(FLAGS.data_dir)
    logging.info("***** Running prediction *****")
    logging.info("  Num examples = %d", len(predict_examples))
    outputs = predict_all(
        strategy, trainer, task, predict_examples, tokenizer,
        os.path.join(FLAGS.output_dir, "predict.tf_record"),
        FLAGS.predict_batch_size)
    real = outputs["is_real_example"] > 0
    probabilities = task.probabilities(outputs["logits"][real])
    if trainer.chief:
      write_predictions(probabilities, task, task_name)


def write_predictions(probabilities, task, task_name):
  """test_results.tsv as the original, and a GLUE submission file."""
  with fileio.atomic_output(os.path.join(FLAGS.output_dir,
                                         "test_results.tsv")) as writer:
    for row in probabilities:
      writer.write("\t".join(str(p) for p in row) + "\n")
  name = classifier.SUBMISSION_NAMES[task_name]
  with fileio.atomic_output(os.path.join(FLAGS.output_dir,
                                         name + ".tsv")) as writer:
    writer.write("index\tprediction\n")
    for index, row in enumerate(probabilities):
      label = ("%.3f" % row[0] if task.regression else
               task.label_list[int(row.argmax())])
      writer.write("%d\t%s\n" % (index, label))
  logging.info("Wrote %d predictions.", len(probabilities))


if __name__ == "__main__":
  flags.mark_flags_as_required(["data_dir", "task_name", "vocab_file",
                                "bert_config_file", "output_dir"])
  errors.run(main)
