"""--gradient_checkpointing: recomputed activations train the same weights as
kept ones (the same dropout masks), take less memory, and running out of
memory ends a run with one line."""

import json
import os
import random
import sys

import numpy as np
import pytest
import tensorflow as tf
import tf_keras

import modeling
from runner_lib.classifier import task as classifier_task
from runner_lib.core import training
from runner_lib.core.inputs import tfrecord_writer
from runner_lib.pretraining import instances
from runner_lib.pretraining import task as pretraining
from tests import conftest
from tests import quickstarts
from tests import reference
from tests import test_create_pretraining_data as cpd
from tests.test_modeling import padded_pair_batch
from tests.test_modeling import tiny_config
from tests.test_run_classifier import base_args
from tests.test_run_classifier import mrpc_folder
from tests.test_training import pretraining_batch
from tests.test_trim import CONFIG as TRIM_CONFIG
from tests.test_trim import STRATEGY_PREAMBLE
from tests.test_trim import write_records

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def classifier_batch(config):
  """3 padded sentence pairs of 11 positions, with labels."""
  batch = {k: tf.constant(v) for k, v in
           padded_pair_batch(config, batch=3, length=11).items()}
  batch["label_ids"] = tf.constant([0, 1, 1])
  return batch


def train_both(tmp_path, task, batch, steps, skip_padding=False):
  """Trains the task's model `steps` steps on `batch`, without then with
  recomputation, from the same weights and dropout seeds.

  Returns:
    [without, with]: each a dict of the trainable weights, the first
    step's gradients and the dropout generators' states, by name.
  """
  runs, initial = [], None
  for recompute in (False, True):
    tf_keras.utils.set_random_seed(1)
    trainer = training.Trainer(
        tf.distribute.get_strategy(),
        task.model_builder(skip_padding, gradient_checkpointing=recompute),
        task.loss, training.TrainingConfig(
            output_dir=str(tmp_path / str(recompute)), learning_rate=1e-3,
            num_train_steps=10, num_warmup_steps=0))
    assert trainer.model.bert.gradient_checkpointing == recompute
    if initial is None:
      initial = [v.numpy() for v in trainer.trainable]
    for variable, value in zip(trainer.trainable, initial):
      variable.assign(value)
    gradients = tf.function(
        lambda: trainer.train_step.loss_and_grads(batch)[1])()
    step = tf.function(lambda: trainer.train_step(batch))
    for _ in range(steps):
      step()
    runs.append({
        "weights": dict(zip(trainer.names,
                            [v.numpy() for v in trainer.trainable])),
        "gradients": dict(zip(trainer.names, [
            None if g is None else tf.convert_to_tensor(g).numpy()
            for g in gradients])),
        "dropout": {name: v.numpy() for name, v in
                    modeling.dropout_state_variables(trainer.model).items()},
        "initial": dict(zip(trainer.names, initial))})
  return runs


@pytest.mark.parametrize("kind", ["pretraining", "classifier_skip_padding"])
def test_steps_with_recomputation_equal_steps_without(tmp_path, kind):
  """Dropout on (0.1 and 0.1): if recomputation drew other masks, the
  gradients would differ by far more than rounding; a variable whose
  gradient it dropped would not move."""
  config = tiny_config(hidden_dropout_prob=0.1,
                       attention_probs_dropout_prob=0.1)
  if kind == "pretraining":
    task = pretraining.PretrainingTask(config, 8, 2)
    batch, skip = pretraining_batch(config), False
  else:
    task = classifier_task.ClassificationTask(config, 11, ["0", "1"])
    batch, skip = classifier_batch(config), True
  without, with_ = train_both(tmp_path, task, batch, steps=4,
                              skip_padding=skip)
  # The same variables under the same checkpoint names.
  assert sorted(with_["weights"]) == sorted(without["weights"])
  assert sorted(with_["dropout"]) == sorted(without["dropout"])
  assert without["dropout"], "no dropout generator: nothing to compare"
  for name, state in without["dropout"].items():
    np.testing.assert_array_equal(with_["dropout"][name], state, name)
  for name, want in without["gradients"].items():
    got = with_["gradients"][name]
    assert (got is None) == (want is None), name
    if want is not None:
      np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-9,
                                 err_msg=name)
  moved = 0
  for name, want in without["weights"].items():
    np.testing.assert_allclose(with_["weights"][name], want, rtol=1e-6,
                               atol=1e-7, err_msg=name)
    moved += not np.array_equal(want, without["initial"][name])
  # Every encoder weight moves (the pooler too, trained by NSP or the
  # classifier); a gradient recomputation lost would leave one in place.
  assert moved == len(without["weights"]), (moved, len(without["weights"]))


