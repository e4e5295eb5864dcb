"""Machine-tagged benchmark records: one JSON line per run.

Each benchmark appends what it printed, as tables, to
benchmarks/results/<benchmark>.jsonl, with the commit, the date and the
machine it ran on; benchmarks/report.py renders the docs' tables and
figures from those lines, so no number in the docs is typed by hand.

A record (one line, keys in this order):
  benchmark: str, the script's name, e.g. "bench_encoder".
  settings: dict, the flags it ran with (paths relative to the repo).
  tables: list of {title, columns: [str], rows: [[cell]]}; a cell is a
    number, a string, a bool or null.
  headline: dict name -> number, the few numbers the README's summary
    may quote. A speed benchmark's (bench_*) are speed ratios ours/peer,
    > 1 where ours is faster: the report draws them as bars.
  notes: list of str, or absent.
  commit: str, git's short hash of HEAD (null outside git).
  dirty: bool, whether tracked files differed from it (null outside git).
  date: str, UTC, e.g. "2025-06-01T12:34:56Z".
  machine: dict, what machine() returns.

Records of commands' output (the README's quick starts) hold one table of
one column, "output", a line of text per row: output_table() builds it.

Nothing here imports TensorFlow: several benchmarks keep it out of their
parent process on purpose.
"""

import datetime
import importlib.metadata
import json
import math
import os
import platform
import re
import subprocess
import sys

from absl import flags

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
RESULTS_DIR = os.path.join(REPO, "benchmarks", "results")

# CPU features that decide the speed of float32 and bfloat16 matmuls.
# (Those ONEDNN_CPU_FLAGS names among them, so that a record tells whether
# its oneDNN state was the CPU's default.)
CPU_FLAGS = ("avx2", "avx_vnni", "avx512f", "avx512_vnni", "avx512_bf16",
             "avx512_fp16", "amx_tile", "amx_bf16", "amx_int8")

# Changes here cannot change a measurement: the records themselves (each
# benchmark appends to a tracked file, which would mark every later run of
# `make benchmark` dirty) and the pages rendered from them.
_NOT_CODE = (":(exclude)benchmarks/results", ":(exclude)docs",
             ":(exclude)*.md")


def define_flags():
  """Defines --record (default true; --norecord skips the record) on absl's
  FLAGS, for a benchmark that parses its flags with absl."""
  flags.DEFINE_bool("record", True,
                    "Append this run's numbers to benchmarks/results/ "
                    "(--norecord: print only).")


def record_wanted(argv):
  """--record / --norecord / --record=BOOL among plain argv (benchmarks
  that parse their arguments by hand, to stay free of absl and
  TensorFlow in the parent process); the last one wins, default true."""
  wanted = True
  for arg in argv:
    if arg in ("--record", "--norecord"):
      wanted = arg == "--record"
    elif arg.startswith("--record="):
      value = arg.split("=", 1)[1].lower()
      if value not in ("true", "false", "1", "0"):
        sys.exit("--record takes true or false, not %r." % value)
      wanted = value in ("true", "1")
  return wanted


def flag_settings(flag_values, **extra):
  """The main script's own absl flags and their values (paths under the
  repo's parent relative to the repo, so checkouts agree), plus extra.

  Args:
    flag_values: absl's FLAGS, parsed.
    **extra: more settings, e.g. device="NVIDIA H200".

  Returns:
    dict name -> value.
  """
  settings = {}
  for flag in flag_values.get_flags_for_module("__main__"):
    settings[flag.name] = _relative(flag.value)
  settings.update(extra)
  return settings


def _relative(value):
  """value with paths under the repo's parent relative to the repo (also
  in lists and comma-separated strings of them)."""
  if isinstance(value, list):
    return [_relative(v) for v in value]
  if isinstance(value, str) and "," in value:
    return ",".join(_relative(v) for v in value.split(","))
  if isinstance(value, str) and os.path.isabs(value) and (
      value.startswith(os.path.dirname(REPO) + os.sep)):
    return os.path.relpath(value, REPO)
  return value


