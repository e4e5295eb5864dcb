"""create_pretraining_data on a Dask cluster against the local workers.

Builds corpora of --megabytes and twice that from the real text under
../shared/data/corpus (the Gutenberg and WikiText-2 pre-training files cut
into documents, repeated, each repetition shuffled with its own seed), then
makes the same sharded records three ways: the local workers
(--num_workers=2) and Dask clusters of 1 and 2 workers (a `dask scheduler`
and `dask worker`s as separate processes on this machine, started fresh for
each run, one thread each). Prints and records wall time, MB/s per worker,
peak RSS per worker (sampled every 0.1 s), whether the records are
byte-identical to the local run's, and the ratios the issue sets targets
for; then a projection from the measured per-core rate.

  .venv/bin/python benchmarks/speed/bench_create_pretraining_data_dask.py \\
      [--megabytes=8] [--dupe_factor=5] [--norecord]
"""

import filecmp
import glob
import os
import random
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

import psutil

REPO = os.path.abspath(os.path.join(__file__, "../../.."))
sys.path.insert(0, REPO)

from benchmarks.lib import results  # pylint: disable=g-import-not-at-top

DATA = os.path.join(os.path.dirname(REPO), "shared", "data")
SOURCES = [os.path.join(DATA, "corpus", name) for name in
           ("gutenberg_pretrain.txt", "wikitext2_test_pretrain.txt")]
# BooksCorpus + English Wikipedia as the paper used them (3.3B words).
PROJECTED_MB = 16_000


def build_corpus(path, megabytes):
  """Documents of SOURCES, repeated, each pass shuffled (seed = pass)."""
  documents = []
  for source in SOURCES:
    with open(source, encoding="utf-8") as f:
      documents += [d.strip("\n") for d in f.read().split("\n\n")
                    if d.strip()]
  size, repetition = 0, 0
  with open(path, "w", encoding="utf-8") as out:
    while size < megabytes * 1e6:
      order = list(documents)
      random.Random(repetition).shuffle(order)
      for document in order:
        text = document + "\n\n"
        out.write(text)
        size += len(text.encode("utf-8"))
      repetition += 1
  return size / 1e6


def free_port():
  with socket.socket() as s:
    s.bind(("127.0.0.1", 0))
    return s.getsockname()[1]


def start_cluster(num_workers, logs):
  """(address, processes): a scheduler and workers, each its own group."""
  address = "tcp://127.0.0.1:%d" % free_port()
  env = dict(os.environ, PYTHONPATH=REPO)
  dask = os.path.join(os.path.dirname(sys.executable), "dask")
  commands = [[dask, "scheduler", "--host", "127.0.0.1", "--port",
               address.rsplit(":", 1)[1], "--no-dashboard"]]
  commands += [[dask, "worker", address, "--nthreads", "1",
                "--no-dashboard"]] * num_workers
  processes = []
  for i, command in enumerate(commands):
    with open(os.path.join(logs, "cluster%d.log" % i), "w") as log:
      processes.append(subprocess.Popen(
          command, env=env, stdout=log, stderr=subprocess.STDOUT,
          start_new_session=True))
    if i == 0:
      time.sleep(2)
  import distributed  # pylint: disable=g-import-not-at-top
  with distributed.Client(address, timeout=60,
                          set_as_default=False) as client:
    client.wait_for_workers(num_workers, timeout=120)
  return address, processes


def stop_cluster(processes):
  for process in processes:
    os.killpg(process.pid, signal.SIGKILL)
  for process in processes:
    process.wait(timeout=30)


def measure(command, worker_roots):
  """Runs command; returns (seconds, peak RSS per worker in MB).

  worker_roots: function () -> list of psutil.Process whose trees are the
  workers (their RSS summed, then divided by the number of roots).
  """
  start = time.perf_counter()
  process = subprocess.Popen(command, stdout=subprocess.DEVNULL,
                             stderr=subprocess.PIPE, cwd=REPO)
  peak = 0
  while process.poll() is None:
    try:
      roots = worker_roots(process)
      rss = sum(p.memory_info().rss for root in roots
                for p in [root] + root.children(recursive=True))
      peak = max(peak, rss / max(1, len(roots)))
    except psutil.Error:
      pass
    time.sleep(0.1)
  seconds = time.perf_counter() - start
  stderr = process.stderr.read().decode()
  if process.returncode:
    sys.exit("failed: %s\n%s" % (" ".join(command), stderr[-3000:]))
  return seconds, peak / 2**20


def same_records(a, b):
  files_a, files_b = sorted(glob.glob(a + "-*")), sorted(glob.glob(b + "-*"))
  return len(files_a) == len(files_b) > 0 and all(
      filecmp.cmp(x, y, shallow=False) for x, y in zip(files_a, files_b))


