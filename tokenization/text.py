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
  return any(low <= cp <= high for low, high in CJK_RANGES)


def clean_text(text):
  """Drops NUL, U+FFFD and control characters; whitespace becomes ' '."""
  output = []
  for char in text:
    cp = ord(char)
    if cp == 0 or cp == 0xFFFD or is_control(char):
      continue
    output.append(" " if is_whitespace(char) else char)
  return "".join(output)


def tokenize_chinese_chars(text):
  """Puts spaces around every CJK ideograph, making each its own word."""
  return "".join(" %s " % char if is_chinese_char(ord(char)) else char
                 for char in text)


def strip_accents(text):
  """NFD-decomposes and drops combining marks (category Mn)."""
  return "".join(char for char in unicodedata.normalize("NFD", text)
                 if unicodedata.category(char) != "Mn")


def split_on_punc(text):
  """Splits a word into runs of non-punctuation and single punctuation."""
  output = []
  start_new_word = True
  for char in text:
    if is_punctuation(char):
      output.append(char)
      start_new_word = True
    else:
      if start_new_word:
        output.append("")
      start_new_word = False
      output[-1] += char
  return output
