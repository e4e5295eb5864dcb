"""The original tokenizer API: FullTokenizer, BasicTokenizer, WordPiece."""

import collections
import re

import tensorflow as tf

from tokenization import text as text_lib

# The original's limit; longer words become [UNK]. (Other ports use 100 or
# 400, which changes the ids of long "words" such as URLs.)
MAX_INPUT_CHARS_PER_WORD = 200

# Released checkpoints whose casing is known, from the original release.
_LOWER_CASED_MODELS = ("uncased_L-24_H-1024_A-16", "uncased_L-12_H-768_A-12",
                       "multilingual_L-12_H-768_A-12",
                       "chinese_L-12_H-768_A-12")
_CASED_MODELS = ("cased_L-12_H-768_A-12", "cased_L-24_H-1024_A-16",
                 "multi_cased_L-12_H-768_A-12")


class VocabError(ValueError):
  """A vocab file that is missing, unreadable or lacks a needed token."""


def validate_case_matches_checkpoint(do_lower_case, init_checkpoint):
  """Checks do_lower_case against a released checkpoint's directory name.

  Args:
    do_lower_case: bool.
    init_checkpoint: str or None, e.g. ".../uncased_L-12_H-768_A-12/
      bert_model.ckpt". Only Google's released names are known.

  Raises:
    ValueError: the flag contradicts the checkpoint's casing.
  """
  if not init_checkpoint:
    return
  m = re.match("^.*?([A-Za-z0-9_-]+)/bert_model.ckpt", init_checkpoint)
  if m is None:
    return
  model_name = m.group(1)
  if model_name in _LOWER_CASED_MODELS and not do_lower_case:
    actual, case_name, opposite = "False", "lowercased", "True"
  elif model_name in _CASED_MODELS and do_lower_case:
    actual, case_name, opposite = "True", "cased", "False"
  else:
    return
  raise ValueError(
      "You passed in `--do_lower_case=%s` with `--init_checkpoint=%s`. "
      "However, `%s` seems to be a %s model, so you should pass in "
      "`--do_lower_case=%s` so that the fine-tuning matches how the model was "
      "pre-trained." % (actual, init_checkpoint, model_name, case_name,
                        opposite))


def load_vocab(vocab_file):
  """Reads vocab.txt: one token per line, id = line number.

  As the original, each line is stripped, and a token that appears twice
  keeps its first position in the dict but the id of its last line.

  Args:
    vocab_file: str, path (any tf.io.gfile path).

  Returns:
    OrderedDict str -> int.

  Raises:
    VocabError: the file is missing, unreadable or empty.
  """
  vocab = collections.OrderedDict()
  try:
    with tf.io.gfile.GFile(vocab_file, "rb") as reader:
      for index, line in enumerate(reader):
        vocab[text_lib.convert_to_unicode(line).strip()] = index
  except (tf.errors.OpError, OSError) as e:
    raise VocabError("Cannot read vocab_file %s: %s" % (vocab_file, e)) from None
  if not vocab:
    raise VocabError("vocab_file %s is empty." % vocab_file)
  return vocab


def convert_by_vocab(vocab, items):
  """Maps each item through vocab (tokens -> ids or ids -> tokens)."""
  return [vocab[item] for item in items]


class BasicTokenizer(object):
  """Cleans text, splits CJK, whitespace and punctuation, lower-cases."""

  def __init__(self, do_lower_case=True):
    """Args: do_lower_case: lower-case and strip accents (uncased models)."""
    self.do_lower_case = do_lower_case

  def tokenize(self, text):
    """Splits text (str or UTF-8 bytes) into a list of str words."""
    text = text_lib.clean_text(text_lib.convert_to_unicode(text))
    text = text_lib.tokenize_chinese_chars(text)
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
               max_input_chars_per_word=MAX_INPUT_CHARS_PER_WORD):
    """Creates the tokenizer.

    Args:
      vocab: dict str -> int.
      unk_token: str, emitted for a word that cannot be covered.
      max_input_chars_per_word: int; longer words become unk_token.
    """
    self.vocab = vocab
    self.unk_token = unk_token
    self.max_input_chars_per_word = max_input_chars_per_word

  def _tokenize_word(self, word):
    if len(word) > self.max_input_chars_per_word:
      return [self.unk_token]
    pieces = []
    start = 0
    while start < len(word):
      end = len(word)
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


class FullTokenizer(object):
  """The original end-to-end tokenizer: BasicTokenizer then WordPiece.

  Example:

  ```python
  tokenizer = tokenization.FullTokenizer("vocab.txt", do_lower_case=True)
  tokens = tokenizer.tokenize("Jim Henson was a puppeteer")
  # ['jim', 'henson', 'was', 'a', 'puppet', '##eer']
  ids = tokenizer.convert_tokens_to_ids(tokens)
  ```
  """

  def __init__(self, vocab_file, do_lower_case=True):
    """Loads the vocab.

    Args:
      vocab_file: str, path of vocab.txt.
      do_lower_case: bool; True for uncased models.

    Raises:
      VocabError: the vocab cannot be read or lacks [UNK].
    """
    self.vocab_file = vocab_file
    self.do_lower_case = do_lower_case
    self.vocab = load_vocab(vocab_file)
    if "[UNK]" not in self.vocab:
      raise VocabError("vocab_file %s has no [UNK] token." % vocab_file)
    self.inv_vocab = {v: k for k, v in self.vocab.items()}
    self.basic_tokenizer = BasicTokenizer(do_lower_case=do_lower_case)
    self.wordpiece_tokenizer = WordpieceTokenizer(vocab=self.vocab)

  @property
  def vocab_size(self):
    """Number of lines in vocab.txt: one more than the largest id."""
    return max(self.vocab.values()) + 1

  def tokenize(self, text):
    """Tokenizes text (str or UTF-8 bytes) into a list of WordPiece str."""
    return [piece for word in self.basic_tokenizer.tokenize(text)
            for piece in self.wordpiece_tokenizer.tokenize(word)]

  def convert_tokens_to_ids(self, tokens):
    """Maps WordPieces to ids; KeyError for a token not in the vocab."""
    return convert_by_vocab(self.vocab, tokens)

  def convert_ids_to_tokens(self, ids):
    """Maps ids back to WordPieces."""
    return convert_by_vocab(self.inv_vocab, ids)
