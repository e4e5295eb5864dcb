"""--long_text=windows: the windows of hand-worked examples, their records,
the model's mean over real windows, and the flags' checks."""

import numpy as np
import pytest
import tensorflow as tf

import modeling
from runner_lib.classifier import data
from runner_lib.classifier import features
from runner_lib.classifier import task as classifier_task
from runner_lib.classifier import windows as windows_lib
from runner_lib.core import errors
from runner_lib.core.inputs import packing
import tokenization
from tests import conftest
from tests import reference
from tests import test_export_saved_model
from tests import test_run_classifier
from tests.test_modeling import tiny_config


def tokens(prefix, count):
  return ["%s%d" % (prefix, i) for i in range(count)]


def layouts(len_a, len_b, seq_length, stride=None, max_windows=8):
  windows = windows_lib.check_windows(stride, max_windows, seq_length,
                                      pair=bool(len_b))
  return windows_lib.window_layouts(tokens("a", len_a),
                                    tokens("b", len_b), seq_length, windows)


def test_text_a_is_windowed_and_text_b_kept_whole_in_each():
  # max_seq_length 10, a pair: 7 tokens of room, text_b takes 2, so each
  # window holds 5 of text_a; the default stride is (10 - 3) // 2 = 3.
  got, cut = layouts(12, 2, 10)
  assert not cut
  want_a = [["a0", "a1", "a2", "a3", "a4"], ["a3", "a4", "a5", "a6", "a7"],
            ["a6", "a7", "a8", "a9", "a10"], ["a9", "a10", "a11"]]
  assert [t for t, _ in got] == [
      ["[CLS]"] + a + ["[SEP]", "b0", "b1", "[SEP]"] for a in want_a]
  assert [s for _, s in got] == [
      [0] * (len(a) + 2) + [1, 1, 1] for a in want_a]


def test_a_long_text_b_is_cut_at_its_end_to_leave_text_a_half():
  # 7 tokens of room: text_a keeps 7 // 2 = 3, text_b its first 4.
  got, cut = layouts(12, 6, 10)
  assert not cut
  assert [t for t, _ in got] == [
      ["[CLS]"] + ["a%d" % i for i in range(s, s + 3)] +
      ["[SEP]", "b0", "b1", "b2", "b3", "[SEP]"] for s in (0, 3, 6, 9)]


@pytest.mark.parametrize("len_a,len_b", [(3, 2), (0, 3), (2, 9), (3, 30),
                                         (7, 0), (8, 0), (3, 4)])
def test_what_one_window_holds_is_the_original_layout(len_a, len_b):
  # Fits, or text_a is at most half the room (the original then cuts
  # text_b alone, at its end), or a single text within the window.
  got, cut = layouts(len_a, len_b, 10)
  assert not cut
  assert got == [packing.pair_layout(tokens("a", len_a), tokens("b", len_b),
                                     10)]


def test_max_windows_keeps_the_first_windows_and_says_so():
  # A single text of 15 at max_seq_length 8: 6 tokens of room, stride 2:
  # windows at 0, 2, ..., 10, the first to reach a14 the last, shorter:
  # 6 of them.
  got, cut = layouts(15, 0, 8, stride=2, max_windows=6)
  assert not cut and len(got) == 6
  assert got[-2][0] == ["[CLS]"] + tokens("a", 15)[8:14] + ["[SEP]"]
  assert got[-1][0] == ["[CLS]"] + tokens("a", 15)[10:] + ["[SEP]"]
  got, cut = layouts(15, 0, 8, stride=2, max_windows=4)
  assert cut
  assert [t[1:-1] for t, _ in got] == [tokens("a", 15)[s:s + 6]
                                       for s in (0, 2, 4, 6)]