def test_dropout_masks_differ_between_steps_with_recomputation(tmp_path):
  """The seeds drawn before each layer advance with every step: the
  recomputed path is not one mask reused forever."""
  config = tiny_config(hidden_dropout_prob=0.5,
                       attention_probs_dropout_prob=0.0)
  tf_keras.utils.set_random_seed(1)
  model = modeling.BertModel(config, gradient_checkpointing=True)
  batch = {k: tf.constant(v) for k, v in padded_pair_batch(config).items()}
  outputs = [model(batch, training=True)["sequence_output"].numpy()
             for _ in range(2)]
  assert not np.allclose(outputs[0], outputs[1])
  # Inference is untouched by the flag.
  inference = model(batch, training=False)["sequence_output"].numpy()
  model.gradient_checkpointing = False
  np.testing.assert_array_equal(
      model(batch, training=False)["sequence_output"], inference)


# Trains a classifier twice under the strategy and settings given, without
# and with recomputation, and prints the largest weight difference. In its
# own process: logical devices must be set up before TensorFlow starts.
TRAIN_BOTH = STRATEGY_PREAMBLE + r"""
import modeling
from runner_lib.classifier import task as classifier_task
from runner_lib.core import training
from runner_lib.core.inputs import input_pipeline
from runner_lib.core.training import precision
options = precision.training_options(settings["precision"], settings["xla"])
config = modeling.BertConfig(**settings["config"])
task = classifier_task.ClassificationTask(config, 64, ["0", "1"])
trim = task.sequence_features(True) if settings["trim"] else ()
weights = []
for recompute in (False, True):
  tf.keras.utils.set_random_seed(1)
  trainer = training.Trainer(
      strategy, task.model_builder(bool(trim) and not settings["xla"],
                                   gradient_checkpointing=recompute,
                                   options=options),
      task.loss, training.TrainingConfig(
          output_dir=tempfile.mkdtemp(), learning_rate=1e-3,
          num_train_steps=4, num_warmup_steps=1,
          jit_compile=settings["xla"],
          gradient_accumulation_steps=settings["accumulation"],
          update=precision.optimizer_update(options,
                                            settings["precision"])))
  trainer.train(input_pipeline.training_dataset_fn(
      [settings["path"]], task.name_to_features(True),
      8 // strategy.num_replicas_in_sync, 3, trim=trim), 8)
  weights.append([v.numpy() for v in trainer.model.variables])
print(json.dumps({"difference": max(float(np.abs(a - b).max())
                                    for a, b in zip(*weights)),
                  "moved": max(float(np.abs(a).max()) for a in weights[0]),
                  "step": int(trainer.step)}))
"""


@pytest.mark.slow
@pytest.mark.parametrize("replicas,xla,accumulation,trim,precision", [
    # MirroredStrategy over 2 replicas, trimmed batches with the padding
    # skipped.
    (2, False, 1, True, "float32"),
    # XLA, accumulation, bfloat16 matmuls.
    (1, True, 2, False, "bfloat16")])
def test_recomputation_composes(tmp_path, replicas, xla, accumulation, trim,
                                precision):
  path = str(tmp_path / "train.tf_record")
  write_records(path, list(np.random.RandomState(4).randint(2, 40, 64)), 64,
                seed=2)
  config = dict(TRIM_CONFIG.to_dict(), hidden_dropout_prob=0.1,
                attention_probs_dropout_prob=0.1)
  result = conftest.run(
      [sys.executable, "-c", TRAIN_BOTH, json.dumps({
          "replicas": replicas, "xla": xla, "accumulation": accumulation,
          "trim": trim, "precision": precision, "path": path,
          "config": config})], cwd=ROOT)
  assert result.returncode == 0, result.stderr[-3000:]
  outcome = json.loads(result.stdout.strip().splitlines()[-1])
  assert outcome["step"] == 4
  assert outcome["difference"] < 1e-5, outcome


