"""The original tokenizer in pure Python: vocab files, BasicTokenizer,
WordPiece, and IdTokenizer (text -> ids, fast on plain ASCII).

Nothing here imports TensorFlow (its import alone takes seconds), so worker
processes and scripts can tokenize exactly as FullTokenizer does without it.
Only a vocab path with a scheme (gs://, hdfs://) brings TensorFlow in, to
read the file through tf.io.gfile.
"""

import collections
import itertools
import os
import re

from tokenization import text as text_lib

# Tokens every BERT vocab needs: the runners lay inputs out with them.
REQUIRED_TOKENS = ("[UNK]", "[CLS]", "[SEP]")

# Distinct words whose WordPieces a WordpieceTokenizer remembers.
_WORD_CACHE_SIZE = 1 << 17

# Entries of IdTokenizer's cache: tokens with punctuation attached ("said,")
# and words, twice WordpieceTokenizer's words. About 160 bytes each (40 MB
# when full); 7 MB of English text fills 100k.
_ID_CACHE_SIZE = 1 << 18

# "gs://bucket/...", "hdfs://...": a path only tf.io.gfile can open.
_SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*://")


class VocabError(ValueError):
  """A vocab file that is missing, unreadable or lacks a needed token."""


def read_vocab_tokens(vocab_file):
  """Reads vocab.txt into a list: one token per line (stripped), id = index.

  Args:
    vocab_file: str, a local path, or any tf.io.gfile path with a scheme
      (gs://, hdfs://).

  Returns:
    list of str.

  Raises:
    VocabError: the file is missing, unreadable, empty or not UTF-8.
  """
  if _SCHEME.match(os.fspath(vocab_file)):
    # Only tf.io.gfile reads remote file systems. Imported here, not at the
    # top, so that local vocabs (nearly all) load without TensorFlow.
    import tensorflow as tf  # pylint: disable=g-import-not-at-top
    opener, errors = tf.io.gfile.GFile, (tf.errors.OpError, OSError)
  else:
    opener, errors = open, OSError
  tokens = []
  try:
    with opener(vocab_file, "rb") as reader:
      for number, line in enumerate(reader, 1):
        try:
          tokens.append(line.decode("utf-8").strip())
        except UnicodeDecodeError as e:
          raise VocabError("vocab_file %s, line %d is not UTF-8: %s" %
                           (vocab_file, number, e)) from None
  except errors as e:
    raise VocabError("Cannot read vocab_file %s: %s" %
                     (vocab_file, e)) from None
  if not tokens:
    raise VocabError("vocab_file %s is empty." % vocab_file)
  return tokens


def check_vocab_tokens(tokens, vocab_file):
  """Rejects a vocab the tokenizer cannot use unambiguously.

  Args:
    tokens: list of str from read_vocab_tokens.
    vocab_file: str, named in messages.

  Raises:
    VocabError: an empty entry, a duplicate (both lines named) or a missing
      required token.
  """
  first_line = {}
  for number, token in enumerate(tokens, 1):
    if not token:
      raise VocabError("vocab_file %s, line %d is empty." % (vocab_file,
                                                             number))
    if token in first_line:
      raise VocabError(
          "vocab_file %s has duplicate entry %r on lines %d and %d; each "
          "token must appear once (its id is its line number - 1)." %
          (vocab_file, token, first_line[token], number))
    first_line[token] = number
  missing = [t for t in REQUIRED_TOKENS if t not in first_line]
  if missing:
    raise VocabError("vocab_file %s lacks %s, which BERT inputs need." %
                     (vocab_file, " and ".join(missing)))


def load_vocab(vocab_file):
  """Reads vocab.txt into an OrderedDict token -> id (line number from 0).

  As the original, a token that appears twice would keep its first position
  but the id of its last line; FullTokenizer rejects such vocabs.

  Raises:
    VocabError: see read_vocab_tokens.
  """
  vocab = collections.OrderedDict()
  for index, token in enumerate(read_vocab_tokens(vocab_file)):
    vocab[token] = index
  return vocab


def convert_by_vocab(vocab, items):
  """Maps each item through vocab (tokens -> ids or ids -> tokens)."""
  return [vocab[item] for item in items]


def convert_tokens_to_ids(vocab, tokens):
  """WordPieces to ids through vocab (load_vocab's dict); KeyError for a
  token not in it."""
  return convert_by_vocab(vocab, tokens)


def convert_ids_to_tokens(inv_vocab, ids):
  """Ids to WordPieces through inv_vocab (id -> token)."""
  return convert_by_vocab(inv_vocab, ids)


