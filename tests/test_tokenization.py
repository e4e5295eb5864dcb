"""tokenization/: identity with the 2018 algorithm, per string and in batch.

The reference is tf-models-official's port of the 2018 tokenization.py,
whose only algorithmic difference from it is the WordPiece word-length limit
(400 characters there, 200 in 2018): the reference below sets it back to
200, and a test of its own pins that difference.
"""

import os

import numpy as np
import pytest
import tensorflow as tf

from official.nlp.tools import tokenization as port

import tokenization
from tokenization import tokenizers
from tokenization import graph
from runner_lib.core.inputs import packing as features
from tests import stress_corpus

SPECIAL = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]


class Reference(object):
  """The 2018 FullTokenizer: the port's classes with the 2018 limit (200)."""

  def __init__(self, vocab, do_lower_case):
    self.vocab = vocab
    self.basic = port.BasicTokenizer(do_lower_case=do_lower_case)
    self.wordpiece = port.WordpieceTokenizer(vocab=vocab,
                                             max_input_chars_per_word=200)

  def tokenize(self, text):
    return [p for w in self.basic.tokenize(text)
            for p in self.wordpiece.tokenize(w)]


def write_vocab(path, tokens):
  path.write_text("".join(t + "\n" for t in tokens), encoding="utf-8")
  return str(path)


@pytest.fixture(scope="module")
def corpus():
  return stress_corpus.corpus()


@pytest.fixture(scope="module")
def stress_vocab_file(corpus, tmp_path_factory):
  tokens = stress_corpus.vocab_for(stress_corpus.basic_words(corpus))
  return write_vocab(tmp_path_factory.mktemp("vocab") / "vocab.txt", tokens)


def check_identity(vocab_file, lines, do_lower_case):
  ours = tokenization.FullTokenizer(vocab_file, do_lower_case)
  reference = Reference(port.load_vocab(vocab_file), do_lower_case)
  want = [reference.tokenize(line) for line in lines]
  assert [ours.tokenize(line) for line in lines] == want
  assert ours.batch_tokenize(lines) == want
  assert ours.batch_tokenize_ids(lines) == [
      ours.convert_tokens_to_ids(tokens) for tokens in want]
  return want


@pytest.mark.parametrize("do_lower_case", [True, False])
def test_stress_corpus_identity(corpus, stress_vocab_file, do_lower_case):
  assert len(corpus) >= 3000
  want = check_identity(stress_vocab_file, corpus, do_lower_case)
  # The corpus exercises what it should: unknowns, long words, continuations.
  flat = [t for tokens in want for t in tokens]
  assert flat.count("[UNK]") > 100
  assert sum(t.startswith("##") for t in flat) > 1000
  assert len(set(flat)) > 1000


@pytest.mark.slow
@pytest.mark.parametrize("do_lower_case", [True, False])
def test_stress_corpus_identity_real_vocab(corpus, shared_data, do_lower_case):
  vocab_file = os.path.join(shared_data, "vocab", "uncased_vocab.txt")
  check_identity(vocab_file, corpus, do_lower_case)


@pytest.mark.slow
def test_real_text_identity(shared_data):
  vocab_file = os.path.join(shared_data, "vocab", "uncased_vocab.txt")
  with open(os.path.join(shared_data, "corpus", "wikitext2_test_pretrain.txt"),
            encoding="utf-8") as f:
    lines = f.read().splitlines()[:3000]
  check_identity(vocab_file, lines, True)


