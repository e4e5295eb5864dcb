"""The original tokenizer as TensorFlow (Text) ops: fast, and in-graph.

Each step of the original BasicTokenizer becomes one vectorised op over a
batch of strings, then TensorFlow Text's FastWordpieceTokenizer (linear-time
WordPiece, the same greedy longest-match-first result) splits the words.

How the steps keep the original's output:
- The original lower-cases, NFD-decomposes and strips accents per
  whitespace-separated token before splitting punctuation. Doing it on the
  whole string gives the same result: none of these steps creates or
  removes whitespace, and a space ends Python's Final_Sigma context just as
  a token boundary does. tf.strings.lower(encoding="utf-8") applies ICU's
  full lower-casing, which agrees with Python's str.lower() (final sigma,
  U+0130) on the inputs we test.
- TensorFlow Text's own BertTokenizer / FastBertTokenizer are not used for
  normalisation: they case-fold (NFKC_Casefold: "ß" -> "ss", full-width ->
  ASCII) where the original only lower-cases, and count the word-length
  limit in bytes where the original counts characters (200).
- U+2028 / U+2029 (line and paragraph separators) survive the original's
  clean-up but split words in Python's str.split(); they become spaces here.
- Character classes come from RE2's Unicode tables, the original's from
  Python's unicodedata; they agree except on characters assigned in Unicode
  versions newer than the running Python's (documented in README.md).
"""

import tensorflow as tf
import tensorflow_text as tf_text

from tokenization import text as text_lib

# The original's whitespace (\t \n \r and category Zs) minus " " itself,
# which needs no replacing (matching every space would double the cost),
# plus U+2028 / U+2029. Zs is spelled out because RE2 has no class
# subtraction; tests check the list against unicodedata.
ZS_BUT_SPACE = (0xA0, 0x1680) + tuple(range(0x2000, 0x200B)) + (0x202F, 0x205F,
                                                                 0x3000)
_WHITESPACE = r"[\t\n\r%s\x{2028}\x{2029}]" % "".join(
    r"\x{%X}" % cp for cp in ZS_BUT_SPACE)
_REMOVED = r"[\x00\x{FFFD}\p{Cc}\p{Cf}]"
_CJK = "([%s])" % "".join(r"\x{%X}-\x{%X}" % r for r in text_lib.CJK_RANGES)
_PUNCTUATION = r"([!-/:-@\[-`{-~\p{P}])"

# FastWordpieceTokenizer counts bytes; give it room for 200 four-byte
# characters and apply the original's character limit ourselves.
_MAX_BYTES_PER_WORD = 4 * text_lib.MAX_INPUT_CHARS_PER_WORD + 4

# Strings of printable ASCII, tab, newline and carriage return only. On these
# FastBertTokenizer's one pass (normalization, splitting and WordPiece in
# C++) gives the original's output: ASCII case-folding is lower-casing, NFD
# and accent stripping change nothing, its punctuation and whitespace are
# the original's there, and bytes are characters for the word limit. It
# differs on other control characters (it splits at \x0b and \x0c, which
# the original drops) and beyond ASCII, so those strings take the exact
# path. Tests compare both on the stress corpus and real corpora.
_FAST_PATH = r"[\t\n\r\x20-\x7e]*"


def split_words(texts, do_lower_case, valid_utf8=False):
  """The original BasicTokenizer on a batch: strings -> words.

  Args:
    texts: string Tensor [B], UTF-8; invalid bytes are dropped, as the
      original's decode(..., "ignore") drops them.
    do_lower_case: bool, lower-case and strip accents.
    valid_utf8: bool; True skips dropping invalid bytes (a full pass) for
      input known to be valid, such as Python str encoded.

  Returns:
    string RaggedTensor [B, (words)].
  """
  if not valid_utf8:
    texts = tf.strings.unicode_transcode(texts, "UTF-8", "UTF-8",
                                         errors="ignore")
  # Whitespace first: the original keeps \t \n \r as spaces before it drops
  # control characters (the class that also holds them).
  texts = tf.strings.regex_replace(texts, _WHITESPACE, " ")
  texts = tf.strings.regex_replace(texts, _REMOVED, "")
  texts = tf.strings.regex_replace(texts, _CJK, r" \1 ")
  if do_lower_case:
    texts = tf.strings.lower(texts, encoding="utf-8")
    texts = tf_text.normalize_utf8(texts, "NFD")
    texts = tf.strings.regex_replace(texts, r"\p{Mn}", "")
  texts = tf.strings.regex_replace(texts, _PUNCTUATION, r" \1 ")
  # Only " " is left as whitespace here, so ICU's whitespace split (faster
  # than tf.strings.split) splits exactly where str.split() would.
  return tf_text.WhitespaceTokenizer().tokenize(texts)


