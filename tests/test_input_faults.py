"""Faults a careless user or a failing disk brings: each is one line naming
the flag or file, found before work where it can be, and leaves nothing
half-written.

The flag checks run in this process on run_classifier.py's flags (the
fine-tuning runners share them, and run_squad.py / run_pretraining.py call
the same functions); a few script runs check the exit status and the one
line users see. A full disk is real: /dev/full behind a temporary file's
name in this process, and a small tmpfs (in a private mount namespace)
under a whole run_classifier.py run.
"""

import errno
import os
import stat
import subprocess
import sys

from absl import flags
from absl import logging
from absl.testing import flagsaver
import pytest
import tensorflow as tf

import modeling
import run_classifier  # pylint: disable=unused-import (defines the flags)
from runner_lib.classifier import data as classifier_data
from runner_lib.core import errors
from runner_lib.core.cli import flags as runner_flags
from runner_lib.core.files import fileio
from runner_lib.core.inputs import tfrecord_writer
from runner_lib.ner import data as ner_data
from runner_lib.serving import export
from runner_lib.squad import data as squad_data
from runner_lib.squad import options as squad_options
from runner_lib.swag import data as swag_data
from tests import conftest
from tests import reference
from tests import test_run_classifier

FLAGS = flags.FLAGS

# run_classifier.py defines --max_seq_length and the rest; the SQuAD window
# flags come from the module run_squad.py takes them from.
if "doc_stride" not in FLAGS:
  squad_options.define_window_flags()
  squad_options.define_answer_flags()


def parse(tmp_path, **values):
  """Parses run_classifier.py-style flags (inside a flagsaver)."""
  args = {"output_dir": tmp_path / "out", "do_train": "true"}
  args.update(values)
  FLAGS(["run_classifier.py"] + ["--%s=%s" % kv for kv in args.items()])


def check_finetuning_flags(tmp_path, **values):
  """runner_flags.check_finetuning_flags's error message, or None."""
  with flagsaver.flagsaver():
    parse(tmp_path, **values)
    try:
      runner_flags.check_finetuning_flags(tf.distribute.get_strategy())
    except errors.InputError as e:
      return str(e)
  return None


@pytest.mark.parametrize("flag,value", [
    ("train_batch_size", "0"), ("train_batch_size", "-4"),
    ("eval_batch_size", "0"), ("predict_batch_size", "0"),
    ("save_checkpoints_steps", "0"), ("iterations_per_loop", "0"),
    ("gradient_accumulation_steps", "0"),
])
def test_integer_flags_below_one(tmp_path, flag, value):
  message = check_finetuning_flags(tmp_path, **{flag: value})
  assert message == "--%s must be at least 1, got %s." % (flag, value)
  assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("flag,value,message", [
    ("learning_rate", "-2e-5", "--learning_rate must be above 0, got -2e-05."),
    ("learning_rate", "0", "--learning_rate must be above 0, got 0.0."),
    ("learning_rate", "nan", "--learning_rate must be above 0, got nan."),
    ("num_train_epochs", "0", "--num_train_epochs must be above 0, got 0.0."),
    ("num_train_epochs", "-1",
     "--num_train_epochs must be above 0, got -1.0."),
    ("warmup_proportion", "1.5",
     "--warmup_proportion must be in [0, 1], got 1.5."),
    ("warmup_proportion", "-0.1",
     "--warmup_proportion must be in [0, 1], got -0.1."),
])
def test_learning_flags_that_cannot_be_meant(tmp_path, flag, value, message):
  assert check_finetuning_flags(tmp_path, **{flag: value}) == message
  assert not (tmp_path / "out").exists()


def test_learning_flags_at_their_limits_pass(tmp_path):
  assert check_finetuning_flags(tmp_path, warmup_proportion="0") is None
  assert check_finetuning_flags(tmp_path, warmup_proportion="1",
                                num_train_epochs="0.01") is None
  # Without --do_train the learning flags are not used: not checked.
  assert check_finetuning_flags(tmp_path, do_train="false", do_eval="true",
                                learning_rate="0",
                                num_train_epochs="0") is None
  # The check creates nothing.
  assert not (tmp_path / "out").exists()


def test_warmup_longer_than_the_run_is_a_warning(caplog):
  with caplog.at_level(logging.WARNING):
    runner_flags.warn_long_warmup(num_train_steps=20, num_warmup_steps=10)
    runner_flags.warn_long_warmup(num_train_steps=10, num_warmup_steps=10)
    assert not caplog.records
    runner_flags.warn_long_warmup(num_train_steps=2, num_warmup_steps=10)
  # At the last update (step 1) the warm-up is at 1/10.
  assert [r.getMessage() for r in caplog.records] == [
      "--num_warmup_steps=10 is longer than the run (2 steps): the learning "
      "rate never exceeds 0.1 x --learning_rate."]


