"""TensorFlow Text's WordPiece vocab learner, the same vocab, vectorized.

tensorflow_text's wordpiece_tokenizer_learner_lib.learn binary-searches a
count threshold; for each threshold it runs 4 passes, each counting in
Python dicts every substring of every word that starts at a piece boundary.
On 35k distinct words that is over a minute. Here every substring of every
word gets an integer id once; a pass is then a few numpy operations:

- counts: np.bincount of the substrings whose start is a piece boundary,
  weighted by word counts;
- the learner's "decrement every prefix, longest tokens first" leaves each
  token its count minus its one-character-longer extensions' counts (the
  extensions' own decrements cancel the rest: see _kept_counts);
- piece boundaries of the next pass: the greedy longest-match split,
  walked for all words at once.

The result equals learn(word_counts, ...) of TensorFlow Text with
include_joiner_token=True and joiner "##" (tests/test_learn_vocab.py checks
this on real text).
"""

import array

import numpy as np

JOINER = "##"


class _Substrings(object):
  """Every substring of every word, by (word, start, end), with token ids.

  A substring starting after the word's first character is the token
  JOINER + substring, as the learner names it.

  Attributes:
    token: int array [num_substrings], token id of each substring, ordered
      by word, then start, then end.
    weight: float array [num_substrings], its word's count.
    group: int array [num_substrings], index of its (word, start) pair.
    end: int array [num_substrings], its end (1..len(word)).
    group_first: int array [num_groups], first substring of each pair.
    word_group: int array [num_words + 1], first pair of each word.
    word_length: int array [num_words].
    parent: int array [num_tokens], the token one character shorter with
      the same start (-1 for single characters).
    tokens: list of str, by id.
  """

  def __init__(self, words, counts):
    ids = {}
    tokens = []
    parent = array.array("q")
    token, weight, end = array.array("q"), array.array("d"), array.array("q")
    group, group_first = array.array("q"), array.array("q")
    word_group = array.array("q", [0])
    for word, count in zip(words, counts):
      length = len(word)
      for start in range(length):
        prefix = JOINER if start else ""
        group_first.append(len(token))
        above = -1
        for stop in range(start + 1, length + 1):
          name = prefix + word[start:stop]
          index = ids.get(name)
          if index is None:
            index = ids[name] = len(tokens)
            tokens.append(name)
            parent.append(above)
          token.append(index)
          end.append(stop)
          above = index
        group.extend([len(group_first) - 1] * (length - start))
        weight.extend([count] * (length - start))
      word_group.append(len(group_first))
    self.ids = ids
    self.tokens = tokens
    self.parent = np.frombuffer(parent, np.int64)
    self.token = np.frombuffer(token, np.int64)
    self.weight = np.frombuffer(weight, np.float64)
    self.end = np.frombuffer(end, np.int64)
    self.group = np.frombuffer(group, np.int64)
    self.group_first = np.frombuffer(group_first, np.int64)
    self.word_group = np.frombuffer(word_group, np.int64)
    self.word_length = np.array([len(w) for w in words], np.int64)

  def token_id(self, name):
    """Id of a token, added (with no substring) if no word has it."""
    index = self.ids.get(name)
    if index is None:
      index = self.ids[name] = len(self.tokens)
      self.tokens.append(name)
      self.parent = np.append(self.parent, -1)
    return index


def _kept_counts(substrings, active_group):
  """One pass's token counts, after the learner's prefix decrements.

  The learner counts the substrings starting at piece boundaries, then
  walks tokens longest first and subtracts each token's (already
  decremented) count from all its shorter prefixes. A token t is thereby
  decremented by sum over its longer extensions u of kept(u), which is the
  sum over its one-character extensions e of count(e): kept(e) plus the
  decrements e itself received. So kept(t) = count(t) - sum of count(e).

  Args:
    substrings: _Substrings.
    active_group: bool array [num_groups], starts at piece boundaries.

  Returns:
    (present bool array [num_tokens], kept int64 array [num_tokens]).
  """
  num_tokens = len(substrings.tokens)
  active = active_group[substrings.group]
  counts = np.bincount(substrings.token[active],
                       weights=substrings.weight[active],
                       minlength=num_tokens)
  present = counts > 0
  child = np.flatnonzero(present & (substrings.parent >= 0))
  extensions = np.bincount(substrings.parent[child], weights=counts[child],
                           minlength=num_tokens)
  return present, np.rint(counts - extensions).astype(np.int64)


def _piece_starts(substrings, in_vocab):
  """Starts of the greedy longest-match pieces of every word.

  Args:
    substrings: _Substrings.
    in_vocab: bool array [num_tokens].

  Returns:
    bool array [num_groups]: the (word, start) pairs that begin a piece,
    all False for a word that cannot be split.
  """
  matched_end = np.where(in_vocab[substrings.token], substrings.end, 0)
  longest = np.maximum.reduceat(matched_end, substrings.group_first)
  num_words = len(substrings.word_length)
  active = np.zeros(len(substrings.group_first), bool)
  splits = np.ones(num_words, bool)
  position = np.zeros(num_words, np.int64)
  walking = np.arange(num_words)
  while walking.size:
    pair = substrings.word_group[walking] + position[walking]
    stop = longest[pair]
    stuck = stop == 0
    splits[walking[stuck]] = False
    walking, pair, stop = walking[~stuck], pair[~stuck], stop[~stuck]
    active[pair] = True
    position[walking] = stop
    walking = walking[stop < substrings.word_length[walking]]
  word_of_group = np.repeat(np.arange(num_words),
                            np.diff(substrings.word_group))
  return active & splits[word_of_group]


