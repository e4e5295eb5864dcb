"""Files by path, with TensorFlow only for the file systems that need it.

tf.io.gfile reaches gs://, hdfs:// and the other file systems TensorFlow
knows, but importing TensorFlow takes about 5 s and 600 MB. Here a path with
a scheme ("gs://bucket/x") goes through tf.io.gfile, importing TensorFlow
then; a local path goes through Python's os and open. So the scripts that
never need a model (create_pretraining_data, learn_vocab) run on local
files without TensorFlow, and every runner keeps reaching remote files.
"""

import builtins
import glob as glob_lib
import os
import shutil
import sys


def is_remote(path):
  """Whether path names a file system of TensorFlow's ("gs://...")."""
  return "://" in path


def _tf_gfile():
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  return tf.io.gfile


def errors():
  """The exception types a file operation can raise, for `except`.

  OSError, and tf.errors.OpError once TensorFlow is loaded: only then can
  one be raised, and looking it up does not import TensorFlow.
  """
  tf = sys.modules.get("tensorflow")
  if tf is None or not hasattr(tf, "errors"):
    return (OSError,)
  return (OSError, tf.errors.OpError)


def open(path, mode="r"):  # pylint: disable=redefined-builtin
  """A file object, as tf.io.gfile.GFile gives: text is UTF-8, with no
  newline translation ("\\r\\n" stays as it is)."""
  if is_remote(path):
    return _tf_gfile().GFile(path, mode)
  if "b" in mode:
    return builtins.open(path, mode)
  return builtins.open(path, mode, encoding="utf-8", newline="")


def absolute(path):
  """path made absolute, unless it is remote (gs://...)."""
  return path if is_remote(path) else os.path.abspath(path)


def exists(path):
  if is_remote(path):
    return _tf_gfile().exists(path)
  return os.path.exists(path)


def isdir(path):
  if is_remote(path):
    return _tf_gfile().isdir(path)
  return os.path.isdir(path)


def glob(pattern):
  """Paths matching pattern, sorted; "*" matches names starting with "."
  too, as in tf.io.gfile.glob."""
  if is_remote(pattern):
    return sorted(_tf_gfile().glob(pattern))
  return sorted(glob_lib.glob(pattern, include_hidden=True))


def size(path):
  """Length of the file in bytes."""
  if is_remote(path):
    return _tf_gfile().stat(path).length
  return os.path.getsize(path)


def mtime_ns(path):
  """Modification time in nanoseconds."""
  if is_remote(path):
    return _tf_gfile().stat(path).mtime_nsec
  return os.stat(path).st_mtime_ns


def listdir(path):
  if is_remote(path):
    return _tf_gfile().listdir(path)
  return os.listdir(path)


def makedirs(path):
  """Creates path and its parents; nothing where it exists."""
  if is_remote(path):
    _tf_gfile().makedirs(path)
  else:
    os.makedirs(path, exist_ok=True)


def remove(path):
  if is_remote(path):
    _tf_gfile().remove(path)
  else:
    os.remove(path)


def rmtree(path):
  if is_remote(path):
    _tf_gfile().rmtree(path)
  else:
    shutil.rmtree(path)


def rename(source, destination):
  """Renames source to destination, replacing it where it exists."""
  if is_remote(source) or is_remote(destination):
    _tf_gfile().rename(source, destination, overwrite=True)
  else:
    os.replace(source, destination)
