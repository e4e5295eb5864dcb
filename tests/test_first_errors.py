"""The mistakes a newcomer makes first on the quick-start paths: each ends
in one line that says what to do, not a traceback.

A TPU that cannot be reached, a HuggingFace folder given where a Google
checkpoint is expected (as --init_checkpoint or as its weight file), and
its config.json given as --bert_config_file (the original reads that file
too, so it is a warning, not a refusal). Missing vocab and config files,
and a do_lower_case that contradicts a Google folder's name, are covered
by test_input_faults.py, test_config.py and test_tokenization.py.
"""

import json

from absl import logging
import pytest

import modeling
from tests import conftest
from tests import test_input_faults
from tests import test_run_classifier


def huggingface_folder(directory):
  """The files of a HuggingFace BERT folder (contents do not matter: the
  reader must refuse them by name before it reads any)."""
  directory.mkdir(parents=True)
  config = modeling.BertConfig(**test_run_classifier.CONFIG).to_dict()
  config.update(model_type="bert", architectures=["BertModel"],
                hidden_act="gelu", layer_norm_eps=1e-12)
  (directory / "config.json").write_text(json.dumps(config))
  (directory / "model.safetensors").write_bytes(b"\0" * 16)
  (directory / "vocab.txt").write_text(
      "\n".join(test_run_classifier.VOCAB) + "\n")
  return directory


CONVERT = ("It looks like a HuggingFace model folder: convert it first "
           "(convert_checkpoint.py --input_dir=%s --output_dir=DIR), then "
           "give --init_checkpoint=DIR/bert_model.ckpt with DIR's "
           "bert_config.json and vocab.txt.")


def test_a_huggingface_folder_as_checkpoint_says_to_convert_it(tmp_path):
  folder = huggingface_folder(tmp_path / "hf")
  with pytest.raises(modeling.CheckpointError) as error:
    modeling.resolve_checkpoint_path(str(folder))
  assert str(error.value) == ("Directory %s holds no Google checkpoint. " %
                              folder + CONVERT % folder)
  weights = str(folder / "model.safetensors")
  with pytest.raises(modeling.CheckpointError) as error:
    modeling.resolve_checkpoint_path(weights)
  assert str(error.value) == (
      "Checkpoint not found: %s (no file %s.index). " % (weights, weights) +
      CONVERT % folder)


def test_a_directory_without_checkpoint_or_weights_keeps_its_message(
    tmp_path):
  with pytest.raises(modeling.CheckpointError) as error:
    modeling.resolve_checkpoint_path(str(tmp_path))
  assert "No checkpoint in directory %s" % tmp_path in str(error.value)
  assert "HuggingFace" not in str(error.value)


def test_a_huggingface_config_is_read_with_a_warning(tmp_path, monkeypatch):
  folder = huggingface_folder(tmp_path / "hf")
  warnings = []
  monkeypatch.setattr(logging, "warning",
                      lambda message, *args: warnings.append(message % args))
  config = modeling.BertConfig.from_json_file(str(folder / "config.json"))
  # Read as the original reads it: the eleven keys, the rest kept aside.
  assert config.hidden_size == test_run_classifier.CONFIG["hidden_size"]
  assert config.extra["model_type"] == "bert"
  assert warnings == [
      "bert_config_file %s looks like a HuggingFace config.json "
      "(model_type / architectures keys), not a Google bert_config.json: "
      "its hidden_act 'gelu' means another function here. Convert the "
      "folder with convert_checkpoint.py and use its bert_config.json." %
      (folder / "config.json")]
  warnings.clear()
  modeling.BertConfig.from_json_file(str(
      test_run_classifier.mrpc_folder(tmp_path / "mrpc") /
      "bert_config.json"))
  assert not warnings


@pytest.mark.slow
def test_runner_errors_are_one_line_and_write_nothing(tmp_path, monkeypatch):
  """run_classifier.py as a user runs it: an unreachable TPU and a
  HuggingFace --init_checkpoint, each one line, exit 1, no output_dir."""
  # The TPU client asks the GCE metadata server for the TPU's address: here
  # a closed port on this machine, so the lookup fails at once, offline.
  monkeypatch.setenv("GCE_METADATA_IP", "127.0.0.1:9")
  data = test_run_classifier.mrpc_folder(tmp_path / "mrpc")
  folder = huggingface_folder(tmp_path / "hf")
  tpu_args = test_run_classifier.base_args(
      data, tmp_path / "out_tpu", do_train="true", use_tpu="true",
      tpu_name="my-tpu")
  hf_args = test_run_classifier.base_args(
      data, tmp_path / "out_hf", do_train="true", init_checkpoint=folder)
  tpu, hf = conftest.run_scripts([("run_classifier.py", tpu_args),
                                  ("run_classifier.py", hf_args)],
                                 timeout=300)
  assert tpu.returncode == 1, tpu.stderr[-2000:]
  [line] = test_input_faults.error_lines(tpu)
  assert line.startswith("Error: --use_tpu: cannot reach the TPU 'my-tpu' "
                         "(URLError: "), line
  assert line.endswith("Check --tpu_name, --tpu_zone and --gcp_project, or "
                       "run without --use_tpu (and --tpu_name) to train on "
                       "this machine's CPU or GPUs."), line
  assert (hf.returncode, test_input_faults.error_lines(hf)) == (1, [
      "Error: Directory %s holds no Google checkpoint. " % folder +
      CONVERT % folder]), hf.stderr[-2000:]
  for result in (tpu, hf):
    assert "Traceback" not in result.stderr
  assert not (tmp_path / "out_tpu").exists()
  assert not (tmp_path / "out_hf").exists()
