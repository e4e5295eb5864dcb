"""run_pretraining.py end to end: learning, resume after SIGKILL, bad input."""

import json
import os
import random
import socket
import sys

import numpy as np
import pytest
import tensorflow as tf

import modeling
from modeling import fused_kernels
from runner_lib.core.inputs import tfrecord_writer
from runner_lib.pretraining import instances as pretraining_instances
from tests import conftest
from tests import reference
from tests import test_create_pretraining_data as cpd
from tests.conftest import REPO_ROOT
from tests.conftest import shared_folder

# End-to-end script runs: left out of make test-fast.
pytestmark = pytest.mark.slow

CONFIG = dict(vocab_size=len(cpd.SPECIAL + cpd.WORDS + cpd.PIECES),
              hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
              intermediate_size=64, max_position_embeddings=64,
              type_vocab_size=2)


def write_data(directory):
  """Writes records of a synthetic corpus (seq 32, 5 predictions) and a
  config into directory."""
  with open(cpd.synthetic_corpus(directory / "corpus.txt", 150)) as f:
    documents, vocab = cpd.read_documents(
        f, cpd.write_vocab(directory / "vocab.txt"))
  records = pretraining_instances.create_training_records(
      documents, pretraining_instances.InstanceOptions(32, 0.1, 0.15, 5, False),
      pretraining_instances.MaskingVocab(vocab), 2, random.Random(1))
  with tfrecord_writer.RoundRobinWriter(
      [str(directory / "examples.tfrecord")]) as writer:
    for record in records:
      writer.write(record)
  config = modeling.BertConfig(**CONFIG)
  (directory / "bert_config.json").write_text(config.to_json_string())


@pytest.fixture(scope="session")
def data(tmp_path_factory):
  """(directory, records path): the records and config of write_data, made
  once for the session (this file's tests, test_preemption's and
  test_resume_faults' read them)."""
  directory = shared_folder(tmp_path_factory, "pretraining_data", write_data)
  return directory, str(directory / "examples.tfrecord")


def command(data, output_dir, **overrides):
  directory, path = data
  args = {"input_file": path, "output_dir": str(output_dir),
          "bert_config_file": str(directory / "bert_config.json"),
          "do_train": "true", "do_eval": "true", "train_batch_size": "16",
          "eval_batch_size": "16", "max_seq_length": "32",
          "max_predictions_per_seq": "5", "num_train_steps": "60",
          "num_warmup_steps": "6", "learning_rate": "2e-3",
          "save_checkpoints_steps": "30", "iterations_per_loop": "10",
          "max_eval_steps": "10", "strategy": "default"}
  args.update(overrides)
  return [sys.executable, os.path.join(REPO_ROOT, "run_pretraining.py")] + [
      "--%s=%s" % kv for kv in args.items()]


def run(cmd):
  return conftest.run(cmd)


def eval_results(output_dir):
  results = {}
  for line in open(os.path.join(output_dir, "eval_results.txt")):
    key, value = line.strip().split(" = ")
    results[key] = float(value)
  return results


def weights_of(prefix):
  reader = tf.train.load_checkpoint(prefix)
  return {n: reader.get_tensor(n) for n, _ in tf.train.list_variables(prefix)}


def test_training_raises_masked_lm_accuracy(data, tmp_path):
  before = run(command(data, tmp_path / "before", do_train="false"))
  assert before.returncode == 0, before.stderr[-3000:]
  after = run(command(data, tmp_path / "after", num_train_steps="150",
                      save_checkpoints_steps="150"))
  assert after.returncode == 0, after.stderr[-3000:]
  start, end = eval_results(tmp_path / "before"), eval_results(
      tmp_path / "after")
  assert start["global_step"] == 0 and end["global_step"] == 150
  assert set(end) == {"global_step", "loss", "masked_lm_accuracy",
                      "masked_lm_loss", "next_sentence_accuracy",
                      "next_sentence_loss"}
  assert start["masked_lm_accuracy"] < 0.05
  # From chance (1/110) to the frequent pieces and beyond.
  assert end["masked_lm_accuracy"] > start["masked_lm_accuracy"] + 0.05
  assert end["masked_lm_loss"] < start["masked_lm_loss"] - 0.5
  listed = dict(tf.train.list_variables(str(tmp_path / "after" /
                                            "model.ckpt-150")))
  assert listed["bert/embeddings/word_embeddings"] == [CONFIG["vocab_size"],
                                                       32]
  assert "bert/embeddings/word_embeddings/adam_m" in listed


