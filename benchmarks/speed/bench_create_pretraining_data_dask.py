"""create_pretraining_data on a Dask cluster against the local workers.

Builds corpora of --megabytes and twice that from the real text under
../shared/data/corpus (the Gutenberg and WikiText-2 pre-training files cut
into documents, repeated, each repetition shuffled with its own seed), then
makes the same sharded records four ways: the local workers
(--num_workers=2: a Dask LocalCluster the script starts; records from
before runner_lib/core/workers.py was removed measured that process
pool), Dask clusters of 2 workers with Dask's defaults and with
the settings docs/pre-training.md gives (its periodic work made rare), and
one of 1 worker (a `dask scheduler` and `dask worker`s as separate
processes on this machine, started fresh for each run, one thread each).
The 2-worker ways alternate, --repeats times each; the 1-worker cluster
runs once. --ways picks among them (local, dask, quiet, one: all by
default), so that a long run at GBs can spend its hours on the ways in
question. Prints and records wall time,
MB/s per worker, peak RSS per worker (sampled every 0.1 s), whether the
records are byte-identical to the first local run's, and the ratios the
issue sets targets for (from medians).

First, on a corpus of --calibration_megabytes (at least one pass over the
sources, 7.2 MB), ours (2 local workers) and
tf-models-official's port of the original (one process) run at
--dupe_factor and at 10 (or 5): their rates give the projection's other
dupe factor and the port's anchor. The projection to BooksCorpus +
Wikipedia is labelled as such, not a run.

  .venv/bin/python benchmarks/speed/bench_create_pretraining_data_dask.py \\
      [--megabytes=8] [--dupe_factor=5] [--repeats=1] \\
      [--calibration_megabytes=4] [--ways=local,dask,quiet,one] \\
      [--norecord]
"""

import filecmp
import glob
import os
import random
import shutil
import signal
import socket
import statistics
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

# The settings docs/pre-training.md gives a cluster's processes: Dask's
# own periodic work (profiler, event-loop ticks, monitors) made rare, from
# the file the local cluster loads too.
QUIET = {"DASK_CONFIG": os.path.join(REPO, "runner_lib", "pretraining",
                                     "dask.yaml")}
DASK, DASK_QUIET = "Dask", "Dask, docs' settings"
LOCAL = "local workers"
# --ways: (name, workers) of each.
WAYS = {"local": (LOCAL, 2), "dask": (DASK, 2), "quiet": (DASK_QUIET, 2),
        "one": (DASK, 1)}


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


def start_cluster(num_workers, logs, settings=None):
  """(address, processes): a scheduler and workers, each its own group.

  settings: None, or environment variables of Dask's configuration.
  """
  address = "tcp://127.0.0.1:%d" % free_port()
  env = dict(os.environ, PYTHONPATH=REPO, **(settings or {}))
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
  # stderr goes to a file: a pipe read only at the end could fill.
  stderr_file = tempfile.TemporaryFile()
  start = time.perf_counter()
  process = subprocess.Popen(command, stdout=subprocess.DEVNULL,
                             stderr=stderr_file, cwd=REPO)
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
  stderr_file.seek(0)
  stderr = stderr_file.read().decode(errors="replace")
  stderr_file.close()
  if process.returncode:
    sys.exit("failed: %s\n%s" % (" ".join(command), stderr[-3000:]))
  return seconds, peak / 2**20


def local_workers(process):
  """The worker processes of the LocalCluster process started: those
  spawned by multiprocessing (not its resource tracker)."""
  return [child for child in psutil.Process(process.pid).children()
          if "spawn_main" in " ".join(child.cmdline())]


def same_records(a, b):
  files_a, files_b = sorted(glob.glob(a + "-*")), sorted(glob.glob(b + "-*"))
  return len(files_a) == len(files_b) > 0 and all(
      filecmp.cmp(x, y, shallow=False) for x, y in zip(files_a, files_b))


def parse_flags(argv):
  """{name: value} of the flags in argv (--record and --norecord aside)."""
  values = {"--megabytes": 8.0, "--dupe_factor": 5, "--repeats": 1,
            "--calibration_megabytes": 4.0, "--ways": ",".join(WAYS)}
  for arg in argv:
    name, _, value = arg.partition("=")
    if name in values:
      values[name] = type(values[name])(value)
    elif name not in ("--record", "--norecord"):
      sys.exit("%s is not a flag of this benchmark (%s)." %
               (arg, ", ".join(sorted(values))))
  ways = values["--ways"].split(",")
  if not ways or any(way not in WAYS for way in ways) or not (
      "local" in ways and (WAYS.keys() - {"local", "one"}) & set(ways)):
    sys.exit("--ways=%s: a comma-separated list of %s, with local and at "
             "least one of dask, quiet." % (values["--ways"], ", ".join(WAYS)))
  values["--ways"] = ways
  return {name[2:]: value for name, value in values.items()}