class BasicTokenizer(object):
  """Cleans text, splits CJK, whitespace and punctuation, lower-cases."""

  def __init__(self, do_lower_case=True):
    """Args: do_lower_case: lower-case and strip accents (uncased models)."""
    self.do_lower_case = do_lower_case

  def tokenize(self, text):
    """Splits text (str or UTF-8 bytes) into a list of str words."""
    text = text_lib.clean_text_and_space_cjk(text_lib.convert_to_unicode(text))
    split_tokens = []
    for token in text_lib.whitespace_tokenize(text):
      if self.do_lower_case:
        token = text_lib.strip_accents(token.lower())
      split_tokens.extend(text_lib.split_on_punc(token))
    # Accent stripping can leave empty or whitespace-only pieces; resplit.
    return text_lib.whitespace_tokenize(" ".join(split_tokens))


class WordpieceTokenizer(object):
  """Greedy longest-match-first WordPiece, "##" marking continuations."""

  def __init__(self, vocab, unk_token="[UNK]",
               max_input_chars_per_word=text_lib.MAX_INPUT_CHARS_PER_WORD):
    """Creates the tokenizer.

    Args:
      vocab: dict str -> int.
      unk_token: str, emitted for a word that cannot be covered.
      max_input_chars_per_word: int; longer words become unk_token.
    """
    self.vocab = vocab
    self.unk_token = unk_token
    self.max_input_chars_per_word = max_input_chars_per_word
    # Word frequencies are Zipfian: most words repeat, so remember them.
    self._cache = {}
    # No vocab entry is longer than these, so no longer piece is tried (the
    # original tries them all, in vain): unknown and long words stay cheap.
    self._max_first = max(map(len, vocab), default=0)
    self._max_rest = max((len(t) - 2 for t in vocab if t.startswith("##")),
                         default=0)

  def _tokenize_word(self, word):
    pieces = self._cache.get(word)
    if pieces is None:
      pieces = self.split_word(word)
      if len(self._cache) < _WORD_CACHE_SIZE:
        self._cache[word] = pieces
    return pieces

  def split_word(self, word):
    """The WordPieces of one word (no whitespace), e.g. "unaffable" ->
    ["un", "##aff", "##able"]; [unk_token] where they cannot cover it."""
    if len(word) > self.max_input_chars_per_word:
      return [self.unk_token]
    pieces = []
    start = 0
    while start < len(word):
      end = min(len(word),
                self._max_first if start == 0 else start + self._max_rest)
      while end > start:
        piece = word[start:end] if start == 0 else "##" + word[start:end]
        if piece in self.vocab:
          break
        end -= 1
      else:
        # No prefix of the rest is in the vocab: the whole word is unknown.
        return [self.unk_token]
      pieces.append(piece)
      start = end
    return pieces

  def tokenize(self, text):
    """Splits whitespace-separated words into WordPieces.

    Args:
      text: str, already passed through BasicTokenizer.

    Returns:
      list of str, e.g. "unaffable" -> ["un", "##aff", "##able"].
    """
    output = []
    for word in text_lib.whitespace_tokenize(text_lib.convert_to_unicode(text)):
      output.extend(self._tokenize_word(word))
    return output


def _ascii_tables():
  """str.translate tables for plain-ASCII text, by do_lower_case.

  On ASCII the original's clean-up deletes NUL and the control characters
  (Cc: 0-31 and 127) but \\t \\n \\r, which become spaces; ASCII has no Cf
  and no CJK, and lower-casing is A-Z -> a-z with no accents to strip.

  Returns:
    dict do_lower_case -> (clean, split): clean maps every character 1:1 or
    deletes it, so str.translate stays on CPython's fast ASCII path;
    split also puts spaces around punctuation, so that .split() gives the
    original's words.
  """
  clean = {cp: None for cp in list(range(32)) + [127]}
  for char in "\t\n\r":
    clean[ord(char)] = " "
  # Deleting \x0b \x0c \x1c-\x1f matters: str.split() would split at them,
  # the original joins the characters around them.
  lower = dict(clean)
  lower.update((cp, cp + 32) for cp in range(ord("A"), ord("Z") + 1))
  tables = {}
  for do_lower_case, table in ((False, clean), (True, lower)):
    split = dict(table)
    split.update((cp, " %c " % cp) for cp in range(128)
                 if text_lib.is_punctuation(chr(cp)))
    tables[do_lower_case] = (table, split)
  return tables


