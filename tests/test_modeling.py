"""BertModel and its layers against the NumPy rendering of the original."""

import numpy as np
import pytest
import tensorflow as tf

import modeling
from modeling import layers
from tests import reference


def tiny_config(**overrides):
  fields = dict(vocab_size=97, hidden_size=32, num_hidden_layers=2,
                num_attention_heads=4, intermediate_size=37,
                max_position_embeddings=24, type_vocab_size=3)
  fields.update(overrides)
  return modeling.BertConfig(**fields)


def padded_pair_batch(config, seed=1, batch=3, length=11):
  """Random ids with sentence pairs and padding of different lengths."""
  rng = np.random.RandomState(seed)
  ids = rng.randint(1, config.vocab_size, size=[batch, length])
  mask = np.zeros([batch, length], np.int32)
  segments = np.zeros([batch, length], np.int32)
  for row, (real, split) in enumerate([(length, 4), (7, 3), (2, 1)][:batch]):
    mask[row, :real] = 1
    segments[row, split:real] = 1
  ids = ids * mask
  return {"input_ids": ids.astype(np.int32), "input_mask": mask,
          "segment_ids": segments}


def loaded_model(tmp_path, config, seed=0, model_class=modeling.BertModel):
  weights = reference.random_weights(config, seed)
  prefix = reference.write_tf1_checkpoint(str(tmp_path / "bert_model.ckpt"),
                                          weights)
  model = model_class(config)
  modeling.load_checkpoint(model, prefix)
  return model, weights


def loaded_twin(tmp_path, config, **kwargs):
  """A BertModel(config, **kwargs) holding loaded_model's checkpoint."""
  model = modeling.BertModel(config, **kwargs)
  modeling.load_checkpoint(model, str(tmp_path / "bert_model.ckpt"))
  return model


def test_gelu_is_the_tanh_form():
  x = np.linspace(-6, 6, 101).astype(np.float32)
  np.testing.assert_allclose(layers.gelu(x).numpy(), reference.np_gelu(x),
                             rtol=1e-6, atol=1e-6)
  # Hand values of 0.5x(1 + tanh(sqrt(2/pi)(x + 0.044715x^3))).
  np.testing.assert_allclose(layers.gelu([1.0, -1.0, 2.0]).numpy(),
                             [0.8411920, -0.1588080, 1.9545977], atol=1e-6)
  # The exact erf form differs from it by up to 4.7e-4 (at |x| ~ 2.7).
  exact = tf.nn.gelu(x, approximate=False).numpy()
  assert np.abs(exact - layers.gelu(x).numpy()).max() > 4e-4


def test_gelu_exact_is_the_erf_form():
  x = np.linspace(-6, 6, 101).astype(np.float32)
  np.testing.assert_allclose(layers.gelu_exact(x).numpy(),
                             reference.np_gelu_exact(x), rtol=1e-6, atol=1e-6)
  # Hand values of 0.5x(1 + erf(x / sqrt(2))).
  np.testing.assert_allclose(
      modeling.get_activation("gelu_exact")([1.0, -1.0, 2.0]).numpy(),
      [0.8413447, -0.1586553, 1.9544997], atol=1e-6)


@pytest.mark.parametrize("name,expected", [
    ("relu", [0.0, 0.0, 2.0]), ("tanh", np.tanh([-1.0, 0.0, 2.0])),
    ("linear", None), ("LINEAR", None)])
def test_get_activation(name, expected):
  fn = modeling.get_activation(name)
  if expected is None:
    assert fn is None
  else:
    np.testing.assert_allclose(fn(tf.constant([-1.0, 0.0, 2.0])), expected,
                               atol=1e-7)
  with pytest.raises(ValueError, match="Unsupported activation: 'swish'"):
    modeling.get_activation("swish")


