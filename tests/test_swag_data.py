"""SWAG CSV reading and four-choice features: real rows of the official
val.csv, hand-written fixtures and hand-worked layouts."""

import os

import numpy as np
import pytest
import tensorflow as tf

from runner_lib.core import errors
from runner_lib.swag import data
from runner_lib.swag import features
import tokenization

HEADER = (",video-id,fold-ind,startphrase,sent1,sent2,gold-source,ending0,"
          "ending1,ending2,ending3,label\n")


def write(path, text):
  path.parent.mkdir(parents=True, exist_ok=True)
  path.write_bytes(text.encode("utf-8"))
  return str(path)


def test_real_val_rows(shared_data):
  examples = data.read_swag_examples(
      os.path.join(shared_data, "swag", "val.subset-first91.csv"))
  assert len(examples) == 91
  # Row 0 is the example quoted in the SWAG README.
  first = examples[0]
  assert (first.swag_id, first.context_sentence, first.start_ending,
          first.label) == ("0", "Students lower their eyes nervously.",
                           "She", 2)
  assert first.endings == [
      "pats her shoulder, then saunters toward someone.",
      "turns with two students.", "walks slowly towards someone.",
      "wheels around as her dog thunders out."]
  # PROVENANCE.md's count of the labels in these rows.
  labels = [e.label for e in examples]
  assert [labels.count(i) for i in range(4)] == [20, 19, 30, 22]
  assert [e.swag_id for e in examples] == [str(i) for i in range(91)]
  # Its first choice with Google's uncased vocab, worked by hand: "pats"
  # and "saunters" are not in the vocab and split into word-pieces.
  tokenizer = tokenization.FullTokenizer(
      os.path.join(shared_data, "vocab", "uncased_vocab.txt"), True)
  feature = features.convert_single_example(first, 24, tokenizer)
  want = ("[CLS] students lower their eyes nervously . [SEP] she pat ##s her "
          "shoulder , then sa ##unt ##ers toward someone . [SEP]").split()
  assert tokenizer.convert_ids_to_tokens(feature.input_ids[0]) == (
      want + ["[PAD]"] * 2)
  assert feature.segment_ids[0] == [0] * 8 + [1] * 14 + [0] * 2
  assert feature.label_id == 2


def test_quoted_fields_and_a_test_file_without_labels(tmp_path):
  path = write(tmp_path / "test.csv", HEADER[:-7] + "\n" +
               '7,v,1,"A, b"" c. He","A, b"" c.",He,gold,"runs, ""fast"".",'
               '"sits\nstill.",e2,e3\n')
  (example,) = data.read_swag_examples(path, has_label=False)
  assert example.swag_id == "7"
  assert example.context_sentence == 'A, b" c.'
  assert example.endings == ['runs, "fast".', "sits\nstill.", "e2", "e3"]
  assert example.label is None
  # A test file with the label column is read, the labels ignored.
  path = write(tmp_path / "labelled.csv", HEADER + "0,v,1,s,a,b,g,w,x,y,z,3")
  assert data.read_swag_examples(path, has_label=False)[0].label is None


@pytest.mark.parametrize("text,message", [
    ("", "is empty; expected the SWAG header ,video-id"),
    (HEADER.replace("sent2", "sent_2"),
     "line 1: header ,video-id,fold-ind,startphrase,sent1,sent_2"),
    (HEADER[:-7] + "\n0,v,1,s,a,b,g,w,x,y,z\n",
     "line 1: header .*ending3 is not the SWAG release's"),
    (HEADER + "0,v,1,s,a,b,g,w,x,y,z,1\n1,v,1,s,a,b,g,w,x,y,z\n",
     "line 3: 11 fields, expected 12."),
    (HEADER + "0,v,1,s,a,b,g,w,x,y,z,7\n",
     "line 2: label '7' is not one of 0, 1, 2, 3."),
    (HEADER + "0,v,1,s,a,b,g,w,x,y,z,\n", "line 2: label '' is not one"),
    (HEADER, "holds no examples."),
])
def test_bad_files_name_file_and_line(tmp_path, text, message):
  path = write(tmp_path / "val.csv", text)
  with pytest.raises(errors.InputError, match=message) as info:
    data.read_swag_examples(path)
  assert str(info.value).startswith(path)


