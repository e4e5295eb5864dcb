"""core/gfile.py: local paths without TensorFlow, others through tf.io.gfile."""

import os
import subprocess
import sys

import tensorflow as tf

from runner_lib.core import gfile
from runner_lib.core.inputs import text_input

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def test_local_paths_behave_as_tf_gfile(tmp_path):
  root = str(tmp_path)
  for name in ("a.txt", ".hidden.txt", "b.bin"):
    with open(os.path.join(root, name), "wb") as f:
      f.write(b"one\r\ntwo\nthree")
  pattern = os.path.join(root, "*.txt")
  assert gfile.glob(pattern) == sorted(tf.io.gfile.glob(pattern))
  assert len(gfile.glob(pattern)) == 2  # "*" matches the hidden file too
  path = os.path.join(root, "a.txt")
  with gfile.open(path) as ours, tf.io.gfile.GFile(path) as theirs:
    assert ours.read() == theirs.read() == "one\r\ntwo\nthree"
  with gfile.open(path, "rb") as ours, tf.io.gfile.GFile(path, "rb") as theirs:
    assert ours.read() == theirs.read() == b"one\r\ntwo\nthree"
  assert gfile.size(path) == tf.io.gfile.stat(path).length == 14
  # TensorFlow's local stat has whole seconds; ours the file system's ns.
  assert 0 <= gfile.mtime_ns(path) - tf.io.gfile.stat(path).mtime_nsec < 1e9
  assert sorted(gfile.listdir(root)) == sorted(tf.io.gfile.listdir(root))
  nested = os.path.join(root, "x", "y")
  gfile.makedirs(nested)
  gfile.makedirs(nested)  # exists: nothing to do
  assert gfile.isdir(nested) and not gfile.isdir(path)
  gfile.rename(path, os.path.join(root, "b.bin"))  # replaces b.bin
  assert not gfile.exists(path)
  gfile.rmtree(os.path.join(root, "x"))
  gfile.remove(os.path.join(root, "b.bin"))
  assert sorted(os.listdir(root)) == [".hidden.txt"]


def test_text_is_utf8_without_newline_translation(tmp_path):
  path = str(tmp_path / "t.txt")
  with gfile.open(path, "w") as f:
    f.write("é\r\n")
  with open(path, "rb") as f:
    assert f.read() == "é\r\n".encode("utf-8")


def test_remote_paths_go_through_tensorflow():
  # ram:// is a TensorFlow file system: os knows nothing of it.
  directory = "ram://gfile_test/dir"
  gfile.makedirs(directory)
  with gfile.open(directory + "/a.txt", "w") as f:
    f.write("remote")
  assert tf.io.gfile.exists(directory + "/a.txt")
  assert gfile.glob("ram://gfile_test/dir/*.txt") == [directory + "/a.txt"]
  assert gfile.size(directory + "/a.txt") == 6
  gfile.rename(directory + "/a.txt", directory + "/b.txt")
  assert gfile.listdir(directory) == ["b.txt"]
  assert gfile.errors()[1] is tf.errors.OpError


def test_local_files_need_no_tensorflow(tmp_path):
  code = (
      "import sys\n"
      "from runner_lib.core import errors, gfile\n"
      "from runner_lib.core.files import fileio\n"
      "from runner_lib.core.inputs import text_input\n"
      "path = %r\n"
      "with fileio.atomic_output(path) as f:\n"
      "  f.write('a\\nb\\n')\n"
      "assert list(text_input.read_lines(text_input.expand_globs(path))) == "
      "['a\\n', 'b\\n']\n"
      "assert gfile.errors() == (OSError,)\n"
      "assert 'tensorflow' not in sys.modules, 'TensorFlow was imported'\n"
      % str(tmp_path / "out.txt"))
  subprocess.run([sys.executable, "-c", code], cwd=REPO, check=True)


def test_read_lines_as_tensorflow_readline(tmp_path):
  # TensorFlow's readline (the original's) drops every "\r"; lines end at
  # "\n" only.
  path = str(tmp_path / "cr.txt")
  with open(path, "wb") as f:
    f.write("a\rb\r\nc\r\r\n\u2028d\re\n\nf".encode("utf-8"))
  expected = [line.decode("utf-8") for line in tf.io.gfile.GFile(path, "rb")]
  assert list(text_input.read_lines([path])) == expected == [
      "ab\n", "c\n", "\u2028de\n", "\n", "f"]
