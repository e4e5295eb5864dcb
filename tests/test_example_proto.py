"""core/example_proto: hand-written tf.train.Example bytes vs TensorFlow's."""

import random

import numpy as np
import pytest
import tensorflow as tf

from runner_lib.core.inputs import example_proto
from runner_lib.pretraining import data as pretraining_data
from runner_lib.pretraining import instances as pretraining_instances


def tensorflow_bytes(features):
  """TensorFlow's deterministic serialization of {name: list of int/float}."""
  feature = {}
  for name, values in features.items():
    if values and isinstance(values[0], float):
      feature[name] = tf.train.Feature(
          float_list=tf.train.FloatList(value=values))
    else:
      feature[name] = tf.train.Feature(
          int64_list=tf.train.Int64List(value=values))
  return tf.train.Example(features=tf.train.Features(
      feature=feature)).SerializeToString(deterministic=True)


def hand_bytes(features, table_size=1000):
  table = example_proto.VarintTable(table_size)
  feature = {}
  for name, values in features.items():
    if values and isinstance(values[0], float):
      feature[name] = example_proto.float_feature(
          example_proto.float_payload(values))
    else:
      feature[name] = example_proto.int64_feature(table.encode(values))
  return example_proto.example(feature)


@pytest.mark.parametrize("seed", range(4))
def test_random_examples_equal_tensorflow(seed):
  rng = random.Random(seed)
  edges = [0, 1, 127, 128, 16383, 16384, 999, 1000, 2**31 - 1, 2**31,
           2**63 - 1, -1, -2**63, -300]
  features = {}
  for index in range(rng.randint(1, 9)):
    # Names in any order, of several lengths, some non-ASCII.
    name = rng.choice(["input_ids", "a", "zz", "é_key", "x" * 200]) + str(
        index)
    kind = rng.random()
    size = rng.choice([0, 1, 3, 40, 300])
    if kind < 0.5:
      features[name] = [rng.choice(edges) if rng.random() < 0.3 else
                        rng.randint(0, 5000) for _ in range(size)]
    else:
      features[name] = [rng.uniform(-1e6, 1e6) for _ in range(size)] or [
          0.5]
  assert hand_bytes(features) == tensorflow_bytes(features)


def test_no_features_and_empty_lists():
  assert hand_bytes({}) == tensorflow_bytes({})
  assert hand_bytes({"empty": []}) == tensorflow_bytes({"empty": []})


def test_varint_matches_protobuf_lengths():
  # 127 is one byte, 128 two; negatives always ten.
  assert example_proto.varint(127) == b"\x7f"
  assert example_proto.varint(128) == b"\x80\x01"
  assert example_proto.varint(300) == b"\xac\x02"
  assert len(example_proto.varint(-1)) == 10


def test_pretraining_instances_equal_tensorflow_serialization():
  rng = random.Random(7)
  encoder = pretraining_instances.InstanceEncoder(30522, 128, 20)
  for _ in range(50):
    n = rng.randint(5, 128)
    k = rng.randint(1, 20)
    instance = pretraining_instances.TrainingInstance(
        [rng.randint(0, 30521) for _ in range(n)],
        [0] * (n // 2) + [1] * (n - n // 2),
        sorted(rng.sample(range(1, n), min(k, n - 1))),
        [rng.randint(0, 30521) for _ in range(min(k, n - 1))],
        rng.random() < 0.5)
    k = len(instance.masked_lm_positions)
    want = tensorflow_bytes({
        "input_ids": instance.tokens + [0] * (128 - n),
        "input_mask": [1] * n + [0] * (128 - n),
        "segment_ids": instance.segment_ids + [0] * (128 - n),
        "masked_lm_positions": instance.masked_lm_positions + [0] * (20 - k),
        "masked_lm_ids": instance.masked_lm_labels + [0] * (20 - k),
        "masked_lm_weights": [1.0] * k + [0.0] * (20 - k),
        "next_sentence_labels": [int(instance.is_random_next)],
    })
    assert encoder.encode(instance) == want
    parsed = tf.io.parse_single_example(
        encoder.encode(instance),
        pretraining_data.pretraining_features(128, 20))
    np.testing.assert_array_equal(parsed["input_ids"][:n], instance.tokens)
