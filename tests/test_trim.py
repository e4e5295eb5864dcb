"""Length-trimmed batches (--trim_padding): cut after each batch's longest
sequence, the outputs those of the original's full-length batches."""

import json
import os
import pathlib
import random
import sys
import tempfile
import types

import numpy as np
import pytest
import tensorflow as tf
import tf_keras

import modeling
from runner_lib.classifier import task as classifier_task
from runner_lib.core import training
from runner_lib.core.cli import runner
from runner_lib.core.inputs import input_pipeline
from runner_lib.core.inputs import tfrecord
from runner_lib.core.training import predict
from runner_lib.ner import task as ner_task
from runner_lib.pretraining import instances as pretraining_instances
from runner_lib.pretraining import task as pretraining_task
from runner_lib.squad import task as squad_task
from runner_lib.swag import task as swag_task
from tests import conftest
from tests import reference
from tests import test_create_pretraining_data as cpd
from tests.conftest import run_script
from tests.conftest import run_scripts

CONFIG = modeling.BertConfig(vocab_size=99, hidden_size=32,
                             num_hidden_layers=2, num_attention_heads=2,
                             intermediate_size=64, max_position_embeddings=64,
                             type_vocab_size=2)


def mask_of(lengths, width):
  return np.array([[1] * n + [0] * (width - n) for n in lengths], np.int32)


def test_a_batch_ends_at_a_multiple_of_16_after_its_longest_sequence():
  for lengths, want in (([3, 17, 5], 32), ([16, 2], 16), ([1], 16),
                        ([60, 4], 64), ([64], 64), ([0, 0], 0)):
    mask = mask_of(lengths, 64)
    batch = {key: tf.constant(value) for key, value in (
        ("input_mask", mask), ("input_ids", mask * 7),
        ("label_ids", np.arange(len(lengths))),
        ("masked_lm_positions", mask[:, :20]))}
    trimmed = input_pipeline.trim_batch(
        batch, ("input_mask", "input_ids"))
    assert trimmed["input_ids"].shape == [len(lengths), want], lengths
    np.testing.assert_array_equal(trimmed["input_mask"], mask[:, :want])
    # Features not named are left whole.
    assert trimmed["masked_lm_positions"].shape == [len(lengths), 20]
    np.testing.assert_array_equal(trimmed["label_ids"], batch["label_ids"])
  # SWAG's [B, choices, T]: the longest of all choices.
  mask = np.stack([mask_of([3, 40, 2, 9], 64), mask_of([5, 1, 1, 1], 64)])
  trimmed = input_pipeline.trim_batch({"input_mask": tf.constant(mask)},
                                      ("input_mask",))
  assert trimmed["input_mask"].shape == [2, 4, 48]
  # Nothing named: the batch itself.
  batch = {"input_mask": mask}
  assert input_pipeline.trim_batch(batch, ()) is batch


def test_tasks_name_their_per_position_features():
  assert classifier_task.ClassificationTask(
      CONFIG, 64, ["0", "1"]).sequence_features(True) == (
          "input_ids", "input_mask", "segment_ids")
  assert ner_task.NerTask(CONFIG, 64, ["O", "B-X", "I-X"]).sequence_features(
      False) == ("input_ids", "input_mask", "label_ids", "label_mask",
                 "segment_ids")
  assert swag_task.SwagTask(CONFIG, 64).sequence_features(True) == (
      "input_ids", "input_mask", "segment_ids")
  squad = squad_task.SquadTask(CONFIG, 64)
  assert squad.sequence_features(True) == ("input_ids", "input_mask",
                                           "segment_ids")
  # The original's n-best ranks the padding's logits too.
  assert squad.sequence_features(False) == ()
  assert pretraining_task.PretrainingTask(
      CONFIG, 64, 20).sequence_features(True) == ()


