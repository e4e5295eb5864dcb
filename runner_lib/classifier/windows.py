"""--long_text=windows: an example longer than max_seq_length as several
windows over text_a, each [CLS] A-window [SEP] B [SEP], whose logits the
model averages (modeling.BertClassifier).

Beyond the original, which truncates the pair (_truncate_seq_pair). The
rule, for one example of len_a WordPieces of text_a and len_b of text_b:

  room    = L - len_b, but at least min(len_a, L // 2), where L is
            max_seq_length - 3 for a pair, - 2 for a single text (or an
            empty text_b, a single text to the original too);
  text_b  keeps its first L - room tokens: whole where text_a keeps half
            the window, else cut at its end;
  windows start 0, stride, 2 * stride, ... over text_a, each up to room
            tokens long; the last is the first to reach text_a's end
            (features.doc_spans_for's rule in run_squad, but an empty
            text_a still has one window); the first max_windows are kept.

An example that fits is one window laid out as the original lays it out,
and so is one whose text_a is at most L // 2 long (the original then cuts
text_b alone, at its end, as here). The same rule runs as TensorFlow ops in
the serving module (serving/modules.py, ClassifierModule).
"""

import dataclasses

import tensorflow as tf

from runner_lib.core import errors
from runner_lib.core.inputs import packing
import tokenization

# Special tokens of a pair ([CLS] A [SEP] B [SEP]) and of a single text.
PAIR_SPECIALS = 3
SINGLE_SPECIALS = 2
# Windows per example unless --max_windows says otherwise.
DEFAULT_MAX_WINDOWS = 8