def test_hand_checked_tokens(tmp_path):
  vocab_file = write_vocab(tmp_path / "v.txt", SPECIAL + [
      "un", "##aff", "##able", "jim", "henson", "was", "a", "puppet", "##eer",
      ",", "!", "hello", "cafe", "café", "中", "文", "$", "3", ".", "50",
      "Hello"])
  lower = tokenization.FullTokenizer(vocab_file, do_lower_case=True)
  cased = tokenization.FullTokenizer(vocab_file, do_lower_case=False)
  cases = [
      ("unaffable", ["un", "##aff", "##able"], ["un", "##aff", "##able"]),
      ("Jim Henson was a puppeteer",
       ["jim", "henson", "was", "a", "puppet", "##eer"],
       ["[UNK]", "[UNK]", "was", "a", "puppet", "##eer"]),
      ("Hello,\tCAFÉ!", ["hello", ",", "cafe", "!"],
       ["Hello", ",", "[UNK]", "!"]),
      ("café\u200b中文", ["cafe", "中", "文"], ["café", "中", "文"]),
      ("$3.50", ["$", "3", ".", "50"], ["$", "3", ".", "50"]),
      ("unaffablex", ["[UNK]"], ["[UNK]"]),
      (b"hello \xff!", ["hello", "!"], ["hello", "!"]),
  ]
  for text, want_lower, want_cased in cases:
    assert lower.tokenize(text) == want_lower, text
    assert cased.tokenize(text) == want_cased, text
    assert lower.batch_tokenize([text]) == [want_lower], text
    assert cased.batch_tokenize([text]) == [want_cased], text
  assert lower.convert_tokens_to_ids(["[CLS]", "un", "##able"]) == [2, 5, 7]
  assert lower.convert_ids_to_tokens([8, 0]) == ["jim", "[PAD]"]


def test_word_length_limit_is_the_originals_200_not_the_ports_400(tmp_path):
  vocab_file = write_vocab(tmp_path / "v.txt", SPECIAL + ["a", "##a"])
  ours = tokenization.FullTokenizer(vocab_file)
  port_default = port.FullTokenizer(vocab_file)
  assert ours.tokenize("a" * 200) == ["a"] + ["##a"] * 199
  for text in ("a" * 201, "a" * 300):
    assert ours.tokenize(text) == ["[UNK]"]
    assert ours.batch_tokenize([text]) == [["[UNK]"]]
  # The port keeps words up to 400 characters: it differs here.
  assert port_default.tokenize("a" * 300) == ["a"] + ["##a"] * 299
  # The limit counts characters, not bytes: 200 two-byte letters pass.
  vocab_file = write_vocab(tmp_path / "w.txt", SPECIAL + ["ж", "##ж"])
  ours = tokenization.FullTokenizer(vocab_file)
  assert ours.batch_tokenize(["ж" * 200, "ж" * 201]) == [
      ["ж"] + ["##ж"] * 199, ["[UNK]"]]


def test_basic_tokenizer_rules():
  basic = tokenization.BasicTokenizer(do_lower_case=True)
  assert basic.tokenize(" \tHeLLo!how  \n Are yoU?  ") == [
      "hello", "!", "how", "are", "you", "?"]
  assert basic.tokenize("H\u00e9llo") == ["hello"]
  # ASCII symbols count as punctuation; math symbols (Sm) do not.
  assert basic.tokenize("a$b^c`d≈e") == ["a", "$", "b", "^", "c", "`", "d≈e"]
  # Control and format characters vanish; line separators split words.
  assert basic.tokenize("ab\u200bcd\x07ef\u2028gh") == ["abcdef", "gh"]
  cased = tokenization.BasicTokenizer(do_lower_case=False)
  assert cased.tokenize("HeLLo Café") == ["HeLLo", "Café"]
  # CJK ideographs become words; kana and hangul do not.
  assert cased.tokenize("中国ひらがな한국") == ["中", "国", "ひらがな한국"]
  # Accent stripping is NFD + drop Mn: it also drops the kana voicing mark
  # and leaves hangul as conjoining jamo, as the original does.
  assert basic.tokenize("がく한") == ["かく한"]


def test_validate_case_matches_checkpoint():
  tokenization.validate_case_matches_checkpoint(
      True, "/m/uncased_L-12_H-768_A-12/bert_model.ckpt")
  tokenization.validate_case_matches_checkpoint(False, "/m/other/bert_model.ckpt")
  with pytest.raises(ValueError, match="--do_lower_case=False"):
    tokenization.validate_case_matches_checkpoint(
        False, "/m/uncased_L-24_H-1024_A-16/bert_model.ckpt")
  with pytest.raises(ValueError, match="seems to be a cased model"):
    tokenization.validate_case_matches_checkpoint(
        True, "gs://b/multi_cased_L-12_H-768_A-12/bert_model.ckpt")