def test_missing_and_non_utf8_files(tmp_path):
  with pytest.raises(errors.InputError, match="Missing data file .*test.csv"):
    data.get_test_examples(str(tmp_path))
  (tmp_path / "train.csv").write_bytes(HEADER.encode() + b"0,\xff\n")
  with pytest.raises(errors.InputError,
                     match="train.csv, line 2 is not UTF-8"):
    data.get_train_examples(str(tmp_path))


VOCAB = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "the", "cat", "sat", "on", "mat",
         "it", "ran", "away", "slept", "ate", "fish", "."]


@pytest.fixture
def tokenizer(tmp_path):
  path = tmp_path / "vocab.txt"
  path.write_text("\n".join(VOCAB) + "\n")
  return tokenization.FullTokenizer(str(path), do_lower_case=True)


def ids(text):
  return [VOCAB.index(t) for t in text.split()]


def test_hand_worked_features(tokenizer):
  example = data.SwagExample("0", "The cat sat on the mat.", "It",
                             ["ran away.", "slept.", "ate the fish.", "sat."],
                             label=2)
  feature = features.convert_single_example(example, 16, tokenizer)
  assert feature.label_id == 2
  context = "[CLS] the cat sat on the mat . [SEP]"
  want = [context + " it ran away . [SEP]", context + " it slept . [SEP]",
          context + " it ate the fish . [SEP]", context + " it sat . [SEP]"]
  for choice, text in enumerate(want):
    n = len(text.split())
    assert feature.input_ids[choice] == ids(text) + [0] * (16 - n)
    assert feature.input_mask[choice] == [1] * n + [0] * (16 - n)
    assert feature.segment_ids[choice] == [0] * 9 + [1] * (n - 9) + [0] * (
        16 - n)


def test_longest_side_is_truncated_first(tokenizer):
  example = data.SwagExample("0", "The cat sat on the mat.", "It",
                             ["ran away.", "ate the fish on the mat."] * 2)
  feature = features.convert_single_example(example, 12, tokenizer)
  assert feature.label_id == 0  # a test example
  # Room for 12 - 3 = 9 pieces; the context has 7.
  # Choice 0: B "it ran away ." has 4: the longer context loses 2 (7 -> 5).
  assert feature.input_ids[0] == ids(
      "[CLS] the cat sat on the [SEP] it ran away . [SEP]")
  # Choice 1: B "it ate the fish on the mat ." has 8: B, longer, loses one
  # (8 -> 7); at equal lengths B loses first, so they take turns: 7/6,
  # 6/6, 6/5, 5/5, 5/4 = 9.
  assert feature.input_ids[1] == ids(
      "[CLS] the cat sat on the [SEP] it ate the fish [SEP]")
  assert feature.segment_ids[1] == [0] * 7 + [1] * 5


def test_records_round_trip(tokenizer, tmp_path):
  examples = [data.SwagExample(str(i), "The cat sat.", "It",
                               ["ran.", "slept.", "ate.", "sat."], i % 4)
              for i in range(3)]
  path = str(tmp_path / "train.tf_record")
  assert features.write_features(examples, 10, tokenizer, path) == 3
  records = list(tf.data.TFRecordDataset(path).map(
      lambda r: tf.io.parse_single_example(
          r, features.name_to_features(10))).as_numpy_iterator())
  assert [r["label_ids"] for r in records] == [0, 1, 2]
  want = features.convert_single_example(examples[1], 10, tokenizer)
  np.testing.assert_array_equal(records[1]["input_ids"], want.input_ids)
  np.testing.assert_array_equal(records[1]["segment_ids"], want.segment_ids)
  assert records[1]["input_ids"].shape == (4, 10)
  assert not [f for f in os.listdir(tmp_path) if ".tmp-" in f]