# One training step of a 4-layer encoder at sequence length 512, without
# recomputation and then with it, in one fresh process; prints
# TensorFlow's allocator peak during each step above what was allocated
# before it, in bytes. The process runs TensorFlow's BFC CPU allocator
# (PEAK_ENV), as benchmarks/speed/bench_memory.py's do: the CPU allocator
# keeps statistics only where it is a BFC allocator, which without that
# variable it is only where oneDNN is on (not on AVX2-only CPUs).
PEAK_ENV = {"TF_CPU_ALLOCATOR_USE_BFC": "true"}
PEAK = r"""
import json
import tensorflow as tf
import modeling
config = modeling.BertConfig(vocab_size=512, hidden_size=256,
                             num_hidden_layers=4, num_attention_heads=4,
                             intermediate_size=1024,
                             max_position_embeddings=512)
ids = tf.random.stateless_uniform([4, 512], [1, 2], 0, 512, tf.int32)
peaks = {}
for recompute in (False, True):
  model = modeling.BertModel(config, gradient_checkpointing=recompute)

  @tf.function
  def step():
    with tf.GradientTape() as tape:
      loss = tf.reduce_mean(model({"input_ids": ids},
                                  training=True)["sequence_output"] ** 2)
    return tape.gradient(loss, model.trainable_variables)

  step.get_concrete_function()
  tf.config.experimental.reset_memory_stats("CPU:0")
  before = tf.config.experimental.get_memory_info("CPU:0")["current"]
  step()
  peaks[str(int(recompute))] = (
      tf.config.experimental.get_memory_info("CPU:0")["peak"] - before)
print(json.dumps(peaks))
"""


@pytest.mark.slow
def test_recomputation_cuts_the_peak_memory_of_a_step():
  """Without it a layer keeps its attention probabilities, their dropout
  and the feed-forward activations (about 60 MB a layer here); with it,
  its input (2 MB) and one layer's activations at a time."""
  result = conftest.run([sys.executable, "-c", PEAK],
                        conftest.script_env(**PEAK_ENV), cwd=ROOT)
  assert result.returncode == 0, result.stderr[-3000:]
  peaks = json.loads(result.stdout.strip().splitlines()[-1])
  assert peaks["0"] > 150e6, peaks
  assert peaks["1"] < 0.5 * peaks["0"], peaks


# run_classifier.py whose training step runs out of memory from the step
# after global step FAIL_FROM on: it asks the allocator for 64 TiB, a real
# ResourceExhaustedError, as a GPU's allocator gives one.
OUT_OF_MEMORY = r"""
import sys
import tensorflow as tf
import run_classifier
from absl import flags
from runner_lib.core.cli import runner
from runner_lib.core.training import step

FAIL_FROM = int(sys.argv.pop(1))
loss_and_grads = step.TrainStep._loss_and_grads

def failing(self, batch):
  size = tf.cast(self.global_step >= FAIL_FROM, tf.int64) * 2**44 + 1
  waste = tf.reduce_sum(tf.fill(tf.reshape(size, [1]), 0.0))
  loss, grads = loss_and_grads(self, batch)
  return loss + 0.0 * waste, grads

step.TrainStep._loss_and_grads = failing
flags.mark_flags_as_required(["data_dir", "task_name", "vocab_file",
                              "bert_config_file", "output_dir"])
runner.run(run_classifier.main)
"""


@pytest.mark.slow
def test_out_of_memory_is_one_line_and_keeps_the_last_checkpoint(tmp_path):
  data = mrpc_folder(tmp_path / "data")
  output_dir = tmp_path / "out"
  args = base_args(data, output_dir, do_train="true", do_eval="false",
                   do_predict="false", save_checkpoints_steps="2",
                   iterations_per_loop="1", train_batch_size="16",
                   num_train_epochs="0.5", max_seq_length="32")
  result = conftest.run(
      [sys.executable, "-c", OUT_OF_MEMORY, "2"] +
      ["--%s=%s" % item for item in args.items()], cwd=ROOT)
  assert result.returncode == 1, result.stderr[-3000:]
  last = result.stderr.strip().splitlines()[-1]
  assert last.startswith("Error: Out of memory training after step 2, at "
                         "batch size 16 (16 examples per replica"), last
  assert "sequence length 32" in last
  for flag in ("--gradient_checkpointing", "--gradient_accumulation_steps=2",
               "--precision=bfloat16", "model.ckpt-2, which is kept"):
    assert flag in last, (flag, last)
  assert "Traceback" not in result.stderr
  reader = tf.train.load_checkpoint(str(output_dir / "model.ckpt-2"))
  assert reader.get_tensor("global_step") == 2
  assert tf.train.latest_checkpoint(str(output_dir)).endswith("model.ckpt-2")


