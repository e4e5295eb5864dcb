"""The `checkpoint` state file and checkpoint directories: what training
writes for every form of output_dir, and what TensorFlow, resuming and an
--init_checkpoint directory read from it."""

import os
import uuid

import numpy as np
import pytest
import tensorflow as tf

import modeling
from runner_lib.core import errors
from runner_lib.core import training
from runner_lib.core.inputs import model_inputs
from runner_lib.core.inputs import packing
from runner_lib.pretraining import task as pretraining
import tokenization
from tests import reference
from tests import test_create_pretraining_data as cpd
from tests import test_resume_faults as resume_test
from tests.conftest import run_script
from tests.test_modeling import tiny_config

CONFIG = tiny_config(vocab_size=len(cpd.SPECIAL + cpd.WORDS + cpd.PIECES))


def trainer(output_dir):
  task = pretraining.PretrainingTask(CONFIG, 16, 4)
  return training.Trainer(
      tf.distribute.get_strategy(), task.build_model, task.loss,
      training.TrainingConfig(output_dir=output_dir, learning_rate=1e-4,
                              num_train_steps=10, num_warmup_steps=1,
                              keep_checkpoint_max=2))


def train_and_save(output_dir, steps=(1, 2, 3)):
  """A Trainer on output_dir saving at each step, its weights changed in
  between (so each checkpoint holds its own values).

  Returns:
    dict original name -> numpy array, the weights of the last step.
  """
  run = trainer(output_dir)
  assert run.initialize() == 0
  rng = np.random.RandomState(0)
  for step in steps:
    for variable in run.trainable:
      variable.assign(rng.randn(*variable.shape).astype(np.float32))
    run.global_step.assign(step)
    run.checkpoint.save(step)
  return {name: variable.numpy()
          for name, variable in modeling.variable_map(run.model).items()}


def assert_loads(checkpoint, want):
  """modeling.load_checkpoint(checkpoint) gives exactly the weights want."""
  model = modeling.BertPretrainer(CONFIG)
  modeling.load_checkpoint(model, checkpoint)
  for name, variable in modeling.variable_map(model).items():
    np.testing.assert_array_equal(variable.numpy(), want[name], err_msg=name)


def read(path):
  with tf.io.gfile.GFile(path) as f:
    return f.read()


BASE_NAMES = ('model_checkpoint_path: "model.ckpt-3"\n'
              'all_model_checkpoint_paths: "model.ckpt-2"\n'
              'all_model_checkpoint_paths: "model.ckpt-3"\n')

# output_dir as given, from the working directory tmp_path/work.
FORMS = {
    "depth 1": "out",
    "depth 2": "a/out",
    "depth 3 (make demo)": "demo/output/pretraining_output",
    "dot": "./out",
    "dot dot": "../out",
    "trailing slash": "a/out/",
    "symlinked folder": "link",
    "absolute": "ABSOLUTE",
    "ram://": "RAM",
}


@pytest.mark.parametrize("form", sorted(FORMS))
def test_state_file_names_base_names_that_tensorflow_resolves(
    tmp_path, monkeypatch, form):
  work = tmp_path / "work"
  work.mkdir()
  monkeypatch.chdir(work)
  output_dir = {"ABSOLUTE": str(tmp_path / "absolute"),
                "RAM": "ram://%s/out" % uuid.uuid4().hex}.get(
                    FORMS[form], FORMS[form])
  if form == "symlinked folder":
    (tmp_path / "real").mkdir()
    os.symlink(tmp_path / "real", work / "link")
  want = train_and_save(output_dir)
  assert read(os.path.join(output_dir, "checkpoint")) == BASE_NAMES
  newest = os.path.join(output_dir, "model.ckpt-3")
  assert tf.train.latest_checkpoint(output_dir) == newest
  assert modeling.resolve_checkpoint_path(output_dir) == newest
  assert_loads(output_dir, want)
  assert trainer(output_dir).initialize() == 3  # Resumes.


STALE_STATES = {
    # This project before it wrote base names, for --output_dir=a/b/c.
    "relative to the working directory": "../../../model.ckpt-{step}",
    # The original's absolute paths, from a folder since moved (or another
    # machine); the old place holds older files, which must not be read.
    "absolute, of another place": "{old}/model.ckpt-{step}",
}