def test_layer_norm_epsilon_is_1e_minus_12():
  # Variance ~1e-8: epsilon 1e-12 still normalises to +-1, Keras' default
  # 1e-3 would squash it to ~0.003.
  x = np.array([[1.0, 1.0002, 1.0, 1.0002]], np.float32)
  norm = layers.layer_norm()
  y = norm(x).numpy()
  np.testing.assert_allclose(
      y, reference.np_layer_norm(x.astype(np.float64), 1.0, 0.0), atol=2e-3)
  np.testing.assert_allclose(np.abs(y), 1.0, atol=2e-3)


def test_attention_mask_adds_minus_10000():
  rng = np.random.RandomState(3)
  attention = layers.SelfAttention(2, 4, 0.02, 0.0)
  x = rng.randn(2, 5, 8).astype(np.float32)
  mask = np.array([[1, 1, 1, 0, 0], [1, 1, 1, 1, 1]], np.float32)
  got = attention(x, mask[:, None, :]).numpy()
  w = {"a/" + n + "/" + v: getattr(getattr(attention, n), v).numpy()
       for n in ("query", "key", "value") for v in ("kernel", "bias")}
  expected = reference.np_attention(x.astype(np.float64), mask, w, "a/", 2)
  np.testing.assert_allclose(got, expected, atol=1e-5)
  # Masked positions contribute nothing: changing them changes no output.
  x2 = x.copy()
  x2[0, 3:] = 100.0
  changed = attention(x2, mask[:, None, :]).numpy()
  np.testing.assert_allclose(changed[0, :3], got[0, :3], atol=1e-5)


@pytest.mark.parametrize("act", ["gelu", "relu", "tanh"])
def test_bert_model_matches_numpy(tmp_path, act):
  config = tiny_config(hidden_act=act)
  model, weights = loaded_model(tmp_path, config)
  batch = padded_pair_batch(config)
  got = model(batch)
  want = reference.np_bert(weights, config, **batch)
  for key in ("sequence_output", "pooled_output", "embedding_output"):
    np.testing.assert_allclose(got[key].numpy(), want[key], atol=1e-5,
                               err_msg=key)
  assert len(got["all_encoder_layers"]) == config.num_hidden_layers
  for g, w in zip(got["all_encoder_layers"], want["all_encoder_layers"]):
    np.testing.assert_allclose(g.numpy(), w, atol=1e-5)
  assert got["sequence_output"] is got["all_encoder_layers"][-1]


def test_defaults_for_mask_and_segments(tmp_path):
  config = tiny_config()
  model, weights = loaded_model(tmp_path, config)
  ids = np.array([[5, 6, 7, 8]], np.int32)
  got = model({"input_ids": ids})["pooled_output"].numpy()
  want = reference.np_bert(weights, config, ids, np.ones_like(ids),
                           np.zeros_like(ids))["pooled_output"]
  np.testing.assert_allclose(got, want, atol=1e-5)


def test_one_hot_embeddings_give_the_same_numbers(tmp_path):
  config = tiny_config()
  model, _ = loaded_model(tmp_path, config)
  one_hot = loaded_twin(tmp_path, config, use_one_hot_embeddings=True)
  batch = padded_pair_batch(config)
  np.testing.assert_allclose(one_hot(batch)["sequence_output"].numpy(),
                             model(batch)["sequence_output"].numpy(),
                             atol=1e-6)


def test_dropout_follows_training_argument(tmp_path):
  config = tiny_config(hidden_dropout_prob=0.3)
  model, _ = loaded_model(tmp_path, config)
  batch = padded_pair_batch(config)
  inference = [model(batch, training=False)["sequence_output"].numpy()
               for _ in range(2)]
  np.testing.assert_array_equal(inference[0], inference[1])
  tf.random.set_seed(1)
  training = model(batch, training=True)["sequence_output"].numpy()
  assert np.abs(training - inference[0]).max() > 1e-2
  assert config.hidden_dropout_prob == 0.3  # the config is never changed


