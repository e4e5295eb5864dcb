"""tokenization/wordpiece: IdTokenizer and word counting, without TensorFlow.

IdTokenizer's ASCII fast path is checked against two independent
implementations: FullTokenizer's per-string Python path and its TensorFlow
Text batch path (graph.py); split_words and count_words against
graph.split_words.
"""

import collections
import os
import subprocess
import sys

import pytest
import tensorflow as tf

import tokenization
from tests import stress_corpus
from tests.conftest import REPO_ROOT
from tokenization import graph
from tokenization import text as text_lib
from tokenization import vocab_learning
from tokenization import wordpiece

# ASCII punctuation as the original counts it (is_punctuation).
PUNCTUATION = "".join(chr(cp) for cp in range(128)
                      if text_lib.is_punctuation(chr(cp)))
CONTROLS = [chr(cp) for cp in list(range(32)) + [127]]


def edge_lines():
  """Lines aimed at the edges of the ASCII fast path."""
  lines = ["", " ", "\t\n\r ", "\x0b\x0c", "\x1c\x1d\x1e\x1f", "\x7f",
           "\x00", PUNCTUATION, " ".join(PUNCTUATION),
           "a".join(PUNCTUATION) + "A", "Hello, World! 3.14 e-mail\t\r\n"]
  for char in CONTROLS:
    # Inside a word, between words, at the ends; next to upper case and
    # punctuation.
    lines.append("ab%scd" % char)
    lines.append("Jim%sHenson was%s a puppeteer" % (char, char))
    lines.append("%sUN%sAFF,able%s" % (char, char, char))
    lines.append("x%s,%sy" % (char, char))
  for length in (199, 200, 201):
    for word in ("a" * length, "A" * length, ("ab" * length)[:length]):
      lines.append(word)
      lines.append("the %s, end" % word)
      # Punctuation cuts a long token into short words.
      lines.append(",".join([word[:100]] * 3))
  lines.append("a," * 150)
  return lines


def write_vocab(path, tokens):
  path.write_text("".join(t + "\n" for t in tokens), encoding="utf-8")
  return str(path)


@pytest.fixture(scope="module")
def corpus():
  """The stress corpus, its lines cut down to ASCII, and edge_lines.

  Most stress lines hold some non-ASCII character; cut down, they run the
  ASCII fast path on the same mix of controls, punctuation and long words.
  """
  lines = stress_corpus.corpus()
  return lines + [line.encode("ascii", "ignore").decode("ascii")
                  for line in lines] + edge_lines()


@pytest.fixture(scope="module")
def stress_vocab_file(corpus, tmp_path_factory):
  tokens = stress_corpus.vocab_for(stress_corpus.basic_words(corpus))
  extra = ["a", "##a", "ab", "##b", "##ab", "A", "##A", "un", "##aff", "cd",
           "##cd", "jim", "henson", "puppet", "##eer", "x", "y", "the", "end"]
  tokens += [t for t in extra + list(PUNCTUATION) if t not in tokens]
  return write_vocab(tmp_path_factory.mktemp("vocab") / "vocab.txt", tokens)


@pytest.fixture
def real_lines(shared_data):
  """Lines of both real corpora: the start of each and every non-ASCII one."""
  lines = []
  for name in ("gutenberg_pretrain.txt", "wikitext2_test_pretrain.txt"):
    path = os.path.join(shared_data, "corpus", name)
    if not os.path.exists(path):
      pytest.skip("%s is absent (../shared/data/corpus)" % path)
    with open(path, encoding="utf-8") as f:
      text = f.read().splitlines(keepends=True)
    lines += text[:4000] + [line for line in text[4000:]
                            if not line.isascii()]
  return lines


def check_ids(vocab_file, lines, do_lower_case):
  full = tokenization.FullTokenizer(vocab_file, do_lower_case)
  ours = wordpiece.IdTokenizer(wordpiece.load_vocab(vocab_file),
                               do_lower_case)
  want = [full.convert_tokens_to_ids(full.tokenize(line)) for line in lines]
  assert full.batch_tokenize_ids(lines) == want
  got = [ours.tokenize_ids(line) for line in lines]
  for line, g, w in zip(lines, got, want):
    assert g == w, repr(line)
  assert ours.tokenize_ids_batch(lines) == want
  # A second pass is answered from the cache.
  assert ours.tokenize_ids_batch(lines[::-1]) == want[::-1]
  return want


