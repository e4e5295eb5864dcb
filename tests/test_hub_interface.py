"""export_saved_model.py's encoder as a TF Hub BERT encoder: loaded with
hub.KerasLayer beside our preprocessor, fine-tuned inside a tf_keras model
on real SST-2 rows, as TensorFlow's "Classify text with BERT" tutorial uses
TF Hub's."""

import csv
import os

import numpy as np
import pytest
import tensorflow as tf
import tensorflow_hub as hub
import tensorflow_text  # pylint: disable=unused-import
import tf_keras

import modeling

pytestmark = pytest.mark.slow  # Two exports in subprocesses.


@pytest.fixture(scope="session")
def exports(hub_exports):
  """conftest's hub_exports: (preprocessor dir, encoder dir, config,
  checkpoint prefix), made once for the session (test_export_saved_model
  reads them too)."""
  return hub_exports


def sst2_rows(count):
  from tests.conftest import SHARED_DATA  # pylint: disable=g-import-not-at-top
  with open(os.path.join(SHARED_DATA, "glue", "SST-2", "train.tsv"),
            encoding="utf-8") as f:
    rows = list(csv.reader(f, delimiter="\t", quotechar=None))[1:count + 1]
  return [row[0] for row in rows], np.array([int(row[1]) for row in rows])


def test_encoder_outputs_equal_bert_models_at_any_length(exports):
  _, encoder_dir, config, prefix = exports
  encoder = tf.saved_model.load(encoder_dir)
  model = modeling.BertModel(config)
  modeling.load_checkpoint(model, prefix)
  rng = np.random.RandomState(0)
  for length in (7, 32, 64):
    ids = rng.randint(5, config.vocab_size, [3, length]).astype(np.int32)
    mask = np.ones([3, length], np.int32)
    mask[1, length // 2:] = 0
    types = np.zeros([3, length], np.int32)
    types[:, length // 3:] = 1
    got = encoder({"input_word_ids": ids, "input_mask": mask,
                   "input_type_ids": types}, training=False)
    want = model({"input_ids": ids, "input_mask": mask, "segment_ids": types},
                 training=False)
    np.testing.assert_allclose(got["pooled_output"], want["pooled_output"],
                               atol=1e-5)
    np.testing.assert_allclose(got["default"], want["pooled_output"],
                               atol=1e-5)
    np.testing.assert_allclose(got["sequence_output"],
                               want["sequence_output"], atol=1e-5)
    assert len(got["encoder_outputs"]) == config.num_hidden_layers
    for got_layer, want_layer in zip(got["encoder_outputs"],
                                     want["all_encoder_layers"]):
      np.testing.assert_allclose(got_layer, want_layer, atol=1e-5)
    # Dropout on where training is.
    dropped = encoder({"input_word_ids": ids, "input_mask": mask,
                       "input_type_ids": types}, training=True)
    assert np.abs(dropped["sequence_output"] -
                  got["sequence_output"]).max() > 1e-3
  assert len(encoder.trainable_variables) == len(model.trainable_variables)
  assert len(encoder.variables) >= len(encoder.trainable_variables)
  assert list(encoder.regularization_losses) == []
  # The raw-text signature is still there.
  assert set(encoder.signatures) == {"serving_default", "serve_pair"}


def test_bad_inputs_get_tensorflows_signature_error(exports):
  _, encoder_dir, _, _ = exports
  encoder = tf.saved_model.load(encoder_dir)
  ids = np.ones([2, 5], np.int32)
  with pytest.raises((ValueError, TypeError), match="input_type_ids|match"):
    encoder({"input_word_ids": ids, "input_mask": ids}, training=False)
  with pytest.raises((ValueError, TypeError), match="int64|int32|match"):
    encoder({"input_word_ids": ids.astype(np.int64), "input_mask": ids,
             "input_type_ids": ids}, training=False)


def test_fine_tuning_through_hub_keras_layers_on_sst2(exports):
  preprocessor_dir, encoder_dir, _, _ = exports
  texts, labels = sst2_rows(32)
  tf_keras.utils.set_random_seed(0)
  text = tf_keras.layers.Input(shape=(), dtype=tf.string)
  encoder = hub.KerasLayer(encoder_dir, trainable=True)
  outputs = encoder(hub.KerasLayer(preprocessor_dir)(text))
  logits = tf_keras.layers.Dense(2)(
      tf_keras.layers.Dropout(0.1)(outputs["pooled_output"]))
  classifier = tf_keras.Model(text, logits)
  classifier.compile(
      optimizer=tf_keras.optimizers.Adam(1e-3),
      loss=tf_keras.losses.SparseCategoricalCrossentropy(from_logits=True))
  before = [v.numpy() for v in encoder.trainable_variables]
  assert before and len(classifier.trainable_variables) == len(before) + 2
  history = classifier.fit(tf.constant(texts), labels, batch_size=8,
                           epochs=12, verbose=0, shuffle=False)
  # From random weights: it learns the 32 rows by heart.
  losses = history.history["loss"]
  assert losses[-1] < 0.65 * losses[0], losses
  changed = [np.abs(a - v.numpy()).max() > 0
             for a, v in zip(before, encoder.trainable_variables)]
  assert sum(changed) > 0.9 * len(changed), sum(changed)