@pytest.mark.parametrize("max_seq_length,max_query_length,doc_stride,warns", [
    (384, 64, 128, False),  # the README's
    (384, 64, 316, False),  # the widest stride that overlaps
    (384, 64, 317, True),  # windows abut
    (128, 64, 64, True),  # the stride wider than the window
    (128, 64, 128, True),
    (24, 8, 13, True),
])
def test_doc_stride_as_wide_as_the_window_warns(
    tmp_path, caplog, max_seq_length, max_query_length, doc_stride, warns):
  """The original accepts any positive stride; windows that cannot overlap
  are only warned about."""
  with flagsaver.flagsaver():
    # Parsed here: the test may run alone (or first) in its process.
    parse(tmp_path, max_seq_length=max_seq_length,
          max_query_length=max_query_length, doc_stride=doc_stride)
    with caplog.at_level(logging.WARNING):
      squad_options.check_flags()
  window = max_seq_length - max_query_length - 3
  assert [r.getMessage() for r in caplog.records] == ([
      "--doc_stride=%d is not below the context window of a question of "
      "--max_query_length=%d pieces (max_seq_length - max_query_length - 3 "
      "= %d): such windows do not overlap, so an answer across a window's "
      "edge is whole in none. Windows advance by min(window length, "
      "doc_stride), as in the original, so no context is skipped." %
      (doc_stride, max_query_length, window)] if warns else [])


@pytest.mark.parametrize("max_seq_length,max_query_length", [
    (67, 64), (64, 64), (10, 64)])
def test_no_room_for_the_context(tmp_path, max_seq_length, max_query_length):
  with flagsaver.flagsaver():
    parse(tmp_path, max_seq_length=max_seq_length,
          max_query_length=max_query_length, doc_stride=1)
    with pytest.raises(errors.InputError) as error:
      squad_options.check_flags()
  assert str(error.value) == (
      "The max_seq_length (%d) must be greater than max_query_length (%d) "
      "+ 3: [CLS] question [SEP] context [SEP] leaves no room for the "
      "context." % (max_seq_length, max_query_length))


@pytest.fixture
def read_only_dir(tmp_path):
  """A directory this process cannot create files in: its mode for a user,
  the immutable attribute for root (whom modes do not stop)."""
  directory = tmp_path / "read_only"
  directory.mkdir()
  if os.geteuid():
    directory.chmod(stat.S_IRUSR | stat.S_IXUSR)
    yield directory
    directory.chmod(stat.S_IRWXU)
  else:
    subprocess.run(["chattr", "+i", str(directory)], check=True)
    yield directory
    subprocess.run(["chattr", "-i", str(directory)], check=True)


def test_read_only_output_dir(tmp_path, read_only_dir):
  reason = os.strerror(errno.EACCES if os.geteuid() else errno.EPERM)
  assert check_finetuning_flags(tmp_path, output_dir=read_only_dir) == (
      "Cannot write to --output_dir %s: %s." % (read_only_dir, reason))
  target = read_only_dir / "a" / "b"
  assert check_finetuning_flags(tmp_path, output_dir=target) == (
      "Cannot write to --output_dir %s (in %s): %s." %
      (target, read_only_dir, reason))
  with pytest.raises(errors.OutputError) as error:
    fileio.check_output_file(str(read_only_dir / "x.jsonl"))
  assert str(error.value) == (
      "Cannot write output file %s (--output_file): %s." %
      (read_only_dir / "x.jsonl", reason))
  # export_saved_model.py writes the model beside --export_dir first.
  with pytest.raises(errors.OutputError) as error:
    export.check_export_dir(str(read_only_dir / "model"), overwrite=False)
  assert str(error.value) == ("Cannot write --export_dir %s: %s." %
                              (read_only_dir / "model", reason))
  assert not os.listdir(read_only_dir)