# Each ablation objective once, in a reduced precision: their heads and
# losses are the default objective's pieces, whose float32 training
# test_training_raises_masked_lm_accuracy checks.
@pytest.mark.parametrize("objective,extra", [
    ("ltr", {"precision": "float16"}),
    ("mlm", {"precision": "bfloat16", "use_xla": "true",
             "gradient_accumulation_steps": "2", "optimizer": "lamb"})])
def test_ablation_objectives_train(data, tmp_path, objective, extra):
  result = run(command(data, tmp_path, objective=objective,
                       num_train_steps="20", save_checkpoints_steps="20",
                       **extra))
  assert result.returncode == 0, result.stderr[-3000:]
  results = eval_results(tmp_path)
  assert "next_sentence_accuracy" not in results
  assert np.isfinite(results["masked_lm_loss"])
  listed = dict(tf.train.list_variables(str(tmp_path / "model.ckpt-20")))
  assert "cls/seq_relationship/output_weights" not in listed
  # Weights stay float32 whatever the compute precision.
  reader = tf.train.load_checkpoint(str(tmp_path / "model.ckpt-20"))
  assert reader.get_variable_to_dtype_map()[
      "bert/embeddings/word_embeddings"] == tf.float32


def test_nan_loss_stops_without_saving(data, tmp_path):
  result = run(command(data, tmp_path, learning_rate="1e30",
                       num_warmup_steps="0", save_checkpoints_steps="10",
                       iterations_per_loop="5"))
  assert result.returncode != 0
  assert "Loss is nan" in result.stderr or "Loss is inf" in result.stderr
  for prefix in tf.io.gfile.glob(str(tmp_path / "model.ckpt-*[0-9].index")):
    for name, value in weights_of(prefix[:-len(".index")]).items():
      assert np.all(np.isfinite(value)), (prefix, name)


def test_truncated_record_file_is_named(data, tmp_path):
  content = open(data[1], "rb").read()
  bad = tmp_path / "cut.tfrecord"
  bad.write_bytes(content[:len(content) - 100])
  result = run(command(data, tmp_path / "out", input_file=str(bad)))
  assert result.returncode != 0
  assert "cut.tfrecord is truncated" in result.stderr


def test_data_of_other_lengths_is_named(data, tmp_path):
  result = run(command(data, tmp_path, max_predictions_per_seq="20"))
  assert result.returncode != 0
  assert ("feature 'masked_lm_positions' has 5 values but "
          "--max_predictions_per_seq=20") in result.stderr


def free_port():
  with socket.socket() as s:
    s.bind(("127.0.0.1", 0))
    return s.getsockname()[1]


