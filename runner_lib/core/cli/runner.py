"""The steps every runner takes with the shared flags (flags.py): seed,
precision policy and Trainer; training and prediction over record files;
eval_results.txt; main under the error handler that cleans --output_dir."""

import os

from absl import flags
from absl import logging
import tensorflow as tf
import tf_keras

from runner_lib.core import errors
from runner_lib.core import training
from runner_lib.core.files import fileio
from runner_lib.core.files import outdir_lock
from runner_lib.core.inputs import input_pipeline
from runner_lib.core.training import checkpointing
from runner_lib.core.training import optimization
from runner_lib.core.training import precision
from runner_lib.core.training import predict

FLAGS = flags.FLAGS


def trims(strategy):
  """Whether batches are trimmed: --trim_padding, and not on TPU (static
  shapes)."""
  return FLAGS.trim_padding and not isinstance(strategy,
                                               tf.distribute.TPUStrategy)


def trim_features(task, strategy, is_training):
  """The features a batch is cut on: Task.sequence_features where trims().

  Returns:
    tuple of str.
  """
  return task.sequence_features(is_training) if trims(strategy) else ()


def skips_padding(task, strategy):
  """Whether the task's encoder computes on real tokens only
  (Task.model_builder): the task reads no padding position
  (Task.SKIP_PADDING), the run allows shapes known only at run time
  (run_pretraining.py's --skip_padding, the fine-tuning runners' trimmed
  batches), and no --use_xla (XLA compiles static shapes; the number of
  real tokens is known only at run time) and no TPU."""
  if "skip_padding" in FLAGS:
    allowed = FLAGS.skip_padding and not isinstance(
        strategy, tf.distribute.TPUStrategy)
  else:
    allowed = trims(strategy)
  return task.SKIP_PADDING and allowed and not FLAGS.use_xla


def trainer_from_flags(strategy, task, num_train_steps, num_warmup_steps):
  """Seeds, sets the precision policy and builds the task's Trainer.

  Args:
    strategy: tf.distribute.Strategy.
    task: core/training/task.Task.
    num_train_steps: int.
    num_warmup_steps: int.

  Returns:
    training.Trainer on --output_dir (created), not yet initialized; with
    --do_train, the chief holds --output_dir's lock until it exits, and
    what an interrupted checkpoint write left there is gone. Another
    worker of a cluster leaves --output_dir to the chief, failed or not
    (fileio.leave_to_chief).

  Raises:
    outdir_lock.OutputDirLockedError: another run trains in --output_dir.
  """
  tf_keras.utils.set_random_seed(FLAGS.seed)
  options = precision.training_options(FLAGS.precision, FLAGS.use_xla,
                                      FLAGS.fused_kernels)
  logging.info("Fused CPU kernels: %s.",
               "on" if options.kernels else "off")
  tf.io.gfile.makedirs(FLAGS.output_dir)
  if not training.is_chief(strategy):
    fileio.leave_to_chief(FLAGS.output_dir)
  elif FLAGS.do_train and outdir_lock.lock_until_exit(FLAGS.output_dir):
    checkpointing.remove_temporaries(FLAGS.output_dir)
  return training.Trainer(
      strategy,
      model_fn=task.model_builder(skips_padding(task, strategy),
                                  FLAGS.gradient_checkpointing, options),
      loss_fn=task.loss,
      config=training.TrainingConfig(
          output_dir=FLAGS.output_dir,
          learning_rate=FLAGS.learning_rate,
          num_train_steps=num_train_steps,
          num_warmup_steps=num_warmup_steps,
          iterations_per_loop=FLAGS.iterations_per_loop,
          save_checkpoints_steps=FLAGS.save_checkpoints_steps,
          keep_checkpoint_max=FLAGS.keep_checkpoint_max,
          jit_compile=FLAGS.use_xla,
          gradient_accumulation_steps=FLAGS.gradient_accumulation_steps,
          optimizer=FLAGS.optimizer,
          loss_scaling=FLAGS.precision == "float16",
          # float32 keeps the original's rounding (op for op, or the
          # kernel's bit-identical pass).
          update=precision.optimizer_update(options, FLAGS.precision,
                                            FLAGS.fused_kernels)))


