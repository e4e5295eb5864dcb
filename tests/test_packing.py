"""core/inputs/packing.py: truncation and the [CLS] A [SEP] B [SEP] layout."""

from runner_lib.core.inputs import packing


def test_truncate_pops_from_the_longer_one_token_at_a_time():
  a, b = list("abcdefg"), list("xyz")
  packing.truncate_seq_pair(a, b, 6)
  assert (a, b) == (list("abc"), list("xyz"))
  a, b = list("abcd"), list("wxyz")
  packing.truncate_seq_pair(a, b, 5)  # ties pop from B first
  assert (a, b) == (list("abc"), list("wx"))


def test_pair_layout():
  tokens, segments = packing.pair_layout(["a", "b"], ["c"], 8)
  assert tokens == ["[CLS]", "a", "b", "[SEP]", "c", "[SEP]"]
  assert segments == [0, 0, 0, 0, 1, 1]
  tokens, segments = packing.pair_layout(list("abcdef"), None, 5)
  assert tokens == ["[CLS]", "a", "b", "c", "[SEP]"]
  assert segments == [0] * 5


def test_pad_features():
  assert packing.pad_features([5, 6], [0, 1], 4) == ([5, 6, 0, 0],
                                                      [1, 1, 0, 0],
                                                      [0, 1, 0, 0])


def test_pair_layout_of_ids():
  # SQuAD packs ids directly: [CLS]=101 question [SEP]=102 window [SEP].
  ids, segments = packing.pair_layout([7, 8, 9], [20, 21], 9, 101, 102)
  assert ids == [101, 7, 8, 9, 102, 20, 21, 102]
  assert segments == [0, 0, 0, 0, 0, 1, 1, 1]
  ids, _ = packing.pair_layout([7, 8, 9], [20, 21], 6, 101, 102)
  assert ids == [101, 7, 8, 102, 20, 102]
