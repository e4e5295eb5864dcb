"""create_pretraining_data: the original's records, invariants, scale mode."""

import collections
import glob
import json
import os
import random
import sys

import numpy as np
import pytest
import tensorflow as tf

import tokenization
from runner_lib.core.inputs import text_input
from runner_lib.core.inputs import tfrecord
from runner_lib.pretraining import data as pretraining_data
from runner_lib.pretraining import documents as pretraining_documents
from runner_lib.pretraining import instances as pretraining_instances
from runner_lib.pretraining import sharding as pretraining_sharding
from tests import conftest
from tokenization import wordpiece

WORDS = ("the of and to in was he that it his for with as had on at by "
         "her not but from she be have an which you they were this my all "
         "one said so we there would been if when their no more out what "
         "up into who will some time about could can only other then than "
         "very its also two after first new them any like our over these "
         "people may way well even because through good where much down "
         "little most long just before great own world man day life years "
         "state house").split()
SPECIAL = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
# Words split into pieces, so whole-word masking has words to keep whole.
PIECES = ["un", "##ion", "##ed", "##ly", "##ing", "##s", "kn", "##ow"]


def write_vocab(path):
  path.write_text("\n".join(SPECIAL + WORDS + PIECES) + "\n")
  return str(path)


def synthetic_corpus(path, num_documents=300, seed=0):
  """Documents of 2-20 sentences of 3-30 words, some split into pieces.

  Words follow a Markov chain in which each word has three successors, so
  a model has something to learn.
  """
  rng = random.Random(seed)
  successors = {w: random.Random(w).sample(WORDS, 3) for w in WORDS}
  with open(path, "w") as f:
    for _ in range(num_documents):
      for _ in range(rng.randint(2, 20)):
        words = [rng.choice(WORDS)]
        for _ in range(rng.randint(3, 30) - 1):
          words.append(rng.choice(successors[words[-1]]))
        words = [w + "ed" if rng.random() < 0.1 else w for w in words]
        words = ["union" if rng.random() < 0.05 else w for w in words]
        f.write(" ".join(words).capitalize() + ".\n")
      f.write("\n")
  return str(path)


def read_documents(lines, vocab_file, do_lower_case=True):
  """Documents as create_pretraining_data reads them, and the vocab."""
  vocab = wordpiece.load_vocab(vocab_file)
  tokenizer = wordpiece.IdTokenizer(vocab, do_lower_case)
  return pretraining_documents.read_documents(lines,
                                              tokenizer.tokenize_ids), vocab


def options(max_seq_length=64, wwm=False, max_predictions=10):
  return pretraining_instances.InstanceOptions(max_seq_length, 0.1, 0.15,
                                          max_predictions, wwm)


def parse(records, max_seq_length, max_predictions):
  spec = pretraining_data.pretraining_features(max_seq_length, max_predictions)
  parsed = tf.io.parse_example(list(records), spec)
  return {k: v.numpy() for k, v in parsed.items()}


def records_of(path):
  return list(tf.data.TFRecordDataset(path, tfrecord.compression_of(path))
              .as_numpy_iterator())


@pytest.mark.parametrize("mode", ["wp", "wwm"])
def test_identical_to_the_original_output(shared_data, mode):
  reference = os.path.join(shared_data, "reference", "create_pretraining_data",
                           "sample_text_seed12345_%s.tfrecord" % mode)
  with open(os.path.join(shared_data, "corpus", "sample_text.txt")) as f:
    documents, vocab = read_documents(
        f, os.path.join(shared_data, "vocab", "uncased_vocab.txt"))
  ours = list(pretraining_instances.create_training_records(
      documents, pretraining_instances.InstanceOptions(128, 0.1, 0.15, 20,
                                                  mode == "wwm"),
      pretraining_instances.MaskingVocab(vocab), 5, random.Random(12345)))
  want = records_of(reference)
  assert len(ours) == len(want) == {"wp": 60, "wwm": 64}[mode]
  got, want = parse(ours, 128, 20), parse(want, 128, 20)
  for key in want:
    np.testing.assert_array_equal(got[key], want[key], err_msg=key)


