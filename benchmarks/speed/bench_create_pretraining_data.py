"""create_pretraining_data at corpus scale: ours (1 and N workers) vs the port.

Builds a corpus of at least --megabytes from ../shared/data/corpus (the
Gutenberg and WikiText-2 pre-training files, repeated) and one twice as
large, then runs on each, with the same flags, tf-models-official's port of
the original script and ours with 1 and 2 workers; ours with 2 workers also
on a corpus four times as large. Prints wall time, peak RSS (summed over
the process tree, sampled every 0.1 s) and ratios; the last lines show
whether memory stays flat as the corpus doubles (from x1, where shards are
smaller than the 4 MB cap, and from x2, where both are at it).

  .venv/bin/python benchmarks/speed/bench_create_pretraining_data.py [--megabytes=20]
      [--norecord]
"""

import glob
import os
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


def build_corpus(path, megabytes):
  texts = []
  for source in SOURCES:
    with open(source, encoding="utf-8") as f:
      texts.append(f.read().rstrip("\n") + "\n\n")
  with open(path, "w", encoding="utf-8") as out:
    size = 0
    while size < megabytes * 1e6:
      for text in texts:
        out.write(text)
        size += len(text.encode("utf-8"))
  return size


def measure(command):
  """Runs a command; returns (seconds, peak RSS in MB of it and children)."""
  env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2", CUDA_VISIBLE_DEVICES="")
  start = time.perf_counter()
  process = subprocess.Popen(command, stdout=subprocess.DEVNULL,
                             stderr=subprocess.PIPE, env=env, cwd=REPO)
  root = psutil.Process(process.pid)
  peak = 0
  while process.poll() is None:
    try:
      tree = [root] + root.children(recursive=True)
      peak = max(peak, sum(p.memory_info().rss for p in tree))
    except psutil.Error:
      pass
    time.sleep(0.1)
  seconds = time.perf_counter() - start
  if process.returncode:
    sys.exit("failed: %s\n%s" % (" ".join(command),
                                 process.stderr.read().decode()[-3000:]))
  return seconds, peak / 2**20


def main():
  megabytes = 20.0
  for arg in sys.argv[1:]:
    if arg.startswith("--megabytes="):
      megabytes = float(arg.split("=", 1)[1])
  record = results.record_wanted(sys.argv[1:])
  with tempfile.TemporaryDirectory() as tmp:
    corpora = {}
    for scale in (1, 2, 4):
      path = os.path.join(tmp, "corpus_x%d.txt" % scale)
      corpora[scale] = (path, build_corpus(path, megabytes * scale) / 1e6)
    flags = ["--vocab_file=%s" % os.path.join(DATA, "vocab",
                                               "uncased_vocab.txt"),
             "--do_lower_case=True", "--max_seq_length=128",
             "--max_predictions_per_seq=20", "--masked_lm_prob=0.15",
             "--random_seed=12345", "--dupe_factor=2", "--short_seq_prob=0.1"]
    python = sys.executable
    rows = []

    def run(name, scale, command):
      path, size = corpora[scale]
      output = os.path.join(tmp, "output.tfrecord")
      seconds, rss = measure(command + ["--input_file=%s" % path,
                                        "--output_file=%s" % output] + flags)
      for written in glob.glob(output + "*"):  # a sharded run's shards too
        os.remove(written)
      print("%-34s %6.1f MB corpus  %7.1f s  peak RSS %7.0f MB" %
            (name, size, seconds, rss), flush=True)
      rows.append([name, round(size, 1), round(seconds, 1), round(rss)])
      return seconds, rss

    print("dupe_factor=2, max_seq_length=128, %d CPUs" % os.cpu_count())
    script = [python, os.path.join(REPO, "create_pretraining_data.py")]
    runs = {}
    for scale in (1, 2):
      runs["port", scale] = run("tf-models-official port", scale, [
          python, "-m", "official.nlp.data.create_pretraining_data"])
      for workers in (1, 2):
        runs[workers, scale] = run(
            "ours, %d worker%s" % (workers, "s" * (workers > 1)), scale,
            script + ["--num_workers=%d" % workers])
    runs[2, 4] = run("ours, 2 workers", 4, script + ["--num_workers=2"])
    ratios = []
    for scale in (1, 2):
      port_seconds, port_rss = runs["port", scale]
      for workers in (1, 2):
        seconds, rss = runs[workers, scale]
        print("%.1f MB, %d worker%s: speed-up vs port %.2fx, peak RSS vs "
              "port %.2fx" % (corpora[scale][1], workers,
                              "s" * (workers > 1), port_seconds / seconds,
                              rss / port_rss))
        ratios.append([round(corpora[scale][1], 1), workers,
                       round(port_seconds / seconds, 2),
                       round(rss / port_rss, 2)])
    growth = []
    for small, large in ((1, 2), (2, 4)):
      print("2 workers, corpus x%d vs x%d: peak RSS %.2fx, time %.2fx" %
            (large, small, runs[2, large][1] / runs[2, small][1],
             runs[2, large][0] / runs[2, small][0]))
      growth.append(["x%d vs x%d" % (large, small),
                     round(runs[2, large][1] / runs[2, small][1], 2),
                     round(runs[2, large][0] / runs[2, small][0], 2)])
    if record:
      results.record(
          "bench_create_pretraining_data",
          [results.table("Runs (dupe_factor=2, max_seq_length=128)",
                         ["run", "corpus MB", "seconds", "peak RSS MB"],
                         rows),
           results.table("Ours against the port",
                         ["corpus MB", "workers", "speed-up vs port",
                          "peak RSS vs port"], ratios),
           results.table("2 workers as the corpus doubles",
                         ["corpora", "peak RSS", "time"], growth)],
          {"megabytes": megabytes},
          headline={"create_pretraining_data, 1 worker: ours/port":
                    ratios[2][2]})


if __name__ == "__main__":
  main()
