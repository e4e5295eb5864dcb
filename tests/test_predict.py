"""core/training/predict.py: fixed-size prediction batches, the last one
padded with zero examples that never reach the outputs."""

import numpy as np
import tensorflow as tf

from runner_lib.core.training import predict


def examples(count):
  """count examples {"ids": [i, i + 1, i + 2], "weight": i / 2}."""
  return tf.data.Dataset.from_tensor_slices({
      "ids": np.array([[i, i + 1, i + 2] for i in range(count)], np.int32),
      "weight": np.arange(count, dtype=np.float32) / 2})


def test_last_batch_is_filled_with_zeros_marked_padding():
  batches = list(predict.pad_and_batch(examples(5), 2))
  assert len(batches) == 3
  masks = [is_real.numpy().tolist() for _, is_real in batches]
  assert masks == [[True, True], [True, True], [True, False]]
  last, _ = batches[-1]
  np.testing.assert_array_equal(last["ids"], [[4, 5, 6], [0, 0, 0]])
  np.testing.assert_array_equal(last["weight"], [2.0, 0.0])
  # Every batch has the static shape (one trace, one XLA program).
  assert batches[0][0]["ids"].shape == [2, 3]


def test_full_batches_get_no_padding():
  batches = list(predict.pad_and_batch(examples(4), 2))
  assert len(batches) == 2
  assert all(is_real.numpy().all() for _, is_real in batches)


def test_predict_all_returns_exactly_the_real_examples_in_order():
  strategy = tf.distribute.get_strategy()

  def predict_fn(batch):
    return {"sum": tf.reduce_sum(batch["ids"], -1), "weight": batch["weight"]}

  for batch_size in (1, 3, 7, 16):
    outputs = predict.predict_all(strategy, predict_fn, examples(7),
                                  batch_size)
    np.testing.assert_array_equal(outputs["sum"], 3 * np.arange(7) + 3)
    np.testing.assert_array_equal(outputs["weight"], np.arange(7) / 2)