@pytest.mark.slow
def test_the_message_leaves_out_what_is_already_on(tmp_path):
  data = mrpc_folder(tmp_path / "data")
  args = base_args(data, tmp_path / "out", do_train="true", do_eval="false",
                   do_predict="false", train_batch_size="2",
                   num_train_epochs="0.01", max_seq_length="32",
                   gradient_checkpointing="true", precision="bfloat16",
                   gradient_accumulation_steps="2")
  result = conftest.run(
      [sys.executable, "-c", OUT_OF_MEMORY, "0"] +
      ["--%s=%s" % item for item in args.items()], cwd=ROOT)
  assert result.returncode == 1, result.stderr[-3000:]
  last = result.stderr.strip().splitlines()[-1]
  assert last.startswith("Error: Out of memory training after step 0, at "
                         "batch size 2 (1 examples per replica"), last
  assert "--gradient_checkpointing" not in last
  assert "--precision" not in last
  # A micro-batch of one example cannot be split further.
  assert "--gradient_accumulation_steps" not in last
  assert "a smaller --train_batch_size or --max_seq_length" in last
  assert "No checkpoint was saved." in last


def squad_training_file(path):
  """A SQuAD v1.1 training file of 12 answered questions."""
  context = ("The man went to the store, and he bought a gallon of milk. "
             "The big dog sat on the red mat.")
  answers = [("What did he buy?", "a gallon of milk"),
             ("Where did the man go?", "the store"),
             ("Who sat on the mat?", "The big dog"),
             ("What color was the mat?", "red")] * 3
  qas = [{"id": "q%d" % i, "question": question,
          "answers": [{"text": text, "answer_start": context.index(text)}]}
         for i, (question, text) in enumerate(answers)]
  path.write_text(json.dumps({"version": "1.1", "data": [{
      "title": "t", "paragraphs": [{"context": context, "qas": qas}]}]}))


@pytest.mark.slow
def test_the_memory_commands_of_the_docs_run_as_written(tmp_path):
  """docs/training.md's Memory commands (BERT-Large settings within 12 or
  16 GB) on a tiny BERT under BERT_LARGE_DIR, each at a few steps: the
  flags they combine (recomputation, accumulation) are accepted together
  and train the steps the batch and epochs imply."""
  blocks = quickstarts.section_blocks("docs/training.md", "Memory")
  large = tmp_path / "large"
  large.mkdir()
  vocab_file = cpd.write_vocab(large / "vocab.txt")
  config = modeling.BertConfig(
      vocab_size=len(open(vocab_file).read().split()), hidden_size=32,
      num_hidden_layers=2, num_attention_heads=2, intermediate_size=64,
      max_position_embeddings=512, type_vocab_size=2)
  (large / "bert_config.json").write_text(config.to_json_string())
  reference.write_tf1_checkpoint(str(large / "bert_model.ckpt"),
                                 reference.random_weights(config, seed=3))
  squad = tmp_path / "squad"
  squad.mkdir()
  squad_training_file(squad / "train-v1.1.json")
  glue = tmp_path / "glue"
  mrpc_folder(glue / "MRPC")
  pretraining = tmp_path / "pretraining"
  pretraining.mkdir()
  with open(cpd.synthetic_corpus(pretraining / "corpus.txt", 40)) as f:
    documents, vocab = cpd.read_documents(f, vocab_file)
  records = instances.create_training_records(
      documents, instances.InstanceOptions(512, 0.1, 0.15, 80, False),
      instances.MaskingVocab(vocab), 1, random.Random(1))
  with tfrecord_writer.RoundRobinWriter(
      [str(pretraining / "tf_examples_512.tfrecord")]) as writer:
    for record in records:
      writer.write(record)
  # Pre-training at a batch of 32 rather than 256: the same 16
  # micro-batches a step (of 2 sequences instead of 16), an eighth of the
  # work.
  script = quickstarts.script(blocks, str(tmp_path), replacements=[
      ("--num_train_epochs=2.0", "--num_train_epochs=4.0"),
      ("--num_train_epochs=3.0", "--num_train_epochs=0.25"),
      ("--train_batch_size=256", "--train_batch_size=32"),
      ("--num_train_steps=100000", "--num_train_steps=2"),
      ("--num_warmup_steps=10000", "--num_warmup_steps=1")])
  result = quickstarts.run_with_relay(script, {
      "BERT_LARGE_DIR": str(large), "SQUAD_DIR": str(squad),
      "GLUE_DIR": str(glue), "PRETRAINING_DIR": str(pretraining)})
  assert result.returncode == 0, result.stderr[-3000:]
  # 12 questions, one window each, batch 24, 4 epochs: 2 steps. 256 MRPC
  # pairs, batch 32, a quarter epoch: 2 steps. Pre-training: 2 steps.
  for output_dir in ("squad_large_12gb", "mrpc_large_12gb",
                     "pretraining_large_16gb"):
    latest = tf.train.latest_checkpoint(str(tmp_path / output_dir))
    assert latest and latest.endswith("model.ckpt-2"), (output_dir, latest)