def test_windows_cover_text_a_stride_apart_within_the_length():
  rng = np.random.RandomState(0)
  for _ in range(300):
    seq_length = int(rng.randint(5, 40))
    len_b = int(rng.randint(0, 3 * seq_length))
    len_a = int(rng.randint(0, 6 * seq_length))
    room = windows_lib.smallest_room(seq_length, bool(len_b))
    stride = int(rng.randint(1, room + 1))
    windows = windows_lib.Windows(stride, 1000)
    spans, keep_b, cut = windows_lib.window_spans(len_a, len_b, seq_length,
                                                  windows)
    assert not cut
    assert [s for s, _ in spans] == [i * stride for i in range(len(spans))]
    assert spans[-1][0] + spans[-1][1] == len_a
    assert len({length for _, length in spans[:-1]}) <= 1
    special = 3 if len_b else 2
    assert all(length + keep_b + special <= seq_length
               for _, length in spans)
    # text_b whole unless text_a would keep less than half the room.
    assert keep_b == len_b or spans[0][1] == min(len_a,
                                                 (seq_length - 3) // 2)


def test_bad_window_flags_name_the_flag():
  with pytest.raises(errors.InputError, match=(
      r"--window_stride=63 is larger than the room text_a has in a window "
      r"\(62 tokens at --max_seq_length=128, where text_b may take the "
      r"other half\).*--window_stride=62 or less")):
    windows_lib.check_windows(63, 8, 128, pair=True)
  # A single text has the whole window.
  assert windows_lib.check_windows(126, 8, 128, pair=False).stride == 126
  with pytest.raises(errors.InputError, match="--window_stride=127 is"):
    windows_lib.check_windows(127, 8, 128, pair=False)
  with pytest.raises(errors.InputError,
                     match="--window_stride must be at least 1, got 0"):
    windows_lib.check_windows(0, 8, 128, pair=True)
  with pytest.raises(errors.InputError,
                     match="--max_windows must be at least 1, got 0"):
    windows_lib.check_windows(None, 0, 128, pair=True)
  with pytest.raises(errors.InputError, match=(
      "--max_seq_length=4 leaves text_a no room beside the special tokens "
      "and text_b")):
    windows_lib.check_windows(None, 8, 4, pair=True)
  assert windows_lib.check_windows(None, 8, 512, pair=True) == (
      windows_lib.Windows(254, 8))


VOCAB = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "one", "two", "three",
         "four", "five", "six", "yes"]


@pytest.fixture
def tokenizer(tmp_path):
  (tmp_path / "vocab.txt").write_text("\n".join(VOCAB) + "\n")
  return tokenization.FullTokenizer(str(tmp_path / "vocab.txt"))


def test_an_example_is_its_windows_padded_with_a_window_mask(tokenizer,
                                                              caplog):
  example = data.InputExample("x", "one two three four five six", "yes",
                              "1")
  windows = windows_lib.Windows(stride=2, max_windows=4)
  feature, cut = features.convert_windowed_example(example, ["0", "1"], 8,
                                                   tokenizer, windows)
  assert not cut and feature.label_id == 1 and feature.is_real_example
  # 5 tokens of room, 1 for "yes": windows of 4 at 0 and 2.
  assert feature.input_ids == [[2, 5, 6, 7, 8, 3, 11, 3],
                               [2, 7, 8, 9, 10, 3, 11, 3],
                               [0] * 8, [0] * 8]
  assert feature.input_mask == [[1] * 8, [1] * 8, [0] * 8, [0] * 8]
  assert feature.segment_ids == [[0] * 6 + [1] * 2] * 2 + [[0] * 8] * 2
  assert feature.window_mask == [1, 1, 0, 0]
  _, cut = features.convert_windowed_example(
      example, ["0", "1"], 8, tokenizer, windows_lib.Windows(1, 2))
  assert cut
  with caplog.at_level("WARNING"):
    features.to_features([example, data.InputExample("y", "one", None, "0")],
                         ["0", "1"], 8, tokenizer, windows_lib.Windows(1, 2))
  assert ("1 of 2 examples have more than --max_windows=2 windows" in
          caplog.text)