@pytest.mark.parametrize("do_lower_case", [True, False])
def test_ids_equal_full_tokenizer_on_stress_and_edge_lines(
    corpus, stress_vocab_file, do_lower_case):
  want = check_ids(stress_vocab_file, corpus, do_lower_case)
  unk = wordpiece.load_vocab(stress_vocab_file)["[UNK]"]
  assert sum(ids.count(unk) for ids in want) > 100
  assert sum(line.isascii() for line in corpus) > 1000


@pytest.mark.parametrize("do_lower_case", [True, False])
def test_ids_equal_full_tokenizer_on_real_text(shared_data, real_lines,
                                               do_lower_case):
  vocab_file = os.path.join(shared_data, "vocab", "uncased_vocab.txt")
  if not os.path.exists(vocab_file):
    pytest.skip("%s is absent" % vocab_file)
  assert sum(not line.isascii() for line in real_lines) > 500
  check_ids(vocab_file, real_lines, do_lower_case)


def test_edge_cases_by_hand(tmp_path):
  vocab = wordpiece.load_vocab(write_vocab(tmp_path / "vocab.txt", [
      "[PAD]", "[UNK]", "[CLS]", "[SEP]", "ab", "##cd", "cd", "a", "##a",
      "jim", "henson", "A"] + list(PUNCTUATION)))
  lower = wordpiece.IdTokenizer(vocab, True)
  cased = wordpiece.IdTokenizer(vocab, False)
  ids = lambda tokens: [vocab[t] for t in tokens]
  for char in CONTROLS:
    want = ["ab", "cd"] if char in "\t\n\r" else ["ab", "##cd"]
    assert lower.tokenize_ids("ab%scd" % char) == ids(want), repr(char)
    assert cased.split_words("A%sB" % char) == (
        ["A", "B"] if char in "\t\n\r" else ["AB"]), repr(char)
  for line in ("", " ", "\x0b\x0c\x1c\x1d\x1e\x1f\x7f\x00", "\t\r\n"):
    assert lower.tokenize_ids(line) == [] and lower.split_words(line) == []
  assert lower.tokenize_ids("a" * 200) == ids(["a"] + ["##a"] * 199)
  assert lower.tokenize_ids("A" * 201) == ids(["[UNK]"])
  assert cased.tokenize_ids("A" * 201 + ",a") == ids(["[UNK]", ",", "a"])
  assert lower.split_words(PUNCTUATION) == list(PUNCTUATION)
  # UTF-8 bytes take the exact path.
  assert lower.tokenize_ids(b"Jim\xff Henson") == ids(["jim", "henson"])


def graph_words(lines, do_lower_case):
  words = graph.split_words(
      tf.constant([line.encode("utf-8") for line in lines]), do_lower_case)
  return [[w.decode("utf-8") for w in row] for row in words.to_list()]


@pytest.mark.parametrize("do_lower_case", [True, False])
def test_split_words_equals_the_graph(corpus, real_lines, stress_vocab_file,
                                      do_lower_case):
  lines = corpus + real_lines
  ours = wordpiece.IdTokenizer(wordpiece.load_vocab(stress_vocab_file),
                               do_lower_case)
  basic = wordpiece.BasicTokenizer(do_lower_case)
  want = graph_words(lines, do_lower_case)
  assert [basic.tokenize(line) for line in lines] == want
  got = [ours.split_words(line) for line in lines]
  for line, g, w in zip(lines, got, want):
    assert g == w, repr(line)