def run_flags(dupe_factor):
  return ["--vocab_file=%s" % os.path.join(DATA, "vocab",
                                            "uncased_vocab.txt"),
          "--max_seq_length=128", "--max_predictions_per_seq=20",
          "--dupe_factor=%d" % dupe_factor, "--random_seed=12345"]


def run_here(command, output):
  """Runs command (ours with --num_workers, or the port) writing output;
  returns (seconds, peak RSS of its process tree in MB); deletes the
  output."""
  seconds, rss = measure(command + ["--output_file=%s" % output],
                         lambda p: [psutil.Process(p.pid)])
  for written in glob.glob(output + "*"):
    os.remove(written)
  return seconds, rss


def calibrate(tmp, megabytes, dupe_factors):
  """Rates per core in MB/s on a small corpus, by dupe_factor: ours (two
  local workers) and tf-models-official's port of the original (one
  process); (corpus MB, {(who, dupe_factor): MB/s per core})."""
  corpus = os.path.join(tmp, "calibration.txt")
  size = build_corpus(corpus, megabytes)
  rates = {}
  for dupe_factor in dupe_factors:
    flags = ["--input_file=%s" % corpus] + run_flags(dupe_factor)
    ours, _ = run_here(
        [sys.executable, os.path.join(REPO, "create_pretraining_data.py"),
         "--num_workers=2"] + flags, os.path.join(tmp, "calibration-ours"))
    port, port_rss = run_here(
        [sys.executable, "-m", "official.nlp.data.create_pretraining_data",
         "--do_lower_case=True"] + flags,
        os.path.join(tmp, "calibration-port"))
    rates["ours", dupe_factor] = size / ours / 2
    rates["port", dupe_factor] = size / port
    print("calibration, %.1f MB, dupe_factor=%d: ours (2 local workers) "
          "%.1f s, the port (1 process) %.1f s, peak RSS %.0f MB" %
          (size, dupe_factor, ours, port, port_rss), flush=True)
  return size, rates


