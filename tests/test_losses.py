"""core/training/losses.py against hand-computed values."""

import math

import numpy as np
import tensorflow as tf

from runner_lib.core.training import losses


def test_cross_entropy_by_hand():
  # Logits [0, ln 3] are probabilities [1/4, 3/4].
  logits = tf.constant([[0.0, math.log(3.0)], [0.0, math.log(3.0)],
                        [2.0, 2.0]], tf.bfloat16)
  got = losses.cross_entropy(logits, tf.constant([0, 1, 1], tf.int64))
  assert got.dtype == tf.float32
  np.testing.assert_allclose(
      got.numpy(), [math.log(4.0), math.log(4.0 / 3.0), math.log(2.0)],
      rtol=1e-2)  # ln 3 in bfloat16 carries 3 significant digits.
  got = losses.cross_entropy(tf.constant([[1.0, 2.0, 3.0]]), [2])
  np.testing.assert_allclose(
      got.numpy(), [-3.0 + math.log(math.exp(1) + math.exp(2) + math.exp(3))],
      rtol=1e-6)