@pytest.mark.parametrize("content,message", [
    (b"", "is empty"),
    (b"[PAD]\n[CLS]\n[SEP]\nhello\n", "lacks \\[UNK\\]"),
    (b"[UNK]\n[SEP]\n", "lacks \\[CLS\\]"),
    (b"[UNK]\n[CLS]\n", "lacks \\[SEP\\]"),
    (b"[UNK]\n[CLS]\n[SEP]\ncaf\xe9\n", "line 4 is not UTF-8"),
    (b"[UNK]\n[CLS]\n[SEP]\nhi\nyo\nhi\n",
     "duplicate entry 'hi' on lines 4 and 6"),
    (b"[UNK]\n[CLS]\n\n[SEP]\n", "line 3 is empty"),
])
def test_bad_vocab(tmp_path, content, message):
  path = tmp_path / "vocab.txt"
  path.write_bytes(content)
  with pytest.raises(tokenization.VocabError, match=message) as error:
    tokenization.FullTokenizer(str(path))
  assert str(path) in str(error.value)
  with pytest.raises(tokenization.VocabError, match=message):
    tokenization.BertPreprocessor(str(path), True, 8)


def test_missing_vocab(tmp_path):
  with pytest.raises(tokenization.VocabError, match="Cannot read vocab_file"):
    tokenization.FullTokenizer(str(tmp_path / "none.txt"))


def python_inputs(tokenizer, text_a, text_b, seq_length):
  tokens, segments = features.pair_layout(
      tokenizer.tokenize(text_a), tokenizer.tokenize(text_b) if text_b is not
      None else None, seq_length)
  return features.pad_features(tokenizer.convert_tokens_to_ids(tokens),
                               segments, seq_length)


@pytest.mark.parametrize("seq_length", [5, 16, 48])
def test_preprocessor_equals_python_path(corpus, stress_vocab_file,
                                         seq_length):
  lines = corpus[:600]
  for do_lower_case in (True, False):
    tokenizer = tokenization.FullTokenizer(stress_vocab_file, do_lower_case)
    layer = tokenization.BertPreprocessor(stress_vocab_file, do_lower_case,
                                          seq_length)
    a, b = lines[0::2], lines[1::2]
    pair = layer([tf.constant(a), tf.constant(b)])
    single = layer(tf.constant(a))
    for name, got, bs in (("pair", pair, b), ("single", single, None)):
      want = [python_inputs(tokenizer, x, y, seq_length)
              for x, y in zip(a, bs or [None] * len(a))]
      for key, index in (("input_ids", 0), ("input_mask", 1),
                         ("segment_ids", 2)):
        np.testing.assert_array_equal(got[key].numpy(),
                                      [w[index] for w in want],
                                      err_msg="%s %s" % (name, key))


def test_pair_truncation_closed_form_equals_the_loop():
  from tokenization import preprocessing
  lengths = np.array([(a, b) for a in range(12) for b in range(12)])
  for budget in range(0, 14):
    got_a, got_b = preprocessing.truncated_pair_lengths(
        tf.constant(lengths[:, 0]), tf.constant(lengths[:, 1]), budget)
    for (a, b), ga, gb in zip(lengths, got_a.numpy(), got_b.numpy()):
      ta, tb = list(range(a)), list(range(b))
      features.truncate_seq_pair(ta, tb, budget)
      assert (len(ta), len(tb)) == (ga, gb), (a, b, budget)


@pytest.mark.slow
def test_preprocessor_in_saved_model(stress_vocab_file, tmp_path):
  layer = tokenization.BertPreprocessor(stress_vocab_file, True, 12)

  class Module(tf.Module):

    def __init__(self):
      super().__init__()
      self.layer = layer

    @tf.function(input_signature=[tf.TensorSpec([None], tf.string),
                                  tf.TensorSpec([None], tf.string)])
    def __call__(self, a, b):
      return self.layer([a, b])

  tf.saved_model.save(Module(), str(tmp_path / "saved"))
  loaded = tf.saved_model.load(str(tmp_path / "saved"))
  a = tf.constant(["Hello, World! café", "中文 text"])
  b = tf.constant(["Jim Henson was a puppeteer", ""])
  got, want = loaded(a, b), layer([a, b])
  for key in ("input_ids", "input_mask", "segment_ids"):
    np.testing.assert_array_equal(got[key].numpy(), want[key].numpy())