def main():
  settings = parse_flags(sys.argv[1:])
  megabytes, dupe_factor = settings["megabytes"], settings["dupe_factor"]
  repeats, ways = settings["repeats"], settings["ways"]
  record = results.record_wanted(sys.argv[1:])
  flags = run_flags(dupe_factor) + [
      # Shards of 1 MB, not the default 4: tens of shards in corpora of
      # tens of MB, so that the last ones leave no worker idle for long (a
      # corpus of GBs has hundreds at the default).
      "--shard_bytes=1000000"]
  script = [sys.executable, os.path.join(REPO, "create_pretraining_data.py")]
  # The ways of running two workers alternate, so that a slow spell of the
  # machine falls on each; one Dask worker (twice as long) runs once.
  plan = [WAYS[w] for w in WAYS if w in ways and w != "one"] * repeats
  if "one" in ways:
    plan.append(WAYS["one"])
  # The Dask way of the projection and the scaling target: the defaults
  # where they ran.
  dask_way = DASK if "dask" in ways else DASK_QUIET
  rows, runs = [], {}
  with tempfile.TemporaryDirectory() as tmp:
    other_dupe = 10 if dupe_factor != 10 else 5
    calibration_mb, rates = calibrate(
        tmp, settings["calibration_megabytes"], (dupe_factor, other_dupe))
    corpora = {scale: build_corpus(os.path.join(tmp, "x%d.txt" % scale),
                                   megabytes * scale) for scale in (1, 2)}
    print("dupe_factor=%d, max_seq_length=128, %d CPUs" %
          (dupe_factor, os.cpu_count()))
    for scale in (1, 2):
      corpus = os.path.join(tmp, "x%d.txt" % scale)
      reference = None
      for i, (name, workers) in enumerate(plan):
        output = os.path.join(tmp, "run%d-x%d" % (i, scale), "examples")
        command = script + ["--input_file=%s" % corpus,
                            "--output_file=%s" % output] + flags
        if name != LOCAL:
          address, processes = start_cluster(
              workers, tmp, QUIET if name == DASK_QUIET else None)
          roots = [psutil.Process(p.pid) for p in processes[1:]]
          try:
            seconds, rss = measure(
                command + ["--dask_scheduler=%s" % address],
                lambda _, roots=roots: roots)
          finally:
            stop_cluster(processes)
        else:
          seconds, rss = measure(command + ["--num_workers=%d" % workers],
                                 local_workers)
        if reference is None:
          reference, identical = output, "reference"
        else:
          identical = "yes" if same_records(reference, output) else "NO"
          shutil.rmtree(os.path.dirname(output))
        label = "%s, %d worker%s" % (name, workers, "s" * (workers > 1))
        runs.setdefault((name, workers, scale), []).append((seconds, rss))
        rate = corpora[scale] / seconds / workers
        print("%-20s %6.1f MB  %6.1f s  %5.2f MB/s per worker  peak RSS "
              "per worker %5.0f MB  identical %s" %
              (label, corpora[scale], seconds, rate, rss, identical),
              flush=True)
        rows.append([label, round(corpora[scale], 1), round(seconds, 1),
                     round(rate, 2), round(rss), identical])
      shutil.rmtree(os.path.dirname(reference))

  def seconds(name, workers, scale):
    return statistics.median(s for s, _ in runs[name, workers, scale])

  def rss(name, workers, scale):
    return max(r for _, r in runs[name, workers, scale])

  targets = []
  for scale in (1, 2):
    pool = seconds(LOCAL, 2, scale)
    for name in (DASK, DASK_QUIET):
      if (name, 2, scale) not in runs:
        continue
      targets.append(["%s overhead vs the local workers, 2 workers, x%d "
                      "(medians of %d runs each)" % (name, scale, repeats),
                      "<= 10%", "%+.1f%%" % (
                          100 * (seconds(name, 2, scale) / pool - 1))])
    if (DASK, 1, scale) in runs:
      targets.append(["%s 2 workers (median) vs Dask 1, throughput, x%d" %
                      (dask_way, scale), ">= 1.8x", "%.2fx" % (
                          seconds(DASK, 1, scale) /
                          seconds(dask_way, 2, scale))])
  for name, workers in ((LOCAL, 2), (DASK, 1), (DASK, 2),
                        (DASK_QUIET, 2)):
    if (name, workers, 1) not in runs:
      continue
    targets.append(["peak RSS per worker x2 vs x1, %s, %d" % (name, workers),
                    "<= 1.2x", "%.2fx" % (rss(name, workers, 2) /
                                          rss(name, workers, 1))])
  print("\n".join("%s: target %s, measured %s" % tuple(t) for t in targets))
  projection = projections(corpora[2] / seconds(dask_way, 2, 2) / 2,
                           dupe_factor, other_dupe, rates)
  for row in projection:
    print("projection: %s, dupe_factor=%s, %d cores: %.2f h" % tuple(row))
  if record:
    results.record(
        "bench_create_pretraining_data_dask",
        [results.table("Runs (dupe_factor=%d, max_seq_length=128; corpora: "
                       "the real documents repeated, each pass shuffled "
                       "with its own seed; in the order run)" % dupe_factor,
                       ["run", "corpus MB", "seconds", "MB/s per worker",
                        "peak RSS per worker MB",
                        "records identical to the first local run's"],
                       rows),
         results.table("Targets", ["what", "target", "measured"], targets),
         results.table(
             "Projection, not a run: hours for %d GB (BooksCorpus + "
             "Wikipedia). Ours: the rate per core of %s, 2 workers, on "
             "the %.0f MB corpus (median), for dupe_factor=%d by the ratio "
             "of the two dupe factors' times on a %.1f MB corpus; the port: "
             "its rate in one process on that corpus (it holds the whole "
             "corpus in memory, so 16 GB would not fit on most machines); "
             "the original: as reported in google-research/bert#616 (5 GB "
             "in about 20 hours, CPU and flags not stated), scaled by size" %
             (PROJECTED_MB // 1000, dask_way, corpora[2], other_dupe,
              calibration_mb),
             ["what", "dupe_factor", "cores", "hours"], projection)],
        {"megabytes": megabytes, "dupe_factor": dupe_factor,
         "repeats": repeats, "ways": ",".join(ways),
         "calibration_megabytes": settings["calibration_megabytes"]},
        headline={"create_pretraining_data, %s 2 workers / local 2 "
                  "workers, time" % dask_way: round(
                      seconds(dask_way, 2, 2) / seconds(LOCAL, 2, 2), 3)})


def projections(per_core, dupe_factor, other_dupe, rates):
  """Rows [what, dupe_factor, cores, hours] for PROJECTED_MB of text.

  per_core: ours on Dask, MB/s per core at dupe_factor. rates:
  calibrate's {(who, dupe_factor): MB/s per core}.
  """
  ours = {dupe_factor: per_core,
          other_dupe: per_core * rates["ours", other_dupe] /
                      rates["ours", dupe_factor]}
  rows = []
  for dupe in sorted(ours):
    for cores in (64, 512):
      rows.append(["ours, Dask", dupe, cores,
                   round(PROJECTED_MB / (ours[dupe] * cores) / 3600, 2)])
  for dupe in sorted(ours):
    rows.append(["tf-models-official port, 1 process", dupe, 1,
                 round(PROJECTED_MB / rates["port", dupe] / 3600, 1)])
  rows.append(["the original, 1 process (google-research/bert#616)",
               "not stated", 1, round(20 * PROJECTED_MB / 5000, 1)])
  return rows


if __name__ == "__main__":
  main()