def test_only_tasks_that_read_no_padding_skip_it():
  tasks = {
      "classifier": classifier_task.ClassificationTask(CONFIG, 64,
                                                       ["0", "1"]),
      "ner": ner_task.NerTask(CONFIG, 64, ["O", "B-X", "I-X"]),
      "ner_features": ner_task.FeatureBasedNerTask(
          CONFIG, 64, ["O", "B-X", "I-X"], feature_layers=(-1, -2),
          lstm_units=4),
      "swag": swag_task.SwagTask(CONFIG, 64),
      # The original's n-best ranks the padding's logits.
      "squad": squad_task.SquadTask(CONFIG, 64),
      "pretraining": pretraining_task.PretrainingTask(CONFIG, 64, 20),
  }
  skipping = {name for name, task in tasks.items()
              if task.model_builder(True)().bert.skip_padding}
  assert skipping == {"classifier", "ner", "ner_features", "swag",
                      "pretraining"}
  assert not any(task.model_builder(False)().bert.skip_padding
                 for task in tasks.values())


class Flags(types.SimpleNamespace):
  """Flag values, with absl's `name in FLAGS`."""

  def __contains__(self, name):
    return name in vars(self)


def test_runners_skip_padding_only_when_trimmed_without_xla(monkeypatch):
  task = classifier_task.ClassificationTask(CONFIG, 64, ["0", "1"])
  strategy = tf.distribute.get_strategy()
  for trim, xla, want in ((False, False, False), (True, True, False),
                          (True, False, True)):
    monkeypatch.setattr(runner, "FLAGS", Flags(trim_padding=trim,
                                               use_xla=xla))
    assert runner.skips_padding(task, strategy) is want
  # Trimmed, no XLA, but the task reads the padding.
  assert runner.skips_padding(squad_task.SquadTask(CONFIG, 64),
                                    strategy) is False


def test_pretraining_skips_padding_by_its_own_flag_without_xla(
    monkeypatch):
  """run_pretraining.py has no --trim_padding (its batches keep their
  length): --skip_padding alone decides, and XLA still rules it out."""
  task = pretraining_task.PretrainingTask(CONFIG, 64, 20)
  strategy = tf.distribute.get_strategy()
  for skip, xla, want in ((False, False, False), (True, True, False),
                          (True, False, True)):
    monkeypatch.setattr(runner, "FLAGS", Flags(skip_padding=skip,
                                               use_xla=xla))
    assert runner.skips_padding(task, strategy) is want