def check_invariants(features, vocab_size, mask_id, max_predictions,
                     masked_lm_prob, wwm):
  ids, mask = features["input_ids"], features["input_mask"]
  segments = features["segment_ids"]
  positions = features["masked_lm_positions"]
  labels, weights = features["masked_lm_ids"], features["masked_lm_weights"]
  lengths = mask.sum(1)
  assert lengths.min() >= 5  # [CLS] a [SEP] b [SEP]
  stats = collections.Counter()
  for row in range(len(ids)):
    n = lengths[row]
    assert (mask[row, :n] == 1).all() and (mask[row, n:] == 0).all()
    assert (ids[row, n:] == 0).all() and (segments[row, n:] == 0).all()
    assert ids[row, 0] == 2 and ids[row, n - 1] == 3  # [CLS] ... [SEP]
    # The [SEP] closing A; [CLS] and [SEP] are never masked, but a random
    # replacement elsewhere may be a [SEP] id, so locate it by segment.
    a_end = int((segments[row, :n] == 0).sum()) - 1
    assert ids[row, a_end] == 3 and 1 <= a_end <= n - 3
    assert (segments[row, a_end + 1:n] == 1).all()
    k = int((weights[row] == 1).sum())
    assert (weights[row, :k] == 1).all() and (weights[row, k:] == 0).all()
    assert (positions[row, k:] == 0).all() and (labels[row, k:] == 0).all()
    real = positions[row, :k]
    assert (np.diff(real) > 0).all()  # sorted, no repeats
    assert (real > 0).all() and (real < n - 1).all() and a_end not in real
    assert (labels[row, :k] < vocab_size).all()
    budget = min(max_predictions, max(1, int(round(n * masked_lm_prob))))
    if wwm:
      assert 1 <= k <= budget
    else:
      assert k == budget
    for position, label in zip(real, labels[row, :k]):
      if ids[row, position] == mask_id:
        stats["mask"] += 1
      elif ids[row, position] == label:
        stats["same"] += 1
      else:
        stats["random"] += 1
  total = sum(stats.values())
  return {key: value / total for key, value in stats.items()}, total


@pytest.mark.parametrize("seed,wwm", [(1, False), (2, True), (3, False)])
def test_invariants_and_80_10_10(tmp_path, seed, wwm):
  with open(synthetic_corpus(tmp_path / "c.txt", 200, seed)) as f:
    documents, tokens = read_documents(f, write_vocab(tmp_path / "vocab.txt"))
  vocab = pretraining_instances.MaskingVocab(tokens)
  records = list(pretraining_instances.create_training_records(
      documents, options(wwm=wwm), vocab, 3, random.Random(seed)))
  features = parse(records, 64, 10)
  shares, total = check_invariants(features, vocab.size, vocab.mask_id, 10,
                                   0.15, wwm)
  assert total > 5000
  # 80% [MASK], 10% the token itself, 10% a random token (which is itself
  # with probability 1/V, a small vocab here).
  assert abs(shares["mask"] - 0.8) < 0.02
  assert abs(shares["same"] - (0.1 + 0.1 / vocab.size)) < 0.015
  assert abs(shares["random"] - 0.1 * (1 - 1 / vocab.size)) < 0.015
  if wwm:
    # No word is split: a masked continuation's previous piece is masked
    # too. As in the original, that is the piece before the [SEP] when a
    # front-truncated B starts with a continuation, and none when A does.
    positions, labels = features["masked_lm_positions"], features[
        "masked_lm_ids"]
    for row in range(len(positions)):
      a_end = int((features["segment_ids"][row] == 0).sum() -
                  (features["input_mask"][row] == 0).sum()) - 1
      chosen = set(positions[row][features["masked_lm_weights"][row] == 1])
      for position, label in zip(positions[row], labels[row]):
        if position in chosen and vocab.is_continuation[label]:
          previous = position - 1 if position - 1 != a_end else position - 2
          assert previous == 0 or previous in chosen


def corpus_stats(features):
  lengths = features["input_mask"].sum(1)
  return {
      "instances": len(lengths),
      "mask_rate": features["masked_lm_weights"].sum() / lengths.sum(),
      "random_next": features["next_sentence_labels"].mean(),
      "mean_length": lengths.mean(),
      "full_length": (lengths >= 60).mean(),
  }