def test_records_round_trip_with_batch_padding(tokenizer, tmp_path):
  examples = [data.InputExample(str(i), "one two three four five six " * i,
                                "yes", "01"[i % 2]) for i in range(3)]
  path = str(tmp_path / "eval.tf_record")
  windows = windows_lib.Windows(stride=3, max_windows=3)
  assert features.write_features(examples, ["0", "1"], 8, tokenizer, path,
                                 batch_size=4, windows=windows) == 3
  task = classifier_task.ClassificationTask(tiny_config(), 8, ["0", "1"],
                                            max_windows=3)
  schema = task.name_to_features(False)
  got = [tf.io.parse_single_example(r, schema) for r in
         tf.data.TFRecordDataset(path)]
  assert len(got) == 4
  want = features.to_features(examples, ["0", "1"], 8, tokenizer, windows)
  for record, feature in zip(got, want):
    for name in ("input_ids", "input_mask", "segment_ids", "window_mask"):
      np.testing.assert_array_equal(record[name], getattr(feature, name))
  # 4 tokens of text_a a window, 3 apart: 0, 6 and 12 tokens take 1, 2
  # and 4 windows (3 kept); the batch's padding none.
  assert [int(r["window_mask"].numpy().sum()) for r in got] == [1, 2, 3, 0]
  assert [int(r["is_real_example"]) for r in got] == [1, 1, 1, 0]
  assert task.sequence_features(True) == ("input_ids", "input_mask",
                                          "segment_ids")


@pytest.mark.parametrize("skip_padding", [False, True])
def test_logits_are_the_mean_over_real_windows(skip_padding):
  config = tiny_config()
  model = modeling.BertClassifier(
      config, 3, seed=1,
      options=modeling.ComputeOptions(skip_padding=skip_padding))
  rng = np.random.RandomState(0)
  real = np.array([2, 4, 1, 0])  # windows per example; the last is padding
  mask = np.zeros([4, 4, 10], np.int32)
  for b, count in enumerate(real):
    for w in range(count):
      mask[b, w, :rng.randint(3, 11)] = 1
  ids = rng.randint(5, config.vocab_size, mask.shape) * mask
  segments = (np.arange(10) >= 6) * mask
  window_mask = mask.max(-1)
  got = model({"input_ids": ids, "input_mask": mask, "segment_ids": segments,
               "window_mask": window_mask}, training=False).numpy()
  # Each window alone, through the original's [B, T] path.
  each = model({"input_ids": ids.reshape(-1, 10),
                "input_mask": mask.reshape(-1, 10),
                "segment_ids": segments.reshape(-1, 10)},
               training=False).numpy().reshape(4, 4, 3)
  want = np.stack([each[b, :n].mean(0) if n else np.zeros(3)
                   for b, n in enumerate(real)])
  # float32 rounding of a few hundred products of O(1) values.
  np.testing.assert_allclose(got, want, atol=1e-5)
  # Without a window_mask, a window with a real token is real.
  np.testing.assert_allclose(
      model({"input_ids": ids, "input_mask": mask, "segment_ids": segments},
            training=False), got, atol=1e-6)


# The built set of the headline test: max_seq_length 32, text_a 70 to 90
# WordPieces of filler with KEYWORDS keywords ("yes": label 1, "no": label
# 0) among its last 20, text_b 2 to 4 filler words. The pair keeps 29
# tokens: truncated, text_a keeps at most 27, never a keyword; in windows
# (26 or so of text_a, 14 apart), 5 or 6 windows, the keywords in the last
# one or two.
LONG_SEQ = 32
KEYWORDS = 3
FILLER = ["the", "cat", "dog", "sat", "ran", "on", "mat", "park"]


def long_text_folder(directory, seed=0, lengths=(70, 90), seq=LONG_SEQ,
                     keywords=(KEYWORDS, 20)):
  """MRPC-format files whose label only a keyword past the cut carries.

  Args:
    directory: pathlib.Path, made here.
    seed: int, of the texts and labels.
    lengths: (min, max) words of text_a (each word one WordPiece).
    seq: int, the max_seq_length the runs will use.
    keywords: (count, span): count keywords among text_a's last span
      words, all past the cut at seq.

  Returns:
    (directory, the test set's labels).
  """
  rng = np.random.RandomState(seed)
  header = "Quality\t#1 ID\t#2 ID\t#1 String\t#2 String\n"

  def rows(count, with_label=True):
    labels = [i % 2 for i in range(count)]  # balanced
    rng.shuffle(labels)
    lines = []
    for i, label in enumerate(labels):
      a = list(rng.choice(FILLER, rng.randint(lengths[0], lengths[1] + 1)))
      count, span = keywords
      assert len(a) - span > seq  # every keyword past the cut
      for position in len(a) - 1 - rng.choice(span, count, replace=False):
        a[position] = "yes" if label else "no"
      b = " ".join(rng.choice(FILLER, rng.randint(2, 5)))
      lines.append("%s\t%d\t%d\t%s\t%s\n" % (
          label if with_label else i, i, i + 1, " ".join(a), b))
    return lines, labels

  directory.mkdir(parents=True)
  train, _ = rows(256)
  dev, _ = rows(128)
  test, test_labels = rows(16, with_label=False)
  (directory / "train.tsv").write_text(header + "".join(train))
  (directory / "dev.tsv").write_text(header + "".join(dev))
  (directory / "test.tsv").write_text(header + "".join(test))
  (directory / "vocab.txt").write_text(
      "\n".join(test_run_classifier.VOCAB) + "\n")
  (directory / "bert_config.json").write_text(
      modeling.BertConfig(**test_run_classifier.CONFIG).to_json_string())
  return directory, test_labels


