"""CoNLL-format NER files: documents of sentences of (word, tag).

One token per line, the word in the first column and the NER tag in the
last, a blank line between sentences and `-DOCSTART-` lines between
documents. CoNLL-2003 ships IOB1 tags (I- opens an entity unless it follows
one of the same type); tags are converted to IOB2 (every entity opens with
B-), the scheme the model predicts and seqeval scores.
"""

import os

import tensorflow as tf

from runner_lib.core import errors

# The order of the head's rows.
LABELS = ("O", "B-PER", "I-PER", "B-ORG", "I-ORG", "B-LOC", "I-LOC",
          "B-MISC", "I-MISC")

# Each split's file names: ours first, then CoNLL-2003's.
FILES = {"train": ("train.txt", "eng.train"),
         "dev": ("dev.txt", "eng.testa"),
         "test": ("test.txt", "eng.testb")}

DOCSTART = "-DOCSTART-"


class Sentence(object):
  """One sentence of a CoNLL file.

  Attributes:
    words: list of str.
    tags: list of str, IOB2, one per word.
    document: int, the index of its document in the file.
  """

  def __init__(self, words, tags, document):
    self.words = words
    self.tags = tags
    self.document = document

  def __repr__(self):
    return "Sentence(%r, %r, %r)" % (self.words, self.tags, self.document)


def iob1_to_iob2(tags):
  """Converts tags to IOB2: an I-X that does not continue an X entity opens
  one (becomes B-X). IOB2 input comes back unchanged.

  Args:
    tags: list of str, "O", "B-X" or "I-X".

  Returns:
    list of str.
  """
  converted = []
  for i, tag in enumerate(tags):
    if tag.startswith("I-"):
      previous = converted[i - 1] if i else "O"
      if previous == "O" or previous[2:] != tag[2:]:
        tag = "B-" + tag[2:]
    converted.append(tag)
  return converted


def read_conll(path, label_list=LABELS):
  """Reads the sentences of a CoNLL file, tags in IOB2.

  Args:
    path: str.
    label_list: the known IOB2 tags; a tag outside it (after conversion) is
      an error.

  Returns:
    list of Sentence, in file order.

  Raises:
    errors.InputError: a missing, non-UTF-8 or empty file, a line with one
      column, an unknown tag; naming file and line.
  """
  if not tf.io.gfile.exists(path):
    raise errors.InputError("Missing data file %s." % path)
  known = set(label_list)
  sentences, words, tags, lines = [], [], [], []
  document = 0

  def end_sentence():
    if words:
      converted = iob1_to_iob2(tags)
      for tag, line in zip(converted, lines):
        if tag not in known:
          raise errors.InputError(
              "%s, line %d: tag %r is not one of %s (the --label_list)." %
              (path, line, tag, ", ".join(label_list)))
      sentences.append(Sentence(list(words), converted, document))
    del words[:], tags[:], lines[:]

  with tf.io.gfile.GFile(path, "rb") as reader:
    for number, raw in enumerate(reader, 1):
      try:
        line = raw.decode("utf-8")
      except UnicodeDecodeError as e:
        raise errors.InputError("%s, line %d is not UTF-8 (%s)." %
                                (path, number, e)) from None
      columns = line.split()
      if not columns:
        end_sentence()
        continue
      if columns[0] == DOCSTART:
        end_sentence()
        if sentences:
          document = sentences[-1].document + 1
        continue
      if len(columns) < 2:
        raise errors.InputError(
            "%s, line %d: one column (%r); expected the word first and the "
            "tag last." % (path, number, line.strip()))
      words.append(columns[0])
      tags.append(columns[-1])
      lines.append(number)
  end_sentence()
  if not sentences:
    raise errors.InputError("%s holds no sentences." % path)
  return sentences


def find_file(data_dir, split):
  """The path of a split's file in data_dir: train.txt / dev.txt /
  test.txt, else CoNLL-2003's eng.train / eng.testa / eng.testb.

  Raises:
    errors.InputError: neither exists.
  """
  for name in FILES[split]:
    path = os.path.join(data_dir, name)
    if tf.io.gfile.exists(path):
      return path
  raise errors.InputError("Missing data file: %s has neither %s." %
                          (data_dir, " nor ".join(FILES[split])))


def get_examples(data_dir, split, label_list=LABELS):
  """The sentences of a split ("train", "dev" or "test") of data_dir."""
  return read_conll(find_file(data_dir, split), label_list)
