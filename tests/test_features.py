"""runner_lib.features: truncation and the [CLS] A [SEP] B [SEP] layout."""

from runner_lib.core import packing as features


def test_truncate_pops_from_the_longer_one_token_at_a_time():
  a, b = list("abcdefg"), list("xyz")
  features.truncate_seq_pair(a, b, 6)
  assert (a, b) == (list("abc"), list("xyz"))
  a, b = list("abcd"), list("wxyz")
  features.truncate_seq_pair(a, b, 5)  # ties pop from B first
  assert (a, b) == (list("abc"), list("wx"))


def test_pair_layout():
  tokens, segments = features.pair_layout(["a", "b"], ["c"], 8)
  assert tokens == ["[CLS]", "a", "b", "[SEP]", "c", "[SEP]"]
  assert segments == [0, 0, 0, 0, 1, 1]
  tokens, segments = features.pair_layout(list("abcdef"), None, 5)
  assert tokens == ["[CLS]", "a", "b", "c", "[SEP]"]
  assert segments == [0] * 5


def test_pad_features():
  assert features.pad_features([5, 6], [0, 1], 4) == ([5, 6, 0, 0],
                                                      [1, 1, 0, 0],
                                                      [0, 1, 0, 0])