class GraphTokenizer(tf.Module):
  """FullTokenizer's tokenize, for batches of strings, in TensorFlow ops.

  Saves with a SavedModel (the vocab is compiled into the op's model).
  """

  def __init__(self, vocab, do_lower_case, name=None):
    """Compiles the WordPiece model.

    Args:
      vocab: list of str, the vocab in id order, without duplicates.
      do_lower_case: bool.
      name: tf.Module name.
    """
    super().__init__(name=name)
    self.do_lower_case = do_lower_case
    self._vocab = tf.constant(vocab)
    self._wordpiece = tf_text.FastWordpieceTokenizer(
        vocab=vocab, suffix_indicator="##",
        max_bytes_per_word=_MAX_BYTES_PER_WORD, token_out_type=tf.int64,
        unknown_token="[UNK]", no_pretokenization=True)
    self._fast = tf_text.FastBertTokenizer(
        vocab=vocab, suffix_indicator="##",
        max_bytes_per_word=text_lib.MAX_INPUT_CHARS_PER_WORD,
        token_out_type=tf.int64, unknown_token="[UNK]",
        lower_case_nfd_strip_accents=do_lower_case)

  def split_words(self, texts, valid_utf8=False):
    """BasicTokenizer's words: string RaggedTensor [B, (words)] (see the
    module's split_words)."""
    return split_words(texts, self.do_lower_case, valid_utf8)

  def wordpiece_ids(self, words):
    """WordpieceTokenizer on words from split_words.

    Args:
      words: string RaggedTensor [..., (words)].

    Returns:
      int64 RaggedTensor [..., (words), (wordpieces)].
    """
    too_long = (tf.strings.length(words.flat_values, unit="UTF8_CHAR") >
                text_lib.MAX_INPUT_CHARS_PER_WORD)
    # "[UNK]" is a vocab entry, so WordPiece maps it to itself.
    words = words.with_flat_values(
        tf.where(too_long, "[UNK]", words.flat_values))
    return self._wordpiece.tokenize(words)

  def tokenize_word_ids(self, texts, valid_utf8=False):
    """Tokenizes a batch to ids, grouped by word.

    Args:
      texts: string Tensor [B], UTF-8 (see split_words).
      valid_utf8: bool, see split_words.

    Returns:
      int64 RaggedTensor [B, (words), (wordpieces)].
    """
    return self.wordpiece_ids(self.split_words(texts, valid_utf8))

  def tokenize_ids(self, texts, valid_utf8=False):
    """Tokenizes a batch to ids.

    Strings of plain ASCII (_FAST_PATH) go through FastBertTokenizer in one
    pass, the rest through the exact path (tokenize_word_ids); the rows are
    put back in order.

    Args:
      texts: string Tensor [B], UTF-8 (see split_words).
      valid_utf8: bool, see split_words.

    Returns:
      int64 RaggedTensor [B, (wordpieces)].
    """
    ids, rows = self.tokenize_ids_by_path(texts, valid_utf8)
    return tf.gather(ids, tf.argsort(rows))

  def tokenize_ids_by_path(self, texts, valid_utf8=False):
    """tokenize_ids before its rows are put back in order.

    Python callers that take the rows apart anyway skip the re-ordering
    gather (a copy of every id) by placing each row themselves.

    Args:
      texts: string Tensor [B], UTF-8 (see split_words).
      valid_utf8: bool, see split_words.

    Returns:
      (ids, rows): int64 RaggedTensor [B, (wordpieces)], the fast path's
      rows then the exact path's; int64 Tensor [B], the input row of each.
    """
    texts = tf.convert_to_tensor(texts, tf.string)
    is_fast = tf.strings.regex_full_match(texts, _FAST_PATH)
    rows = tf.range(tf.size(texts, out_type=tf.int64))

    def mixed():
      fast_rows = tf.boolean_mask(rows, is_fast)
      exact_rows = tf.boolean_mask(rows, ~is_fast)
      fast = self._fast.tokenize(tf.gather(texts, fast_rows))
      exact = self.tokenize_word_ids(tf.gather(texts, exact_rows),
                                     valid_utf8).merge_dims(-2, -1)
      return (tf.concat([tf.cast(fast, tf.int64), exact], axis=0),
              tf.concat([fast_rows, exact_rows], 0))

    # A batch of plain ASCII (most of many corpora) needs no split.
    return tf.cond(tf.reduce_all(is_fast),
                   lambda: (tf.cast(self._fast.tokenize(texts), tf.int64),
                            rows),
                   mixed)

  def tokenize(self, texts, valid_utf8=False):
    """Like tokenize_ids, but string RaggedTensor [B, (wordpieces)]."""
    return self.id_to_token(self.tokenize_ids(texts, valid_utf8))

  def id_to_token(self, ids):
    """The vocab's strings for int ids of any shape (ragged too)."""
    if isinstance(ids, tf.RaggedTensor):
      return ids.with_flat_values(self.id_to_token(ids.flat_values))
    return tf.gather(self._vocab, ids)