@pytest.mark.parametrize("do_lower_case", [True, False])
def test_count_words_equals_a_count_of_graph_words(corpus, real_lines,
                                                   do_lower_case):
  lines = real_lines + corpus
  want = collections.Counter(
      w for row in graph_words(lines, do_lower_case) for w in row)
  calls = []
  got = vocab_learning.count_words(
      lines, do_lower_case, batch_size=1000,
      progress=lambda done, counts: calls.append((done, len(counts))))
  assert got == want
  # The same insertion order: the learner breaks ties by it.
  assert list(got) == list(want)
  assert len(calls) == -(-len(lines) // 1000)
  assert calls[-1] == (sum(len(line.encode("utf-8")) for line in lines),
                       len(want))
  assert [done for done, _ in calls] == sorted(done for done, _ in calls)


def test_the_cache_is_bounded(corpus, stress_vocab_file, monkeypatch):
  monkeypatch.setattr(wordpiece, "_ID_CACHE_SIZE", 50)
  vocab = wordpiece.load_vocab(stress_vocab_file)
  ours = wordpiece.IdTokenizer(vocab, True)
  full = tokenization.FullTokenizer(stress_vocab_file, True)
  lines = corpus[:500]
  assert ours.tokenize_ids_batch(lines) == [
      full.convert_tokens_to_ids(full.tokenize(line)) for line in lines]
  assert len(ours._ids) == 50  # pylint: disable=protected-access


def test_a_vocab_without_unk_is_an_error():
  with pytest.raises(wordpiece.VocabError, match=r"lacks \[UNK\]"):
    wordpiece.IdTokenizer({"[CLS]": 0, "a": 1}, True)


def test_scheme_paths_go_through_gfile(tmp_path):
  path = write_vocab(tmp_path / "v.txt", ["[UNK]", "[CLS]", "[SEP]", "hi"])
  assert wordpiece.read_vocab_tokens("file://" + path) == [
      "[UNK]", "[CLS]", "[SEP]", "hi"]
  with pytest.raises(wordpiece.VocabError, match="Cannot read vocab_file"):
    wordpiece.read_vocab_tokens("file://" + str(tmp_path / "none.txt"))
  with pytest.raises(wordpiece.VocabError, match="Cannot read vocab_file"):
    wordpiece.read_vocab_tokens(str(tmp_path))  # a directory


def test_the_package_exports_every_name_lazily():
  for name in tokenization.__all__:
    assert getattr(tokenization, name) is not None, name
  assert tokenization.BasicTokenizer is wordpiece.BasicTokenizer
  assert tokenization.tokenizers.VocabError is wordpiece.VocabError
  assert tokenization.FullTokenizer.__module__ == "tokenization.tokenizers"
  assert set(tokenization.__all__) <= set(dir(tokenization))
  with pytest.raises(AttributeError, match="no attribute 'Nope'"):
    tokenization.Nope  # pylint: disable=pointless-statement


def test_workers_tokenize_and_count_without_tensorflow(tmp_path):
  vocab_file = write_vocab(tmp_path / "vocab.txt", [
      "[PAD]", "[UNK]", "[CLS]", "[SEP]", "jim", "henson", "puppet", "##eer",
      ",", "was", "a"])
  script = "\n".join([
      "import sys",
      "import tokenization.wordpiece as w, tokenization.vocab_learning as v",
      "import tokenization.text, tokenization.wordpiece_learner",
      "import tokenization",
      "t = w.IdTokenizer(w.load_vocab(sys.argv[1]), True)",
      "assert t.tokenize_ids('Jim Henson, was a puppeteer') == "
      "[4, 5, 8, 9, 10, 6, 7], t.tokenize_ids('Jim Henson, was a puppeteer')",
      "assert t.tokenize_ids('caf\u00e9 Jim') == [1, 4]",
      "assert tokenization.BasicTokenizer(True).tokenize('A,b') == "
      "['a', ',', 'b']",
      "c = v.count_words(['Jim, jim', 'caf\u00e9'], True)",
      "assert c == {'jim': 2, ',': 1, 'cafe': 1}, c",
      "v.learn_vocab(c, 20)",
      "assert 'tensorflow' not in sys.modules",
      "print('ok')",
  ])
  result = subprocess.run([sys.executable, "-c", script, vocab_file],
                          capture_output=True, text=True, cwd=REPO_ROOT,
                          timeout=120)
  assert result.returncode == 0, result.stderr
  assert result.stdout.strip() == "ok"