def main():
  megabytes, dupe_factor = 8.0, 5
  for arg in sys.argv[1:]:
    if arg.startswith("--megabytes="):
      megabytes = float(arg.split("=", 1)[1])
    if arg.startswith("--dupe_factor="):
      dupe_factor = int(arg.split("=", 1)[1])
  record = results.record_wanted(sys.argv[1:])
  flags = ["--vocab_file=%s" % os.path.join(DATA, "vocab",
                                             "uncased_vocab.txt"),
           "--max_seq_length=128", "--max_predictions_per_seq=20",
           "--dupe_factor=%d" % dupe_factor, "--random_seed=12345",
           # Shards of 1 MB, not the default 4: tens of shards in corpora
           # of tens of MB, so that the last ones leave no worker idle for
           # long (a corpus of GBs has hundreds at the default).
           "--shard_bytes=1000000"]
  script = [sys.executable, os.path.join(REPO, "create_pretraining_data.py")]
  rows, runs = [], {}
  with tempfile.TemporaryDirectory() as tmp:
    corpora = {scale: build_corpus(os.path.join(tmp, "x%d.txt" % scale),
                                   megabytes * scale) for scale in (1, 2)}
    print("dupe_factor=%d, max_seq_length=128, %d CPUs" %
          (dupe_factor, os.cpu_count()))
    for scale in (1, 2):
      corpus = os.path.join(tmp, "x%d.txt" % scale)
      for name, workers in (("local workers", 2), ("Dask", 1), ("Dask", 2)):
        output = os.path.join(tmp, "%s-%d-%d" % (name[0], workers, scale),
                              "examples")
        command = script + ["--input_file=%s" % corpus,
                            "--output_file=%s" % output] + flags
        if name == "Dask":
          address, processes = start_cluster(workers, tmp)
          roots = [psutil.Process(p.pid) for p in processes[1:]]
          try:
            seconds, rss = measure(
                command + ["--dask_scheduler=%s" % address],
                lambda _, roots=roots: roots)
          finally:
            stop_cluster(processes)
        else:
          seconds, rss = measure(command + ["--num_workers=%d" % workers],
                                 lambda p: psutil.Process(p.pid).children())
        reference = os.path.join(tmp, "l-2-%d" % scale, "examples")
        identical = same_records(reference, output)
        label = "%s, %d worker%s" % (name, workers, "s" * (workers > 1))
        runs[name, workers, scale] = seconds, rss
        rate = corpora[scale] / seconds / workers
        print("%-20s %6.1f MB  %6.1f s  %5.2f MB/s per worker  peak RSS "
              "per worker %5.0f MB  identical %s" %
              (label, corpora[scale], seconds, rate, rss, identical),
              flush=True)
        rows.append([label, round(corpora[scale], 1), round(seconds, 1),
                     round(rate, 2), round(rss), "yes" if identical else
                     "NO"])
      for scale_dir in glob.glob(os.path.join(tmp, "*-%d" % scale)):
        shutil.rmtree(scale_dir)
  targets = []
  for scale in (1, 2):
    pool, dask2, dask1 = (runs["local workers", 2, scale][0],
                          runs["Dask", 2, scale][0], runs["Dask", 1, scale][0])
    targets.append(["Dask overhead vs the local workers, 2 workers, "
                    "x%d" % scale, "<= 10%",
                    "%+.1f%%" % (100 * (dask2 / pool - 1))])
    targets.append(["Dask 2 workers vs 1, throughput, x%d" % scale, ">= 1.8x",
                    "%.2fx" % (dask1 / dask2)])
  for name, workers in (("local workers", 2), ("Dask", 1), ("Dask", 2)):
    targets.append(["peak RSS per worker x2 vs x1, %s, %d" % (name, workers),
                    "<= 1.2x", "%.2fx" % (runs[name, workers, 2][1] /
                                          runs[name, workers, 1][1])])
  print("\n".join("%s: target %s, measured %s" % tuple(t) for t in targets))
  per_core = corpora[2] / runs["Dask", 2, 2][0] / 2
  projection = [[cores, round(PROJECTED_MB / (per_core * cores) / 3600, 2)]
                for cores in (64, 512)]
  for cores, hours in projection:
    print("projection: %d GB at dupe_factor=%d on %d cores: %.2f h" %
          (PROJECTED_MB // 1000, dupe_factor, cores, hours))
  if record:
    results.record(
        "bench_create_pretraining_data_dask",
        [results.table("Runs (dupe_factor=%d, max_seq_length=128; corpora: "
                       "the real documents repeated, each pass shuffled "
                       "with its own seed)" % dupe_factor,
                       ["run", "corpus MB", "seconds", "MB/s per worker",
                        "peak RSS per worker MB",
                        "records identical to the local workers'"], rows),
         results.table("Targets", ["what", "target", "measured"], targets),
         results.table("Projection from the measured rate per core (Dask, "
                       "2 workers, x2), not a run: %d GB (BooksCorpus + "
                       "Wikipedia) at dupe_factor=%d" %
                       (PROJECTED_MB // 1000, dupe_factor),
                       ["cores", "hours"], projection)],
        {"megabytes": megabytes, "dupe_factor": dupe_factor},
        headline={"create_pretraining_data, Dask 2 workers / local 2 "
                  "workers, time": round(runs["Dask", 2, 2][0] /
                                         runs["local workers", 2, 2][0], 3)})


if __name__ == "__main__":
  main()
