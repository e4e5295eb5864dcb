"""Learning a WordPiece vocab.txt from plain text (TensorFlow Text's learner).

Words are counted with this package's own word splitter (the original
BasicTokenizer), so the learned pieces are exactly those FullTokenizer will
look up; TensorFlow Text's bert_vocab_from_dataset would split words with
its own BertTokenizer normalisation instead. The learner is TensorFlow
Text's algorithm, vectorized (wordpiece_learner.py): the same vocab, tens of
times faster.
"""

import collections

import tensorflow as tf

from tokenization import graph
from tokenization import wordpiece_learner


def reserved_tokens(num_unused=0):
  """[PAD], [unused0..N-1], [UNK], [CLS], [SEP], [MASK], in Google's order.

  With num_unused=99 the special tokens get Google's ids ([PAD]=0,
  [UNK]=100, [CLS]=101, [SEP]=102, [MASK]=103); [unusedN] slots can later be
  renamed to domain words without changing the model's shape.
  """
  return (["[PAD]"] + ["[unused%d]" % i for i in range(num_unused)] +
          ["[UNK]", "[CLS]", "[SEP]", "[MASK]"])


def count_words(lines, do_lower_case, batch_size=4096, progress=None):
  """Counts the words the original BasicTokenizer makes of the lines.

  Args:
    lines: iterable of str.
    do_lower_case: bool.
    batch_size: int, lines per TensorFlow call.
    progress: function or None, called after each batch with the bytes of
      text counted so far and the Counter.

  Returns:
    collections.Counter str -> int.
  """
  split = tf.function(lambda texts: graph.split_words(texts, do_lower_case),
                      input_signature=[tf.TensorSpec([None], tf.string)],
                      autograph=False)
  # Counted as bytes (Counter's C loop), decoded once per distinct word.
  counts = collections.Counter()
  batch = []
  done_bytes = 0

  def flush():
    counts.update(split(tf.constant(batch, tf.string)).flat_values.numpy()
                  .tolist())
    batch.clear()
    if progress:
      progress(done_bytes, counts)

  for line in lines:
    encoded = line.encode("utf-8")
    done_bytes += len(encoded)
    batch.append(encoded)
    if len(batch) == batch_size:
      flush()
  if batch:
    flush()
  return collections.Counter(
      {word.decode("utf-8"): count for word, count in counts.items()})


def learn_vocab(word_counts, vocab_size, num_unused=0, max_unique_chars=1000):
  """Learns a WordPiece vocab of about vocab_size entries.

  Args:
    word_counts: dict str -> int.
    vocab_size: int, the target: the learner's threshold search aims
      within 5% below it (smaller when the text has fewer distinct pieces)
      and returns a larger vocab where no threshold lands there.
    num_unused: int, [unusedN] slots (see reserved_tokens).
    max_unique_chars: int, the alphabet cap: words with rarer characters are
      dropped (they tokenize to [UNK]).

  Returns:
    list of str, reserved tokens first.
  """
  reserved = reserved_tokens(num_unused)
  if vocab_size <= len(reserved):
    raise ValueError("vocab_size %d leaves no room beside the %d reserved "
                     "tokens." % (vocab_size, len(reserved)))
  # lower_thresh 1 (the learner's default is 10) lets the threshold search
  # reach the target size on small corpora too.
  return wordpiece_learner.learn(word_counts, vocab_size, reserved,
                                 lower_thresh=1,
                                 max_unique_chars=max_unique_chars)
