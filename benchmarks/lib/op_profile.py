"""Op time per step from a TF profiler trace (CPU): which op types (or op
names) a step's time goes to, and how its wall time is shared between
ops (timeline)."""

import collections
import glob
import os
import re
import tempfile

import tensorflow as tf
from tensorflow.tsl.profiler.protobuf import xplane_pb2

# Events that hold the op events rather than run an op.
_ENCLOSING = ("Process", "Run", "ExecutorState::Process")
# Op types that are matmuls (by part of the name): _MklMatMul,
# _MklBatchMatMulV2, _MklNativeFusedMatMul, Model Garden's _MklEinsum.
_MATMULS = ("MatMul", "Einsum")


def traced_steps(step, steps):
  """The op events of `steps` calls of step, each call traced alone.

  Returns:
    list (one per call) of lists of (start_ps, end_ps, op_type, op_name,
    thread) tuples: the executor's op events, the function and executor
    events enclosing them left out.
  """
  for _ in range(3):
    float(step())
  calls = []
  for _ in range(steps):
    logdir = tempfile.mkdtemp()
    tf.profiler.experimental.start(logdir)
    float(step())
    tf.profiler.experimental.stop()
    space = xplane_pb2.XSpace()
    with open(glob.glob(os.path.join(logdir, "**", "*.xplane.pb"),
                        recursive=True)[0], "rb") as f:
      space.ParseFromString(f.read())
    events = []
    for plane in space.planes:
      if plane.name != "/host:CPU":
        continue
      for thread, line in enumerate(plane.lines):
        for event in line.events:
          name = plane.event_metadata[event.metadata_id].name
          # Executor op events are "op_name:OpType".
          if ":" not in name or name.startswith(("Iterator", "$", " ")):
            continue
          op_name, op_type = [part.strip() for part in name.rsplit(":", 1)]
          if op_type not in _ENCLOSING and not op_type.startswith(
              "__inference"):
            start = line.timestamp_ns * 1000 + event.offset_ps
            events.append((start, start + event.duration_ps, op_type,
                           op_name, thread))
    calls.append(events)
  return calls


def op_times(step, steps, by_name=False):
  """dict op type (or, by_name, op name with layer_N for every layer's
  number) -> seconds per step, from traces of `steps` calls."""
  return times_of(traced_steps(step, steps), by_name)


def times_of(calls, by_name=False):
  """op_times' dict from traced_steps' events."""
  totals = collections.Counter()
  for events in calls:
    for start, end, op_type, op_name, _ in events:
      key = ("%s (%s)" % (re.sub(r"layer_\d+", "layer_N", op_name), op_type)
             if by_name else op_type)
      totals[key] += (end - start) * 1e-12
  return {op: seconds / len(calls) for op, seconds in totals.items()}


def timeline(events):
  """How one step's wall time is shared between its ops (one call's
  events from traced_steps).

  An op event nested in another on the same thread (an op run inline
  by another) counts as part of the outer one.

  Returns:
    dict: "wall" (seconds from the first op's start to the last op's
    end); "running" ({0, 1, 2 or more ops running at once: seconds});
    "alone" (Counter op type -> seconds it ran with no other op
    running); "tail" (seconds after the last matmul ended: the
    optimizer's update and what else cannot overlap the backward pass)
    and "tail_ops" (Counter op type -> its op time in the tail: ops
    running side by side each count).
  """
  by_thread = collections.defaultdict(list)
  for event in events:
    if event[1] > event[0]:
      by_thread[event[4]].append(event)
  outer = []
  for thread_events in by_thread.values():
    thread_events.sort(key=lambda e: (e[0], -e[1]))
    end = 0
    for event in thread_events:
      if event[0] >= end:
        outer.append(event)
      end = max(end, event[1])
  points = sorted([(e[0], 1, i) for i, e in enumerate(outer)] +
                  [(e[1], -1, i) for i, e in enumerate(outer)],
                  key=lambda p: (p[0], p[1]))
  first, last = points[0][0], points[-1][0]
  running = collections.Counter()
  alone = collections.Counter()
  active = set()
  previous = first
  for time_ps, change, index in points:
    if time_ps > previous:
      running[min(len(active), 2)] += (time_ps - previous) * 1e-12
      if len(active) == 1:
        alone[outer[next(iter(active))][2]] += (time_ps - previous) * 1e-12
    previous = time_ps
    if change > 0:
      active.add(index)
    else:
      active.discard(index)
  matmul_end = max([e[1] for e in outer if any(
      kind in e[2] for kind in _MATMULS)] or [first])
  tail_ops = collections.Counter()
  for start, end, op_type, _, _ in outer:
    if end > matmul_end:
      tail_ops[op_type] += (end - max(start, matmul_end)) * 1e-12
  return {"wall": (last - first) * 1e-12, "running": running,
          "alone": alone, "tail": (last - matmul_end) * 1e-12,
          "tail_ops": tail_ops}


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
