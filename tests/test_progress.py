"""core/cli/progress.py: progress lines every interval, with share and ETA."""

from runner_lib.core.cli import progress


class Clock(object):
  def __init__(self):
    self.now = 100.0

  def __call__(self):
    return self.now


def test_a_line_every_interval_with_rate_and_eta():
  clock = Clock()
  bar = progress.Progress("Tokenizing", 20.0, interval=5.0, clock=clock)
  clock.now += 4.0
  assert bar.update(3.0) is None  # too soon
  clock.now += 1.0
  # 5 MB in 5 s: 1 MB/s, 15 MB to go.
  assert bar.update(5.0, documents=12) == (
      "Tokenizing: 5.0 of 20.0 MB (25%), 1.00 MB/s, ETA 0:00:15; "
      "12 documents")
  clock.now += 2.0
  assert bar.update(6.0) is None
  clock.now += 3.0
  assert bar.update(8.0, distinct_words=3) == (
      "Tokenizing: 8.0 of 20.0 MB (40%), 0.80 MB/s, ETA 0:00:15; "
      "3 distinct words")


def test_without_a_total_no_share_or_eta():
  clock = Clock()
  bar = progress.Progress("Counting", None, unit="documents", interval=1.0,
                          clock=clock)
  clock.now += 2.0
  assert bar.update(10) == "Counting: 10.0 documents, 5.00 documents/s"


def test_durations():
  assert progress.format_duration(0) == "0:00:00"
  assert progress.format_duration(3725.4) == "1:02:05"
