"""Length-trimmed batches (--trim_padding) against full-length ones.

On real data from ../shared/data, max_seq_length 128, batch 32:
- MRPC: one epoch of fine-tuning plus dev prediction, ours trimmed (the
  encoder skipping padding, as the runner does; also computing it, and
  with --bucket_by_length) vs ours full length (the original's shapes) vs
  Model Garden's BertClassifier on
  the same full-length records (its AdamW, the original's settings); and
  the dev probabilities of the trimmed and the full-length path from the
  same weights (max difference).
- SST-2 and CoNLL-2003 dev prediction: trimmed (sorted by length) vs full
  length, same weights.
- SQuAD v1.1: four epochs of training at seq 384 (windows mostly full),
  trimmed vs full length.
Whole runs alternate (--repeats); medians and ratios are printed.

  .venv/bin/python benchmarks/speed/bench_trim.py [--shapes=small,base]
      [--max_train_steps=N] [--repeats=1]
"""

import math
import os
import sys
import tempfile
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
sys.path.insert(0, os.path.abspath(os.path.join(__file__, "../../..")))

from absl import app  # pylint: disable=g-import-not-at-top
from absl import flags
from absl import logging
import numpy as np
import tensorflow as tf

from official.nlp.modeling import models

from benchmarks.lib import model_garden
from benchmarks.lib import results
from benchmarks.lib.shapes import SHAPES
import modeling
from runner_lib.classifier import data as classifier_data
from runner_lib.classifier import features as classifier_features
from runner_lib.classifier import task as classifier_task
from runner_lib.core import training
from runner_lib.core.inputs import input_pipeline
from runner_lib.core.training import predict
from runner_lib.ner import data as ner_data
from runner_lib.ner import features as ner_features
from runner_lib.ner import task as ner_task
from runner_lib.squad import data as squad_data
from runner_lib.squad import features as squad_features
from runner_lib.squad import task as squad_task
import tokenization
from tests import reference
from tests.conftest import SHARED_DATA

FLAGS = flags.FLAGS
flags.DEFINE_string("shapes", "small", "Comma-separated: small, base.")
flags.DEFINE_integer("max_train_steps", 0,
                     "Cap on MRPC training steps (0: one epoch, 115).")
flags.DEFINE_integer("repeats", 1, "Alternated whole runs per variant.")
flags.DEFINE_list("tasks", ["mrpc", "sst-2", "conll", "squad"],
                  "Which to run.")
results.define_flags()

SEQ = 128
BATCH = 32


def glue_records(directory, task_name, tokenizer):
  """(train path, train count, dev path, labels) of a GLUE task."""
  processor = classifier_data.get_processor(task_name)
  data_dir = os.path.join(SHARED_DATA, "glue", task_name)
  labels = processor.get_labels()
  paths = []
  for split, examples in (("train", processor.get_train_examples(data_dir)
                           if task_name == "MRPC" else []),
                          ("dev", processor.get_dev_examples(data_dir))):
    path = os.path.join(directory, "%s_%s.tf_record" % (task_name, split))
    paths.append((path, classifier_features.write_features(
        examples, labels, SEQ, tokenizer, path)))
  return paths[0][0], paths[0][1], paths[1][0], labels


def ours(task, train, steps, dev, trim, bucket=False, skip_padding=None):
  """One epoch and dev prediction with our Trainer (--trim_padding as trim,
  --bucket_by_length as bucket; the encoder skips padding where the runner
  would, unless skip_padding says otherwise); returns (seconds, trainer)."""
  started = time.perf_counter()
  trainer = training.Trainer(
      tf.distribute.get_strategy(),
      task.model_builder(trim if skip_padding is None else skip_padding),
      task.loss, training.TrainingConfig(
          output_dir=tempfile.mkdtemp(), learning_rate=2e-5,
          num_train_steps=steps, num_warmup_steps=steps // 10,
          iterations_per_loop=steps, save_checkpoints_steps=10 ** 9))
  names = task.sequence_features(True) if trim else ()
  trainer.train(input_pipeline.training_dataset_fn(
      [train], task.name_to_features(True), BATCH, 12345, trim=names,
      bucket_by_length=bucket), BATCH)
  predict.predict_records(
      trainer.strategy, lambda batch: task.predict(trainer.model, batch), dev,
      task.name_to_features(False), BATCH,
      trim=task.sequence_features(False) if trim else ())
  return time.perf_counter() - started, trainer