@pytest.mark.parametrize("stale", sorted(STALE_STATES))
def test_stale_state_files_resume_and_load_by_base_name(tmp_path, caplog,
                                                        stale):
  old = tmp_path / "old"
  train_and_save(str(old), steps=(1, 2))
  new = tmp_path / "new"
  want = train_and_save(str(new))
  path = STALE_STATES[stale]
  (new / "checkpoint").write_text(
      'model_checkpoint_path: "%s"\n' % path.format(old=old, step=3) +
      "".join('all_model_checkpoint_paths: "%s"\n' %
              path.format(old=old, step=s) for s in (2, 3)))
  assert modeling.resolve_checkpoint_path(str(new)) == str(
      new / "model.ckpt-3")
  assert_loads(str(new), want)
  fresh = trainer(str(tmp_path / "fresh"))
  assert fresh.initialize(str(new)) == 0  # --init_checkpoint=<directory>
  for name, variable in modeling.variable_map(fresh.model).items():
    np.testing.assert_array_equal(variable.numpy(), want[name], err_msg=name)
  resumed = trainer(str(new))
  assert resumed.initialize() == 3
  assert not resume_test.warnings(caplog), caplog.text
  # The next save rewrites the state file in base names and prunes only
  # the folder's own files.
  resumed.checkpoint.save(4)
  assert read(str(new / "checkpoint")) == (
      'model_checkpoint_path: "model.ckpt-4"\n'
      'all_model_checkpoint_paths: "model.ckpt-3"\n'
      'all_model_checkpoint_paths: "model.ckpt-4"\n')
  assert sorted(p.name for p in new.glob("*[0-9].index")) == [
      "model.ckpt-3.index", "model.ckpt-4.index"]
  assert sorted(p.name for p in old.glob("*[0-9].index")) == [
      "model.ckpt-1.index", "model.ckpt-2.index"]


def test_damaged_newest_in_an_init_directory_falls_back_with_a_warning(
    tmp_path, caplog):
  directory = tmp_path / "pretrained"
  train_and_save(str(directory))
  before = tf.train.load_checkpoint(str(directory / "model.ckpt-2"))
  data = directory / "model.ckpt-3.data-00000-of-00001"
  resume_test.flip_byte(data)
  # The index is intact: only reading the tensors finds the damage.
  assert modeling.resolve_checkpoint_path(str(directory)) == str(
      directory / "model.ckpt-3")
  fresh = trainer(str(tmp_path / "out"))
  assert fresh.initialize(str(directory)) == 0
  for name, variable in modeling.variable_map(fresh.model).items():
    np.testing.assert_array_equal(variable.numpy(), before.get_tensor(name),
                                  err_msg=name)
  found = [w for w in resume_test.warnings(caplog)
           if w.startswith("Checkpoint %s is damaged" %
                           (directory / "model.ckpt-3"))]
  assert len(found) == 1, caplog.text
  assert "from %s (" % data in found[0]
  assert found[0].endswith("Falling back to the checkpoint before it.")
  assert "Using %s: newer checkpoint(s) damaged: %s" % (
      directory / "model.ckpt-2",
      directory / "model.ckpt-3") in resume_test.warnings(caplog)
  # A damaged index is found by the check runners make before any work.
  resume_test.flip_byte(directory / "model.ckpt-3.index", 0)
  assert modeling.resolve_checkpoint_path(str(directory)) == str(
      directory / "model.ckpt-2")
  resume_test.flip_byte(directory / "model.ckpt-2.index", 0)
  with pytest.raises(modeling.DamagedCheckpointError) as raised:
    modeling.resolve_checkpoint_path(str(directory))
  assert str(raised.value) == (
      "No intact checkpoint in directory %s; damaged: model.ckpt-3, "
      "model.ckpt-2." % directory)


