"""Side-by-side timing on a shared, noisy machine: runs alternate, medians
are compared."""

import statistics
import time

import tensorflow as tf


def alternated_times(runs, repeats, warmup=2):
  """Seconds of each call of each function, calls alternated.

  Args:
    runs: dict name -> function of no arguments that blocks until its work
      is done (e.g. ends with .numpy() or float()).
    repeats: int, timed calls of each.
    warmup: int, untimed calls of each first (tracing, caches).

  Returns:
    dict name -> list of repeats seconds; entry i of each list is from
    round i (the functions called one after another).
  """
  for fn in runs.values():
    for _ in range(warmup):
      fn()
  times = {name: [] for name in runs}
  for _ in range(repeats):
    for name, fn in runs.items():
      start = time.perf_counter()
      fn()
      times[name].append(time.perf_counter() - start)
  return times


def alternated_medians(runs, repeats, warmup=2):
  """Median seconds per call of each function, calls alternated
  (alternated_times' arguments).

  Returns:
    dict name -> median seconds.
  """
  return {name: statistics.median(t) for name, t in
          alternated_times(runs, repeats, warmup).items()}


def paired_ratio(times, name, base):
  """The median over rounds of times[name][i] / times[base][i]: a ratio
  of two alternated functions that a slow drift of the machine's speed
  (which moves both calls of a round alike) leaves alone."""
  return statistics.median(a / b for a, b in zip(times[name], times[base]))


def matmul_run(dtype, size=2048, count=8):
  """A run of count size x size matmuls in dtype, for alternated_medians
  beside the steps it is the peak of (the same noise hits both).

  Returns:
    (function of no arguments that blocks until the matmuls are done,
    FLOPs it computes).
  """
  a = tf.random.stateless_normal([size, size], [1, 2], dtype=dtype)
  # A different b for each: identical matmuls would be merged into one.
  bs = [tf.random.stateless_normal([size, size], [3, i], dtype=dtype)
        for i in range(count)]

  @tf.function
  def matmuls():
    total = tf.zeros([], tf.float32)
    for b in bs:
      total += tf.cast(tf.matmul(a, b)[0, 0], tf.float32)
    return total

  return (lambda: float(matmuls())), 2.0 * count * size ** 3

