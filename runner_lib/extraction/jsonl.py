"""extract_features' output: the original's JSON lines.

The original writes json.dumps of round(float(x), 6) for every value, i.e.
Python's shortest repr of the float nearest to a 6-decimal number. With
BERT-Base and 4 layers that is 3072 numbers per token, and formatting them
one by one in Python took longer than running the model. Here whole
[T, H] arrays are rounded and written at once (numpy), to the same bytes.
"""

import json

import numpy as np

# Largest magnitude the array formatter writes (its micros fit int64, and
# repr stays positional); anything larger, NaN or infinite goes through
# json.dumps. No BERT layer outputs such values in practice.
_MAX_FAST = 1e12
_DIGITS = np.frombuffer(b"0123456789", np.uint8)


def _format_rows(output):
  """", ".join(repr(round(float(x), 6)) ...) of each row of a float32
  [T, H] array: json.dumps' text of a list of those floats.

  round()'s floats exactly: a float32 has a 24-bit significand and
  10**6 = 2**6 * 15625 a 14-bit odd part, so x * 1e6 is exact in float64,
  and np.rint rounds it half to even, as round() rounds the exact decimal:
  the result k is round()'s number of millionths (its sign too, -0.0 for
  a small negative x). round() returns the float nearest k / 10**6, and
  repr writes that as k's digits with the point 6 places in and trailing
  zeros dropped (one decimal at least), except below 1e-4, where it
  switches to exponent form ("1.2e-05", "5e-06"). Each number is laid out
  in a fixed field of characters, those repr would not write masked out,
  and each row's kept characters joined.

  Returns:
    list of T str.
  """
  if output.dtype != np.float32:
    raise TypeError("exact for float32 only, got %s" % output.dtype)
  scaled = np.rint(output.astype(np.float64) * 1e6)
  if not np.all(np.abs(scaled) < _MAX_FAST * 1e6):  # also False for NaN
    return [", ".join(json.dumps(x) for x in row)
            for row in (scaled / 1e6).tolist()]
  micros = np.abs(scaled).astype(np.int64)
  whole, fraction = np.divmod(micros, 10**6)
  # Field of one number: sign, integer digits (as many as the largest
  # has), ".", 6 decimals, ", ".
  int_digits = len(str(int(whole.max()))) if whole.size else 1
  point = 1 + int_digits
  chars = np.zeros(output.shape + (point + 9,), np.uint8)
  keep = np.zeros(output.shape + (point + 9,), bool)
  chars[..., 0] = ord("-")
  keep[..., 0] = np.signbit(scaled)
  # Integer digits right-aligned before the point, "0" at least.
  for place in range(int_digits):
    chars[..., point - 1 - place] = _DIGITS[whole // 10**place % 10]
    keep[..., point - 1 - place] = (whole >= 10**place) | (place == 0)
  chars[..., point] = ord(".")
  keep[..., point] = True
  # Decimals up to the last nonzero one, "0" at least.
  decimals = [fraction // 10**(5 - place) % 10 for place in range(6)]
  shown = np.ones(output.shape, np.int64)
  for place, digit in enumerate(decimals):
    shown = np.where(digit != 0, place + 1, shown)
  for place, digit in enumerate(decimals):
    chars[..., point + 1 + place] = _DIGITS[digit]
    keep[..., point + 1 + place] = shown > place
  tiny = (micros > 0) & (micros < 100)
  if tiny.any():
    _exponent_form(chars, keep, micros, tiny, point)
  chars[..., -2:] = np.frombuffer(b", ", np.uint8)
  keep[..., -2:] = True
  keep[..., -1, -2:] = False  # no separator after a row's last number
  rows = chars.reshape(output.shape[0], -1)
  masks = keep.reshape(output.shape[0], -1)
  return [row[mask].tobytes().decode("ascii")
          for row, mask in zip(rows, masks)]


def _exponent_form(chars, keep, micros, tiny, point):
  """Rewrites the fields where tiny (0 < |x| < 1e-4) as repr writes them:
  "de-06" for 1 to 9 micros, "d.de-05" for 11 to 99, "de-05" for 10, 20,
  ... 90, from column point - 1 (the integer's last digit) on. The sign
  stays in column 0; the rest of the field is dropped."""
  two_digits = micros >= 10
  first = np.where(two_digits, micros // 10, micros) % 10  # tiny: < 10
  second = micros % 10
  with_point = two_digits & (second != 0)

  def constant(char):
    return np.full(micros.shape, ord(char), np.uint8)

  # (character, shown) in the field's columns from point - 1 on.
  layout = [(_DIGITS[first], True), (constant("."), with_point),
            (_DIGITS[second], with_point), (constant("e"), True),
            (constant("-"), True), (constant("0"), True),
            (np.where(two_digits, ord("5"), ord("6")).astype(np.uint8),
             True)]
  keep[..., 1:-2] &= ~tiny[..., None]
  for offset, (char, shown) in enumerate(layout):
    column = point - 1 + offset
    chars[..., column] = np.where(tiny, char, chars[..., column])
    keep[..., column] |= tiny & shown


def to_json_line(feature, layer_indexes, layer_outputs):
  """Formats one example as the original's JSON line:
  {"linex_index": i, "features": [{"token": t, "layers": [{"index": j,
  "values": [...]}, ...]}, ...]}, with json.dumps' separators and escapes.

  Args:
    feature: InputFeatures.
    layer_indexes: list of int, as given in --layers.
    layer_outputs: list (per layer index) of float32 [T, H] arrays, T at
      least the number of tokens.

  Returns:
    str, one JSON object and a newline.
  """
  num_tokens = len(feature.tokens)
  rows = [_format_rows(output[:num_tokens]) for output in layer_outputs]
  tokens = []
  for i, token in enumerate(feature.tokens):
    layers = ", ".join('{"index": %d, "values": [%s]}' % (index, values[i])
                       for index, values in zip(layer_indexes, rows))
    tokens.append('{"token": %s, "layers": [%s]}' % (json.dumps(token),
                                                     layers))
  return '{"linex_index": %d, "features": [%s]}\n' % (feature.unique_id,
                                                      ", ".join(tokens))