def test_folder_of_other_prefixes_resolves_to_the_one_named(tmp_path):
  # A released model's folder: bert_model.ckpt, no state file.
  folder = tmp_path / "uncased_L-2_H-32_A-4"
  weights = reference.random_weights(CONFIG, seed=2)
  prefix = reference.write_tf1_checkpoint(str(folder / "bert_model.ckpt"),
                                          weights)
  assert modeling.resolve_checkpoint_path(str(folder)) == prefix
  assert_loads(str(folder), weights)
  other = reference.write_tf1_checkpoint(
      str(folder / "tuned.ckpt"), reference.random_weights(CONFIG, seed=3))
  with pytest.raises(modeling.CheckpointError) as raised:
    modeling.resolve_checkpoint_path(str(folder))
  assert str(raised.value) == (
      "Directory %s holds 2 checkpoints (bert_model.ckpt, tuned.ckpt) and no "
      "'checkpoint' state file naming one; give the prefix instead, e.g. %s"
      % (folder, other))
  # As TensorFlow's tools write it: the state file chooses.
  (folder / "checkpoint").write_text('model_checkpoint_path: "%s"\n' % other)
  assert modeling.resolve_checkpoint_path(str(folder)) == other
  (folder / "checkpoint").write_text(
      'model_checkpoint_path: "bert_model.ckpt"\n')
  assert modeling.resolve_checkpoint_path(str(folder) + "/") == (
      str(folder) + "/bert_model.ckpt")
  # One the folder lacks chooses nothing.
  (folder / "checkpoint").write_text('model_checkpoint_path: "gone.ckpt"\n')
  with pytest.raises(modeling.CheckpointError, match="holds 2 checkpoints"):
    modeling.resolve_checkpoint_path(str(folder))


def test_empty_directory_is_no_checkpoint(tmp_path):
  (tmp_path / "notes.txt").write_text("x")
  with pytest.raises(modeling.CheckpointError) as raised:
    modeling.resolve_checkpoint_path(str(tmp_path))
  assert str(raised.value) == (
      "No checkpoint in directory %s (no 'checkpoint' state file, "
      "model.ckpt-N or other *.index file); give the prefix instead, e.g. "
      "%s/bert_model.ckpt" % (tmp_path, tmp_path))


@pytest.mark.slow
def test_export_reads_the_relative_output_dir_of_a_training_run(
    tmp_path, monkeypatch):
  monkeypatch.chdir(tmp_path)
  output_dir = "demo/output/pretraining_output"  # As make demo gives it.
  want = train_and_save(output_dir)
  (tmp_path / "bert_config.json").write_text(CONFIG.to_json_string())
  vocab_file = cpd.write_vocab(tmp_path / "vocab.txt")
  result = run_script("export_saved_model.py", {
      "task": "encoder", "vocab_file": "vocab.txt",
      "bert_config_file": "bert_config.json", "init_checkpoint": output_dir,
      "max_seq_length": "16", "export_dir": "exported"}, cwd=str(tmp_path))
  assert result.returncode == 0, result.stderr[-3000:]
  # The SavedModel (its ops registered by tokenization's import of
  # TensorFlow Text) answers as a BertModel with the newest weights.
  loaded = tf.saved_model.load(str(tmp_path / "exported"))
  text = " ".join(cpd.WORDS[:5])
  got = loaded.signatures["serving_default"](text_a=tf.constant([text]))
  model = modeling.BertModel(CONFIG)
  for name, variable in modeling.variable_map(model).items():
    variable.assign(want[name])
  _, ids, mask, segments = packing.encode_pair(
      tokenization.FullTokenizer(vocab_file), text, None, 16)
  expected = model({"input_ids": np.array([ids]),
                    "input_mask": np.array([mask]),
                    "segment_ids": np.array([segments])}, training=False)
  np.testing.assert_allclose(got["pooled_output"].numpy(),
                             expected["pooled_output"].numpy(), atol=1e-5)


def test_case_check_reads_the_prefix_a_directory_stands_for(tmp_path):
  """--init_checkpoint=uncased_L-12_H-768_A-12 (the released folder) is
  checked against --do_lower_case as its bert_model.ckpt is."""
  config = modeling.BertConfig(vocab_size=10, hidden_size=8,
                               num_hidden_layers=1, num_attention_heads=2,
                               intermediate_size=16,
                               max_position_embeddings=16, type_vocab_size=2)
  folder = tmp_path / "uncased_L-12_H-768_A-12"
  modeling.save_checkpoint(modeling.BertModel(config),
                           str(folder / "bert_model.ckpt"))
  (folder / "bert_config.json").write_text(config.to_json_string())
  (folder / "vocab.txt").write_text("\n".join(
      ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "a", "b"]) + "\n")
  args = (str(folder / "bert_config.json"), str(folder / "vocab.txt"))
  model_inputs.load_config_and_tokenizer(*args, True, str(folder), 8)
  with pytest.raises(errors.InputError) as error:
    model_inputs.load_config_and_tokenizer(*args, False, str(folder), 8)
  assert "uncased_L-12_H-768_A-12" in str(error.value)
  assert "do_lower_case" in str(error.value)
