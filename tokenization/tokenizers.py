"""The original tokenizer API: FullTokenizer, BasicTokenizer, WordPiece.

The per-string methods are a pure-Python rendering of the 2018 algorithm
(wordpiece.py, importable without TensorFlow); the batch methods run the
same algorithm as TensorFlow ops (graph.py).
"""

import collections
import concurrent.futures
import os
import re

import numpy as np
import tensorflow as tf

from tokenization import graph
from tokenization import text as text_lib
# The pure-Python parts live in wordpiece.py (no TensorFlow); they stay
# importable from here under their original names.
# pylint: disable=unused-import
from tokenization.wordpiece import _WORD_CACHE_SIZE
from tokenization.wordpiece import BasicTokenizer
from tokenization.wordpiece import check_vocab_tokens
from tokenization.wordpiece import convert_by_vocab
from tokenization.wordpiece import load_vocab
from tokenization.wordpiece import read_vocab_tokens
from tokenization.wordpiece import REQUIRED_TOKENS
from tokenization.wordpiece import VocabError
from tokenization.wordpiece import WordpieceTokenizer
# pylint: enable=unused-import

# Strings per call of the TensorFlow path: large enough to amortise the call,
# small enough to bound the memory of the ragged intermediates.
BATCH_CHUNK = 4096

# Released checkpoints whose casing is known, from the original release.
_LOWER_CASED_MODELS = ("uncased_L-24_H-1024_A-16", "uncased_L-12_H-768_A-12",
                       "multilingual_L-12_H-768_A-12",
                       "chinese_L-12_H-768_A-12")
_CASED_MODELS = ("cased_L-12_H-768_A-12", "cased_L-24_H-1024_A-16",
                 "multi_cased_L-12_H-768_A-12")


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
      VocabError: the vocab cannot be read, is not UTF-8, has an empty or a
        duplicate entry, or lacks [UNK], [CLS] or [SEP].
    """
    self.vocab_file = vocab_file
    self.do_lower_case = do_lower_case
    tokens = read_vocab_tokens(vocab_file)
    check_vocab_tokens(tokens, vocab_file)
    self.vocab = collections.OrderedDict((t, i) for i, t in enumerate(tokens))
    self.inv_vocab = dict(enumerate(tokens))
    self.basic_tokenizer = BasicTokenizer(do_lower_case=do_lower_case)
    self.wordpiece_tokenizer = WordpieceTokenizer(vocab=self.vocab)
    self._graph_tokenizer = None
    self._tokenize_ids_fn = None
    self._vocab_array = None

  @property
  def vocab_size(self):
    """Number of entries in vocab.txt; ids run from 0 to vocab_size - 1."""
    return len(self.vocab)

  @property
  def graph_tokenizer(self):
    """The same tokenizer as TensorFlow ops (graph.GraphTokenizer)."""
    if self._graph_tokenizer is None:
      self._graph_tokenizer = graph.GraphTokenizer(list(self.vocab),
                                                   self.do_lower_case)
    return self._graph_tokenizer

  def batch_tokenize_ids(self, texts):
    """Tokenizes many texts to ids at once, with TensorFlow Text.

    The same ids as convert_tokens_to_ids(tokenize(text)) for each text,
    many times faster on large batches.

    Args:
      texts: iterable of str or UTF-8 bytes (invalid bytes are dropped, as
        tokenize does).

    Returns:
      list (per text) of lists of int.
    """
    return self._batch_map(texts, lambda flat_ids: flat_ids.tolist())

  def batch_tokenize(self, texts):
    """Like batch_tokenize_ids, but WordPiece strings: [tokenize(t), ...]."""
    if self._vocab_array is None:
      self._vocab_array = np.array(list(self.vocab), dtype=object)
    return self._batch_map(texts,
                           lambda flat_ids: self._vocab_array[flat_ids].tolist())

  def _batch_map(self, texts, convert):
    """Runs the TensorFlow path in chunks; convert maps flat ids to a list."""
    if self._tokenize_ids_fn is None:
      # Built outside the function: its compiled vocab must outlive the
      # trace (graph_tokenizer serves other functions too).
      graph_tokenizer = self.graph_tokenizer
      # Python str encodes to valid UTF-8: skip the graph's byte clean-up.
      # The graph code has no Python control flow on tensors: autograph
      # would only add a second or two of conversion to the first call.
      self._tokenize_ids_fn = tf.function(
          lambda texts: graph_tokenizer.tokenize_ids_by_path(texts, True),
          input_signature=[tf.TensorSpec([None], tf.string)],
          autograph=False)
    encoded = [text_lib.convert_to_unicode(t).encode("utf-8") for t in texts]

    def tokenize_chunk(start):
      ids, order = self._tokenize_ids_fn(
          tf.constant(encoded[start:start + BATCH_CHUNK], tf.string))
      flat = convert(ids.flat_values.numpy())
      splits = ids.row_splits.numpy().tolist()
      chunk = [None] * (len(splits) - 1)
      for row, begin, end in zip(order.numpy().tolist(), splits, splits[1:]):
        chunk[row] = flat[begin:end]
      return chunk

    starts = range(0, len(encoded), BATCH_CHUNK)
    rows = []
    if len(starts) < 2:
      for start in starts:
        rows.extend(tokenize_chunk(start))
      return rows
    # TensorFlow Text's ops run on one core each and release the GIL: a
    # chunk per thread keeps every core busy.
    with concurrent.futures.ThreadPoolExecutor(
        min(len(starts), os.cpu_count() or 1)) as pool:
      for chunk in pool.map(tokenize_chunk, starts):
        rows.extend(chunk)
    return rows

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
