"""Training checkpoints that readers of Google's checkpoints read as the
original's: model.ckpt-N holds only weights under the original names, their
adam_m / adam_v slots and global_step; the rest of the training state lies
in the model.ckpt-N.train_state sidecar, and resuming reads both."""

import logging
import re

import numpy as np
import pytest
import tensorflow as tf

import modeling
from modeling import checkpoint_dir
from runner_lib.core import training
from runner_lib.core.training import checkpointing
from runner_lib.pretraining import task as pretraining
from tests import test_training
from tests.test_modeling import tiny_config

# The components HuggingFace's load_tf_weights_in_bert skips a name for; any
# other name must resolve to a weight, or it stops (or, where the shapes
# agree, writes the tensor into the weight it reached).
SKIPPED_BY_HUGGINGFACE = ("adam_v", "adam_m", "AdamWeightDecayOptimizer",
                          "AdamWeightDecayOptimizer_1", "global_step")


def trained(tmp_path, optimizer, steps=2):
  """A pre-training Trainer with dropout, loss scaling and `optimizer`,
  after `steps` steps."""
  config = tiny_config()
  task = pretraining.PretrainingTask(config, 8, 2)
  trainer = training.Trainer(
      tf.distribute.get_strategy(), task.build_model, task.loss,
      training.TrainingConfig(
          output_dir=str(tmp_path), learning_rate=1e-3, num_train_steps=10,
          num_warmup_steps=1, optimizer=optimizer, loss_scaling=True))
  batch = test_training.pretraining_batch(config)
  step = tf.function(lambda: trainer.train_step(batch))
  for _ in range(steps):
    step()
  return trainer


def values(trainer):
  return {name: v.numpy() for name, v in trainer.checkpoint.variables.items()}


def assert_same(got, want):
  assert sorted(got) == sorted(want)
  for name in want:
    np.testing.assert_array_equal(got[name], want[name], err_msg=name)


@pytest.mark.parametrize("optimizer", ["adamw", "lamb"])
def test_the_checkpoint_holds_what_the_originals_hold_and_resumes_exactly(
    tmp_path, optimizer):
  trainer = trained(tmp_path / "out", optimizer)
  prefix = trainer.checkpoint.save(trainer.step)
  weights = set(modeling.variable_map(trainer.model))
  names = [name for name, _ in tf.train.list_variables(prefix)]
  for name in names:
    components = name.split("/")
    assert name in weights or (
        components[-1] in ("adam_m", "adam_v") and
        "/".join(components[:-1]) in weights) or name == "global_step", name
    assert name in weights or set(components) & set(SKIPPED_BY_HUGGINGFACE)
  assert ("bert/embeddings/word_embeddings/adam_m" in names) == (
      optimizer == "adamw")
  sidecar = [name for name, _ in tf.train.list_variables(
      prefix + checkpointing.TRAIN_STATE_SUFFIX)]
  assert sorted(names + sidecar) == sorted(trainer.checkpoint.variables)
  assert any(re.match(r"dropout_rng/\d+$", n) for n in sidecar)
  assert "loss_scale" in sidecar
  assert ("bert/embeddings/word_embeddings/lamb_m" in sidecar) == (
      optimizer == "lamb")
  # Only the model.ckpt-N it names: the sidecar is no checkpoint of its own.
  assert checkpoint_dir.saved_steps(str(tmp_path / "out")) == [2]
  assert tf.train.latest_checkpoint(str(tmp_path / "out")) == prefix

  fresh = trained(tmp_path / "out", optimizer, steps=0)
  assert fresh.checkpoint.restore_latest() == prefix
  assert_same(values(fresh), values(trainer))


def two_checkpoints(output_dir):
  """An AdamW Trainer saved after steps 1 and 2.

  Returns:
    the Trainer, its values at step 1, the prefix of model.ckpt-2.
  """
  trainer = trained(output_dir, "adamw", steps=0)
  # One function for both steps: a trace of the step costs seconds.
  step = tf.function(lambda: trainer.train_step(
      test_training.pretraining_batch(tiny_config())))
  step()
  first = values(trainer)
  trainer.checkpoint.save(1)
  step()
  return trainer, first, trainer.checkpoint.save(2)


def test_a_lost_sidecar_falls_back_to_the_checkpoint_before(tmp_path,
                                                            caplog):
  # model.ckpt-2 intact without its sidecar: resumed, its dropout masks
  # would start over silently (and a LAMB run would not resume at all).
  _, first, second = two_checkpoints(tmp_path / "out")
  for path in tf.io.gfile.glob(second + checkpointing.TRAIN_STATE_SUFFIX +
                               ".*"):
    tf.io.gfile.remove(path)
  fresh = trained(tmp_path / "out", "adamw", steps=0)
  with caplog.at_level(logging.WARNING):
    assert fresh.checkpoint.restore_latest() == checkpoint_dir.step_prefix(
        str(tmp_path / "out"), 1)
  assert_same(values(fresh), first)
  assert "model.ckpt-2 lacks its training state model.ckpt-2.train_state" in (
      caplog.text)


def test_the_originals_checkpoint_resumes_with_fresh_dropout_and_says_so(
    tmp_path, caplog):
  # What the original's run_pretraining.py leaves: weights, adam slots and
  # global_step, no sidecar anywhere.
  config = tiny_config()
  task = pretraining.PretrainingTask(config, 8, 2)

  def trainer():
    return training.Trainer(
        tf.distribute.get_strategy(), task.build_model, task.loss,
        training.TrainingConfig(
            output_dir=str(tmp_path / "out"), learning_rate=1e-3,
            num_train_steps=10, num_warmup_steps=1))

  before = trainer()
  tf.function(lambda: before.train_step(test_training.pretraining_batch(
      config)))()
  prefix = checkpoint_dir.step_prefix(str(tmp_path / "out"), 1)
  modeling.save_variables(prefix, {
      n: v for n, v in before.checkpoint.variables.items()
      if not checkpoint_dir.is_sidecar_state(n)})
  checkpoint_dir.write_state(str(tmp_path / "out"), [1])
  after = trainer()
  with caplog.at_level(logging.WARNING):
    assert after.checkpoint.restore_latest() == prefix
  got, want = values(after), values(before)
  for name in want:
    if name.startswith("dropout_rng/"):
      assert not np.array_equal(got[name], want[name]), name
    else:
      np.testing.assert_array_equal(got[name], want[name], err_msg=name)
  assert "has no dropout generator states" in caplog.text


def test_a_damaged_sidecar_falls_back_to_the_checkpoint_before(tmp_path,
                                                               caplog):
  trainer, first, second = two_checkpoints(tmp_path / "out")
  index = second + checkpointing.TRAIN_STATE_SUFFIX + ".index"
  with open(index, "r+b") as f:
    f.truncate(10)
  fresh = trained(tmp_path / "out", "adamw", steps=0)
  with caplog.at_level(logging.WARNING):
    assert fresh.checkpoint.restore_latest() == checkpoint_dir.step_prefix(
        str(tmp_path / "out"), 1)
  assert_same(values(fresh), first)
  assert "model.ckpt-2.train_state" in caplog.text
  # Older checkpoints go with their sidecars.
  for step in range(3, 9):
    trainer.checkpoint.save(step)
  assert not tf.io.gfile.glob(str(tmp_path / "out" / "model.ckpt-[12].*"))