@pytest.mark.slow
def test_windows_learn_a_label_past_the_cut_that_truncation_cannot(tmp_path):
  folder, test_labels = long_text_folder(tmp_path / "long")
  runs = {mode: test_run_classifier.base_args(
      folder, tmp_path / mode, max_seq_length=str(LONG_SEQ),
      do_train="true", do_eval="true", do_predict="true",
      # Each of ~5 windows' logits enter the mean at 1/5, so does their
      # gradient: with the original's AdamW (no bias correction), 1 of 11
      # seeds stayed at chance for 20 epochs; with Adam's correction
      # (larger steps once started) 11 of 11 reached 0.96 or more.
      num_train_epochs="20", optimizer="adamw_corrected", long_text=mode)
          for mode in ("truncate", "windows")}
  results = conftest.run_scripts([("run_classifier.py", args)
                                  for args in runs.values()])
  for result in results:
    assert result.returncode == 0, result.stderr[-3000:]
  accuracy = {mode: conftest.read_results(
      tmp_path / mode / "eval_results.txt")["eval_accuracy"]
              for mode in runs}
  # Truncated, the model sees filler independent of the label: on 128
  # balanced dev examples its accuracy has mean 0.5 and standard deviation
  # at most 0.5 / sqrt(128) = 0.044; 3.5 of them is 0.155.
  assert abs(accuracy["truncate"] - 0.5) <= 3.5 * 0.5 / np.sqrt(128), accuracy
  assert accuracy["windows"] >= 0.9, accuracy
  # One test_results.tsv row per example, in the original's format.
  rows = (tmp_path / "windows" / "test_results.tsv").read_text().splitlines()
  probabilities = np.array([[float(p) for p in row.split("\t")]
                            for row in rows])
  assert probabilities.shape == (16, 2)
  np.testing.assert_allclose(probabilities.sum(-1), 1.0, atol=1e-5)
  assert np.mean(probabilities.argmax(-1) == test_labels) >= 0.8
  # The checkpoint trained on windows is the original's variables: it
  # predicts truncated (and only windows see the keywords).
  result = conftest.run_script("run_classifier.py", dict(
      runs["truncate"], do_train="false", do_eval="false",
      init_checkpoint=str(tmp_path / "windows"),
      output_dir=str(tmp_path / "truncate_from_windows")))
  assert result.returncode == 0, result.stderr[-3000:]
  rows = (tmp_path / "truncate_from_windows" /
          "test_results.tsv").read_text().splitlines()
  assert len(rows) == 16
  print("dev accuracy (max_seq_length %d): %s" % (LONG_SEQ, accuracy))


