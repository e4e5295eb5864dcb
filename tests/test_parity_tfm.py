"""Parity with tf-models-official's BertEncoder, an independent TF2 BERT.

The same random TF1 checkpoint goes into our BertModel (modeling's loader)
and into Model Garden's BertEncoder / BertPretrainerV2 (through its own TF1
checkpoint converter); outputs must agree within 1e-5.
"""

import numpy as np
import pytest
import tf_keras

from official.modeling import tf_utils
from official.nlp.modeling import models
from official.nlp.tools import tf1_bert_checkpoint_converter_lib as converter

import modeling
from tests import reference

CONFIGS = [
    dict(vocab_size=101, hidden_size=32, num_hidden_layers=2,
         num_attention_heads=4, intermediate_size=64,
         max_position_embeddings=40, type_vocab_size=2),
    dict(vocab_size=67, hidden_size=48, num_hidden_layers=3,
         num_attention_heads=3, intermediate_size=20,
         max_position_embeddings=16, type_vocab_size=4, hidden_act="relu"),
    dict(vocab_size=30, hidden_size=16, num_hidden_layers=1,
         num_attention_heads=1, intermediate_size=16,
         max_position_embeddings=64, type_vocab_size=16),
    # HuggingFace's erf GELU (all-MiniLM-L6-v2's, converted): the tanh
    # form is up to 1e-3 from it, far outside the 1e-5 below.
    dict(vocab_size=50, hidden_size=24, num_hidden_layers=2,
         num_attention_heads=2, intermediate_size=40,
         max_position_embeddings=20, type_vocab_size=2,
         hidden_act="gelu_exact"),
]


def converted(tmp_path, config, weights, model):
  """Loads weights into a Model Garden model the way its converter does."""
  v1 = reference.write_tf1_checkpoint(str(tmp_path / "v1" / "bert_model.ckpt"),
                                      weights)
  renamed = str(tmp_path / "renamed" / "ckpt")
  converter.convert(v1, renamed, config.num_attention_heads,
                    converter.BERT_V2_NAME_REPLACEMENTS,
                    converter.BERT_V2_PERMUTATIONS,
                    exclude_patterns=["adam", "Adam", "global_step"])
  model.load_weights(renamed).assert_existing_objects_matched()
  return v1


def batch_for(config, seed, batch=4, length=13):
  rng = np.random.RandomState(seed)
  lengths = [length, length - 5, 3, 2][:batch]
  ids = rng.randint(1, config.vocab_size, size=[batch, length])
  mask = (np.arange(length)[None] < np.array(lengths)[:, None]).astype(
      np.int32)
  segments = np.zeros_like(mask)
  for row, real in enumerate(lengths):
    segments[row, real // 2:real] = rng.randint(1, config.type_vocab_size)
  return (ids * mask).astype(np.int32), mask, segments


@pytest.mark.parametrize("index", range(len(CONFIGS)))
def test_encoder_outputs_match_model_garden(tmp_path, index):
  config = modeling.BertConfig(**CONFIGS[index])
  weights = reference.random_weights(config, seed=index, heads=False)
  theirs = reference.model_garden_encoder(config)
  v1 = converted(tmp_path, config, weights, theirs)
  ours = modeling.BertModel(config)
  modeling.load_checkpoint(ours, v1)

  ids, mask, segments = batch_for(config, seed=index)
  got = ours({"input_ids": ids, "input_mask": mask, "segment_ids": segments})
  want = theirs({"input_word_ids": ids, "input_mask": mask,
                 "input_type_ids": segments})
  np.testing.assert_allclose(got["sequence_output"].numpy(),
                             want["sequence_output"].numpy(), atol=1e-5)
  np.testing.assert_allclose(got["pooled_output"].numpy(),
                             want["pooled_output"].numpy(), atol=1e-5)
  for g, w in zip(got["all_encoder_layers"], want["encoder_outputs"]):
    np.testing.assert_allclose(g.numpy(), w.numpy(), atol=1e-5)
  # Outputs of this size make an absolute 1e-5 a tight bound.
  assert np.abs(got["sequence_output"].numpy()).max() > 0.1


def test_masked_lm_matches_model_garden_pretrainer(tmp_path):
  config = modeling.BertConfig(**CONFIGS[0])
  weights = reference.random_weights(config, seed=5)
  theirs = models.BertPretrainerV2(
      encoder_network=reference.model_garden_encoder(config),
      mlm_activation=tf_utils.get_activation(config.hidden_act),
      mlm_initializer=tf_keras.initializers.TruncatedNormal(stddev=0.02))
  _ = theirs(theirs.inputs)
  # BertPretrainerV2 has no next-sentence head: drop cls/seq_relationship.
  v1 = converted(tmp_path, config,
                 {k: v for k, v in weights.items()
                  if not k.startswith("cls/seq_relationship")}, theirs)
  ours = modeling.BertPretrainer(config)
  modeling.load_checkpoint(ours, v1, allow_partial=True)

  ids, mask, segments = batch_for(config, seed=9)
  positions = np.array([[1, 2, 7], [0, 4, 5], [1, 2, 0], [1, 0, 0]], np.int32)
  got = ours({"input_ids": ids, "input_mask": mask, "segment_ids": segments,
              "masked_lm_positions": positions})
  want = theirs({"input_word_ids": ids, "input_mask": mask,
                 "input_type_ids": segments,
                 "masked_lm_positions": positions})
  np.testing.assert_allclose(got["masked_lm_logits"].numpy(),
                             want["mlm_logits"].numpy(), atol=1e-5)


@pytest.mark.parametrize("index", range(len(CONFIGS)))
def test_skipping_padding_matches_model_garden_at_real_positions(tmp_path,
                                                                 index):
  config = modeling.BertConfig(**CONFIGS[index])
  weights = reference.random_weights(config, seed=index, heads=False)
  theirs = reference.model_garden_encoder(config)
  v1 = converted(tmp_path, config, weights, theirs)
  ours = modeling.BertModel(config, skip_padding=True)
  modeling.load_checkpoint(ours, v1)

  ids, mask, segments = batch_for(config, seed=index + 10)
  got = ours({"input_ids": ids, "input_mask": mask, "segment_ids": segments})
  want = theirs({"input_word_ids": ids, "input_mask": mask,
                 "input_type_ids": segments})
  real = mask.astype(bool)
  np.testing.assert_allclose(got["pooled_output"].numpy(),
                             want["pooled_output"].numpy(), atol=1e-5)
  for g, w in zip(got["all_encoder_layers"] + [got["sequence_output"]],
                  want["encoder_outputs"] + [want["sequence_output"]]):
    np.testing.assert_allclose(g.numpy()[real], w.numpy()[real], atol=1e-5)
    # Padding positions are zeros (Model Garden's are not: they are
    # computed like any other position).
    assert not g.numpy()[~real].any()
    assert np.abs(w.numpy()[~real]).max() > 0.1
