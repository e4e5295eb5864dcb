"""Checkpoint I/O under the original TF1 variable names."""

import logging as std_logging

from absl import logging
import numpy as np
import pytest
import tensorflow as tf

import modeling
from tests import reference
from tests.test_modeling import padded_pair_batch
from tests.test_modeling import tiny_config


def test_save_writes_original_names_and_loads_back(tmp_path):
  config = tiny_config()
  model = modeling.BertPretrainer(config)
  prefix = modeling.save_checkpoint(model, str(tmp_path / "out" / "model.ckpt-3"))
  listed = dict(tf.train.list_variables(prefix))
  assert listed == reference.original_shapes(config)
  reader = tf.train.load_checkpoint(prefix)
  np.testing.assert_array_equal(
      reader.get_tensor("bert/encoder/layer_1/attention/self/key/kernel"),
      model.bert.encoder_layers[1].attention.key.kernel.numpy())

  fresh = modeling.BertPretrainer(config)
  modeling.load_checkpoint(fresh, prefix)
  batch = dict(padded_pair_batch(config),
               masked_lm_positions=np.array([[1, 2]] * 3, np.int32))
  for key in ("sequence_output", "pooled_output", "masked_lm_logits",
              "next_sentence_logits"):
    np.testing.assert_array_equal(fresh(batch)[key].numpy(),
                                  model(batch)[key].numpy())


def test_original_checkpoint_loads_every_weight(tmp_path):
  config = tiny_config()
  weights = reference.random_weights(config)
  prefix = reference.write_tf1_checkpoint(str(tmp_path / "bert_model.ckpt"),
                                          weights)
  model = modeling.BertPretrainer(config)
  result = modeling.load_checkpoint(model, prefix)
  assert result.missing == [] and result.unused == ["global_step"]
  assert len(result.loaded) == len(weights)
  for name, variable in modeling.variable_map(model).items():
    np.testing.assert_array_equal(variable.numpy(), weights[name])


def test_encoder_ignores_heads_and_reports_them_at_debug(tmp_path, caplog):
  config = tiny_config()
  prefix = reference.write_tf1_checkpoint(
      str(tmp_path / "bert_model.ckpt"), reference.random_weights(config))
  logging.set_verbosity(logging.DEBUG)
  try:
    with caplog.at_level(std_logging.DEBUG):
      result = modeling.load_checkpoint(modeling.BertModel(config), prefix)
  finally:
    logging.set_verbosity(logging.INFO)
  assert "cls/predictions/output_bias" in result.unused
  assert "cls/seq_relationship/output_weights" in result.unused
  debug = [r.getMessage() for r in caplog.records
           if r.levelno == std_logging.DEBUG]
  assert any("cls/predictions/output_bias" in m for m in debug)


def test_missing_and_misshapen_variables_are_all_listed(tmp_path):
  config = tiny_config()
  weights = reference.random_weights(config, heads=False)
  del weights["bert/pooler/dense/bias"]
  del weights["bert/encoder/layer_1/output/LayerNorm/beta"]
  weights["bert/embeddings/word_embeddings"] = np.zeros([50, 32], np.float32)
  prefix = reference.write_tf1_checkpoint(str(tmp_path / "bad.ckpt"), weights)
  model = modeling.BertModel(config)
  with pytest.raises(modeling.CheckpointError) as error:
    modeling.load_checkpoint(model, prefix)
  message = str(error.value)
  assert "2 variable(s) missing" in message
  assert "bert/pooler/dense/bias" in message
  assert "bert/encoder/layer_1/output/LayerNorm/beta" in message
  assert ("bert/embeddings/word_embeddings: checkpoint [50, 32], model "
          "[97, 32]") in message
  # Partial load still refuses a wrong shape.
  with pytest.raises(modeling.CheckpointError, match="wrong shape"):
    modeling.load_checkpoint(model, prefix, allow_partial=True)


def test_partial_load_keeps_new_weights(tmp_path):
  config = tiny_config()
  prefix = reference.write_tf1_checkpoint(
      str(tmp_path / "bert_model.ckpt"),
      reference.random_weights(config, heads=False))
  model = modeling.BertPretrainer(config)
  before = model.next_sentence.output_weights.numpy()
  with pytest.raises(modeling.CheckpointError, match="7 variable"):
    modeling.load_checkpoint(model, prefix)
  result = modeling.load_checkpoint(model, prefix, allow_partial=True)
  assert "cls/seq_relationship/output_weights" in result.missing
  assert len(result.missing) == 7
  np.testing.assert_array_equal(model.next_sentence.output_weights.numpy(),
                                before)


def test_missing_checkpoint_is_named(tmp_path):
  model = modeling.BertModel(tiny_config())
  with pytest.raises(modeling.CheckpointError,
                     match=r"Checkpoint not found: .*nothing/bert_model.ckpt"):
    modeling.load_checkpoint(model, str(tmp_path / "nothing/bert_model.ckpt"))
  modeling.save_checkpoint(model, str(tmp_path / "m.ckpt"))
  with pytest.raises(modeling.CheckpointError, match="without the .index"):
    modeling.load_checkpoint(model, str(tmp_path / "m.ckpt.index"))
  (tmp_path / "empty").mkdir()
  with pytest.raises(modeling.CheckpointError, match="No checkpoint in dir"):
    modeling.load_checkpoint(model, str(tmp_path / "empty"))


def test_directory_resolves_to_latest(tmp_path):
  model = modeling.BertModel(tiny_config())
  prefix = modeling.save_checkpoint(model, str(tmp_path / "model.ckpt-5"))
  tf.compat.v1.train.update_checkpoint_state(str(tmp_path), prefix)
  assert modeling.resolve_checkpoint_path(str(tmp_path)) == prefix