def test_two_worker_multi_worker_mirrored_matches_one_worker(data, tmp_path):
  # No dropout, so that both runs compute the same function.
  config = modeling.BertConfig(hidden_dropout_prob=0.0,
                               attention_probs_dropout_prob=0.0, **CONFIG)
  (tmp_path / "config.json").write_text(config.to_json_string())
  init = reference.random_weights(config, seed=2, scale=0.05)
  reference.write_tf1_checkpoint(str(tmp_path / "init" / "bert_model.ckpt"),
                                 init)
  steps = dict(num_train_steps="8", save_checkpoints_steps="8",
               iterations_per_loop="4", do_eval="false", learning_rate="1e-3",
               bert_config_file=str(tmp_path / "config.json"),
               init_checkpoint=str(tmp_path / "init" / "bert_model.ckpt"))
  single = run(command(data, tmp_path / "single", **steps))
  assert single.returncode == 0, single.stderr[-3000:]
  workers = ["127.0.0.1:%d" % free_port() for _ in range(2)]
  processes = []
  for index in range(2):
    tf_config = json.dumps({"cluster": {"worker": workers},
                            "task": {"type": "worker", "index": index}})
    processes.append(conftest.popen(
        command(data, tmp_path / ("multi%d" % index),
                strategy="multi_worker_mirrored", **steps),
        env=conftest.script_env(TF_CONFIG=tf_config)))
  for process in processes:
    _, stderr = process.communicate(timeout=600)
    assert process.returncode == 0, stderr[-3000:]
  # Worker 0 is the chief and writes the checkpoint.
  assert not (tmp_path / "multi1" / "model.ckpt-8.index").exists()
  want = weights_of(str(tmp_path / "single" / "model.ckpt-8"))
  got = weights_of(str(tmp_path / "multi0" / "model.ckpt-8"))
  # The same global batches, split over two workers; the per-worker masked
  # LM means (and clipping) differ slightly from the global ones, as on the
  # original's TPU cores: the runs differ by a small part of what they moved
  # (Adam's normalised steps magnify tiny gradient differences).
  # (Key biases get no gradient at all: softmax ignores a shift.)
  for name, start in init.items():
    moved = np.linalg.norm(want[name] - start)
    difference = np.linalg.norm(got[name] - want[name])
    assert difference < max(0.3 * moved, 1e-6), (name, difference, moved)
  assert got["global_step"] == want["global_step"] == 8


def test_fused_kernels_false_trains_with_tensorflows_ops_alone(data, tmp_path):
  # float32 training with the kernels (the default) and without. The
  # kernels compute their own float32 arithmetic (each within ~1e-6 of its
  # formula in float64), so the weights part in the last bits. The bound:
  # a few float32 roundings (2^-24 each) per op and step carried through 4
  # Adam updates, and an absolute floor for weights that only collect
  # rounding (the key biases, whose true gradient is 0); a wrong kernel
  # moves weights by far more.
  started = [conftest.popen(command(
      data, tmp_path / name, num_train_steps="4", save_checkpoints_steps="4",
      do_eval="false", **flags)) for name, flags in (
          ("on", {}), ("off", {"fused_kernels": "false"}))]
  outputs = [process.communicate(timeout=600) for process in started]
  for process, (_, stderr) in zip(started, outputs):
    assert process.returncode == 0, stderr[-3000:]
  built = "on" if fused_kernels.available() else "off"
  assert "Fused CPU kernels: %s." % built in outputs[0][1]
  assert "Fused CPU kernels: off." in outputs[1][1]
  on = weights_of(str(tmp_path / "on" / "model.ckpt-4"))
  off = weights_of(str(tmp_path / "off" / "model.ckpt-4"))
  assert sorted(on) == sorted(off) and len(on) > 20
  for name in on:
    np.testing.assert_allclose(on[name], off[name], rtol=1e-5, atol=1e-8,
                               err_msg=name)


def write_unmasked_data(directory):
  """Unmasked records (create_pretraining_data --dynamic_masking) of
  write_data's corpus, dupe_factor 1, and its vocab and config."""
  with open(cpd.synthetic_corpus(directory / "corpus.txt", 150)) as f:
    documents, vocab = cpd.read_documents(
        f, cpd.write_vocab(directory / "vocab.txt"))
  records = pretraining_instances.create_training_records(
      documents, pretraining_instances.InstanceOptions(
          32, 0.1, 0.15, 5, False, dynamic_masking=True),
      pretraining_instances.MaskingVocab(vocab), 1, random.Random(1))
  with tfrecord_writer.RoundRobinWriter(
      [str(directory / "unmasked.tfrecord")]) as writer:
    for record in records:
      writer.write(record)
  config = modeling.BertConfig(**CONFIG)
  (directory / "bert_config.json").write_text(config.to_json_string())