def test_a_file_or_directory_in_the_way(tmp_path):
  (tmp_path / "file").write_text("mine")
  assert check_finetuning_flags(tmp_path, output_dir=tmp_path / "file") == (
      "--output_dir %s is a file, not a directory." % (tmp_path / "file"))
  assert check_finetuning_flags(
      tmp_path, output_dir=tmp_path / "file" / "out") == (
          "Cannot write to --output_dir %s: %s is a file, not a directory." %
          (tmp_path / "file" / "out", tmp_path / "file"))
  (tmp_path / "dir").mkdir()
  with pytest.raises(errors.OutputError) as error:
    fileio.check_output_file(str(tmp_path / "dir"))
  assert str(error.value) == ("Cannot write output file %s (--output_file): "
                              "it is a directory." % (tmp_path / "dir"))
  # The writers refuse it too, leaving no temporary file beside it.
  with pytest.raises(errors.OutputError, match="it is a directory"):
    with fileio.atomic_output(str(tmp_path / "dir")) as f:
      f.write("x")
  with pytest.raises(errors.OutputError, match="it is a directory"):
    tfrecord_writer.RoundRobinWriter([str(tmp_path / "dir")])
  assert sorted(os.listdir(tmp_path)) == ["dir", "file"]
  assert (tmp_path / "file").read_text() == "mine"


def full_disk_behind(path):
  """Puts /dev/full (which refuses every write: ENOSPC) where this process
  writes path's temporary file."""
  os.symlink("/dev/full", "%s.tmp-%d" % (path, os.getpid()))


def test_disk_full_while_writing_a_file(tmp_path):
  path = str(tmp_path / "predictions.json")
  full_disk_behind(path)
  with pytest.raises(OSError) as error:
    with fileio.atomic_output(path) as writer:
      writer.write("{}")
  # errors.run reports it as one line naming the output, not its temporary.
  assert errors.write_failure(error.value) == (
      "Cannot write %s: No space left on device." % path)
  assert not os.listdir(tmp_path)
  assert stat.S_ISCHR(os.stat("/dev/full").st_mode)


def test_disk_full_while_writing_records(tmp_path):
  paths = [str(tmp_path / "a.tfrecord"), str(tmp_path / "b.tfrecord")]
  full_disk_behind(paths[0])
  with pytest.raises(errors.OutputError) as error:
    with tfrecord_writer.RoundRobinWriter(paths) as writer:
      for _ in range(10):
        writer.write(b"x" * 100)
  assert str(error.value) == ("Cannot write output file %s: No space left on "
                              "device." % paths[0])
  assert not os.listdir(tmp_path)


def test_write_failure_is_only_a_file_system_refusal():
  with pytest.raises(OSError) as error:
    with open("/dev/full", "w") as f:
      f.write("x")
  assert errors.write_failure(error.value) == (
      "Cannot write output: No space left on device.")
  full = OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), "/out/x.tmp-12")
  assert errors.write_failure(full) == (
      "Cannot write /out/x: No space left on device.")
  checkpoint = tf.errors.ResourceExhaustedError(
      None, None, "{{function_node __wrapped__SaveV2_dtypes_9_device_/job:"
      "localhost/replica:0/task:0/device:CPU:0}} /my out/model.ckpt-2.data-"
      "00000-of-00001.tempstate999877701094361532; No space left on device "
      "[Op:SaveV2]")
  assert errors.write_failure(checkpoint) == (
      "Cannot write /my out/model.ckpt-2.data-00000-of-00001: No space left "
      "on device.")
  # Not a write refusal: out of memory, a missing file, a bad input.
  assert errors.write_failure(tf.errors.ResourceExhaustedError(
      None, None, "OOM when allocating tensor with shape[4096,4096]")) is None
  assert errors.write_failure(FileNotFoundError(
      errno.ENOENT, "No such file or directory", "/in.txt")) is None
  assert errors.write_failure(ValueError("No space left on device")) is None


def touch(path, text="x"):
  path.write_text(text)
  return path


def fail_in(directory, body):
  """Runs body() under fileio.cleaned_on_failure(directory); it raises."""
  with pytest.raises(RuntimeError):
    with fileio.cleaned_on_failure(str(directory)):
      body()
      raise RuntimeError("the run fails")


def test_a_failed_run_leaves_no_temporary_or_record_file(tmp_path):
  out = tmp_path / "out"
  out.mkdir()
  kept = ["checkpoint", "model.ckpt-1.index",
          "model.ckpt-1.data-00000-of-00001", "events.out.tfevents.1.old.v2",
          "train.tf_record"]
  for name in kept:
    touch(out / name)
  os.utime(out / "train.tf_record", ns=(1, 1))

  def body():
    touch(out / "train.tf_record", "rewritten")
    touch(out / "eval.tf_record")
    touch(out / ("eval_results.txt.tmp-%d" % os.getpid()))
    touch(out / "model.ckpt-2.data-00000-of-00001.tempstate123")
    touch(out / "model.ckpt-2.data-00000-of-00001")
    touch(out / "events.out.tfevents.2.new.v2")
    touch(out / "eval_results.txt")
    touch(out / "other.tmp-1")  # another process's

  fail_in(out, body)
  # Records are rewritten by every run; the new event file charts steps
  # that no checkpoint holds; model.ckpt-2 has no index.
  assert sorted(os.listdir(out)) == sorted(
      set(kept) - {"train.tf_record"} | {"eval_results.txt", "other.tmp-1"})


