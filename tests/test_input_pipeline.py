"""The order in which training reads records.

Fine-tuning runners read their train file in epochs: each a fresh seeded
permutation of every record, so after E epochs' steps each record was seen
E times. The original's stream (repeat, then a 100- or 1000-record shuffle
buffer), which pre-training keeps, gives no such count, and its first
steps see only the file's first records (docs/differences.md; on real
weights the results moved within the seeds' spread).
"""

import collections

from absl import logging
import numpy as np
import tensorflow as tf

from runner_lib.core.inputs import input_pipeline
from runner_lib.core.inputs import tfrecord

SPEC = {"index": tf.io.FixedLenFeature([], tf.int64)}


def write_indexed(path, count):
  """count records whose feature "index" is their position in the file."""
  with tf.io.TFRecordWriter(path) as writer:
    for i in range(count):
      writer.write(tf.train.Example(features=tf.train.Features(feature={
          "index": tfrecord.int_feature([i])})).SerializeToString())


def indexes(dataset, count):
  """The first count records' "index", in the order read (parsed by the
  protocol buffer itself: an eager op per record costs a millisecond)."""
  return [tf.train.Example.FromString(r).features.feature["index"]
          .int64_list.value[0]
          for r in dataset.take(count).as_numpy_iterator()]


def test_epochs_permute_every_record_afresh(tmp_path):
  path = str(tmp_path / "train.tf_record")
  write_indexed(path, 50)
  read = indexes(input_pipeline.record_dataset([path], True, 3,
                                               num_records=50), 200)
  epochs = [read[k:k + 50] for k in range(0, 200, 50)]
  for epoch in epochs:
    assert sorted(epoch) == list(range(50))
  assert len({tuple(e) for e in epochs}) == 4
  # Not the file's order, and the first steps reach the file's end.
  assert epochs[0] != list(range(50)) and max(epochs[0][:25]) >= 25
  # Seeded: the same order again, and a resumed run skips into it.
  assert indexes(input_pipeline.record_dataset(
      [path], True, 3, num_records=50), 200) == read
  assert indexes(input_pipeline.record_dataset(
      [path], True, 3, skip_records=73, num_records=50), 127) == read[73:]
  assert indexes(input_pipeline.record_dataset(
      [path], True, 4, num_records=50), 50) != epochs[0]


def test_the_stream_without_epochs_gives_no_count(tmp_path):
  # What the runners read before: 2 epochs' worth of 2000 records through
  # the original's repeat-then-shuffle. Some records come 3 times, some
  # once: the reason the runners now read in epochs.
  path = str(tmp_path / "train.tf_record")
  write_indexed(path, 2000)
  counts = collections.Counter(collections.Counter(indexes(
      input_pipeline.record_dataset([path], True, 12345), 4000)).values())
  assert counts[1] > 200 and counts[3] > 200
  epochs = collections.Counter(collections.Counter(indexes(
      input_pipeline.record_dataset([path], True, 12345, num_records=2000),
      4000)).values())
  assert epochs == {2: 2000}


def test_input_pipelines_share_each_epoch(tmp_path):
  # One train file, two input pipelines: they split one permuted stream,
  # so together they read every record once per epoch.
  path = str(tmp_path / "train.tf_record")
  write_indexed(path, 40)
  read = []
  for pipeline in range(2):
    context = tf.distribute.InputContext(num_input_pipelines=2,
                                         input_pipeline_id=pipeline)
    read.append(indexes(input_pipeline.record_dataset(
        [path], True, 5, context, num_records=40), 40))
  for epoch in range(2):
    both = read[0][epoch * 20:epoch * 20 + 20] + read[1][
        epoch * 20:epoch * 20 + 20]
    assert sorted(both) == list(range(40))


def test_runner_batches_see_each_record_once_per_epoch(tmp_path):
  # The runners' dataset_fn, trimmed.
  path = str(tmp_path / "train.tf_record")
  lengths = np.random.RandomState(0).randint(2, 17, 64)
  with tf.io.TFRecordWriter(path) as writer:
    for i, length in enumerate(lengths):
      mask = [1] * int(length) + [0] * (48 - int(length))
      writer.write(tf.train.Example(features=tf.train.Features(feature={
          "index": tfrecord.int_feature([i]),
          "input_mask": tfrecord.int_feature(mask)})).SerializeToString())
  spec = dict(SPEC, input_mask=tf.io.FixedLenFeature([48], tf.int64))
  dataset_fn = input_pipeline.training_dataset_fn(
      [path], spec, 8, 7, trim=("input_mask",), num_records=64)
  batches = list(dataset_fn(tf.distribute.InputContext(), 0).take(24))
  # Trimmed: every batch cut to 16 of the records' 48 positions (in any
  # order the shuffle takes; TensorFlow's global seed changes it).
  assert {b["input_mask"].shape[1] for b in batches} == {16}
  seen = np.concatenate([b["index"].numpy() for b in batches])
  for epoch in range(3):
    assert sorted(seen[epoch * 64:(epoch + 1) * 64]) == list(range(64))


def test_a_large_train_file_is_shuffled_in_a_window(tmp_path, monkeypatch):
  path = str(tmp_path / "train.tf_record")
  write_indexed(path, 3000)
  size = tf.io.gfile.stat(path).length
  assert input_pipeline.epoch_buffer([path], 3000) == 3000
  monkeypatch.setattr(input_pipeline, "EPOCH_SHUFFLE_BYTES", size // 2)
  logged = []
  monkeypatch.setattr(logging, "info", lambda f, *a: logged.append(f % a))
  assert input_pipeline.epoch_buffer([path], 3000) == 1500
  assert "within a window of 1500 of its 3000 records" in logged[-1]
  # Never below the stream's buffer.
  monkeypatch.setattr(input_pipeline, "EPOCH_SHUFFLE_BYTES", 1)
  assert input_pipeline.epoch_buffer([path], 3000) == (
      input_pipeline.SHUFFLE_BUFFER)