def test_sequence_longer_than_position_table_is_rejected():
  model = modeling.BertModel(tiny_config(max_position_embeddings=8))
  with pytest.raises(ValueError, match="exceeds max_position_embeddings 8"):
    model({"input_ids": np.ones([1, 9], np.int32)})


def test_input_ids_must_be_rank_2():
  model = modeling.BertModel(tiny_config())
  with pytest.raises(ValueError, match="input_ids must have rank 2"):
    model({"input_ids": np.ones([4], np.int32)})


def test_initializers_are_truncated_normal_and_distinct():
  config = tiny_config(hidden_size=64, intermediate_size=128,
                       initializer_range=0.05)
  names = modeling.variable_map(modeling.BertModel(config))
  kernels = [v.numpy() for n, v in names.items()
             if n.endswith(("kernel", "embeddings"))]
  for k in kernels:
    assert np.abs(k).max() <= 2 * 0.05 + 1e-7  # cut at two stddev
    assert 0.6 * 0.05 < k.std() < 1.0 * 0.05
  flat = [k.ravel()[:16].tobytes() for k in kernels]
  assert len(set(flat)) == len(flat)  # no two weights share values
  assert all(np.all(v.numpy() == 0) for n, v in names.items()
             if n.endswith(("bias", "beta")))
  assert all(np.all(v.numpy() == 1) for n, v in names.items()
             if n.endswith("gamma"))


def test_pretraining_heads_match_numpy(tmp_path):
  config = tiny_config()
  model, weights = loaded_model(tmp_path, config,
                                model_class=modeling.BertPretrainer)
  batch = padded_pair_batch(config)
  positions = np.array([[1, 3, 0], [2, 5, 6], [1, 0, 0]], np.int32)
  got = model(dict(batch, masked_lm_positions=positions))
  want = reference.np_bert(weights, config, **batch)
  np.testing.assert_allclose(
      got["masked_lm_logits"].numpy(),
      reference.np_masked_lm(weights, config, want["sequence_output"],
                             positions), atol=1e-4)
  np.testing.assert_allclose(
      got["next_sentence_logits"].numpy(),
      reference.np_next_sentence(weights, want["pooled_output"]), atol=1e-5)
  # The output projection is the word embedding table itself.
  assert model.masked_lm.embedding_table is model.bert.embedding_table


def test_feature_layers_resolve_like_extract_features_layers():
  resolve = modeling.token_classifier.resolve_layers
  # Indexes into [embedding output, layer 0, ..., layer 11].
  assert resolve([-1, -2, -3, -4], 12) == [12, 11, 10, 9]
  assert resolve(["embeddings", 0, 11], 12) == [0, 1, 12]
  with pytest.raises(ValueError, match="Layer 12 does not exist"):
    resolve([12], 12)
  with pytest.raises(ValueError, match="named twice"):
    resolve([-1, 11], 12)


def test_skipping_padding_gives_the_real_positions_values(tmp_path):
  config = tiny_config()
  model, weights = loaded_model(tmp_path, config)
  skipping = loaded_twin(tmp_path, config, skip_padding=True)
  batch = padded_pair_batch(config)
  real = batch["input_mask"].astype(bool)
  got = skipping(batch)
  want = reference.np_bert(weights, config, **batch)
  np.testing.assert_allclose(got["pooled_output"].numpy(),
                             want["pooled_output"], atol=1e-5)
  for g, w in zip(got["all_encoder_layers"], want["all_encoder_layers"]):
    np.testing.assert_allclose(g.numpy()[real], w[real], atol=1e-5)
    assert not g.numpy()[~real].any()
  assert got["sequence_output"] is got["all_encoder_layers"][-1]

  # Gradients of a loss on real positions are those of the padded model,
  # traced once for batches of any size and length.
  def gradients(bert):
    @tf.function(input_signature=[{
        name: tf.TensorSpec([None, None], tf.int32) for name in batch}])
    def step(inputs):
      with tf.GradientTape() as tape:
        outputs = bert(inputs, training=False)
        weights = tf.cast(inputs["input_mask"], tf.float32)[:, :, None]
        loss = (tf.reduce_sum(outputs["pooled_output"] ** 2) +
                tf.reduce_sum(outputs["sequence_output"] ** 2 * weights))
      return [tf.convert_to_tensor(g) for g in
              tape.gradient(loss, bert.trainable_variables)]
    return [[g.numpy() for g in step(inputs)]
            for inputs in (batch, padded_pair_batch(config, seed=2, batch=2,
                                                    length=16))]
  for ours, padded in zip(gradients(skipping), gradients(model)):
    for g, w in zip(ours, padded):
      np.testing.assert_allclose(g, w, atol=1e-5, rtol=1e-5)