def test_a_failed_worker_leaves_the_chiefs_checkpoint_in_the_making(
    tmp_path, monkeypatch):
  # Another worker of a cluster shares the chief's --output_dir and writes
  # nothing there; failing (a preemption signal) while the chief saves, it
  # saw the chief's sidecar (written before its model.ckpt-N.index) and
  # .tempstate files appear, and took them for its own leftovers.
  monkeypatch.setattr(fileio, "_CHIEFS_DIRECTORIES", set())
  out = tmp_path / "out"
  out.mkdir()
  chiefs = ["model.ckpt-7.train_state.index",
            "model.ckpt-7.train_state.data-00000-of-00001",
            "model.ckpt-7.data-00000-of-00001.tempstate99"]

  def body():
    fileio.leave_to_chief(str(out))
    for name in chiefs:
      touch(out / name)

  fail_in(out, body)
  assert sorted(os.listdir(out)) == sorted(chiefs)
  # The chief's own run removes them when it fails.
  chief = tmp_path / "chief"
  chief.mkdir()
  fail_in(chief, lambda: [touch(chief / name) for name in chiefs])
  assert not os.listdir(chief)


def test_a_failed_run_keeps_the_events_of_its_checkpoints(tmp_path):
  out = tmp_path / "out"

  def body():
    out.mkdir()
    for name in ("model.ckpt-2.index", "model.ckpt-2.data-00000-of-00001",
                 "events.out.tfevents.2.new.v2", "train.tf_record"):
      touch(out / name)

  fail_in(out, body)
  assert sorted(os.listdir(out)) == [
      "events.out.tfevents.2.new.v2", "model.ckpt-2.data-00000-of-00001",
      "model.ckpt-2.index"]


def test_a_failed_run_removes_the_output_dir_it_created_if_empty(tmp_path):
  out = tmp_path / "a" / "out"
  fail_in(out, lambda: (out.mkdir(parents=True),
                        touch(out / "train.tf_record")))
  assert not out.exists() and (tmp_path / "a").exists()
  # A clean exit is no failure.
  out.mkdir()
  with pytest.raises(SystemExit):
    with fileio.cleaned_on_failure(str(out)):
      touch(out / "train.tf_record")
      sys.exit(0)
  assert os.listdir(out) == ["train.tf_record"]


def test_non_utf8_data_files_name_the_line(tmp_path):
  bad = b"caf\xe9"
  mrpc = tmp_path / "mrpc"
  mrpc.mkdir()
  (mrpc / "train.tsv").write_bytes(
      b"Quality\t#1 ID\t#2 ID\t#1 String\t#2 String\n1\t1\t2\ta\tb\n"
      b"0\t3\t4\ta " + bad + b"\tb\n")
  swag = tmp_path / "swag"
  swag.mkdir()
  (swag / "train.csv").write_bytes(
      b",video-id,fold-ind,startphrase,sent1,sent2,gold-source,ending0,"
      b"ending1,ending2,ending3,label\n0,v,1,a b,a," + bad +
      b",gold,c,d,e,f,0\n")
  conll = tmp_path / "conll"
  conll.mkdir()
  (conll / "train.txt").write_bytes(b"-DOCSTART- O\n\nEU B-ORG\n" + bad +
                                    b" O\n\n")
  (tmp_path / "squad.json").write_bytes(
      b'{"data": [\n{"paragraphs": [{"context": "' + bad + b'", "qas": []}]}'
      b"]}")
  reads = [
      (lambda: classifier_data.get_processor("mrpc").get_train_examples(
          str(mrpc)), mrpc / "train.tsv", 3),
      (lambda: swag_data.get_train_examples(str(swag)), swag / "train.csv",
       2),
      (lambda: ner_data.get_examples(str(conll), "train"),
       conll / "train.txt", 4),
      (lambda: squad_data.read_squad_json(str(tmp_path / "squad.json")),
       tmp_path / "squad.json", 2),
  ]
  for read, path, line in reads:
    with pytest.raises(errors.InputError) as error:
      read()
    assert str(error.value).startswith(
        "%s, line %d is not UTF-8 ('utf-8' codec can't decode byte 0xe9 in "
        "position " % (path, line)), error.value


