"""Progress lines for long runs: how much is done, how fast, and when it
will end, logged every few seconds."""

import time

from absl import logging

# Seconds between progress lines.
INTERVAL_SECONDS = 5.0


def format_duration(seconds):
  """H:MM:SS of a number of seconds."""
  seconds = int(round(seconds))
  return "%d:%02d:%02d" % (seconds // 3600, seconds // 60 % 60, seconds % 60)


class Progress(object):
  """Logs "Tokenizing: 12.3 of 21.6 MB (57%), 3.10 MB/s, ETA 0:00:03;
  1234 documents" at most every interval seconds.

  Args:
    what: str, the phase ("Tokenizing").
    total: float or None, the work in units (None: no share or ETA).
    unit: str.
    interval: float, seconds between lines.
    clock: function () -> seconds (time.monotonic; tests pass their own).
  """

  def __init__(self, what, total=None, unit="MB", interval=INTERVAL_SECONDS,
               clock=time.monotonic):
    self.what = what
    self.total = total
    self.unit = unit
    self.interval = interval
    self.clock = clock
    self.start = self.last = clock()

  def update(self, done, **counts):
    """Notes that `done` units are done (and counts of other things, by
    name); logs a line if interval seconds passed since the last.

    Returns:
      the line logged, or None.
    """
    now = self.clock()
    if now - self.last < self.interval:
      return None
    self.last = now
    line = self.line(done, now - self.start, counts)
    logging.info(line)
    return line

  def line(self, done, elapsed, counts):
    """The progress line for `done` units after `elapsed` seconds."""
    rate = done / max(elapsed, 1e-9)
    if self.total:
      text = "%s: %.1f of %.1f %s (%.0f%%), %.2f %s/s" % (
          self.what, done, self.total, self.unit, 100.0 * done / self.total,
          rate, self.unit)
      if rate > 0:
        text += ", ETA %s" % format_duration(
            max(self.total - done, 0.0) / rate)
    else:
      text = "%s: %.1f %s, %.2f %s/s" % (self.what, done, self.unit, rate,
                                         self.unit)
    if counts:
      text += "; " + ", ".join("%d %s" % (value, name.replace("_", " "))
                               for name, value in counts.items())
    return text
