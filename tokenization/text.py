"""Text normalisation of the original BasicTokenizer, as pure functions.

Character classes follow the 2018 tokenization.py exactly: whitespace is
space, tab, newline, carriage return and category Zs; control is Cc and Cf
except tab, newline, carriage return; punctuation is every P* category plus
all non-alphanumeric printable ASCII (so "$", "+", "^", "`" split too).
"""

import unicodedata

# The original WordPiece limit: a word of more characters (code points)
# becomes [UNK]. Other ports use 100 or 400, which changes the ids of long
# "words" such as URLs.
MAX_INPUT_CHARS_PER_WORD = 200

# The "CJK Unified Ideographs" ranges the original puts spaces around. Not
# all of CJK: Hiragana, Katakana and Hangul are written with spaces or are
# left to WordPiece, as in the original.
CJK_RANGES = (
    (0x4E00, 0x9FFF),
    (0x3400, 0x4DBF),
    (0x20000, 0x2A6DF),
    (0x2A700, 0x2B73F),
    (0x2B740, 0x2B81F),
    (0x2B820, 0x2CEAF),
    (0xF900, 0xFAFF),
    (0x2F800, 0x2FA1F),
)


def convert_to_unicode(text):
  """Returns str; bytes are decoded as UTF-8, dropping invalid bytes.

  Raises:
    ValueError: neither str nor bytes.
  """
  if isinstance(text, str):
    return text
  if isinstance(text, bytes):
    return text.decode("utf-8", "ignore")
  raise ValueError("Unsupported string type: %s" % type(text))


def printable_text(text):
  """Returns text as str, suitable for print or logging."""
  return convert_to_unicode(text)


def whitespace_tokenize(text):
  """Splits on whitespace after stripping; [] for blank text."""
  return text.split()


def is_whitespace(char):
  """Space, \\t, \\n, \\r, or a Unicode space separator (Zs)."""
  if char in " \t\n\r":
    return True
  return unicodedata.category(char) == "Zs"


def is_control(char):
  """Cc or Cf, except \\t, \\n, \\r, which count as whitespace."""
  if char in "\t\n\r":
    return False
  return unicodedata.category(char) in ("Cc", "Cf")


def is_punctuation(char):
  """Unicode P* or non-alphanumeric printable ASCII."""
  cp = ord(char)
  if 33 <= cp <= 47 or 58 <= cp <= 64 or 91 <= cp <= 96 or 123 <= cp <= 126:
    return True
  return unicodedata.category(char).startswith("P")


def is_chinese_char(cp):
  """Whether code point cp lies in one of CJK_RANGES."""
  for low, high in CJK_RANGES:
    if low <= cp <= high:
      return True
  return False


class _LazyTable(dict):
  """A str.translate table filled on first sight of each code point.

  str.translate looks every character up in C; only characters not seen
  before reach Python, so repeated text costs one dict lookup per character.
  """

  def __init__(self, rule):
    super().__init__()
    self._rule = rule

  def __missing__(self, cp):
    value = self._rule(chr(cp))
    self[cp] = value
    return value


def _clean_and_space_cjk(char):
  cp = ord(char)
  if cp == 0 or cp == 0xFFFD or is_control(char):
    return None  # deleted
  if is_whitespace(char):
    return " "
  if is_chinese_char(cp):
    return " %s " % char
  return cp  # unchanged


_CLEAN_CJK_TABLE = _LazyTable(_clean_and_space_cjk)
_SPACE_PUNCTUATION_TABLE = _LazyTable(
    lambda char: " %s " % char if is_punctuation(char) else ord(char))
_DROP_MN_TABLE = _LazyTable(
    lambda char: None if unicodedata.category(char) == "Mn" else ord(char))


def clean_text_and_space_cjk(text):
  """The original's _clean_text then _tokenize_chinese_chars, in one pass.

  Drops NUL, U+FFFD and control characters, turns whitespace into " " and
  puts spaces around every CJK ideograph (no character is in two classes).
  """
  return text.translate(_CLEAN_CJK_TABLE)


def strip_accents(text):
  """NFD-decomposes and drops combining marks (category Mn)."""
  if text.isascii():
    return text  # nothing to decompose
  return unicodedata.normalize("NFD", text).translate(_DROP_MN_TABLE)


def split_on_punc(text):
  """Splits a word into runs of non-punctuation and single punctuation.

  Args:
    text: str without whitespace (one whitespace-separated token).

  Returns:
    list of str.
  """
  return text.translate(_SPACE_PUNCTUATION_TABLE).split()
