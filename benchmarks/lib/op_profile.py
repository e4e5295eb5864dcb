"""Op time per step from a TF profiler trace (CPU): which op types (or op
names) a step's time goes to."""

import collections
import glob
import os
import re
import tempfile

import tensorflow as tf
from tensorflow.tsl.profiler.protobuf import xplane_pb2

# Events that hold the op events rather than run an op.
_ENCLOSING = ("Process", "Run", "ExecutorState::Process")


def op_times(step, steps, by_name=False):
  """dict op type (or, by_name, op name with layer_N for every layer's
  number) -> seconds per step, from a trace of `steps` calls."""
  for _ in range(3):
    float(step())
  logdir = tempfile.mkdtemp()
  tf.profiler.experimental.start(logdir)
  for _ in range(steps):
    float(step())
  tf.profiler.experimental.stop()
  space = xplane_pb2.XSpace()
  with open(glob.glob(os.path.join(logdir, "**", "*.xplane.pb"),
                      recursive=True)[0], "rb") as f:
    space.ParseFromString(f.read())
  totals = collections.Counter()
  for plane in space.planes:
    if plane.name != "/host:CPU":
      continue
    for line in plane.lines:
      for event in line.events:
        name = plane.event_metadata[event.metadata_id].name
        # Executor op events are "op_name:OpType"; the function and
        # executor events enclosing them are left out.
        if ":" not in name or name.startswith(("Iterator", "$", " ")):
          continue
        op_name, op_type = [part.strip() for part in name.rsplit(":", 1)]
        if op_type not in _ENCLOSING and not op_type.startswith(
            "__inference"):
          key = ("%s (%s)" % (re.sub(r"layer_\d+", "layer_N", op_name),
                              op_type) if by_name else op_type)
          totals[key] += event.duration_ps * 1e-12
  return {op: seconds / steps for op, seconds in totals.items()}


def top_ops(times, top):
  """The `top` ops of op_times' dict, slowest first: a list of (name, ms
  per step, percent of the step's op time)."""
  total = sum(times.values())
  return [(op, 1000 * seconds, 100 * seconds / total) for op, seconds in
          sorted(times.items(), key=lambda x: -x[1])[:top]]


def top_rows(times, top):
  """top_ops as a record's table rows: [name, ms (2 decimals), % (1)]."""
  return [[op, round(ms, 2), round(share, 1)]
          for op, ms, share in top_ops(times, top)]


def print_top(times, top, width, indent):
  """Prints top_ops: name (its last `width` characters), ms per step and
  share of the step's op time."""
  for op, ms, share in top_ops(times, top):
    print("%s%-*s %8.2f ms  %5.1f%%" % (indent, width, op[-width:], ms,
                                       share))