def _learn_with_thresh(substrings, char_ids, first_pass, thresh,
                       num_iterations):
  """The learner's learn_with_thresh: token id -> count after the passes.

  Args:
    substrings: _Substrings.
    char_ids: int array, ids of every character and JOINER + character.
    first_pass: (present, kept) of the first pass, which counts every
      substring and so does not depend on thresh.
    thresh: int.
    num_iterations: int.

  Returns:
    (in_vocab bool array, counts int64 array), by token id.
  """
  for iteration in range(num_iterations):
    if iteration == 0:
      present, kept = first_pass
    else:
      present, kept = _kept_counts(substrings,
                                   _piece_starts(substrings, in_vocab))
    in_vocab = present & (kept >= thresh)
    # Every character (and its ## form) stays, with count 1 if it fell out.
    missing = char_ids[~in_vocab[char_ids]]
    kept = kept.copy()
    kept[missing] = 1
    in_vocab[missing] = True
  return in_vocab, kept


def _top_chars(all_counts, max_unique_chars):
  """The max_unique_chars most frequent characters (ties alphabetical)."""
  char_counts = {}
  for word, count in all_counts:
    for char in word:
      char_counts[char] = char_counts.get(char, 0) + count
  ranked = sorted(char_counts.items(), key=lambda item: (-item[1], item[0]))
  return {char for char, _ in ranked[:max_unique_chars]}


def learn(word_counts, vocab_size, reserved_tokens, upper_thresh=int(1e7),
          lower_thresh=10, num_iterations=4, max_input_tokens=int(5e6),
          max_token_length=50, max_unique_chars=1000, slack_ratio=0.05):
  """TensorFlow Text's learn() with the "##" joiner: the same vocab, faster.

  Args:
    word_counts: dict word -> count (or a list of (word, count) pairs).
    vocab_size: int, the target (the maximum, within slack_ratio below).
    reserved_tokens: list of str, first in the vocab.
    upper_thresh, lower_thresh: int or None, the threshold search bounds.
    num_iterations: int, passes per threshold.
    max_input_tokens: int, most frequent words kept (-1 or None: all).
    max_token_length: int, longer words are dropped.
    max_unique_chars: int, the alphabet cap.
    slack_ratio: float.

  Returns:
    list of str: reserved tokens, characters, then pieces by count.
  """
  word_counts = list(word_counts.items() if isinstance(word_counts, dict)
                     else word_counts)
  counts = [count for _, count in word_counts]
  upper = max(counts) if upper_thresh is None else min(max(counts),
                                                       upper_thresh)
  lower = min(counts) if lower_thresh is None else max(min(counts),
                                                       lower_thresh)
  reserved = set(reserved_tokens)
  all_counts = [(word, count) for word, count in word_counts
                if len(word) <= max_token_length and word not in reserved]
  allowed = _top_chars(all_counts, max_unique_chars)
  limit = -1 if max_input_tokens is None else max_input_tokens
  words = []
  for word, count in sorted(all_counts, key=lambda item: item[1],
                            reverse=True):
    if limit != -1 and len(words) >= limit:
      break
    if all(char in allowed for char in word):
      words.append((word, count))

  substrings = _Substrings([w for w, _ in words], [c for _, c in words])
  chars = sorted({char for word, _ in words for char in word})
  char_ids = np.array([substrings.token_id(name) for char in chars
                       for name in (char, JOINER + char)], np.int64)
  first_pass = _kept_counts(substrings,
                            np.ones(len(substrings.group_first), bool))
  slack = max(slack_ratio * vocab_size, 0)
  while True:
    thresh = (upper + lower) // 2
    in_vocab, kept = _learn_with_thresh(substrings, char_ids, first_pass,
                                        thresh, num_iterations)
    vocab = _final_vocab(reserved_tokens, chars, substrings.tokens,
                         in_vocab, kept)
    within = len(vocab) <= vocab_size and vocab_size - len(vocab) <= slack
    if within or lower >= upper or thresh <= 1:
      return vocab
    if len(vocab) > vocab_size:
      lower = thresh + 1
    else:
      upper = thresh - 1


def _final_vocab(reserved_tokens, chars, tokens, in_vocab, kept):
  """Reserved tokens, sorted characters, then tokens by count, alphabetical
  among equal counts; each once."""
  chosen = np.flatnonzero(in_vocab)
  ranked = sorted(zip((-kept[chosen]).tolist(),
                      [tokens[i] for i in chosen]))
  vocab, seen = [], set()
  for token in list(reserved_tokens) + chars + [t for _, t in ranked]:
    if token not in seen:
      seen.add(token)
      vocab.append(token)
  return vocab
