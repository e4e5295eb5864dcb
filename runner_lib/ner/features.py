"""NER sentences as word-piece tagging sequences.

Each word's label sits on its first word-piece; the word's other pieces,
[CLS], [SEP], padding and context carry no label (label_mask 0) and no
loss. A sentence longer than a sequence is cut at word boundaries into
several sequences, so every word is labelled and predicted exactly once.
With document context (the paper's "maximal document context") the rest of
each sequence is filled with the pieces around it in its document, left and
right, and only its own words are labelled.
"""

import collections

import tensorflow as tf

from runner_lib.core.inputs import tfrecord
from runner_lib.core.inputs import tfrecord_writer


class InputFeatures(object):
  """One sequence: lists of max_seq_length ints."""

  def __init__(self, input_ids, input_mask, segment_ids, label_ids,
               label_mask):
    self.input_ids = input_ids
    self.input_mask = input_mask
    self.segment_ids = segment_ids
    self.label_ids = label_ids
    self.label_mask = label_mask


# The words [word_start, word_end) of sentence sentence_index that one
# sequence labels, and the positions of their first pieces in it.
Span = collections.namedtuple(
    "Span", ["sentence_index", "word_start", "word_end", "positions"])


def word_piece_ids(sentences, tokenizer):
  """Each word's WordPiece ids, every distinct word tokenized once.

  A word the tokenizer turns into nothing (only control characters) becomes
  [UNK], so that it still has a piece to be labelled on.

  Args:
    sentences: list of data.Sentence.
    tokenizer: tokenization.FullTokenizer.

  Returns:
    list (per sentence) of lists (per word) of lists of int ids.
  """
  unknown = tokenizer.convert_tokens_to_ids(["[UNK]"])
  pieces = {}
  for sentence in sentences:
    for word in sentence.words:
      if word not in pieces:
        pieces[word] = tokenizer.convert_tokens_to_ids(
            tokenizer.tokenize(word)) or unknown
  return [[pieces[word] for word in s.words] for s in sentences]


def chunk_words(word_pieces, max_pieces):
  """Cuts a sentence at word boundaries into runs of at most max_pieces
  pieces.

  Args:
    word_pieces: list (per word) of lists of ids.
    max_pieces: int >= 1.

  Returns:
    list of (word_start, word_end) covering every word once, in order. A
    single word of more than max_pieces pieces is a run of its own (its
    pieces are cut to max_pieces; its first piece, the labelled one, stays).
  """
  chunks, start, length = [], 0, 0
  for i, pieces in enumerate(word_pieces):
    if length and length + len(pieces) > max_pieces:
      chunks.append((start, i))
      start, length = i, 0
    length += len(pieces)
  if word_pieces:
    chunks.append((start, len(word_pieces)))
  return chunks


def _context_sizes(budget, left_available, right_available):
  """How many context pieces to take on each side: half the budget each,
  a side's unused share going to the other."""
  left = min(left_available, max(budget // 2, budget - right_available))
  return left, min(right_available, budget - left)


def convert_sentences(sentences, label_list, max_seq_length, tokenizer,
                      document_context=False):
  """Lays out sentences as [CLS] pieces [SEP] sequences, padded.

  Args:
    sentences: list of data.Sentence, in document order.
    label_list: list of str, the tags in the head's order.
    max_seq_length: int >= 3.
    tokenizer: tokenization.FullTokenizer.
    document_context: bool, fill each sequence with the pieces around it
      in its document.

  Returns:
    (features, spans): lists of InputFeatures and Span, one per sequence,
    in order (sentence by sentence, each sentence's runs left to right).
  """
  label_index = {label: i for i, label in enumerate(label_list)}
  cls_id, sep_id = tokenizer.convert_tokens_to_ids(["[CLS]", "[SEP]"])
  pieces = word_piece_ids(sentences, tokenizer)
  max_pieces = max_seq_length - 2
  # Each document's pieces, flat, and where each sentence starts in them.
  document_pieces = collections.defaultdict(list)
  offsets = []
  for sentence, words in zip(sentences, pieces):
    flat = document_pieces[sentence.document]
    offsets.append(len(flat))
    for word in words:
      flat.extend(word)
  features, spans = [], []
  for index, (sentence, words) in enumerate(zip(sentences, pieces)):
    word_offsets = [offsets[index]]
    for word in words:
      word_offsets.append(word_offsets[-1] + len(word))
    for start, end in chunk_words(words, max_pieces):
      centre, first_pieces, labels = [], [], []
      for i in range(start, end):
        first_pieces.append(len(centre))
        labels.append(label_index[sentence.tags[i]])
        centre.extend(words[i])
      centre = centre[:max_pieces]
      left = right = []
      if document_context:
        flat = document_pieces[sentence.document]
        begin = word_offsets[start]
        stop = begin + len(centre)
        n_left, n_right = _context_sizes(max_pieces - len(centre), begin,
                                         len(flat) - stop)
        left, right = flat[begin - n_left:begin], flat[stop:stop + n_right]
      ids = [cls_id] + left + centre + right + [sep_id]
      positions = [1 + len(left) + p for p in first_pieces]
      padding = [0] * (max_seq_length - len(ids))
      label_ids = [0] * max_seq_length
      label_mask = [0] * max_seq_length
      for position, label in zip(positions, labels):
        label_ids[position], label_mask[position] = label, 1
      features.append(InputFeatures(ids + padding, [1] * len(ids) + padding,
                                    [0] * max_seq_length, label_ids,
                                    label_mask))
      spans.append(Span(index, start, end, positions))
  return features, spans


def name_to_features(max_seq_length):
  """The record schema: ids and per-position labels and mask."""
  seq = tf.io.FixedLenFeature([max_seq_length], tf.int64)
  return {"input_ids": seq, "input_mask": seq, "segment_ids": seq,
          "label_ids": seq, "label_mask": seq}


def serialize(feature):
  return tf.train.Example(features=tf.train.Features(feature={
      name: tfrecord.int_feature(getattr(feature, name))
      for name in ("input_ids", "input_mask", "segment_ids", "label_ids",
                   "label_mask")})).SerializeToString(deterministic=True)


def write_features(features, path):
  """Writes features as records at path (atomically); returns their
  count."""
  with tfrecord_writer.RoundRobinWriter([path]) as writer:
    for feature in features:
      writer.write(serialize(feature))
  return len(features)


def word_predictions(sentences, spans, predicted):
  """Each word's predicted label id, from per-position predictions.

  Args:
    sentences: list of data.Sentence.
    spans: list of Span, from convert_sentences.
    predicted: int array [num_sequences, max_seq_length], the label argmax
      at every position, in the spans' order.

  Returns:
    list (per sentence) of lists (per word) of int.
  """
  words = [[None] * len(s.words) for s in sentences]
  for span, row in zip(spans, predicted):
    for word, position in zip(range(span.word_start, span.word_end),
                              span.positions):
      words[span.sentence_index][word] = int(row[position])
  return words
