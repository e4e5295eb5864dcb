"""tf.train.Example bytes without TensorFlow.

Worker processes that only serialize records should not pay for importing
TensorFlow (seconds and about 1 GB each). The Example proto is small:

  Example  { Features features = 1; }
  Features { map<string, Feature> feature = 1; }
  Feature  { oneof { BytesList = 1; FloatList = 2; Int64List = 3; } }
  FloatList / Int64List { repeated float / int64 value = 1 [packed]; }

Map entries are written sorted by key, as TensorFlow's deterministic
serialization writes them, so the bytes equal
`example.SerializeToString(deterministic=True)` (tests/test_example_proto.py
checks this against TensorFlow).
"""

import struct

_FLOAT = struct.Struct("<f")


def varint(value):
  """Protobuf base-128 varint of an int64 (negatives as 10-byte two's
  complement, as protobuf writes them)."""
  value &= (1 << 64) - 1
  out = bytearray()
  while value > 0x7f:
    out.append(value & 0x7f | 0x80)
    value >>= 7
  out.append(value)
  return bytes(out)


# Varints of lengths and small values, looked up rather than computed.
_SMALL = [varint(i) for i in range(1 << 14)]


def _field(tag, payload):
  """A length-delimited field: tag byte, length, payload."""
  n = len(payload)
  return b"".join((tag, _SMALL[n] if n < 16384 else varint(n), payload))


class VarintTable(object):
  """Packed int64 payloads from a lookup table of small non-negative ints."""

  def __init__(self, size):
    """Args: size: int, values in [0, size) come from the table."""
    self._table = [varint(i) for i in range(size)]

  def encode(self, values):
    """Packed payload of values (ints); any int64 outside the table works
    too, more slowly."""
    table = self._table
    try:
      return b"".join([table[v] if v >= 0 else varint(v) for v in values])
    except IndexError:
      return b"".join(map(varint, values))


def int64_feature(payload):
  """Feature bytes of an Int64List from its packed payload."""
  return _field(b"\x1a", _field(b"\x0a", payload) if payload else b"")


def float_feature(payload):
  """Feature bytes of a FloatList from its packed payload (4 bytes each)."""
  return _field(b"\x12", _field(b"\x0a", payload) if payload else b"")


def float_payload(values):
  """Packed little-endian float32 payload of values."""
  return b"".join(_FLOAT.pack(v) for v in values)


def example(features):
  """Serialized tf.train.Example.

  Args:
    features: dict name (str) -> Feature bytes from int64_feature or
      float_feature.

  Returns:
    bytes, equal to TensorFlow's deterministic serialization.
  """
  entries = b"".join(
      _field(b"\x0a", _field(b"\x0a", name.encode("utf-8")) +
             _field(b"\x12", features[name]))
      for name in sorted(features))
  return _field(b"\x0a", entries)