def device_name():
  """The first GPU's name (e.g. "NVIDIA H200"), or "CPU": for benchmarks
  that have imported TensorFlow already."""
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  gpus = tf.config.list_physical_devices("GPU")
  if not gpus:
    return "CPU"
  return tf.config.experimental.get_device_details(gpus[0]).get(
      "device_name", gpus[0].name)


def table(title, columns, rows):
  """One table of a record: {title, columns, rows}."""
  rows = [list(row) for row in rows]
  for row in rows:
    assert len(row) == len(columns), (title, columns, row)
  return {"title": title, "columns": list(columns), "rows": rows}


def output_table(lines):
  """The table of a record of a command's output: a row per line."""
  return table("output", ["output"], [[line] for line in lines])


def _cpu_model():
  try:
    with open("/proc/cpuinfo", encoding="utf-8") as f:
      for line in f:
        if line.startswith("model name"):
          return line.split(":", 1)[1].strip()
  except OSError:
    pass
  return platform.processor() or platform.machine()


def _present_cpu_flags():
  try:
    with open("/proc/cpuinfo", encoding="utf-8") as f:
      for line in f:
        if line.startswith("flags"):
          return set(line.split(":", 1)[1].split())
  except OSError:
    pass
  return set()


def _cpu_flags():
  present = _present_cpu_flags()
  return {name: name in present for name in CPU_FLAGS}


# The CPU flags with which TensorFlow 2.20's Linux x86 build turns oneDNN on
# by default (tensorflow/core/util/util.cc, IsMKLEnabled): neural-network
# instructions. Elsewhere (AVX2-only CPUs) it runs its Eigen kernels and a
# CPU allocator without statistics, unless TF_ENABLE_ONEDNN_OPTS says
# otherwise.
ONEDNN_CPU_FLAGS = ("avx512_vnni", "avx512_bf16", "avx_vnni", "amx_tile",
                    "amx_int8", "amx_bf16")


def onednn_enabled(cpu_flags, environ=None):
  """Whether TensorFlow runs oneDNN here, without importing TensorFlow.

  Args:
    cpu_flags: set of str, /proc/cpuinfo's flags.
    environ: mapping, the environment TensorFlow loads with (os.environ).

  Returns:
    bool: TF_ENABLE_ONEDNN_OPTS where it is set (1/true or 0/false), else
    whether the CPU has one of ONEDNN_CPU_FLAGS.
  """
  setting = (os.environ if environ is None else environ).get(
      "TF_ENABLE_ONEDNN_OPTS", "").strip().lower()
  if setting in ("1", "true"):
    return True
  if setting in ("0", "false"):
    return False
  return bool(set(cpu_flags) & set(ONEDNN_CPU_FLAGS))


def onednn_state(machine_info):
  """(whether a record's run had oneDNN on, whether that is its CPU's
  default). Records made before they noted it ran with the default."""
  default = onednn_enabled(
      [name for name, on in machine_info.get("flags", {}).items() if on], {})
  state = machine_info.get("onednn", default)
  return state, state == default


def _cores():
  try:
    return len(os.sched_getaffinity(0))
  except AttributeError:  # Not on Linux.
    return os.cpu_count()


def _tensorflow_version():
  # The installed package's metadata, not `import tensorflow`: seconds of
  # import and threads the benchmark may not want in this process.
  try:
    return importlib.metadata.version("tensorflow")
  except importlib.metadata.PackageNotFoundError:
    return None


def machine():
  """What the numbers depend on: dict with cpu (model name), cores (usable
  by this process), flags (CPU_FLAGS -> bool), onednn (whether TensorFlow
  runs oneDNN, onednn_enabled), tensorflow (version or None), python,
  os."""
  return {"cpu": _cpu_model(), "cores": _cores(), "flags": _cpu_flags(),
          "onednn": onednn_enabled(_present_cpu_flags()),
          "tensorflow": _tensorflow_version(),
          "python": platform.python_version(),
          "os": "%s %s" % (platform.system(), platform.release())}