def finetuning_trainer(strategy, task, num_train_examples):
  """The Trainer of a fine-tuning run, initialized from --init_checkpoint
  (or its own latest checkpoint in --output_dir).

  Args:
    strategy: tf.distribute.Strategy.
    task: core/training/task.Task; its new_variables may be missing from the
      initial checkpoint.
    num_train_examples: int, the training set's size (ignored without
      --do_train); with --num_train_epochs and --warmup_proportion it sets
      the steps.

  Returns:
    training.Trainer.

  Raises:
    errors.InputError: --do_train with no training example (an empty or
      header-only file would otherwise repeat zero records forever).
  """
  if FLAGS.do_train and not num_train_examples:
    raise errors.InputError(
        "--do_train: the training file in --data_dir %s holds no examples." %
        FLAGS.data_dir)
  num_train_steps, num_warmup_steps = 1, 0
  if FLAGS.do_train:
    num_train_steps, num_warmup_steps = optimization.finetuning_steps(
        num_train_examples, FLAGS.train_batch_size, FLAGS.num_train_epochs,
        FLAGS.warmup_proportion)
  trainer = trainer_from_flags(strategy, task, num_train_steps,
                               num_warmup_steps)
  trainer.initialize(FLAGS.init_checkpoint, new_variables=task.new_variables)
  return trainer


def train_on_records(trainer, task, train_file, num_examples, per_replica):
  """Trains on a record file of num_examples examples, as the original
  logs it.

  Args:
    trainer: training.Trainer, from finetuning_trainer.
    task: core/training/task.Task, the records' schema.
    train_file: str, the TFRecord file.
    num_examples: int, the records in train_file.
    per_replica: int, the per-replica batch (check_finetuning_flags).
  """
  logging.info("***** Running training *****")
  logging.info("  Num examples = %d", num_examples)
  logging.info("  Batch size = %d", FLAGS.train_batch_size)
  logging.info("  Num steps = %d", trainer.config.num_train_steps)
  trainer.train(training_dataset_fn(task, trainer.strategy, train_file,
                                    per_replica, num_examples),
                FLAGS.train_batch_size, FLAGS.max_seq_length)


def training_dataset_fn(task, strategy, train_file, per_replica,
                        num_records):
  """input_pipeline.training_dataset_fn for a record file of num_records
  records, read in epochs (each a permutation of all of them), trimmed and
  bucketed as --trim_padding and --bucket_by_length say."""
  trim = trim_features(task, strategy, True)
  return input_pipeline.training_dataset_fn(
      [train_file], task.name_to_features(True), per_replica, FLAGS.seed,
      trim=trim, bucket_by_length=bool(trim) and FLAGS.bucket_by_length,
      num_records=num_records)


def predict_on_records(trainer, task, path, num_records, batch_size,
                       mode="prediction"):
  """Runs task.predict with the trainer's model over a record file.

  Args:
    trainer: training.Trainer.
    task: core/training/task.Task, the records' schema and predict().
    path: str, the TFRecord file.
    num_records: int, how many records (from the start) to predict.
    batch_size: int, the global batch size.
    mode: str, for the log: "evaluation" or "prediction".

  Returns:
    dict of numpy arrays, task.predict's outputs, one row per record.
  """
  logging.info("***** Running %s *****", mode)
  logging.info("  Num examples = %d", num_records)
  return predict.predict_records(
      trainer.strategy, lambda batch: task.predict(trainer.model, batch),
      path, task.name_to_features(False), batch_size,
      num_records=num_records,
      trim=trim_features(task, trainer.strategy, False))


def write_eval_results(trainer, results):
  """Adds global_step to results and writes them to
  --output_dir/eval_results.txt (on the chief only)."""
  results["global_step"] = trainer.step
  if trainer.chief:
    fileio.write_eval_results(
        os.path.join(FLAGS.output_dir, "eval_results.txt"), results)


def run(main):
  """errors.run(main) for a runner with --output_dir: a failed run first
  removes what it left half done there (fileio.cleaned_on_failure)."""

  def main_cleaned_on_failure(argv):
    with fileio.cleaned_on_failure(FLAGS.output_dir):
      try:
        return main(argv)
      finally:
        outdir_lock.release_all()

  errors.run(main_cleaned_on_failure)