def model_garden_run(config, task, train, steps, dev):
  """The same with Model Garden's BertClassifier on full-length records."""
  started = time.perf_counter()
  model = models.BertClassifier(reference.model_garden_encoder(config),
                                num_classes=2, dropout_rate=0.1)
  batches = iter(input_pipeline.parse_and_batch(
      input_pipeline.record_dataset([train], True, 12345),
      task.name_to_features(True), BATCH))
  batch = next(batches)
  # train_step closes over one batch: each batch is fed through variables.
  holders = {key: tf.Variable(value, trainable=False)
             for key, value in batch.items()}
  step = model_garden.train_step(
      model, holders, lambda logits: tf.reduce_mean(task.per_example_loss(
          logits, holders["label_ids"])), 2e-5, False)
  for _ in range(steps):
    for key, value in next(batches).items():
      holders[key].assign(value)
    step()
  predict_step = tf.function(lambda b: tf.nn.softmax(model({
      "input_word_ids": b["input_ids"], "input_mask": b["input_mask"],
      "input_type_ids": b["segment_ids"]}, training=False)))
  for b in input_pipeline.parse_and_batch(
      tf.data.TFRecordDataset(dev), task.name_to_features(False), BATCH,
      drop_remainder=False):
    predict_step(b).numpy()
  return time.perf_counter() - started


def median_runs(runs, repeats):
  """Median seconds of each run (name -> function returning seconds),
  whole runs alternated."""
  times = {name: [] for name in runs}
  for _ in range(repeats):
    for name, run in runs.items():
      times[name].append(run())
  return {name: float(np.median(t)) for name, t in times.items()}


def prediction_ratio(task, path, weights_from=None, repeats=1):
  """(trimmed seconds, full seconds, max |difference| of outputs) of
  predicting the records at path with the same weights, trimmed (the
  encoder skipping padding where the runner would) and full length."""
  models = {trim: task.model_builder(trim)() for trim in (True, False)}
  weights = (models[True] if weights_from is None else
             weights_from).get_weights()
  for model in models.values():
    model.set_weights(weights)
  strategy = tf.distribute.get_strategy()
  outputs = {}

  def run(trim):
    started = time.perf_counter()
    outputs[trim] = predict.predict_records(
        strategy, lambda batch: task.predict(models[trim], batch), path,
        task.name_to_features(False), BATCH,
        trim=task.sequence_features(False) if trim else ())
    return time.perf_counter() - started

  # No warm-up: each call builds and traces its predictor, as a run does.
  m = median_runs({"trim": lambda: run(True), "full": lambda: run(False)},
                  repeats)
  # NER: each sequence's loss over its labelled pieces (its predictions
  # past a sequence's end are padding's, not compared).
  key = "logits" if "logits" in outputs[True] else "loss_sum"
  difference = float(np.max(np.abs(
      outputs[True][key].astype(np.float64) -
      outputs[False][key].astype(np.float64))))
  return m["trim"], m["full"], difference