def default_stride(max_seq_length):
  """--window_stride's default: (max_seq_length - 3) // 2 (62 at 128, 254
  at 512), the largest a pair task allows (text_a's smallest room), about
  half a window for single texts and short text_b: each token but the
  first and last stride's is in two windows, one where it is not near an
  edge."""
  return max(1, (max_seq_length - PAIR_SPECIALS) // 2)


def smallest_room(max_seq_length, pair):
  """The fewest text_a tokens a window holds where text_a has several
  windows: (max_seq_length - 3) // 2 for a pair task, max_seq_length - 2
  for single texts."""
  if pair:
    return (max_seq_length - PAIR_SPECIALS) // 2
  return max_seq_length - SINGLE_SPECIALS


@dataclasses.dataclass(frozen=True)
class Windows:
  """How texts longer than a window are cut: stride (text_a tokens between
  the starts of consecutive windows) and max_windows (windows kept per
  example)."""

  stride: int
  max_windows: int


def check_windows(stride, max_windows, max_seq_length, pair):
  """Windows from the flags' values, checked.

  Args:
    stride: int or None (default_stride).
    max_windows: int.
    max_seq_length: int.
    pair: bool, whether the task has text_b.

  Returns:
    Windows.

  Raises:
    errors.InputError: naming the flag: a stride below 1 or above text_a's
      smallest room (windows would skip tokens), max_windows below 1, a
      max_seq_length that leaves text_a no room.
  """
  if stride is None:
    stride = default_stride(max_seq_length)
  room = smallest_room(max_seq_length, pair)
  if max_windows < 1:
    raise errors.InputError("--max_windows must be at least 1, got %d." %
                            max_windows)
  if stride < 1:
    raise errors.InputError("--window_stride must be at least 1, got %d." %
                            stride)
  if room < 1:
    raise errors.InputError(
        "--long_text=windows: --max_seq_length=%d leaves text_a no room "
        "beside the special tokens%s." %
        (max_seq_length, " and text_b" if pair else ""))
  if stride > room:
    raise errors.InputError(
        "--window_stride=%d is larger than the room text_a has in a window "
        "(%d tokens at --max_seq_length=%d%s): windows would skip text. "
        "Use --window_stride=%d or less, or a larger --max_seq_length." %
        (stride, room, max_seq_length,
         ", where text_b may take the other half" if pair else "", room))
  return Windows(stride, max_windows)


def window_spans(len_a, len_b, max_seq_length, windows):
  """Where an example's windows lie.

  Args:
    len_a: int, text_a's WordPieces.
    len_b: int, text_b's (0: none).
    max_seq_length: int.
    windows: Windows.

  Returns:
    (spans, keep_b, cut): spans a list of (start, length) in text_a, at
    most windows.max_windows; keep_b the int number of text_b's first
    tokens every window holds; cut a bool, whether max_windows dropped
    windows.
  """
  room_total = max_seq_length - (PAIR_SPECIALS if len_b else SINGLE_SPECIALS)
  room = max(room_total - len_b, min(len_a, room_total // 2))
  keep_b = min(len_b, room_total - room)
  # check_windows keeps the stride within any room of several windows.
  assert len_a <= room or windows.stride <= room, (len_a, room)
  count = 1 if len_a <= room else -(-(len_a - room) // windows.stride) + 1
  spans = [(i * windows.stride, min(room, len_a - i * windows.stride))
           for i in range(min(count, windows.max_windows))]
  return spans, keep_b, count > windows.max_windows


def window_layouts(tokens_a, tokens_b, max_seq_length, windows):
  """An example's windows as [CLS] A-window [SEP] B [SEP] layouts.

  Args:
    tokens_a: list of str WordPieces (or int ids).
    tokens_b: list like tokens_a, or None / empty.
    max_seq_length: int.
    windows: Windows.

  Returns:
    (layouts, cut): layouts a list of (tokens, segment_ids), each as
    packing.pair_layout gives (unpadded, at most max_seq_length); cut as
    window_spans.
  """
  tokens_b = list(tokens_b or [])
  spans, keep_b, cut = window_spans(len(tokens_a), len(tokens_b),
                                    max_seq_length, windows)
  layouts = [packing.pair_layout(tokens_a[start:start + length],
                                 tokens_b[:keep_b], max_seq_length)
             for start, length in spans]
  return layouts, cut


def graph_window_inputs(ids_a, ids_b, seq_length, windows, cls_id, sep_id):
  """window_layouts over a batch, as TensorFlow ops (for a SavedModel):
  every example's windows packed and padded, [B, W, T] as the records hold
  them (W the batch's most windows, not max_windows).

  Args:
    ids_a: int RaggedTensor [B, (A)], text_a's WordPiece ids.
    ids_b: int RaggedTensor [B, (B')], text_b's, or None (single texts).
    seq_length: int, max_seq_length.
    windows: Windows.
    cls_id: int, the [CLS] id.
    sep_id: int, the [SEP] id.

  Returns:
    (inputs, window_mask): inputs a dict of int32 [B, W, seq_length],
    input_ids, input_mask and segment_ids; window_mask int32 [B, W], 1 for
    an example's windows.
  """
  ids_a = tf.cast(ids_a, tf.int64)
  len_a = ids_a.row_lengths()
  len_b = (tf.zeros_like(len_a) if ids_b is None else
           tf.cast(ids_b, tf.int64).row_lengths())
  # window_spans, for every example at once.
  room_total = seq_length - tf.where(len_b > 0, tf.constant(
      PAIR_SPECIALS, tf.int64), SINGLE_SPECIALS)
  room = tf.maximum(room_total - len_b, tf.minimum(len_a, room_total // 2))
  keep_b = tf.minimum(len_b, room_total - room)
  stride = tf.constant(windows.stride, tf.int64)
  count = tf.where(len_a <= room, tf.ones_like(len_a),
                   (len_a - room + stride - 1) // stride + 1)
  count = tf.minimum(count, windows.max_windows)  # [B]
  example = tf.repeat(tf.range(tf.size(count, out_type=tf.int64)), count)
  start = tf.ragged.range(count).flat_values * stride  # [N]
  length = tf.minimum(tf.gather(room, example),
                      tf.gather(len_a, example) - start)
  segments = [tf.gather(ids_a.flat_values, tf.ragged.range(
      start, start + length) + tf.gather(ids_a.row_starts(),
                                         example)[:, tf.newaxis])]
  if ids_b is not None:
    ids_b = tf.cast(ids_b, tf.int64)
    segments.append(tf.gather(ids_b.flat_values, tf.ragged.range(
        tf.gather(keep_b, example)) + tf.gather(ids_b.row_starts(),
                                                example)[:, tf.newaxis]))
  # Each window fits: packing cuts nothing, and lays out and pads as the
  # runner's packing.pair_layout and pad_features.
  packed = tokenization.pack_inputs(segments, seq_length, cls_id,
                                    sep_id)  # [N, T]
  inputs = {name: tf.RaggedTensor.from_row_lengths(value, count).to_tensor()
            for name, value in packed.items()}  # [B, W, T]
  window_mask = tf.RaggedTensor.from_row_lengths(
      tf.ones_like(example, tf.int32), count).to_tensor()  # [B, W]
  return inputs, window_mask
