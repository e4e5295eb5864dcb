"""TFRecord files: tf.train.Feature helpers, compression detection.

Writing them is tfrecord_writer.py (no TensorFlow).
"""

import tensorflow as tf

GZIP_MAGIC = b"\x1f\x8b"


def int_feature(values):
  return tf.train.Feature(int64_list=tf.train.Int64List(value=values))


def float_feature(values):
  return tf.train.Feature(float_list=tf.train.FloatList(value=values))


def compression_of(path):
  """'GZIP' if the file starts with the gzip magic bytes, else ''."""
  with tf.io.gfile.GFile(path, "rb") as f:
    return "GZIP" if f.read(2) == GZIP_MAGIC else ""
