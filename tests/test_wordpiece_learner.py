"""tokenization/wordpiece_learner: TensorFlow Text's learner, the same vocab."""

import os

import pytest
from tensorflow_text.tools.wordpiece_vocab import wordpiece_tokenizer_learner_lib as reference

from tests import stress_corpus
from tokenization import vocab_learning
from tokenization import wordpiece_learner


def both(counts, vocab_size, **kwargs):
  reserved = vocab_learning.reserved_tokens(3)
  return (wordpiece_learner.learn(counts, vocab_size, reserved, **kwargs),
          reference.learn(counts, vocab_size, reserved, **kwargs))


@pytest.mark.slow
@pytest.mark.parametrize("do_lower_case,vocab_size,kwargs", [
    (True, 1000, {"lower_thresh": 1}),
    (False, 1500, {"lower_thresh": 1, "max_unique_chars": 60}),
    (True, 600, {"max_input_tokens": 700}),  # the learner's default bounds
])
def test_same_vocab_as_tensorflow_text_on_real_text(shared_data, do_lower_case,
                                                    vocab_size, kwargs):
  with open(os.path.join(shared_data, "corpus",
                         "wikitext2_test_pretrain.txt"), encoding="utf-8") as f:
    text = f.read(40000)
  counts = vocab_learning.count_words(text.splitlines(), do_lower_case)
  assert len(counts) > 1500
  ours, theirs = both(counts, vocab_size, **kwargs)
  assert ours == theirs
  assert len(ours) > 250


@pytest.mark.slow
def test_same_vocab_on_the_stress_corpus():
  # Accents, CJK, long words, punctuation: an alphabet far past the cap.
  lines = stress_corpus.corpus(1500, seed=4)
  for do_lower_case in (True, False):
    counts = vocab_learning.count_words(lines, do_lower_case)
    for vocab_size in (400, 3000):
      ours, theirs = both(counts, vocab_size, lower_thresh=1,
                          max_unique_chars=150)
      assert ours == theirs, (do_lower_case, vocab_size)


def test_unreachable_target_and_tiny_input():
  # Fewer pieces than asked for: the search runs down to threshold 1.
  counts = {"hello": 3, "world": 2, "help": 1}
  ours, theirs = both(counts, 500, lower_thresh=1)
  assert ours == theirs and len(ours) < 100
