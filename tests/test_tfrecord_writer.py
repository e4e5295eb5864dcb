"""TFRecord files written by hand (core/inputs/tfrecord_writer.py) vs
TensorFlow's."""

import os
import random
import subprocess
import sys

import pytest
import tensorflow as tf

from runner_lib.core.inputs import tfrecord_writer

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _records():
  rng = random.Random(7)
  records = [b"", b"\x00", b"x" * 65536]
  records += [bytes(rng.getrandbits(8) for _ in range(rng.randint(0, 2000)))
              for _ in range(200)]
  return records


def _tensorflow_file(path, records, compression):
  writer = tf.io.TFRecordWriter(
      path, tf.io.TFRecordOptions(compression_type=compression))
  for record in records:
    writer.write(record)
  writer.close()
  with open(path, "rb") as f:
    return f.read()


def test_masked_crc32c_by_hand():
  # CRC32C("123456789") is the standard check value 0xE3069283; TFRecord
  # masks it as ((crc >> 15) | (crc << 17)) + 0xa282ead8, modulo 2^32.
  crc = 0xE3069283
  masked = ((crc >> 15) | (crc << 17)) + 0xA282EAD8
  assert tfrecord_writer.masked_crc32c(b"123456789") == masked % 2**32


def test_frame_layout():
  framed = tfrecord_writer.frame(b"abc")
  assert framed[:8] == (3).to_bytes(8, "little")
  assert framed[8:12] == tfrecord_writer.masked_crc32c(
      framed[:8]).to_bytes(4, "little")
  assert framed[12:15] == b"abc"
  assert framed[15:] == tfrecord_writer.masked_crc32c(b"abc").to_bytes(
      4, "little")


@pytest.mark.parametrize("gzip", [False, True])
def test_same_bytes_as_tensorflow(tmp_path, gzip):
  records = _records()
  expected = _tensorflow_file(str(tmp_path / "tf.tfrecord"), records,
                              "GZIP" if gzip else "")
  ours = str(tmp_path / "ours.tfrecord")
  with tfrecord_writer.RoundRobinWriter([ours], gzip) as writer:
    for record in records:
      writer.write(record)
  with open(ours, "rb") as f:
    assert f.read() == expected
  back = [r.numpy() for r in tf.data.TFRecordDataset(
      ours, compression_type="GZIP" if gzip else "")]
  assert back == records


def test_round_robin_over_files(tmp_path):
  records = _records()[:10]
  paths = [str(tmp_path / "a"), str(tmp_path / "sub" / "b")]
  with tfrecord_writer.RoundRobinWriter(paths) as writer:
    for record in records:
      writer.write(record)
  assert writer.num_written == 10
  for index, path in enumerate(paths):
    back = [r.numpy() for r in tf.data.TFRecordDataset(path)]
    assert back == records[index::2]
  assert sorted(os.listdir(tmp_path)) == ["a", "sub"]


def test_failure_leaves_no_file(tmp_path):
  path = str(tmp_path / "out.tfrecord")
  with pytest.raises(RuntimeError):
    with tfrecord_writer.RoundRobinWriter([path]) as writer:
      writer.write(b"x")
      raise RuntimeError("stop")
  assert not os.listdir(tmp_path)


def test_writes_without_tensorflow(tmp_path):
  path = str(tmp_path / "out.tfrecord")
  code = (
      "import sys\n"
      "from runner_lib.core.inputs import tfrecord_writer\n"
      "with tfrecord_writer.RoundRobinWriter([%r], gzip=True) as w:\n"
      "  w.write(b'record')\n"
      "assert 'tensorflow' not in sys.modules, 'TensorFlow was imported'\n"
      % path)
  subprocess.run([sys.executable, "-c", code], cwd=REPO, check=True)
  back = [r.numpy() for r in tf.data.TFRecordDataset(path, "GZIP")]
  assert back == [b"record"]
