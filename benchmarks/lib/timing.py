"""Side-by-side timing on a shared, noisy machine: runs alternate, medians
are compared."""

import statistics
import time

import tensorflow as tf


def alternated_medians(runs, repeats, warmup=2):
  """Median seconds per call of each function, calls alternated.

  Args:
    runs: dict name -> function of no arguments that blocks until its work
      is done (e.g. ends with .numpy() or float()).
    repeats: int, timed calls of each.
    warmup: int, untimed calls of each first (tracing, caches).

  Returns:
    dict name -> median seconds.
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
  return {name: statistics.median(t) for name, t in times.items()}


def matmul_flops(dtype, size=2048, repeats=20):
  """FLOP/s of a size x size matmul in dtype: the practical peak of the
  machine's matrix units for that type, median of repeats calls."""
  a = tf.random.stateless_normal([size, size], [1, 2], dtype=dtype)
  b = tf.random.stateless_normal([size, size], [3, 4], dtype=dtype)
  matmul = tf.function(lambda: tf.reduce_sum(tf.cast(
      tf.matmul(a, b)[:1, :1], tf.float32)))
  seconds = alternated_medians({"matmul": lambda: float(matmul())},
                               repeats)["matmul"]
  return 2.0 * size ** 3 / seconds