def mrpc(shape, config, labels, train, steps, dev):
  """Prints the MRPC epoch's times and ratios; returns them, a row."""
  task = classifier_task.ClassificationTask(config, SEQ, labels)
  trainers = {}

  def ours_run(trim, bucket=False, skip_padding=None):
    seconds, trainers[trim] = ours(task, train, steps, dev, trim, bucket,
                                   skip_padding)
    return seconds

  m = median_runs({
      "trim": lambda: ours_run(True), "full": lambda: ours_run(False),
      "trim_padded": lambda: ours_run(True, skip_padding=False),
      "bucket": lambda: ours_run(True, True),
      "model_garden": lambda: model_garden_run(config, task, train, steps,
                                               dev)}, FLAGS.repeats)
  _, _, difference = prediction_ratio(task, dev, trainers[True].model)
  print("%s (L=%d H=%d) MRPC %d steps + dev prediction, seq %d batch %d: "
        "trimmed %.1f s (computing the padding: %.1f s), bucketed %.1f s, "
        "full length %.1f s, Model Garden %.1f s; ratio trimmed/Model "
        "Garden = %.2f (computing the padding: %.2f), bucketed/Model "
        "Garden = %.2f, trimmed/full = %.2f; dev logits trimmed vs full "
        "(same weights) max |diff| %.1e" %
        (shape, config.num_hidden_layers, config.hidden_size, steps, SEQ,
         BATCH, m["trim"], m["trim_padded"], m["bucket"], m["full"],
         m["model_garden"], m["model_garden"] / m["trim"],
         m["model_garden"] / m["trim_padded"], m["model_garden"] / m["bucket"],
         m["full"] / m["trim"], difference))
  return [shape, config.num_hidden_layers, config.hidden_size, steps, SEQ,
          BATCH, round(m["trim"], 1), round(m["trim_padded"], 1),
          round(m["bucket"], 1), round(m["full"], 1),
          round(m["model_garden"], 1),
          round(m["model_garden"] / m["trim"], 2),
          round(m["model_garden"] / m["trim_padded"], 2),
          round(m["model_garden"] / m["bucket"], 2),
          round(m["full"] / m["trim"], 2), float("%.1e" % difference)]


def squad_training(shape, config, tokenizer, directory):
  """Prints SQuAD v1.1 training (4 epochs of the Notre Dame train subset,
  seq 384, stride 128, batch 32) trimmed vs full length; returns the
  numbers, a row. Prediction is not trimmed (see
  SquadTask.sequence_features)."""
  path = os.path.join(SHARED_DATA, "squad",
                      "train-v1.1.subset-University_of_Notre_Dame.json")
  examples, _ = squad_data.read_squad_examples(path, True, False)
  train = os.path.join(directory, "squad_train.tf_record")
  count, _ = squad_features.write_features(examples, tokenizer, 384, 128,
                                           64, True, train)
  task = squad_task.SquadTask(config, 384)
  steps = 4 * math.ceil(count / BATCH)

  def run(trim):
    started = time.perf_counter()
    trainer = training.Trainer(
        tf.distribute.get_strategy(), task.build_model, task.loss,
        training.TrainingConfig(
            output_dir=tempfile.mkdtemp(), learning_rate=3e-5,
            num_train_steps=steps, num_warmup_steps=steps // 10,
            iterations_per_loop=steps, save_checkpoints_steps=10 ** 9))
    trainer.train(input_pipeline.training_dataset_fn(
        [train], task.name_to_features(True), BATCH, 12345,
        trim=task.sequence_features(True) if trim else ()), BATCH)
    return time.perf_counter() - started

  m = median_runs({"trim": lambda: run(True), "full": lambda: run(False)},
                  FLAGS.repeats)
  print("%s (L=%d H=%d) SQuAD v1.1 training, %d windows x 4 (%d steps), seq "
        "384 batch %d: trimmed %.1f s, full length %.1f s, ratio %.2f" %
        (shape, config.num_hidden_layers, config.hidden_size, count, steps,
         BATCH, m["trim"], m["full"], m["full"] / m["trim"]))
  return [shape, config.num_hidden_layers, config.hidden_size, count, steps,
          384, BATCH, round(m["trim"], 1), round(m["full"], 1),
          round(m["full"] / m["trim"], 2)]