@pytest.fixture(scope="session")
def unmasked_data(tmp_path_factory):
  directory = shared_folder(tmp_path_factory, "unmasked_pretraining_data",
                            write_unmasked_data)
  return directory, str(directory / "unmasked.tfrecord")


def test_dynamic_masking_trains_evaluates_and_reproduces(unmasked_data,
                                                         tmp_path):
  directory = unmasked_data[0]
  dynamic = dict(dynamic_masking="true", vocab_file=str(directory /
                                                        "vocab.txt"),
                 do_whole_word_mask="true", num_train_steps="80",
                 save_checkpoints_steps="80", seed="3")
  for result in [run(command(unmasked_data, tmp_path / name,
                             **dict(dynamic, seed=seed)))
                 for name, seed in (("a", "3"), ("b", "3"), ("c", "4"))]:
    assert result.returncode == 0, result.stderr[-3000:]
  a, b, c = (eval_results(tmp_path / name) for name in "abc")
  # Trained on masks drawn in the pipeline: over 5 times chance (1/110).
  assert a["global_step"] == 80 and a["masked_lm_accuracy"] > 0.05
  assert a == b  # the same seed: the same masks, the same weights
  assert a != c
  for name, value in weights_of(str(tmp_path / "a" / "model.ckpt-80")).items():
    np.testing.assert_array_equal(
        value, weights_of(str(tmp_path / "b" / "model.ckpt-80"))[name])


def test_dynamic_masking_resumes_with_the_uninterrupted_masks(
    unmasked_data, tmp_path):
  directory = unmasked_data[0]
  cmd = command(unmasked_data, tmp_path, dynamic_masking="true",
                vocab_file=str(directory / "vocab.txt"), do_eval="false",
                num_train_steps="80", save_checkpoints_steps="40",
                iterations_per_loop="20")
  result = run(cmd)
  assert result.returncode == 0, result.stderr[-3000:]
  straight = weights_of(str(tmp_path / "model.ckpt-80"))
  # As if stopped after step 40: the later checkpoint and the state file
  # naming it are gone.
  for name in os.listdir(tmp_path):
    if name.startswith("model.ckpt-80") or name == "checkpoint":
      os.remove(tmp_path / name)
  resumed = run(cmd)
  assert resumed.returncode == 0, resumed.stderr[-3000:]
  assert "at step 40" in resumed.stderr
  # The steps after 40 read the examples and masks the uninterrupted run
  # read (keyed by their number in the stream), so the weights are equal.
  for name, value in weights_of(str(tmp_path / "model.ckpt-80")).items():
    np.testing.assert_array_equal(value, straight[name], err_msg=name)


def test_records_and_dynamic_masking_flag_must_agree(data, unmasked_data,
                                                     tmp_path):
  vocab_file = str(unmasked_data[0] / "vocab.txt")
  masked = run(command(data, tmp_path / "m", dynamic_masking="true",
                       vocab_file=vocab_file))
  assert masked.returncode != 0
  assert ("examples.tfrecord: records have no feature "
          "'masked_lm_candidates' (masked records: run without "
          "--dynamic_masking") in masked.stderr
  unmasked = run(command(unmasked_data, tmp_path / "u"))
  assert unmasked.returncode != 0
  assert ("unmasked.tfrecord: records have no feature 'masked_lm_positions' "
          "(unmasked records (create_pretraining_data.py --dynamic_masking)? "
          "Pass --dynamic_masking") in unmasked.stderr
  stray = run(command(data, tmp_path / "s", masked_lm_prob="0.2"))
  assert stray.returncode != 0
  assert "--masked_lm_prob: for --dynamic_masking only" in stray.stderr
  no_vocab = run(command(unmasked_data, tmp_path / "v",
                         dynamic_masking="true"))
  assert no_vocab.returncode != 0
  assert "--dynamic_masking needs --vocab_file" in no_vocab.stderr