@pytest.mark.slow
def test_script_errors_are_one_line_and_write_nothing(tmp_path):
  """The exit status and line users see, for faults the runners check
  before any work."""
  corpus = touch(tmp_path / "corpus.txt", "the man went to the store .\n")
  empty = touch(tmp_path / "empty.txt", "")
  (tmp_path / "dir").mkdir()
  model = test_run_classifier.mrpc_folder(tmp_path / "mrpc")
  model_flags = {"vocab_file": model / "vocab.txt",
                 "bert_config_file": model / "bert_config.json"}
  # extract_features.py reads the checkpoint's variable list before the
  # input.
  checkpoint = reference.write_tf1_checkpoint(
      str(tmp_path / "ckpt" / "bert_model.ckpt"), reference.random_weights(
          modeling.BertConfig(**test_run_classifier.CONFIG), seed=0))
  cases = [
      ("learn_vocab.py", {"input_file": corpus, "num_unused": "-3",
                          "output_file": tmp_path / "out" / "vocab.txt"},
       "Error: --num_unused must be >= 0, got -3."),
      ("create_pretraining_data.py", {
          "input_file": corpus, "vocab_file": model / "vocab.txt",
          "output_file": tmp_path / "dir"},
       "Error: Cannot write output file %s (--output_file): it is a "
       "directory." % (tmp_path / "dir")),
      ("extract_features.py", dict(
          model_flags, input_file=empty, init_checkpoint=checkpoint,
          output_file=tmp_path / "out" / "x.jsonl", max_seq_length="16",
          layers="-1"),
       "Error: input_file %s is empty: no lines to extract features of." %
       empty),
      ("run_squad.py", dict(
          model_flags, do_predict="true", predict_file=corpus,
          max_seq_length="48", max_query_length="45",
          output_dir=tmp_path / "out"),
       "Error: The max_seq_length (48) must be greater than max_query_length "
       "(45) + 3: [CLS] question [SEP] context [SEP] leaves no room for the "
       "context."),
  ]
  results = conftest.run_scripts([(script, args) for script, args, _ in cases],
                                 timeout=300)
  for (script, _, message), result in zip(cases, results):
    assert (result.returncode, error_lines(result)) == (1, [message]), (
        script, result.stderr[-2000:])
    assert "Traceback" not in result.stderr
  assert not (tmp_path / "out").exists()
  assert not os.listdir(tmp_path / "dir")


def error_lines(result):
  return [line for line in result.stderr.splitlines()
          if line.startswith("Error:")]


# A tmpfs this small holds the records and event file of the run below but
# not its first checkpoint (about 0.4 MB with the Adam slots).
TMPFS_SIZE = "300k"


@pytest.mark.slow
def test_disk_full_during_a_checkpoint_leaves_nothing(tmp_path):
  data = test_run_classifier.mrpc_folder(tmp_path / "mrpc")
  mount = tmp_path / "small_disk"
  mount.mkdir()
  args = test_run_classifier.base_args(
      data, mount / "out", do_train="true", num_train_epochs="1",
      save_checkpoints_steps="2")
  command = [sys.executable, os.path.join(conftest.REPO_ROOT,
                                         "run_classifier.py")]
  command += ["--%s=%s" % item for item in args.items()]
  # A private mount namespace (and, for a user, a user namespace, where the
  # user may mount): the tmpfs vanishes with the process, so list what is
  # left on it before.
  namespace = ["unshare", "-m"] if os.geteuid() == 0 else ["unshare", "-rm"]
  script = ('mount -t tmpfs -o size=%s tmpfs "$0" && "$@"; status=$?; '
            'echo "left:"; find "$0" -mindepth 1; exit $status' % TMPFS_SIZE)
  result = subprocess.run(
      namespace + ["sh", "-c", script, str(mount)] + command,
      capture_output=True, text=True, timeout=600,
      env=dict(os.environ, CUDA_VISIBLE_DEVICES="", TF_CPP_MIN_LOG_LEVEL="2"))
  assert (result.returncode, error_lines(result)) == (1, [
      "Error: Cannot write %s: No space left on device." %
      (mount / "out" / "model.ckpt-2.data-00000-of-00001")]), (
          result.stderr[-3000:])
  assert "Traceback" not in result.stderr
  # train.tf_record, the event file and the checkpoint's temporary files
  # were there; the run made output_dir, and removes it.
  assert result.stdout.split("left:")[-1].split() == []
  assert "Removed %s" % (mount / "out" / "train.tf_record") in result.stderr
