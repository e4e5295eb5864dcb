"""benchmarks/lib/op_profile.py's timeline on hand-made op events, against
shares worked out by hand."""

from benchmarks.lib import op_profile

MS = 10**9  # picoseconds per millisecond


def event(start_ms, end_ms, op_type, thread):
  return (start_ms * MS, end_ms * MS, op_type, op_type.lower(), thread)


def test_timeline_shares_wall_time_between_ops():
  # Thread 0: a matmul, with an op run inline inside it (part of it),
  # then a Mul. Thread 1: an L2Loss beside the matmul, then the update
  # after a 1 ms gap. An event without duration counts for nothing.
  events = [event(0, 10, "_MklMatMul", 0), event(2, 3, "Cast", 0),
            event(10, 12, "Mul", 0), event(5, 8, "L2Loss", 1),
            event(13, 20, "FusedAdamWeightDecay", 1),
            event(4, 4, "Record", 1)]
  line = op_profile.timeline(events)
  assert line["wall"] * 1000 == 20
  # One op: 0-5 and 8-10 (the matmul), 10-12 (Mul), 13-20 (the update);
  # two: 5-8; none: 12-13.
  assert {k: round(v * 1000, 9) for k, v in line["running"].items()} == {
      0: 1, 1: 16, 2: 3}
  assert {k: round(v * 1000, 9) for k, v in line["alone"].items()} == {
      "_MklMatMul": 7, "Mul": 2, "FusedAdamWeightDecay": 7}
  assert round(line["tail"] * 1000, 9) == 10
  assert {k: round(v * 1000, 9) for k, v in line["tail_ops"].items()} == {
      "Mul": 2, "FusedAdamWeightDecay": 7}


def test_timeline_counts_model_garden_einsums_as_matmuls():
  events = [event(0, 6, "_MklEinsum", 0), event(0, 2, "_MklMatMul", 1),
            event(6, 9, "ResourceApplyAdam", 0)]
  line = op_profile.timeline(events)
  assert round(line["tail"] * 1000, 9) == 3
  assert {k: round(v * 1000, 9) for k, v in line["running"].items()} == {
      1: 7, 2: 2}