def write_records(path, lengths, width, seed):
  """Classifier records with random ids, of the given real lengths."""
  rng = np.random.RandomState(seed)
  with tf.io.TFRecordWriter(path) as writer:
    for i, n in enumerate(lengths):
      mask = [1] * n + [0] * (width - n)
      ids = [int(x) * m for x, m in zip(rng.randint(5, 99, width), mask)]
      segments = [int(j >= n // 2) * m for j, m in enumerate(mask)]
      writer.write(tf.train.Example(features=tf.train.Features(feature={
          "input_ids": tfrecord.int_feature(ids),
          "input_mask": tfrecord.int_feature(mask),
          "segment_ids": tfrecord.int_feature(segments),
          "label_ids": tfrecord.int_feature([i % 2]),
          "is_real_example": tfrecord.int_feature([1])})).SerializeToString())


def test_trimmed_sorted_prediction_equals_the_full_length_path(tmp_path):
  lengths = list(np.random.RandomState(0).randint(3, 64, 37)) + [64, 2]
  path = str(tmp_path / "eval.tf_record")
  write_records(path, lengths, 64, seed=1)
  task = classifier_task.ClassificationTask(CONFIG, 64, ["0", "1"])
  model = task.build_model()
  weights = reference.random_weights(CONFIG, seed=4)
  weights["output_weights"] = np.random.RandomState(5).randn(
      2, 32).astype(np.float32)
  weights["output_bias"] = np.zeros([2], np.float32)
  modeling.load_checkpoint(model, reference.write_tf1_checkpoint(
      str(tmp_path / "ckpt" / "model.ckpt"), weights))
  widths = []

  def predict_fn(batch):
    widths.append(batch["input_ids"].shape[1])
    outputs = task.predict(model, batch)
    outputs["width"] = tf.fill(tf.shape(batch["label_ids"]),
                               tf.shape(batch["input_ids"])[1])
    return outputs

  strategy = tf.distribute.get_strategy()
  full = predict.predict_records(strategy, predict_fn, path,
                                 task.name_to_features(False), 8)
  trimmed = predict.predict_records(
      strategy, predict_fn, path, task.name_to_features(False), 8,
      trim=task.sequence_features(False))
  np.testing.assert_allclose(trimmed["logits"], full["logits"], atol=1e-5)
  np.testing.assert_array_equal(trimmed["label_ids"],
                                [i % 2 for i in range(len(lengths))])
  assert set(full["width"]) == {64}
  # Shortest first: each batch as wide as its longest, rounded to 16.
  order = np.argsort(lengths, kind="stable")
  for start in range(0, len(lengths), 8):
    rows = order[start:start + 8]
    longest = max(lengths[i] for i in rows)
    assert set(trimmed["width"][rows]) == {min(64, -(-longest // 16) * 16)}
  assert set(trimmed["width"]) <= {16, 32, 48, 64}
  # Traced once for each path (trimmed: a dynamic length).
  assert widths == [64, None], widths


@pytest.mark.slow
def test_runners_trimmed_equal_full_length_on_real_rows(shared_data,
                                                        tmp_path):
  config = modeling.BertConfig(**dict(
      CONFIG.to_dict(), vocab_size=30522, max_position_embeddings=128,
      hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0))
  (tmp_path / "bert_config.json").write_text(config.to_json_string())
  weights = reference.random_weights(config, seed=2, scale=0.05)
  rng = np.random.RandomState(3)
  weights["cls/ner/output_weights"] = rng.randn(9, 32).astype(np.float32)
  weights["cls/ner/output_bias"] = np.zeros([9], np.float32)
  prefix = reference.write_tf1_checkpoint(
      str(tmp_path / "pretrained" / "bert_model.ckpt"), weights)
  vocab_file = os.path.join(shared_data, "vocab", "uncased_vocab.txt")
  mrpc = tmp_path / "mrpc"
  mrpc.mkdir()
  source = os.path.join(shared_data, "glue", "MRPC")
  for name, rows in (("train.tsv", 97), ("dev.tsv", 61), ("test.tsv", 45)):
    with open(os.path.join(source, name)) as f:
      (mrpc / name).write_text("".join(f.readlines()[:rows]))
  conll = tmp_path / "conll"
  conll.mkdir()
  with open(os.path.join(shared_data, "conll2003", "eng.testb")) as f:
    (conll / "test.txt").write_text("\n\n".join(f.read().split("\n\n")[:80]))
  (tmp_path / "lines.txt").write_text("".join(
      line.split("\t")[3] + " ||| " + line.split("\t")[4]
      for line in (mrpc / "test.tsv").read_text().splitlines(True)[1:21]))
  common = {"vocab_file": vocab_file,
            "bert_config_file": str(tmp_path / "bert_config.json"),
            "max_seq_length": "128", "strategy": "default"}
  runs = []
  for trim in ("true", "false"):
    runs += [
        # Training without dropout: the same updates, then predictions.
        ("run_classifier.py", dict(
            common, task_name="MRPC", data_dir=str(mrpc), do_train="true",
            do_eval="true", do_predict="true", init_checkpoint=prefix,
            train_batch_size="16", num_train_epochs="1", trim_padding=trim,
            output_dir=str(tmp_path / ("mrpc_" + trim)))),
        ("run_ner.py", dict(common, data_dir=str(conll), do_predict="true",
                            init_checkpoint=prefix, trim_padding=trim,
                            output_dir=str(tmp_path / ("ner_" + trim)))),
        ("extract_features.py", dict(
            {k: v for k, v in common.items() if k != "strategy"},
            input_file=str(tmp_path / "lines.txt"),
            init_checkpoint=prefix, layers="-1", batch_size="8",
            trim_padding=trim,
            output_file=str(tmp_path / ("features_%s.jsonl" % trim))))]
  for result in run_scripts(runs):
    assert result.returncode == 0, result.stderr[-3000:]

  def probabilities(trim, name):
    lines = (tmp_path / ("mrpc_" + trim) / name).read_text().splitlines()
    return np.array([[float(x) for x in line.split("\t")] for line in lines])

  np.testing.assert_allclose(probabilities("true", "test_results.tsv"),
                             probabilities("false", "test_results.tsv"),
                             atol=1e-5)
  results = {trim: (tmp_path / ("mrpc_" + trim) / "eval_results.txt")
             .read_text().splitlines() for trim in ("true", "false")}
  for got, want in zip(results["true"], results["false"]):
    name, got = got.split(" = ")
    assert float(got) == pytest.approx(float(want.split(" = ")[1]),
                                       abs=1e-5), name
  assert ((tmp_path / "ner_true" / "test_predictions.txt").read_text() ==
          (tmp_path / "ner_false" / "test_predictions.txt").read_text())
  got = (tmp_path / "features_true.jsonl").read_text().splitlines()
  want = (tmp_path / "features_false.jsonl").read_text().splitlines()
  assert len(got) == len(want) == 20
  for a, b in zip(got, want):
    a, b = json.loads(a), json.loads(b)
    assert [t["token"] for t in a["features"]] == [
        t["token"] for t in b["features"]]
    np.testing.assert_allclose(
        [t["layers"][0]["values"] for t in a["features"]],
        [t["layers"][0]["values"] for t in b["features"]], atol=2e-6)


def test_training_skipping_padding_equals_trimmed_training_with_dropout(
    tmp_path):
  """The default path (trimmed, padding skipped) trains as the trimmed
  batches do with dropout on: the same masks at every real position, so
  the same weights after every step, not only without dropout."""
  path = str(tmp_path / "train.tf_record")
  write_records(path, list(np.random.RandomState(4).randint(2, 40, 32)), 64,
                seed=2)
  config = modeling.BertConfig(**dict(CONFIG.to_dict(),
                                      hidden_dropout_prob=0.3,
                                      attention_probs_dropout_prob=0.2))
  task = classifier_task.ClassificationTask(config, 64, ["0", "1"])
  weights, initial = [], None
  for skip in (True, False):
    # Seeds the dropout generators (BertModel draws their seed from
    # Python's random module) as the runners do.
    tf_keras.utils.set_random_seed(1)
    trainer = training.Trainer(
        tf.distribute.get_strategy(), task.model_builder(skip), task.loss,
        training.TrainingConfig(
            output_dir=str(tmp_path / ("out_%s" % skip)), learning_rate=1e-3,
            num_train_steps=4, num_warmup_steps=1))
    assert trainer.model.bert.skip_padding == skip
    # The same starting weights whatever other tests drew before.
    if initial is None:
      initial = [v.numpy() for v in trainer.model.trainable_variables]
    for variable, value in zip(trainer.model.trainable_variables, initial):
      variable.assign(value)
    trainer.train(input_pipeline.training_dataset_fn(
        [path], task.name_to_features(True), 8, 3,
        trim=task.sequence_features(True)), 8)
    weights.append([v.numpy() for v in trainer.model.trainable_variables])
  moved = max(float(np.abs(a - b).max())
              for a, b in zip(weights[0], initial))
  assert moved > 1e-3
  for a, b in zip(*weights):
    np.testing.assert_allclose(a, b, atol=1e-5)


def short_pretraining_batch(batch_size=16, seq_length=128):
  """A batch of create_pretraining_data's records from documents of 2-6
  sentences of 3-20 words, so that many instances end short, at their
  document's end.

  Returns:
    (dict of Tensors as the input pipeline parses them, the vocab size).
  """
  rng = random.Random(3)
  lines = []
  for _ in range(40):
    lines += [" ".join(rng.choice(cpd.WORDS) for _ in range(rng.randint(
        3, 20))) for _ in range(rng.randint(2, 6))] + [""]
  directory = pathlib.Path(tempfile.mkdtemp())
  documents, vocab = cpd.read_documents(
      lines, cpd.write_vocab(directory / "vocab.txt"))
  records = list(pretraining_instances.create_training_records(
      documents, cpd.options(seq_length, max_predictions=20),
      pretraining_instances.MaskingVocab(vocab), 1, random.Random(2)))
  features = pretraining_task.PretrainingTask(
      CONFIG, seq_length, 20).name_to_features(True)
  batch = tf.io.parse_example(records[:batch_size], features)
  return ({k: tf.cast(v, tf.int32) if v.dtype == tf.int64 else v
           for k, v in batch.items()}, len(vocab))


@pytest.mark.parametrize("objective", ["mlm_nsp", "ltr"])
def test_pretraining_skipping_padding_gives_the_padded_steps(tmp_path,
                                                             objective):
  """Pre-training on real tokens only: the padded step's loss and
  gradients, then its weights after three updates, with dropout on, on
  records of which a third or more is padding.

  Tolerance: 2^-13 of each tensor's largest value, plus 2^-20 of the
  largest gradient anywhere. The two paths sum the same terms in other
  orders (float32, eps 2^-23, sums of a few hundred terms, two layers): a
  few hundred ulps of the largest term. The floor is for gradients that
  are zero in exact arithmetic (the key bias: softmax ignores a shift
  that all of a query's scores share), rounding noise of terms that
  cancel. What this guards against, a padding position read or a dropout
  mask drawn elsewhere, moves gradients by percents."""
  batch, vocab_size = short_pretraining_batch()
  padding = 1 - float(tf.reduce_mean(tf.cast(batch["input_mask"],
                                             tf.float32)))
  assert padding > 0.3, padding
  config = modeling.BertConfig(**dict(
      CONFIG.to_dict(), vocab_size=vocab_size, max_position_embeddings=128,
      hidden_dropout_prob=0.1, attention_probs_dropout_prob=0.1))
  task = pretraining_task.PretrainingTask(config, 128, 20, objective)
  runs, initial = [], None
  for skip in (False, True):
    tf_keras.utils.set_random_seed(1)
    trainer = training.Trainer(
        tf.distribute.get_strategy(), task.model_builder(skip), task.loss,
        training.TrainingConfig(
            output_dir=str(tmp_path / str(skip)), learning_rate=1e-3,
            num_train_steps=10, num_warmup_steps=0))
    assert trainer.model.bert.skip_padding == skip
    if initial is None:
      initial = [v.numpy() for v in trainer.trainable]
    for variable, value in zip(trainer.trainable, initial):
      variable.assign(value)
    loss, grads = tf.function(
        lambda: trainer.train_step.loss_and_grads(batch))()
    step = tf.function(lambda: trainer.train_step(batch))
    losses = [float(step()) for _ in range(3)]
    runs.append((float(loss), [
        None if g is None else tf.convert_to_tensor(g).numpy()
        for g in grads], losses, [v.numpy() for v in trainer.trainable]))
  (loss, grads, losses, weights), (skip_loss, skip_grads, skip_losses,
                                   skip_weights) = runs
  assert max(float(np.abs(w - v).max())
             for w, v in zip(weights, initial)) > 1e-3  # it trained
  np.testing.assert_allclose(skip_loss, loss, rtol=2 ** -13)
  np.testing.assert_allclose(skip_losses, losses, rtol=2 ** -13)
  floor = 2 ** -20 * max(np.abs(g).max() for g in grads if g is not None)
  for name, got, want in zip(trainer.names, skip_grads, grads):
    assert (got is None) == (want is None), name
    if want is not None:
      np.testing.assert_allclose(
          got, want, rtol=0, atol=2 ** -13 * np.abs(want).max() + floor,
          err_msg=name)
  floor = 2 ** -20 * max(np.abs(w).max() for w in weights)
  for name, got, want in zip(trainer.names, skip_weights, weights):
    np.testing.assert_allclose(
        got, want, rtol=0, atol=2 ** -13 * np.abs(want).max() + floor,
        err_msg=name)


def serialized(lengths, width):
  """Records whose input_ids[0] is the record's index."""
  records = []
  for i, n in enumerate(lengths):
    mask = [1] * n + [0] * (width - n)
    records.append(tf.train.Example(features=tf.train.Features(feature={
        "input_ids": tfrecord.int_feature([i] + [1] * (width - 1)),
        "input_mask": tfrecord.int_feature(mask)})).SerializeToString())
  return records


def test_bucketing_keeps_every_record_once_in_batches_of_similar_length():
  lengths = list(np.random.RandomState(3).randint(1, 65, 203))
  spec = tf.io.FixedLenFeature([64], tf.int64)
  records = tf.data.Dataset.from_tensor_slices(serialized(lengths, 64))
  batches = list(input_pipeline.length_bucketed(records, 8, spec, seed=5,
                                                chunk_batches=4))
  indexes = [[tf.train.Example.FromString(r).features.feature[
      "input_ids"].int64_list.value[0] for r in batch.numpy()]
             for batch in batches]
  # Each record once: 25 full batches and the stream's short last one.
  assert sorted(sum(indexes, [])) == list(range(203))
  assert sorted(len(b) for b in indexes) == [3] + [8] * 25
  # A batch holds neighbours in its chunk's length order.
  for chunk_start in range(0, 203, 32):
    chunk = list(range(chunk_start, min(chunk_start + 32, 203)))
    order = sorted(chunk, key=lambda i: lengths[i])  # stable, as argsort
    want = {tuple(sorted(order[k:k + 8])) for k in range(0, len(chunk), 8)}
    got = {tuple(sorted(b)) for b in indexes if b[0] in chunk}
    assert got == want
  # Shorter once trimmed: the summed widths of bucketed batches vs the
  # stream's own batches.
  width = lambda batch: -(-max(lengths[i] for i in batch) // 16) * 16
  plain = [list(range(k, min(k + 8, 203))) for k in range(0, 203, 8)]
  assert sum(map(width, indexes)) < 0.8 * sum(map(width, plain))
  # Seeded: the same batches in the same order.
  again = [b.numpy().tolist() for b in input_pipeline.length_bucketed(
      records, 8, spec, seed=5, chunk_batches=4)]
  assert again == [b.numpy().tolist() for b in batches]


def test_bucketed_training_input_resumes_where_it_stopped(tmp_path):
  path = str(tmp_path / "train.tf_record")
  write_records(path, list(np.random.RandomState(2).randint(2, 64, 50)), 64,
                seed=0)
  task = classifier_task.ClassificationTask(CONFIG, 64, ["0", "1"])
  dataset_fn = input_pipeline.training_dataset_fn(
      [path], task.name_to_features(True), 4, 7,
      trim=task.sequence_features(True), bucket_by_length=True)
  context = tf.distribute.InputContext()
  whole = [b["input_ids"].numpy() for b in dataset_fn(context, 0).take(30)]
  resumed = [b["input_ids"].numpy() for b in dataset_fn(context, 12).take(18)]
  for got, want in zip(resumed, whole[12:]):
    np.testing.assert_array_equal(got, want)
  assert len({b.shape[1] for b in whole}) > 1


@pytest.mark.slow
def test_bucketing_without_trimming_is_refused(tmp_path):
  result = run_script("run_classifier.py", {
      "task_name": "MRPC", "data_dir": str(tmp_path), "do_train": "true",
      "vocab_file": str(tmp_path / "vocab.txt"),
      "bert_config_file": str(tmp_path / "bert_config.json"),
      "output_dir": str(tmp_path / "out"), "bucket_by_length": "true",
      "trim_padding": "false"})
  assert result.returncode == 1
  assert "--bucket_by_length needs --trim_padding" in result.stderr
  assert not (tmp_path / "out").exists()


# The start of a training script run in its own process (logical devices
# must be set up before TensorFlow starts): settings from argv[1] as JSON,
# `strategy` a MirroredStrategy over settings["replicas"] logical CPUs
# (more than one) or the default strategy.
STRATEGY_PREAMBLE = r"""
import json, sys, tempfile
import numpy as np
import tensorflow as tf
settings = json.loads(sys.argv[1])
if settings["replicas"] > 1:
  tf.config.set_logical_device_configuration(
      tf.config.list_physical_devices("CPU")[0],
      [tf.config.LogicalDeviceConfiguration()] * settings["replicas"])
  strategy = tf.distribute.MirroredStrategy(
      ["/cpu:%d" % i for i in range(settings["replicas"])])
else:
  strategy = tf.distribute.get_strategy()
"""

# Trains a classifier on trimmed and on full-length batches of the same
# records under the strategy and settings given; prints the largest weight
# difference.
TRAIN_BOTH = STRATEGY_PREAMBLE + r"""
import modeling
from runner_lib.classifier import task as classifier_task
from runner_lib.core import training
from runner_lib.core.inputs import input_pipeline
config = modeling.BertConfig(**settings["config"])
task = classifier_task.ClassificationTask(config, 64, ["0", "1"])
weights = []
for trim in (task.sequence_features(True), ()):
  tf.keras.utils.set_random_seed(1)
  # As runner.skips_padding: trimmed and no XLA skips the padding.
  trainer = training.Trainer(
      strategy, task.model_builder(bool(trim) and not settings["xla"]),
      task.loss, training.TrainingConfig(
          output_dir=tempfile.mkdtemp(), learning_rate=1e-3,
          num_train_steps=4, num_warmup_steps=1,
          jit_compile=settings["xla"],
          gradient_accumulation_steps=settings["accumulation"]))
  trainer.train(input_pipeline.training_dataset_fn(
      [settings["path"]], task.name_to_features(True),
      8 // strategy.num_replicas_in_sync, 3, trim=trim), 8)
  weights.append([v.numpy() for v in trainer.model.variables])
print(json.dumps({"difference": max(float(np.abs(a - b).max())
                                    for a, b in zip(*weights)),
                  "step": int(trainer.step)}))
"""


@pytest.mark.slow
@pytest.mark.parametrize("replicas,xla,accumulation", [
    (2, False, 1), (1, True, 2)])
def test_trimmed_training_equals_full_length_under_strategies(
    tmp_path, replicas, xla, accumulation):
  path = str(tmp_path / "train.tf_record")
  write_records(path, list(np.random.RandomState(4).randint(2, 40, 64)), 64,
                seed=2)
  config = dict(CONFIG.to_dict(), hidden_dropout_prob=0.0,
                attention_probs_dropout_prob=0.0)
  result = conftest.run(
      [sys.executable, "-c", TRAIN_BOTH, json.dumps({
          "replicas": replicas, "xla": xla, "accumulation": accumulation,
          "path": path, "config": config})],
      cwd=os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
  assert result.returncode == 0, result.stderr[-3000:]
  outcome = json.loads(result.stdout.strip().splitlines()[-1])
  assert outcome["step"] == 4
  assert outcome["difference"] < 1e-5, outcome


def test_a_records_length_is_its_longest_sequence():
  records = []
  for lengths in ([3, 9, 1, 4], [2, 2, 2, 2], [8, 0, 0, 0]):
    mask = np.concatenate([mask_of(lengths, 16)]).reshape([-1]).tolist()
    records.append(tf.train.Example(features=tf.train.Features(feature={
        "input_mask": tfrecord.int_feature(mask)})).SerializeToString())
  spec = tf.io.FixedLenFeature([4, 16], tf.int64)  # SWAG's layout
  got = predict.sequence_lengths(tf.data.Dataset.from_tensor_slices(records),
                                 spec, batch_size=2)
  np.testing.assert_array_equal(got, [9, 2, 8])