_ASCII_TABLES = _ascii_tables()


def ascii_clean_table(do_lower_case):
  """The table that cleans (and lower-cases) plain ASCII as the original.

  For a str s with s.isascii(), s.translate(table).split() gives the
  original BasicTokenizer's whitespace-separated tokens, each still holding
  its punctuation; text.split_on_punc(token) gives the token's words.

  Args:
    do_lower_case: bool.

  Returns:
    dict code point -> str or None, for str.translate.
  """
  return _ASCII_TABLES[bool(do_lower_case)][0]


class _IdCache(dict):
  """Ids of one whitespace-separated token, computed on first sight.

  Keys are tokens after clean-up and lower-casing: words, or (on the ASCII
  path) punctuation still attached ("said,"). A dict lookup per token, in
  C, is all that repeated tokens cost. A token's words are looked up here
  too, so "said," costs one WordPiece split of "said" shared with "said".
  """

  def __init__(self, vocab):
    super().__init__()
    self._vocab = vocab
    self._wordpiece = WordpieceTokenizer(vocab)

  def __missing__(self, token):
    # Letters and digits hold no punctuation: the token is one word.
    words = [token] if token.isalnum() else text_lib.split_on_punc(token)
    if len(words) == 1:
      ids = self._word_ids(words[0])
    else:
      ids = tuple(itertools.chain.from_iterable(map(self.__getitem__, words)))
    # Stop remembering when full: frequent tokens come early, and memory
    # stays flat however big the corpus.
    if len(self) < _ID_CACHE_SIZE:
      self[token] = ids
    return ids

  def _word_ids(self, word):
    """WordpieceTokenizer's pieces of one word, as a tuple of ids."""
    return tuple(map(self._vocab.__getitem__,
                     self._wordpiece.split_word(word)))


class IdTokenizer(object):
  """FullTokenizer's text -> ids in pure Python, fast on plain ASCII.

  tokenize_ids(text) == [vocab[t] for t in FullTokenizer.tokenize(text)] for
  every str. A line of plain ASCII (most lines of most corpora) is cleaned
  and lower-cased by one str.translate and split once; each distinct token
  gets its ids once (the original's punctuation split and WordPiece). Other
  lines take BasicTokenizer's exact path.

  Example:

  ```python
  tokenizer = wordpiece.IdTokenizer(wordpiece.load_vocab("vocab.txt"), True)
  tokenizer.tokenize_ids("Jim Henson was a puppeteer")
  # [3958, 27227, 2001, 1037, 13997, 11510]
  ```
  """

  def __init__(self, vocab, do_lower_case):
    """Creates the tokenizer.

    Args:
      vocab: dict str -> int, as load_vocab gives.
      do_lower_case: bool; True for uncased models.

    Raises:
      VocabError: vocab lacks [UNK].
    """
    if "[UNK]" not in vocab:
      raise VocabError("The vocab lacks [UNK], which WordPiece emits for "
                       "words it cannot cover.")
    self.vocab = vocab
    self.do_lower_case = do_lower_case
    self._basic = BasicTokenizer(do_lower_case)
    self._ids = _IdCache(vocab)
    self._clean, self._split = _ASCII_TABLES[bool(do_lower_case)]

  def tokenize_ids(self, text):
    """Tokenizes text to ids.

    Args:
      text: str (UTF-8 bytes take the exact path).

    Returns:
      list of int.
    """
    if text.isascii() and isinstance(text, str):
      tokens = text.translate(self._clean).split()
    else:
      tokens = self._basic.tokenize(text)
    return list(itertools.chain.from_iterable(
        map(self._ids.__getitem__, tokens)))

  def tokenize_ids_batch(self, texts):
    """tokenize_ids of each text, without a Python call per text.

    Args:
      texts: iterable of str.

    Returns:
      list (per text) of lists of int.
    """
    clean, basic, lookup = self._clean, self._basic.tokenize, self._ids
    chain = itertools.chain.from_iterable
    return [list(chain(map(lookup.__getitem__,
                           text.translate(clean).split()
                           if text.isascii() and isinstance(text, str)
                           else basic(text))))
            for text in texts]

  def split_words(self, text):
    """BasicTokenizer(do_lower_case).tokenize(text): the original's words.

    Args:
      text: str (UTF-8 bytes take the exact path).

    Returns:
      list of str.
    """
    if text.isascii() and isinstance(text, str):
      return text.translate(self._split).split()
    return self._basic.tokenize(text)