def machine_key(machine_info):
  """A short, stable name for grouping records by machine, e.g.
  "Intel Xeon Platinum 8481C (AMX), 2 cores": the model name without
  trademarks and clock, the widest matrix feature, the cores."""
  cpu = re.sub(r"\((R|TM|tm|r)\)", "", machine_info["cpu"])
  cpu = re.sub(r"\s+(CPU\s+)?@.*$", "", cpu)
  cpu = re.sub(r"\s+CPU$", "", cpu)
  cpu = " ".join(cpu.replace(" Processor", " ").split()) or "Unknown CPU"
  flags = machine_info.get("flags", {})
  for feature, label in (("amx_bf16", "AMX"), ("avx512_bf16", "AVX512-BF16"),
                         ("avx512f", "AVX-512"), ("avx2", "AVX2")):
    if flags.get(feature):
      cpu += " (%s)" % label
      break
  # Where the record says so and it is not the CPU's default (a run with
  # TF_ENABLE_ONEDNN_OPTS set), its numbers go in a section of their own.
  onednn, default = onednn_state(machine_info)
  if not default:
    cpu += ", oneDNN %s" % ("on" if onednn else "off")
  cores = machine_info.get("cores")
  return "%s, %d core%s" % (cpu, cores, "s" * (cores != 1))


def _git(*args):
  return subprocess.run(["git"] + list(args), cwd=REPO, capture_output=True,
                        text=True, check=True).stdout


def commit():
  """(short hash of HEAD, whether tracked code differs from it), or
  (None, None) outside a git checkout."""
  try:
    head = _git("rev-parse", "--short", "HEAD").strip()
    changes = _git("status", "--porcelain", "--untracked-files=no", "--",
                   ".", *_NOT_CODE)
  except (OSError, subprocess.CalledProcessError):
    return None, None
  return head, bool(changes.strip())


def _plain(value):
  """value with NumPy scalars as Python numbers and non-finite floats as
  strings (JSON has no NaN)."""
  if isinstance(value, dict):
    return {str(k): _plain(v) for k, v in value.items()}
  if isinstance(value, (list, tuple)):
    return [_plain(v) for v in value]
  if hasattr(value, "item") and not isinstance(value, (str, bytes)):
    value = value.item()
  if isinstance(value, float) and not math.isfinite(value):
    return str(value)
  return value


def record(benchmark, tables, settings, headline=None, notes=None,
           directory=None):
  """Appends one record to DIRECTORY/<benchmark>.jsonl.

  One write of one complete line, in append mode: records of concurrent
  runs never interleave, and an interrupted run leaves no half line.

  Args:
    benchmark: str, the file's name, e.g. "bench_encoder".
    tables: list of table() dicts.
    settings: dict, the flags the run used (flag_settings()).
    headline: dict name -> number, or None.
    notes: list of str, or None.
    directory: where the .jsonl files go (default benchmarks/results).

  Returns:
    the record written, a dict.
  """
  head, dirty = commit()
  entry = {"benchmark": benchmark, "settings": settings, "tables": tables,
           "headline": headline or {}}
  if notes:
    entry["notes"] = list(notes)
  entry.update(
      commit=head, dirty=dirty,
      date=datetime.datetime.now(datetime.timezone.utc).strftime(
          "%Y-%m-%dT%H:%M:%SZ"),
      machine=machine())
  entry = _plain(entry)
  line = (json.dumps(entry, allow_nan=False) + "\n").encode("utf-8")
  directory = directory or RESULTS_DIR
  os.makedirs(directory, exist_ok=True)
  path = os.path.join(directory, benchmark + ".jsonl")
  fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
  try:
    written = os.write(fd, line)
  finally:
    os.close(fd)
  if written != len(line):
    raise OSError("Wrote %d of %d bytes to %s." % (written, len(line), path))
  return entry