@pytest.mark.slow
def test_the_export_windows_texts_as_run_classifier_predicts(tmp_path):
  # Also: run_classifier's trimmed batches (windows of padding skipped)
  # predict as its full-length ones (every window computed).
  folder, _ = long_text_folder(tmp_path / "long")
  rows = [line.split("\t") for line in
          (folder / "test.tsv").read_text().splitlines()[1:]]
  # A short pair and one with a long text_b, beside the long texts.
  rows[0][3], rows[1][4] = "the cat sat", " ".join(["dog park"] * 30)
  (folder / "test.tsv").write_text("header\n" + "".join(
      "\t".join(row) + "\n" for row in rows))
  config_file, prefix, _ = reference.write_task_checkpoint(
      tmp_path, modeling.BertConfig.from_json_file(
          str(folder / "bert_config.json")))
  # A stride of 10 and at most 4 windows: 70 to 90 tokens need 5 to 7, so
  # the cap cuts most examples.
  common = {"vocab_file": str(folder / "vocab.txt"),
            "bert_config_file": str(config_file), "init_checkpoint": prefix,
            "max_seq_length": str(LONG_SEQ), "long_text": "windows",
            "window_stride": "10", "max_windows": "4"}
  predict = dict(common, task_name="MRPC", data_dir=str(folder),
                 do_predict="true", predict_batch_size="4",
                 strategy="default", output_dir=str(tmp_path / "out"))
  predicted, full_length, exported = conftest.run_scripts([
      ("run_classifier.py", predict),
      # Batches of full length, every window computed.
      ("run_classifier.py", dict(predict, trim_padding="false",
                                 output_dir=str(tmp_path / "full"))),
      ("export_saved_model.py", dict(common, task="classifier",
                                     task_name="MRPC",
                                     export_dir=str(tmp_path / "export")))])
  for result in (predicted, full_length, exported):
    assert result.returncode == 0, result.stderr[-3000:]
  assert "examples have more than --max_windows=4 windows" in (
      predicted.stderr)
  want = test_export_saved_model.read_probabilities(
      tmp_path / "out" / "test_results.tsv")
  np.testing.assert_allclose(test_export_saved_model.read_probabilities(
      tmp_path / "full" / "test_results.tsv"), want, atol=1e-5)
  path = str(tmp_path / "export")
  got = test_export_saved_model.load_isolated(tmp_path, {
      "texts": {"path": path, "signature": "serving_default",
                "inputs": {"text_a": [r[3] for r in rows],
                           "text_b": [r[4] for r in rows]}},
      "examples": {"path": path, "signature": "serve_examples",
                   "inputs": {"examples": [
                       test_export_saved_model.serialized_example(r[3], r[4])
                       for r in rows[:3]]}}})
  assert want.shape == (len(rows), 2)
  # float32 rounding: the same windows, other batch-mates and lengths.
  np.testing.assert_allclose(got["texts"]["probabilities"], want, atol=1e-5)
  assert got["texts"]["label"] == [str(i) for i in want.argmax(-1)]
  np.testing.assert_allclose(got["examples"]["probabilities"], want[:3],
                             atol=1e-5)



@pytest.mark.slow
def test_bad_long_text_flags_are_named_before_any_work(tmp_path):
  folder, _ = long_text_folder(tmp_path / "long")
  args = test_run_classifier.base_args(folder, tmp_path / "out",
                                       do_train="true")
  export = {"task": "ner", "vocab_file": str(folder / "vocab.txt"),
            "bert_config_file": str(folder / "bert_config.json"),
            "init_checkpoint": str(tmp_path / "none"),
            "export_dir": str(tmp_path / "export")}
  cases = [
      ("run_classifier.py", dict(args, long_text="windows",
                                 window_stride="11"),
       "--window_stride=11 is larger than the room text_a has in a window "
       "(10 tokens at --max_seq_length=24, where text_b may take the other "
       "half): windows would skip text."),
      ("run_classifier.py", dict(args, max_windows="4"),
       "--max_windows is for --long_text=windows (got "
       "--long_text=truncate)."),
      ("run_classifier.py", dict(args, long_text="windows", max_windows="0"),
       "--max_windows must be at least 1, got 0."),
      ("export_saved_model.py", dict(export, long_text="windows"),
       "--long_text is for --task=classifier (got --task=ner)."),
      ("export_saved_model.py", dict(export, task="classifier",
                                     task_name="MRPC", long_text="windows",
                                     precision="bfloat16"),
       "--long_text=windows exports in --precision=float32 only"),
  ]
  results = conftest.run_scripts([(script, flags)
                                  for script, flags, _ in cases])
  for (script, _, message), result in zip(cases, results):
    assert result.returncode == 1, (script, result.stderr[-2000:])
    assert message in result.stderr, (message, result.stderr[-2000:])
    assert "Traceback" not in result.stderr
  assert not (tmp_path / "out").exists()
  assert not (tmp_path / "export").exists()