def test_spelled_out_space_separators_are_category_zs():
  import sys
  import unicodedata
  from tokenization import graph
  zs = [cp for cp in range(sys.maxunicode + 1)
        if unicodedata.category(chr(cp)) == "Zs"]
  assert sorted(graph.ZS_BUT_SPACE + (0x20,)) == zs


def test_a_pair_whose_b_has_no_tokens_is_a_single_sentence(stress_vocab_file):
  tokenizer = tokenization.FullTokenizer(stress_vocab_file)
  layer = tokenization.BertPreprocessor(stress_vocab_file, True, 8)
  a = ["hello world " * 5, "hello", "hello world"]
  b = ["", " \t ", "world"]
  got = layer([tf.constant(a), tf.constant(b)])
  for row, (x, y) in enumerate(zip(a, b)):
    # The original: [CLS] A [SEP] (A cut to 6) where B tokenizes to nothing.
    want = python_inputs(tokenizer, x, y, 8)
    for key, index in (("input_ids", 0), ("input_mask", 1),
                       ("segment_ids", 2)):
      np.testing.assert_array_equal(got[key][row].numpy(), want[index])
  assert list(got["input_mask"][0].numpy()) == [1] * 8
  # [CLS] hello [SEP]: no second [SEP].
  assert got["input_mask"][1].numpy().sum() == len(
      tokenizer.tokenize("hello")) + 2


def test_invalid_utf8_is_dropped_in_graph_as_in_python(stress_vocab_file):
  tokenizer = tokenization.FullTokenizer(stress_vocab_file)
  layer = tokenization.BertPreprocessor(stress_vocab_file, True, 16)
  raw = [b"caf\xc3\xa9 \xff d\xc3on't \xe4\xb8", b"\xc3\xa9t\xc3"]
  got = layer(tf.constant(raw))
  for row, text in enumerate(raw):
    np.testing.assert_array_equal(
        got["input_ids"][row].numpy(),
        python_inputs(tokenizer, text.decode("utf-8", "ignore"), None, 16)[0])


def test_plain_ascii_takes_the_one_pass_path_and_the_rest_the_exact_one(
    tmp_path):
  fast = lambda text: bool(tf.strings.regex_full_match(
      tf.constant(text), graph._FAST_PATH))  # pylint: disable=protected-access
  assert fast("Hello, World! 3.14 e-mail\tand\nmore\r")
  assert fast("")
  for text in ("café", "vt\x0bff\x0c", "nul\x00byte", "del\x7f", "bell\x07",
               "\u3000", "日本"):
    assert not fast(text), repr(text)
  assert not bool(tf.strings.regex_full_match(tf.constant(b"ab\xffcd"),
                                              graph._FAST_PATH))  # pylint: disable=protected-access
  # A batch mixing both, with the lines where TensorFlow Text's own
  # FastBertTokenizer differs from the original: the original's output, in
  # the batch's order.
  vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "vt", "ff", "nul", "byte",
           "cafe", "caf", "##e", "ss", "stra", "##ße", "strasse", "a", ",",
           "the", "b", "##c"] + ["x" * 200]
  path = tmp_path / "vocab.txt"
  path.write_text("\n".join(vocab) + "\n")
  texts = ["vt\x0bff\x0c", "the a, b", "café", "Straße", "nul\x00byte",
           "THE BC", "", "x" * 200, "x" * 201, "\u3000the\u3000", "a\tb"]
  for do_lower_case in (True, False):
    ours = tokenization.FullTokenizer(str(path), do_lower_case)
    want = [ours.tokenize(t) for t in texts]
    assert ours.batch_tokenize(texts) == want
    assert ours.batch_tokenize_ids(texts[::-1]) == [
        ours.convert_tokens_to_ids(w) for w in want[::-1]]
  assert want[0] == ["[UNK]"]  # cased: "vtff", the controls dropped