@pytest.mark.slow
def test_parallel_mode_statistics_match_one_worker(tmp_path):
  vocab_file = write_vocab(tmp_path / "vocab.txt")
  corpus = synthetic_corpus(tmp_path / "c.txt", 400, seed=5)
  with open(corpus) as f:
    lines = f.readlines()
  documents, vocab = read_documents(lines, vocab_file)
  single = parse(pretraining_instances.create_training_records(
      documents, options(), pretraining_instances.MaskingVocab(vocab), 4,
      random.Random(5)), 64, 10)

  corpus_bytes = os.path.getsize(corpus)
  settings = pretraining_sharding.Settings(
      tuple(wordpiece.read_vocab_tokens(vocab_file)), True, options(), 4, 5,
      False, False, None, None)

  def parallel():
    # Shards of about a sixth of the corpus, made in this process.
    shards = pretraining_sharding.plan([corpus], [corpus_bytes],
                                       corpus_bytes // 6)
    assert len(shards) >= 6
    return [record for shard in shards for record in
            pretraining_sharding.shard_records(shard, settings)[1]]

  records = parallel()
  assert records == parallel()  # deterministic for seed and worker count
  sharded = parse(records, 64, 10)
  check_invariants(sharded, len(vocab), 4, 10, 0.15, False)
  a, b = corpus_stats(single), corpus_stats(sharded)
  assert abs(a["instances"] / b["instances"] - 1) < 0.05, (a, b)
  for key, tolerance in (("mask_rate", 0.003), ("random_next", 0.03),
                         ("mean_length", 1.5), ("full_length", 0.04)):
    assert abs(a[key] - b[key]) < tolerance, (key, a, b)


@pytest.mark.parametrize("seed", range(3))
def test_shards_hold_each_line_once_at_any_shard_size(tmp_path, seed):
  # Byte ranges cut anywhere (inside a line, a "\r\n", a multi-byte
  # character, a run of blank lines): the shards' lines, in shard order,
  # are the file's lines, and each shard begins at a document boundary.
  rng = random.Random(seed)
  pieces = [b"one two\n", b"\n", b"  \n", b"\r\n", b"a\rb\n", b"\t \n",
            b"x" * 50 + b"\n", b"\xc3\xa9t\xc3\xa9\n", b" \xc2\xa0\n"]
  path = str(tmp_path / "corpus.txt")
  for _ in range(40):
    data = b"".join(rng.choice(pieces) for _ in range(rng.randint(0, 60)))
    data += rng.choice([b"", b"no newline at the end"])
    with open(path, "wb") as f:
      f.write(data)
    want = list(text_input.read_lines([path]))
    for shard_bytes in (1, 2, 3, 7, 40, 1000):
      shards = pretraining_sharding.plan([path], [len(data)], shard_bytes)
      got = [list(pretraining_sharding.shard_lines(s)) for s in shards]
      assert sum(got, []) == want, (data, shard_bytes)
      before = []
      for lines in got:
        # Each shard's lines begin after a blank line (or the file's start).
        assert not lines or not before or not before[-1].strip()
        before += lines


def run_script(args):
  # No TensorFlow on local files: it would cost more than the work.
  return conftest.run_script_without_tensorflow("create_pretraining_data.py",
                                                args, timeout=300)


@pytest.mark.slow
def test_script_round_robin_gzip(tmp_path):
  vocab_file = write_vocab(tmp_path / "vocab.txt")
  corpus = synthetic_corpus(tmp_path / "c.txt", 30)
  outputs = [str(tmp_path / "out" / ("part-%d.tfrecord" % i)) for i in (0, 1)]
  result = run_script(["--input_file=%s" % corpus,
                       "--output_file=%s" % ",".join(outputs),
                       "--vocab_file=%s" % vocab_file, "--max_seq_length=32",
                       "--max_predictions_per_seq=5", "--dupe_factor=2",
                       "--gzip"])
  assert result.returncode == 0, result.stderr[-3000:]
  parts = [records_of(p) for p in outputs]
  assert all(tfrecord.compression_of(p) == "GZIP" for p in outputs)
  assert abs(len(parts[0]) - len(parts[1])) <= 1 and len(parts[0]) > 20
  assert "Wrote %d total instances" % (len(parts[0]) + len(parts[1])) in (
      result.stderr)
  assert sorted(os.listdir(tmp_path / "out")) == ["part-0.tfrecord",
                                                  "part-1.tfrecord"]


def bad_run(tmp_path, **overrides):
  args = {"input_file": synthetic_corpus(tmp_path / "c.txt", 5),
          "output_file": str(tmp_path / "out" / "x.tfrecord"),
          "vocab_file": write_vocab(tmp_path / "vocab.txt"),
          "max_seq_length": "32", "max_predictions_per_seq": "5",
          "dupe_factor": "1"}
  args.update(overrides)
  return run_script(["--%s=%s" % kv for kv in args.items()])


@pytest.mark.slow
@pytest.mark.parametrize("case", ["no_match", "empty", "no_mask", "utf8",
                                  "unwritable"])
def test_bad_input(tmp_path, case):
  overrides, message = {
      "no_match": ({"input_file": str(tmp_path / "nothing*.txt")},
                   "--input_file: no file matches"),
      "empty": ({"input_file": str(tmp_path / "empty.txt")},
                "the files are empty"),
      "no_mask": ({"vocab_file": str(tmp_path / "v2.txt")},
                  "has no [MASK] token"),
      "utf8": ({"input_file": str(tmp_path / "bad.txt")},
               "bad.txt, line 2 is not UTF-8"),
      "unwritable": ({"output_file": str(tmp_path / "file.txt" / "x")},
                     "Cannot write output file"),
  }[case]
  (tmp_path / "empty.txt").write_text("")
  (tmp_path / "v2.txt").write_text("\n".join(SPECIAL[:4] + WORDS) + "\n")
  (tmp_path / "bad.txt").write_bytes(b"the man.\ncaf\xe9 time.\n")
  (tmp_path / "file.txt").write_text("a file, not a directory")
  result = bad_run(tmp_path, **overrides)
  assert result.returncode != 0
  assert message in result.stderr, result.stderr[-2000:]
  assert not (tmp_path / "out").exists() or not os.listdir(tmp_path / "out")


@pytest.mark.slow
def test_skip_invalid_lines_and_low_prediction_cap_warning(tmp_path):
  (tmp_path / "bad.txt").write_bytes(
      b"the man was good.\ncaf\xe9 time.\nthe day was long.\n\n"
      b"she said no.\nwe were there.\n")
  result = bad_run(tmp_path, input_file=str(tmp_path / "bad.txt"),
                   skip_invalid_lines="true", max_predictions_per_seq="2")
  assert result.returncode == 0, result.stderr[-2000:]
  assert "skipped 1 lines that are not UTF-8" in result.stderr
  assert "--max_predictions_per_seq=2 is below" in result.stderr
  assert records_of(str(tmp_path / "out" / "x.tfrecord"))


def original_truncate_seq_pair(tokens_a, tokens_b, max_num_tokens, rng):
  """The original's truncate_seq_pair, as its create_pretraining_data.py
  has it: a token at a time from the longer list, front or back."""
  while True:
    total_length = len(tokens_a) + len(tokens_b)
    if total_length <= max_num_tokens:
      break
    trunc_tokens = tokens_a if len(tokens_a) > len(tokens_b) else tokens_b
    assert len(trunc_tokens) >= 1
    if rng.random() < 0.5:
      del trunc_tokens[0]
    else:
      trunc_tokens.pop()


@pytest.mark.parametrize("seed", range(3))
def test_truncation_cuts_what_the_originals_cuts(seed):
  rng = random.Random(seed)
  for _ in range(300):
    a = list(range(rng.randint(0, 300)))
    b = list(range(1000, 1000 + rng.randint(0, 300)))
    limit = rng.randint(0, 400)
    want_a, want_b, want_rng = list(a), list(b), random.Random(rng.random())
    got_rng = random.Random()
    got_rng.setstate(want_rng.getstate())
    original_truncate_seq_pair(want_a, want_b, limit, want_rng)
    pretraining_instances.random_truncate_seq_pair(a, b, limit, got_rng)
    assert (a, b) == (want_a, want_b)
    assert got_rng.random() == want_rng.random()  # the same draws


@pytest.mark.parametrize("length", [0, 1, 2, 3, 10, 125, 300, 5000])
def test_fast_shuffle_draws_as_random_shuffle(length):
  for seed in range(20):
    want, got = list(range(length)), list(range(length))
    reference, ours = random.Random(seed), random.Random(seed)
    reference.shuffle(want)
    pretraining_instances.shuffle(ours, got)
    assert got == want
    # The generators are left in the same state: later draws agree too.
    assert ours.random() == reference.random()


@pytest.mark.slow
@pytest.mark.parametrize("num_workers", [1, 2])
def test_script_records_equal_tensorflow_tokenization(tmp_path, num_workers):
  vocab_file = write_vocab(tmp_path / "vocab.txt")
  corpus = synthetic_corpus(tmp_path / "c.txt", 60, seed=3)
  output = str(tmp_path / "out.tfrecord")
  result = run_script([
      "--input_file=%s" % corpus, "--output_file=%s" % output,
      "--vocab_file=%s" % vocab_file, "--max_seq_length=64",
      "--max_predictions_per_seq=10", "--dupe_factor=2", "--random_seed=4",
      "--num_workers=%d" % num_workers])
  assert result.returncode == 0, result.stderr[-3000:]
  if num_workers == 1:
    records = records_of(output)
  else:
    shards = sorted(glob.glob(output + "-*-of-*"))
    assert shards and not glob.glob(output + "-*.tmp-*")
    records = sum((records_of(p) for p in shards), [])
  if num_workers == 1:
    # The records of the same documents tokenized by TensorFlow Text's
    # batch path (an independent tokenizer), made in this process.
    tokenizer = tokenization.FullTokenizer(vocab_file)
    with open(corpus) as f:
      lines = [line.strip() for line in f]
    documents = [[]]
    for line, ids in zip(lines, tokenizer.batch_tokenize_ids(lines)):
      if not line:
        documents.append([])
      elif ids:
        documents[-1].append(ids)
    want = list(pretraining_instances.create_training_records(
        [d for d in documents if d], options(), pretraining_instances
        .MaskingVocab(tokenizer.vocab), 2, random.Random(4)))
    assert records == want
  else:
    check_invariants(parse(records, 64, 10), len(wordpiece.load_vocab(
        vocab_file)), 4, 10, 0.15, False)


@pytest.mark.slow
def test_remote_output_through_tensorflow(tmp_path):
  # ram:// is a TensorFlow file system (as gs:// is): the script writes it
  # through tf.io.gfile, with the same records as a local file.
  vocab_file = write_vocab(tmp_path / "vocab.txt")
  corpus = synthetic_corpus(tmp_path / "c.txt", 20, seed=6)
  local = str(tmp_path / "local.tfrecord")
  code = (
      "import runpy, sys\n"
      "import tensorflow as tf\n"
      "for output in ('ram://remote/out.tfrecord', %r):\n"
      "  sys.argv = ['create_pretraining_data.py', '--input_file=%s',\n"
      "              '--vocab_file=%s', '--max_seq_length=32',\n"
      "              '--max_predictions_per_seq=5', '--output_file=' + output]\n"
      "  try:\n"
      "    runpy.run_path('create_pretraining_data.py', run_name='__main__')\n"
      "  except SystemExit as e:\n"
      "    assert not e.code, e.code\n"
      "  from absl import flags\n"
      "  flags.FLAGS.unparse_flags()\n"
      "records = [[r.numpy() for r in tf.data.TFRecordDataset(p)]\n"
      "           for p in ('ram://remote/out.tfrecord', %r)]\n"
      "assert records[0] == records[1] and records[0], len(records[0])\n"
      % (local, corpus, vocab_file, local))
  result = conftest.run([sys.executable, "-c", code], cwd=conftest.REPO_ROOT,
                        timeout=300)
  assert result.returncode == 0, result.stderr[-3000:]
  assert sorted(os.listdir(tmp_path)) == ["c.txt", "local.tfrecord",
                                          "vocab.txt"]


@pytest.mark.slow
def test_a_50_mb_line_without_a_newline(tmp_path):
  # The corpus ends with one line of 50 MB and no newline, longer than a
  # dozen shards: the shard it begins in holds it whole, the shards inside
  # it hold nothing, and its sentence (200k tokens) is cut to a sequence
  # in linear time.
  vocab_file = write_vocab(tmp_path / "vocab.txt")
  unit = b"the day was long" + b" " * 1008
  corpus = tmp_path / "long.txt"
  with open(corpus, "wb") as f:
    f.write(b"The man was here.\nHe said no.\n\nShe had been there.\n\n")
    f.write(unit * (50 * 1024))
  output = str(tmp_path / "out" / "x.tfrecord")
  result = run_script(["--input_file=%s" % corpus, "--output_file=" + output,
                       "--vocab_file=" + vocab_file, "--max_seq_length=32",
                       "--max_predictions_per_seq=5", "--dupe_factor=2",
                       "--num_workers=2"])
  assert result.returncode == 0, result.stderr[-3000:]
  with open(output + ".manifest.json") as f:
    manifest = json.load(f)
  assert manifest["complete"] and manifest["num_shards"] == 13
  counts = [shard["records"] for shard in manifest["shards"]]
  assert counts[0] > 0 and counts[1:] == [0] * 12
  records = records_of(output + "-00000-of-00013")
  features = parse(records, 32, 5)
  vocab = wordpiece.load_vocab(vocab_file)
  long_ids = {vocab[w] for w in ("the", "day", "was", "long")}
  cut = 0
  for row in range(len(records)):
    ids = list(features["input_ids"][row])
    for position, original in zip(features["masked_lm_positions"][row],
                                  features["masked_lm_ids"][row]):
      if position:
        ids[position] = original
    length = int(features["input_mask"][row].sum())
    a_end = list(features["segment_ids"][row]).index(1) - 1
    # A piece of the long line as segment A, the pair cut to 32 - 3.
    cut += length == 32 and a_end > 10 and set(ids[1:a_end]) <= long_ids
  assert cut >= 1
  assert sorted(os.listdir(tmp_path / "out")) == (
      ["x.tfrecord-%05d-of-00013" % i for i in range(13)] +
      ["x.tfrecord.manifest.json"])


def parse_unmasked(records, max_seq_length):
  spec = pretraining_data.unmasked_features(max_seq_length)
  parsed = tf.io.parse_example(list(records), spec)
  return {k: v.numpy() for k, v in parsed.items()}


def test_dynamic_masking_writes_candidates_by_hand(tmp_path):
  vocab = wordpiece.load_vocab(write_vocab(tmp_path / "vocab.txt"))
  ids = {token: vocab[token] for token in ("the", "un", "##ion", "##ed",
                                           "kn", "##ow", "of", "[CLS]",
                                           "[SEP]")}
  # A: "the union", B: "##ed known of" (a B starting with a piece, as a
  # front truncation leaves it).
  instance = pretraining_instances.TrainingInstance(
      [ids["[CLS]"], ids["the"], ids["un"], ids["##ion"], ids["[SEP]"],
       ids["##ed"], ids["kn"], ids["##ow"], ids["of"], ids["[SEP]"]],
      [0] * 5 + [1] * 5, None, None, True)
  encoder = pretraining_instances.InstanceEncoder(len(vocab), 12, 3)
  record = encoder.encode(instance, pretraining_instances.MaskingVocab(vocab))
  got = parse_unmasked([record], 12)
  np.testing.assert_array_equal(got["masked_lm_candidates"][0],
                                [0, 1, 1, 2, 0, 2, 1, 2, 1, 0, 0, 0])
  np.testing.assert_array_equal(got["input_ids"][0],
                                instance.tokens + [0, 0])
  np.testing.assert_array_equal(got["input_mask"][0], [1] * 10 + [0, 0])
  np.testing.assert_array_equal(got["segment_ids"][0],
                                [0] * 5 + [1] * 5 + [0, 0])
  assert got["next_sentence_labels"][0] == [1]
  example = tf.train.Example.FromString(record)
  assert sorted(example.features.feature) == [
      "input_ids", "input_mask", "masked_lm_candidates", "next_sentence_labels",
      "segment_ids"]


@pytest.mark.parametrize("wwm", [False, True])
def test_dynamic_masking_instances_are_the_masked_ones_unmasked(
    tmp_path, monkeypatch, wwm):
  """Unmasked records are the default's instances, masks put back, when
  masking draws from a random stream of its own: --dynamic_masking skips
  the masking draws and changes nothing else in the stream."""
  with open(synthetic_corpus(tmp_path / "c.txt", 60, 4)) as f:
    documents, tokens = read_documents(f, write_vocab(tmp_path / "vocab.txt"))
  vocab = pretraining_instances.MaskingVocab(tokens)
  dynamic = parse_unmasked(pretraining_instances.create_training_records(
      list(documents), options(wwm=wwm)._replace(dynamic_masking=True),
      vocab, 2, random.Random(9)), 64)

  masking_rng = random.Random(1)
  original = pretraining_instances.create_masked_lm_predictions

  def own_stream(tokens, prob, max_predictions, vocab, rng, wwm):
    del rng
    return original(tokens, prob, max_predictions, vocab, masking_rng, wwm)

  monkeypatch.setattr(pretraining_instances, "create_masked_lm_predictions",
                      own_stream)
  masked = parse(pretraining_instances.create_training_records(
      list(documents), options(wwm=wwm), vocab, 2, random.Random(9)), 64, 10)
  unmasked = masked["input_ids"].copy()
  for row in range(len(unmasked)):
    real = masked["masked_lm_weights"][row] > 0
    unmasked[row, masked["masked_lm_positions"][row][real]] = (
        masked["masked_lm_ids"][row][real])
  assert len(unmasked) > 100
  np.testing.assert_array_equal(dynamic["input_ids"], unmasked)
  for key in ("input_mask", "segment_ids", "next_sentence_labels"):
    np.testing.assert_array_equal(dynamic[key], masked[key], err_msg=key)
  candidates = dynamic["masked_lm_candidates"]
  ids = dynamic["input_ids"]
  special = (ids == vocab.cls_id) | (ids == vocab.sep_id) | (
      dynamic["input_mask"] == 0)
  assert (candidates[special] == 0).all()
  pieces = np.array(vocab.is_continuation, bool)[ids]
  assert (candidates[~special & pieces] == 2).all()
  assert (candidates[~special & ~pieces] == 1).all()


def test_dynamic_masking_reaches_sharded_workers(tmp_path):
  vocab_file = write_vocab(tmp_path / "vocab.txt")
  corpus = synthetic_corpus(tmp_path / "c.txt", 40, seed=2)
  size = os.path.getsize(corpus)
  settings = pretraining_sharding.Settings(
      tuple(wordpiece.read_vocab_tokens(vocab_file)), True,
      options()._replace(dynamic_masking=True), 1, 5, False, False, None,
      None)
  shards = pretraining_sharding.plan([corpus], [size], size // 3)
  records = [record for shard in shards for record in
             pretraining_sharding.shard_records(shard, settings)[1]]
  assert len(records) > 20
  for record in records:
    features = tf.train.Example.FromString(record).features.feature
    assert "masked_lm_candidates" in features
    assert "masked_lm_positions" not in features


@pytest.mark.slow
def test_script_dynamic_masking_flags(tmp_path):
  vocab_file = write_vocab(tmp_path / "vocab.txt")
  corpus = synthetic_corpus(tmp_path / "c.txt", 20)
  output = str(tmp_path / "u.tfrecord")
  args = ["--input_file=%s" % corpus, "--output_file=%s" % output,
          "--vocab_file=%s" % vocab_file, "--max_seq_length=32",
          "--dynamic_masking"]
  refused = run_script(args + ["--masked_lm_prob=0.2",
                               "--do_whole_word_mask"])
  assert refused.returncode != 0
  assert ("--masked_lm_prob, --do_whole_word_mask choose masks, give them to "
          "run_pretraining.py --dynamic_masking") in refused.stderr
  assert not os.path.exists(output)
  result = run_script(args + ["--dupe_factor=2"])
  assert result.returncode == 0, result.stderr[-3000:]
  assert "--dupe_factor=2 with --dynamic_masking" in result.stderr
  features = parse_unmasked(records_of(output), 32)
  assert len(features["input_ids"]) > 20
  assert set(np.unique(features["masked_lm_candidates"])) == {0, 1, 2}