def main(argv):
  del argv
  logging.set_verbosity(logging.WARNING)
  vocab_file = os.path.join(SHARED_DATA, "vocab", "uncased_vocab.txt")
  if not os.path.exists(os.path.join(SHARED_DATA, "glue", "MRPC")):
    raise SystemExit("Needs ../shared/data (GLUE MRPC and SST-2, CoNLL).")
  tokenizer = tokenization.FullTokenizer(vocab_file)
  directory = tempfile.mkdtemp()
  train, num_train, dev, labels = glue_records(directory, "MRPC", tokenizer)
  _, _, sst_dev, sst_labels = glue_records(directory, "SST-2", tokenizer)
  sentences = ner_data.get_examples(os.path.join(SHARED_DATA, "conll2003"),
                                    "dev")
  conll_dev = os.path.join(directory, "conll_dev.tf_record")
  ner_features.write_features(
      ner_features.convert_sentences(sentences, list(ner_data.LABELS), SEQ,
                                     tokenizer)[0], conll_dev)
  steps = FLAGS.max_train_steps or math.ceil(num_train / BATCH)
  mrpc_rows, squad_rows, prediction_rows = [], [], []
  for shape in FLAGS.shapes.split(","):
    config = modeling.BertConfig(vocab_size=30522, type_vocab_size=2,
                                 **SHAPES[shape])
    if "mrpc" in FLAGS.tasks:
      mrpc_rows.append(mrpc(shape, config, labels, train, steps, dev))
    if "squad" in FLAGS.tasks:
      squad_rows.append(squad_training(shape, config, tokenizer, directory))
    for key, name, task, path in (
        ("sst-2", "SST-2",
         classifier_task.ClassificationTask(config, SEQ, sst_labels),
         sst_dev),
        ("conll", "CoNLL-2003",
         ner_task.NerTask(config, SEQ, list(ner_data.LABELS)), conll_dev)):
      if key not in FLAGS.tasks:
        continue
      trim, full, difference = prediction_ratio(task, path,
                                                repeats=FLAGS.repeats)
      print("%s (L=%d H=%d) %s dev prediction, seq %d batch %d: trimmed "
            "%.2f s, full length %.2f s, ratio %.2f; outputs max |diff| "
            "%.1e" % (shape, config.num_hidden_layers, config.hidden_size,
                      name, SEQ, BATCH, trim, full, full / trim, difference))
      prediction_rows.append([
          shape, config.num_hidden_layers, config.hidden_size, name, SEQ,
          BATCH, round(trim, 2), round(full, 2), round(full / trim, 2),
          float("%.1e" % difference)])
  if FLAGS.record:
    record(results.flag_settings(FLAGS), mrpc_rows, squad_rows,
           prediction_rows)


def record(settings, mrpc_rows, squad_rows, prediction_rows):
  """Appends the printed numbers, run with settings (the flags), to
  benchmarks/results/bench_trim.jsonl."""
  tables = []
  if mrpc_rows:
    tables.append(results.table(
        "MRPC: training steps + dev prediction, seconds",
        ["shape", "L", "H", "steps", "seq", "batch", "trimmed",
         "trimmed, computing the padding", "bucketed", "full length",
         "Model Garden", "trimmed/Model Garden",
         "computing the padding/Model Garden", "bucketed/Model Garden",
         "trimmed/full", "dev logits max |diff|"], mrpc_rows))
  if squad_rows:
    tables.append(results.table(
        "SQuAD v1.1 training, 4 epochs, seconds",
        ["shape", "L", "H", "windows", "steps", "seq", "batch", "trimmed",
         "full length", "trimmed/full"], squad_rows))
  if prediction_rows:
    tables.append(results.table(
        "Dev prediction, seconds",
        ["shape", "L", "H", "data set", "seq", "batch", "trimmed",
         "full length", "trimmed/full", "outputs max |diff|"],
        prediction_rows))
  results.record(
      "bench_trim", tables, settings,
      headline={"MRPC epoch + dev prediction %s, trimmed: ours/Model "
                "Garden" % ("BERT-Base" if row[0] == "base" else "L=%d H=%d" %
                            (row[1], row[2])): row[11] for row in mrpc_rows})


if __name__ == "__main__":
  app.run(main)