def test_batch_chunks_on_threads_keep_order(tmp_path, corpus, monkeypatch):
  # Chunks are tokenized on a thread each; rows must come back in order
  # whatever chunk finishes first (chunks of 7 lines, uneven last chunk).
  monkeypatch.setattr(tokenizers, "BATCH_CHUNK", 7)
  vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "the", "a", ",", "##s", "b"]
  path = tmp_path / "vocab.txt"
  path.write_text("\n".join(vocab) + "\n")
  ours = tokenization.FullTokenizer(str(path), True)
  lines = corpus[:100]
  want = [ours.tokenize(line) for line in lines]
  assert len(lines) == 100 and len(set(map(tuple, want))) > 5
  assert ours.batch_tokenize(lines) == want
  assert ours.batch_tokenize_ids(lines) == [
      ours.convert_tokens_to_ids(tokens) for tokens in want]


# The 2018 module's public names (and the private character classes its
# own tests call), for code written against it.
ORIGINAL_NAMES = (
    "convert_to_unicode", "printable_text", "load_vocab", "convert_by_vocab",
    "convert_tokens_to_ids", "convert_ids_to_tokens", "whitespace_tokenize",
    "validate_case_matches_checkpoint", "FullTokenizer", "BasicTokenizer",
    "WordpieceTokenizer", "_is_whitespace", "_is_control", "_is_punctuation")


def test_the_original_modules_names_behave_as_the_ports(tmp_path):
  for name in ORIGINAL_NAMES:
    assert hasattr(tokenization, name), name
  assert set(ORIGINAL_NAMES) <= set(dir(tokenization))
  # The character classes on every BMP code point and some beyond.
  chars = [chr(cp) for cp in list(range(0xD800)) + list(range(0xE000, 0x10000))
           + [0x1F4A9, 0x20000, 0xE0001, 0x10FFFD]]
  for name in ("_is_whitespace", "_is_control", "_is_punctuation"):
    ours, theirs = getattr(tokenization, name), getattr(port, name)
    differing = [c for c in chars if ours(c) != theirs(c)]
    assert not differing, (name, differing[:10])
  # The original's documented cases.
  assert tokenization._is_whitespace("\u00a0")
  assert not tokenization._is_control("\t")
  assert tokenization._is_control("\u0005")
  assert tokenization._is_punctuation("`")
  assert not tokenization._is_punctuation(" ")
  vocab_file = write_vocab(tmp_path / "v.txt", SPECIAL + [
      "want", "##want", "##ed", "wa", "un", "runn", "##ing", ","])
  vocab = tokenization.load_vocab(vocab_file)
  assert vocab == port.load_vocab(vocab_file)
  assert list(vocab) == SPECIAL + ["want", "##want", "##ed", "wa", "un",
                                   "runn", "##ing", ","]
  tokens = ["un", "##want", "##ed", "runn", "##ing"]
  assert tokenization.convert_tokens_to_ids(vocab, tokens) == [9, 6, 7, 10,
                                                               11]
  assert tokenization.convert_tokens_to_ids(vocab, tokens) == (
      port.convert_tokens_to_ids(vocab, tokens))
  inv_vocab = {index: token for token, index in vocab.items()}
  assert tokenization.convert_ids_to_tokens(inv_vocab, [9, 6, 7, 10, 11]) == (
      tokens)
  assert tokenization.convert_by_vocab(vocab, ["want"]) == [5]
  with pytest.raises(KeyError):
    tokenization.convert_tokens_to_ids(vocab, ["unwanted"])
  for text in (" a\tb \n c  ", "", "   ", "\u3000x\u00a0y"):
    assert tokenization.whitespace_tokenize(text) == (
        port.whitespace_tokenize(text)), repr(text)
  for text in ("caf\u00e9", "caf\u00e9".encode("utf-8"), b"ok\xff"):
    assert tokenization.convert_to_unicode(text) == (
        port.convert_to_unicode(text))
    assert tokenization.printable_text(text) == port.printable_text(text)
  with pytest.raises(ValueError):
    tokenization.convert_to_unicode(3)
  wordpiece = tokenization.WordpieceTokenizer(vocab=vocab)
  assert wordpiece.tokenize("unwanted running") == tokens
  assert wordpiece.tokenize("unwantedX running") == ["[UNK]", "runn",
                                                     "##ing"]
