"""Learning a WordPiece vocab.txt from plain text (TensorFlow Text's learner).

Words are counted with this package's own word splitter (the original
BasicTokenizer), so the learned pieces are exactly those FullTokenizer will
look up; TensorFlow Text's bert_vocab_from_dataset would split words with
its own BertTokenizer normalisation instead. The learner is TensorFlow
Text's algorithm, vectorized (wordpiece_learner.py): the same vocab, tens of
times faster. Neither needs TensorFlow.
"""

import collections

from tokenization import text as text_lib
from tokenization import wordpiece
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
    batch_size: int, lines between calls of progress.
    progress: function or None, called after each batch with the bytes of
      UTF-8 text counted so far and the Counter.

  Returns:
    collections.Counter str -> int, its words in the order they first
    appear in the text.
  """
  clean = wordpiece.ascii_clean_table(do_lower_case)
  basic = wordpiece.BasicTokenizer(do_lower_case).tokenize
  counts = collections.Counter()
  tokens = collections.Counter()
  ascii_run = []

  def count_ascii_run():
    # Plain ASCII lines (most of most corpora) are only cleaned and split at
    # whitespace, a run of them at once (joined by a space, which no token
    # crosses): a token such as "said," is counted whole, in C, and split
    # into its words once per batch in flush_batch.
    tokens.update(" ".join(ascii_run).translate(clean).split())
    ascii_run.clear()

  def flush_batch():
    if ascii_run:
      count_ascii_run()
    # A word first appears inside the first token holding it, so walking the
    # tokens in first-appearance order keeps the words' order too.
    for token, count in tokens.items():
      if token.isalnum():  # letters and digits only: one word
        counts[token] += count
      else:
        for word in text_lib.split_on_punc(token):
          counts[word] += count
    tokens.clear()
    if progress:
      progress(done_bytes, counts)

  done_bytes = 0
  batch_lines = 0
  for line in lines:
    if line.isascii():
      done_bytes += len(line)
      ascii_run.append(line)
    else:
      done_bytes += len(line.encode("utf-8"))
      if ascii_run:
        count_ascii_run()
      # BasicTokenizer's words, which split_on_punc leaves as they are.
      tokens.update(basic(line))
    batch_lines += 1
    if batch_lines == batch_size:
      flush_batch()
      batch_lines = 0
  if batch_lines:
    flush_batch()
  return counts


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