def test_skipping_padding_with_causal_attention_and_dropout(tmp_path):
  config = tiny_config(hidden_dropout_prob=0.2,
                       attention_probs_dropout_prob=0.2)
  batch = padded_pair_batch(config)
  real = batch["input_mask"].astype(bool)
  outputs = []
  for skip_padding in (False, True):
    model = modeling.BertModel(config, causal_attention=True,
                               skip_padding=skip_padding)
    modeling.load_checkpoint(model, reference.write_tf1_checkpoint(
        str(tmp_path / "bert_model.ckpt"), reference.random_weights(config,
                                                                    0)))
    outputs.append(model(batch)["sequence_output"].numpy())
    training = model(batch, training=True)["sequence_output"].numpy()
    assert np.abs(training - outputs[-1])[real].max() > 1e-2
  np.testing.assert_allclose(outputs[1][real], outputs[0][real], atol=1e-5)


def test_skipping_padding_drops_what_the_padded_batch_drops(tmp_path):
  """With dropout on, the encoder skipping padding draws the padded
  batch's masks at the real positions: the same outputs and gradients,
  call after call (masks drawn on the gathered rows instead were other
  ones, and training took another path than the padded batch's)."""
  config = tiny_config(hidden_dropout_prob=0.3,
                       attention_probs_dropout_prob=0.2)
  batch = padded_pair_batch(config)
  real = batch["input_mask"].astype(bool)
  prefix = reference.write_tf1_checkpoint(
      str(tmp_path / "bert_model.ckpt"), reference.random_weights(config, 0))
  results = []
  for skip_padding in (False, True):
    model = modeling.BertModel(config, seed=5, skip_padding=skip_padding)
    modeling.load_checkpoint(model, prefix)
    calls = []
    for _ in range(3):
      with tf.GradientTape() as tape:
        outputs = model(batch, training=True)
        weights = tf.cast(batch["input_mask"], tf.float32)[:, :, None]
        loss = tf.reduce_sum(outputs["sequence_output"] ** 2 * weights)
      grads = tape.gradient(loss, model.trainable_variables)
      # The pooler has no gradient (None).
      calls.append((outputs["sequence_output"].numpy()[real],
                    [tf.convert_to_tensor(g).numpy() for g in grads
                     if g is not None]))
    results.append(calls)
    inference = model(batch, training=False)["sequence_output"].numpy()[real]
    assert np.abs(calls[0][0] - inference).max() > 1e-2  # dropout acted
  assert np.abs(results[0][0][0] - results[0][1][0]).max() > 1e-2
  # Gradients: 2^-13 of each tensor's largest value, plus 2^-20 of the
  # largest anywhere (as test_trim's pre-training test, which says why):
  # sums of the same terms in other orders, a few hundred float32 ulps of
  # the largest term; an absolute 1e-5 failed by 1.5e-5 with oneDNN off.
  for (padded, padded_grads), (skipped, skipped_grads) in zip(*results):
    np.testing.assert_allclose(skipped, padded, atol=1e-5)
    floor = 2 ** -20 * max(np.abs(w).max() for w in padded_grads)
    for g, w in zip(skipped_grads, padded_grads):
      np.testing.assert_allclose(g, w, rtol=0,
                                 atol=2 ** -13 * np.abs(w).max() + floor)
