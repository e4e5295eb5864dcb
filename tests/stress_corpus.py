"""A deterministic stress corpus for the tokenizers, and a vocab for it.

Thousands of lines mixing what trips tokenizers: English punctuation,
numbers and contractions; accents and combining marks; Chinese, Japanese,
Korean, Arabic, Cyrillic, Greek, Hebrew, Devanagari, Thai; emoji with
modifiers and joiners; control, format and zero-width characters; tabs and
exotic spaces; words just under, at and past 200 characters; Unicode
punctuation; mixed case.
"""

import random

FRAGMENTS = {
    "english": [
        "The quick brown fox jumps over the lazy dog.", "Don't stop!",
        "I'm sure it's fine, isn't it?", "U.S.A. vs. U.K.", "$3.50", "1,000",
        "3.14159", "e-mail", "(parenthetical)", "state-of-the-art",
        "Mr. O'Neil's", "rock'n'roll", "50%", "#hashtag", "@user",
        "http://example.com/a?b=c&d=e", "C++", "x^2+y^2=z^2", "a|b", "~tilde~",
        "`code`", "<tag>", "[bracket]", "{brace}", "under_score", "back\\slash",
        "\"quoted\"", "well...", "Jim Henson was a puppeteer",
        "unaffable", "running", "jumped", "1990s", "9/11", "24/7",
    ],
    "mixed_case": [
        "McDonald's", "iPhone", "HTML5", "XMLHttpRequest", "eBay", "NASA",
        "LaTeX", "camelCaseWord", "ALLCAPS", "Title Case Words",
    ],
    "accents": [
        "café", "naïve", "Ångström", "Dvořák", "résumé", "São Paulo",
        "Straße", "ÉCOLE", "İstanbul", "ǅemal", "Ǆ", "e\u0301te\u0301",
        "A\u030a", "Zoë", "façade", "Øresund", "Łódź", "Ŧest", "ﬁnance",
        "Ⅻ", "ᾯ", "Σίσυφος", "ΟΔΟΣ", "ὈΔΥΣΣΕΎΣ",
    ],
    "cjk": [
        "中文分词测试", "北京欢迎你", "日本語のテキスト、カタカナ。", "ｶﾀｶﾅ",
        "ひらがな", "한국어 텍스트입니다", "漢字かな交じり文", "𠀀𠀁𪜀",
        "豈更車", "㐀㐁", "〇", "⺀",
    ],
    "other_scripts": [
        "مرحبا بالعالم", "العربية!", "Привет, мир!", "ЁЛКА ёлка",
        "Ελληνικά", "שלום עולם", "नमस्ते दुनिया", "สวัสดีครับ", "ქართული",
        "Հայերեն", "ትግርኛ",
    ],
    "emoji": [
        "😀", "👍🏽", "👨\u200d👩\u200d👧", "🇺🇸", "❤\ufe0f", "☺", "🤖🚀",
        "✨done✨", "a😀b",
    ],
    "controls": [
        "zero\u200bwidth", "join\u200dner", "\ufeffbom", "bell\x07",
        "esc\x1b[0m", "nul\x00byte", "repl\ufffdchar", "soft\u00adhyphen",
        "nel\x85line", "line\u2028sep", "para\u2029sep", "vt\x0bff\x0c",
        "fs\x1cgs\x1d", "rtl\u200fmark", "\u2066isolate\u2069", "del\x7f",
    ],
    "spaces": [
        "tab\there", "nbsp\xa0here", "ideo\u3000space", "thin\u2009space",
        "narrow\u202fnbsp", "ogham\u1680space", "  double  ", "\r\nCRLF",
        "en\u2002em\u2003",
    ],
    "punctuation": [
        "¡Hola!", "¿Qué?", "«guillemets»", "‹single›", "“smart quotes”",
        "‘single’", "„low“", "†‡•", "…", "‰", "′″", "、。", "「」『』", "【】",
        "〈〉《》", "！？，．：；", "—em–en", "‐‑‒", "§¶", "·", "⁅⁆", "؟،",
        "¦", "÷×", "∑∫√≈≠", "€£¥₹", "©®™", "°C", "½¼", "²³", "ＡＢＣ！",
        "¨", "῭", "`",
    ],
}


def long_words():
  """Words near and past the 200-character limit."""
  words = []
  for length in (199, 200, 201, 250, 401):
    words.append("a" * length)
    words.append("ж" * length)
    words.append(("Ab" * length)[:length])
  # Punctuation splits a long run into short words; accents shrink under
  # lower-casing (e + combining acute = 2 characters become 1).
  words.append("ab," * 120)
  words.append("e\u0301" * 150)
  words.append("É" * 201)
  return words


def corpus(num_lines=3000, seed=2018):
  """Returns a list of num_lines strings."""
  rng = random.Random(seed)
  pools = list(FRAGMENTS.values())
  separators = [" ", " ", " ", "", "\t", "\xa0", "  ", "\u3000"]
  longs = long_words()
  lines = []
  for number in range(num_lines):
    parts = []
    for _ in range(rng.randint(1, 12)):
      pool = rng.choice(pools)
      parts.append(rng.choice(pool))
      parts.append(rng.choice(separators))
    if number % 25 == 0:
      parts.insert(rng.randint(0, len(parts)), " %s " % rng.choice(longs))
    lines.append("".join(parts))
  lines.extend(longs)
  lines.extend(["", " ", "\t\n", "\x00", "\u200b"])
  return lines


def basic_words(lines):
  """The words of the lines, for both casings, by tf-models-official's port
  of the original BasicTokenizer (an independent reference).

  Returns:
    list of str.
  """
  from official.nlp.tools import tokenization as port  # pylint: disable=g-import-not-at-top
  words = []
  for lower in (True, False):
    basic = port.BasicTokenizer(do_lower_case=lower)
    for line in lines:
      words.extend(basic.tokenize(line))
  return words


def vocab_for(words, seed=7, max_pieces=6000):
  """A WordPiece vocab covering much, not all, of the given words.

  Whole words, prefixes and "##" continuations cut at random points, with a
  few characters left out so that [UNK] appears too.

  Args:
    words: iterable of str words (already basic-tokenized).
    seed: int.
    max_pieces: int, cap on the number of learned entries.

  Returns:
    list of str, special tokens first.
  """
  rng = random.Random(seed)
  pieces = set()
  for word in sorted(set(words)):
    if len(word) > 30 or rng.random() < 0.03:
      continue
    if rng.random() < 0.4:
      pieces.add(word)
    cut = rng.randint(1, len(word))
    pieces.add(word[:cut])
    while cut < len(word):
      end = rng.randint(cut + 1, len(word))
      pieces.add("##" + word[cut:end])
      cut = end
  learned = sorted(pieces)
  rng.shuffle(learned)
  special = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
  return special + [p for p in learned[:max_pieces] if p not in special]
