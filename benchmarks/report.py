"""Renders the docs' benchmark and result tables from benchmarks/results/.

Every number in docs/benchmarks.md, docs/results.md and the README's short
table comes from the records the benchmarks append (benchmarks/lib/
results.py), never from a hand: this script reads them all, keeps the
newest record of each benchmark per machine and settings, and rewrites
the text between marker lines in the pages (a record from an uncommitted
tree is kept in its file but never shown: the script says how many
there are),

  <!-- report:begin NAME -->
  ...
  <!-- report:end NAME -->

leaving everything else in a page byte for byte. Blocks:
- docs/benchmarks.md `benchmarks`: a section per machine, a table per
  benchmark record, newest first; `benchmarks-figure`: a link to
  docs/img/speed_ratios.png, the speed ratios (ours/peer) per benchmark
  and machine, drawn here;
- docs/results.md `results`: quality.py's records, per machine;
- docs/training.md `memory`: bench_memory.py's largest-batch table beside
  the original README's, per machine, and a link to docs/img/memory.png,
  peak memory against batch size, drawn here;
- docs/fine-tuning.md `time`: how long the original's BERT-Base recipes
  (MRPC, SQuAD 1.1, pre-training) take at the speed a benchmark recorded
  on each machine;
- README.md `glance`: up to 6 headline numbers with machine and date;
  `quickstart-mrpc`, `quickstart-pretrain`, `quickstart-serving`, `demo`:
  the output a command printed, from the record of that name.

  .venv/bin/python benchmarks/report.py           # rewrite pages, figure
  .venv/bin/python benchmarks/report.py --check   # exit 1 where they differ

TensorFlow is never imported; matplotlib only to draw the figure.
"""

import difflib
import io
import json
import os
import sys

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
sys.path.insert(0, REPO)

from absl import app  # pylint: disable=g-import-not-at-top
from absl import flags

from benchmarks.lib import results

FLAGS = flags.FLAGS
flags.DEFINE_bool("check", False,
                  "Render in memory only; exit 1, one line per block, where "
                  "a page differs from what the records give (figures: "
                  "only that they exist).")

BENCHMARKS_PAGE = "docs/benchmarks.md"
RESULTS_PAGE = "docs/results.md"
README = "README.md"
# The figure, relative to the repo and to its page.
FIGURE = "docs/img/speed_ratios.png"
FIGURE_LINK = "img/speed_ratios.png"

QUALITY = "quality"
# Its headline numbers are batch sizes and memory ratios, not speed ratios:
# not drawn as bars nor quoted in the README's speed table.
MEMORY = "bench_memory"
TRAINING_PAGE = "docs/training.md"
MEMORY_FIGURE = "docs/img/memory.png"
MEMORY_FIGURE_LINK = "img/memory.png"
# The fit table's and the points table's titles start so
# (bench_memory.py).
MEMORY_POINTS = "Peak memory of one training step"
MEMORY_FITS = "Fit: peak ="
MEMORY_LARGEST = "Largest training batch"
# Records of a command's output -> what to run to record one.
OUTPUTS = {
    "quickstart-mrpc": "the MRPC quick start",
    "quickstart-pretrain": "the pre-training quick start",
    "quickstart-serving": "the serving quick start",
    "demo": "`make demo`",
}
# The page each output block is on: the quick starts' under them in the
# README, the demo's (longer) in docs/results.md.
OUTPUT_PAGES = {"demo": RESULTS_PAGE}
FINE_TUNING_PAGE = "docs/fine-tuning.md"
SERVING_PAGE = "docs/serving.md"
SERVING_PRECISION = "bench_serving_precision"
# bench_pretraining.py's real-text rows: docs/training.md, Unpadded
# pre-training.
REAL_TEXT = "bench_pretraining_real_text"
# run_classifier.py --long_text on the built long pairs: docs/fine-tuning.md.
LONG_TEXT = "long_text"
# (page, block) in the order they are rendered and reported.
BLOCKS = ((BENCHMARKS_PAGE, "benchmarks"),
          (BENCHMARKS_PAGE, "benchmarks-figure"),
          (RESULTS_PAGE, "results"),
          (TRAINING_PAGE, "bfloat16-speed"),
          (TRAINING_PAGE, "memory"),
          (TRAINING_PAGE, "unpadded"),
          (FINE_TUNING_PAGE, "time"),
          (FINE_TUNING_PAGE, "long-text"),
          (SERVING_PAGE, "serving-precision"),
          (README, "glance")) + tuple(
              (OUTPUT_PAGES.get(name, README), name) for name in OUTPUTS)

# Settings that change what a benchmark's rows measure: a newer record
# that differs in them measured other things, so its rows leave none out.
# (bench_create_pretraining_data_dask: its rows are named by way and scale,
# x1 / x2, of a corpus of --megabytes.)
ROW_KEY_SETTINGS = {"bench_create_pretraining_data_dask": ("megabytes",)}

# The README's short table: headlines of these benchmarks first, in this
# order (then any other, by name), at most GLANCE_ROWS rows.
GLANCE_ORDER = ("quality", "bench_pretraining", "bench_classifier",
                "bench_hf_classifier", "bench_serving", "bench_tokenizer",
                "bench_create_pretraining_data", "bench_learn_vocab")
GLANCE_ROWS = 6
# What a benchmark's headlines measured, where the README quotes another
# recipe of the same task (quick start 1's MRPC run).
GLANCE_RECIPES = {QUALITY: " (make quality: all-MiniLM-L6-v2, 3 seeds)"}

# The figure: fixed size per bar and resolution, so the same records give
# the same bytes.
FIGURE_WIDTH = 9.0
FIGURE_DPI = 100
BAR_HEIGHT = 0.32


# What every record holds (results.record writes more).
RECORD_KEYS = ("benchmark", "settings", "tables", "date", "machine")


class ReportError(Exception):
  """A record, page or marker the report cannot use; one line."""


# ---------------------------------------------------------------- records


def load_records(results_dir):
  """Every record in results_dir/*.jsonl, in file and line order.

  Raises:
    ReportError: a line that is not a record (its file and line named).
  """
  records = []
  if not os.path.isdir(results_dir):
    return records
  for name in sorted(os.listdir(results_dir)):
    if not name.endswith(".jsonl"):
      continue
    path = os.path.join(results_dir, name)
    with open(path, encoding="utf-8") as f:
      for number, line in enumerate(f, 1):
        if not line.strip():
          continue
        try:
          entry = json.loads(line)
        except ValueError as e:
          raise ReportError("%s:%d is not JSON (%s)." % (path, number,
                                                         e)) from e
        missing = [key for key in RECORD_KEYS
                   if not isinstance(entry, dict) or key not in entry]
        if missing:
          raise ReportError("%s:%d is not a record: it lacks %s." % (
              path, number, ", ".join(missing)))
        records.append(entry)
  return records


def settings_key(settings):
  return json.dumps(settings, sort_keys=True)


def newest(records):
  """The newest record of each (benchmark, machine key, settings), newest
  first (ties: by benchmark, machine key, then settings)."""
  kept = {}
  for entry in records:
    key = (entry["benchmark"], results.machine_key(entry["machine"]),
           settings_key(entry["settings"]))
    if key not in kept or entry["date"] >= kept[key]["date"]:
      kept[key] = entry
  ordered = sorted(kept.values(), key=lambda e: (
      e["benchmark"], results.machine_key(e["machine"]),
      settings_key(e["settings"])))
  ordered.sort(key=lambda e: e["date"], reverse=True)  # Stable: ties stay.
  return ordered


def by_machine(records):
  """[(machine key, its records newest first)], the machine with the
  newest record first; records as newest() orders them."""
  groups = {}
  for entry in records:
    groups.setdefault(results.machine_key(entry["machine"]), []).append(entry)
  return list(groups.items())


# -------------------------------------------------------------- markdown


def cell(value):
  """A table cell: numbers as recorded, bools yes/no, null empty."""
  if value is None:
    return ""
  if isinstance(value, bool):
    return "yes" if value else "no"
  if isinstance(value, (int, float)):
    return repr(value)
  return renamed(str(value)).replace("|", "\\|").replace("\n", " ")


def markdown_table(table):
  """A record's table as markdown: a bold title line (none where the
  title is None), then the table, numeric columns right-aligned."""
  columns, rows = table["columns"], table["rows"]

  def is_number(value):
    return isinstance(value, (int, float)) and not isinstance(value, bool)

  numeric = [bool(rows) and all(row[i] is None or is_number(row[i])
                                for row in rows)
             for i in range(len(columns))]
  lines = []
  if table["title"] is not None:
    lines += ["**%s**" % cell(table["title"]), ""]
  lines += ["| %s |" % " | ".join(cell(c) for c in columns),
            "| %s |" % " | ".join("---:" if n else "---" for n in numeric)]
  lines += ["| %s |" % " | ".join(cell(v) for v in row) for row in rows]
  return "\n".join(lines)


def day(entry):
  return entry["date"][:10]


def provenance(entry):
  """"Commit abc1234, 2025-06-01"."""
  return "Commit %s, %s" % (entry.get("commit") or "unknown", day(entry))


# Settings that say where a run wrote its scratch files, not how it ran.
SCRATCH_SETTINGS = frozenset(["work_dir"])

# Older records' names for what a row or table compared against, shown as
# what it is.
RENAMED = (("(ours before)", "(TensorFlow's ops)"),
           ("TF (the replaced pipeline)", "TF (TensorFlow's own pipeline)"))


def renamed(text):
  for old, new in RENAMED:
    text = text.replace(old, new)
  return text


def settings_text(settings):
  """The settings as `name=value` spans, lists joined by commas; scratch
  folders left out."""
  def value(v):
    if isinstance(v, bool):
      return "true" if v else "false"
    if isinstance(v, list):
      return ",".join(str(x) for x in v)
    return str(v)
  return ", ".join("`%s=%s`" % (name, value(v))
                   for name, v in sorted(settings.items())
                   if v is not None and name not in SCRATCH_SETTINGS)


def machine_heading(key, machine):
  """A machine's section heading and its one-line description."""
  present = [name for name, on in machine.get("flags", {}).items() if on]
  onednn, _ = results.onednn_state(machine)
  details = [", ".join(present) or "no AVX-512 or AMX",
             "oneDNN %s" % ("on" if onednn else "off"),
             "TensorFlow %s, Python %s, %s" % (
                 machine.get("tensorflow") or "not installed",
                 machine["python"], machine["os"])]
  return "### %s\n\n%s, %d cores; %s." % (
      key, machine["cpu"], machine["cores"], "; ".join(details))


def record_block(entry, machine, tables, dropped):
  """One record: where and when it ran, its settings, tables and notes.

  Args:
    entry: the record.
    machine: the machine of its section.
    tables: its tables as shown (rows measured again later left out).
    dropped: int, how many rows were left out.
  """
  parts = ["%s. Settings: %s." % (provenance(entry),
                                  settings_text(entry["settings"]) or "none")]
  if entry["machine"].get("tensorflow") != machine.get("tensorflow"):
    parts[0] += " TensorFlow %s." % entry["machine"].get("tensorflow")
  parts += [markdown_table(t) for t in tables]
  if dropped:
    parts.append("(%d %s measured again by a newer record above: left out.)"
                 % (dropped, "row" if dropped == 1 else "rows"))
  parts += ["Note: %s" % note for note in entry.get("notes", [])]
  return "\n\n".join(parts)


def row_key(row):
  """What a row measures: its cells up to the first float (the
  measurements start there), or all but the last where it has none."""
  for i, value in enumerate(row):
    if isinstance(value, float):
      return tuple(row[:i])
  return tuple(row[:-1])


def newest_rows(entries):
  """[(entry, its tables, rows left out)] of one benchmark on one machine,
  newest first: a row whose table title and row_key a newer record
  measured too (with the same ROW_KEY_SETTINGS) is left out, so a page
  never shows one measurement twice with two values. A record left with no
  row is left out."""
  seen, kept = set(), []
  for entry in entries:
    settings = tuple(entry["settings"].get(name) for name in
                     ROW_KEY_SETTINGS.get(entry["benchmark"], ()))
    tables, dropped = [], 0
    for table in entry["tables"]:
      rows = [row for row in table["rows"]
              if (table["title"], row_key(row), settings) not in seen]
      dropped += len(table["rows"]) - len(rows)
      if rows:
        tables.append(dict(table, rows=rows))
    for table in entry["tables"]:
      seen.update((table["title"], row_key(row), settings)
                  for row in table["rows"])
    if tables:
      kept.append((entry, tables, dropped))
  return kept


def machine_sections(records, title):
  """A section per machine: a heading per benchmark (title(name)), its
  records under it, newest first (newest_rows)."""
  sections = []
  for key, entries in by_machine(records):
    machine = entries[0]["machine"]
    parts = [machine_heading(key, machine)]
    names = []
    for entry in entries:
      if entry["benchmark"] not in names:
        names.append(entry["benchmark"])
    for name in names:
      parts.append("#### %s" % title(name))
      parts += [record_block(e, machine, tables, dropped)
                for e, tables, dropped in newest_rows(
                    [e for e in entries if e["benchmark"] == name])]
    sections.append("\n\n".join(parts))
  return "\n\n".join(sections)


# ---------------------------------------------------------------- blocks


def is_speed(entry):
  return entry["benchmark"] not in OUTPUTS and entry["benchmark"] not in (
      QUALITY, LONG_TEXT)


def benchmarks_block(records):
  """The speed records per machine."""
  speed = [e for e in records if is_speed(e)]
  if not speed:
    return ("Not recorded yet: run `make benchmark` (see "
            "[benchmarks/README.md](../benchmarks/README.md)).")
  return machine_sections(speed, lambda name: name)


def uncommitted_count(records):
  """How many records came from an uncommitted tree (no page shows them;
  main says so to whoever runs the report)."""
  return sum(1 for e in records if e.get("dirty"))


def speed_ratios(records):
  """[(machine key, [(headline name, ratio)] sorted by name)]: each
  machine's newest value of each speed benchmark's headline."""
  bars = []
  for key, entries in by_machine([e for e in records
                                  if e["benchmark"].startswith("bench_") and
                                  e["benchmark"] != MEMORY]):
    values = {}
    for entry in entries:
      for name, value in entry.get("headline", {}).items():
        # A ratio only: not a string such as "nan", never 0 on a log scale.
        if (isinstance(value, (int, float)) and not isinstance(value, bool)
            and value > 0):
          values.setdefault(name, value)
    if values:
      bars.append((key, sorted(values.items())))
  return bars


def figure_block(bars):
  if not bars:
    return "Not recorded yet: run `make benchmark`."
  return ("![Speed ratios ours/peer per benchmark, one group per machine]"
          "(%s)\n\nEach bar is a benchmark's speed ratio, ours over the "
          "peer its label names: above 1 where ours is faster. Drawn by "
          "benchmarks/report.py from the records the tables show." %
          FIGURE_LINK)


def results_block(records):
  quality = [e for e in records if e["benchmark"] == QUALITY]
  if not quality:
    return "Not recorded yet: run `make quality`."
  return machine_sections(quality, lambda name: "quality.py")


def glance_block(records):
  """The README's short table: headline numbers, newest per name."""
  names = sorted({e["benchmark"] for e in records} - {MEMORY})
  order = [n for n in GLANCE_ORDER if n in names] + [
      n for n in names if n not in GLANCE_ORDER]
  rows, seen = [], set()
  for benchmark in order:
    for entry in records:
      if entry["benchmark"] != benchmark:
        continue
      emulated = not bfloat16_units(entry["machine"])
      for name, value in entry.get("headline", {}).items():
        if emulated and "bfloat16" in name:
          # A CPU without bfloat16 units emulates it: no headline.
          continue
        name += GLANCE_RECIPES.get(benchmark, "")
        if name not in seen and len(rows) < GLANCE_ROWS:
          seen.add(name)
          rows.append([name, value, results.machine_key(entry["machine"]),
                       day(entry)])
  links = ("All tables, per machine: [docs/benchmarks.md]"
           "(docs/benchmarks.md) (speed) and [docs/results.md]"
           "(docs/results.md) (fine-tuning quality).")
  if not rows:
    return ("Not recorded yet: run `make benchmark` and `make quality`.\n\n" +
            links)
  table = markdown_table({"title": None, "rows": rows,
                          "columns": ["", "value", "machine", "date"]})
  return table + "\n\nSpeed ratios: ours / peer, above 1 where ours is faster."


class Recipe(object):
  """One of the original's BERT-Base runs, timed at a benchmark's speed.

  Args:
    name: str, the run as the table names it.
    sequences: int, the sequences it trains on (epochs x examples).
    benchmark: str, the record that measures its step.
    table: str, that record's table title.
    where: dict column -> value, the row that measures it.
    per_second: function (row as a dict) -> sequences per second.
  """

  def __init__(self, name, sequences, benchmark, table, where, per_second):
    self.name, self.sequences = name, sequences
    self.benchmark, self.table, self.where = benchmark, table, where
    self.per_second = per_second


# The original's BERT-Base recipes (its README's commands; the paper's
# pre-training), float32 without XLA. Examples, not features: SQuAD's
# long contexts make more than one window each, so its time is a floor.
RECIPES = (
    Recipe("MRPC: 3 epochs of 3,668 pairs, 128 tokens", 3 * 3668,
           "bench_classifier", "Fine-tuning examples/s",
           {"L": 12, "H": 768, "seq": 128, "xla": False,
            "precision": "float32"}, lambda row: row["ours"]),
    Recipe("SQuAD 1.1: 2 epochs of 87,599 questions, 384 tokens",
           2 * 87599, "bench_squad", "Fine-tuning examples/s",
           {"L": 12, "H": 768, "seq": 384, "xla": False},
           lambda row: row["ours"]),
    Recipe("Pre-training: 1,000,000 steps of 256 sequences, 128 tokens",
           256 * 1000000, "bench_pretraining", "Pre-training steps/s",
           {"shape": "base", "seq": 128, "xla": False,
            "precision": "float32", "variant": "ours"},
           lambda row: row["steps/s"] * row["batch"]),
)


def duration(seconds):
  """"41 minutes", "1.6 hours", "4.3 days", "12 years"."""
  for unit, size in (("years", 365 * 86400), ("days", 86400),
                     ("hours", 3600)):
    if seconds >= 1.5 * size:
      return "%.2g %s" % (seconds / size, unit)
  return "%d minutes" % round(seconds / 60)


def recipe_rate(entry, recipe):
  """Sequences per second of the recipe's row in the record, or None."""
  if entry["benchmark"] != recipe.benchmark:
    return None
  for table in entry["tables"]:
    if table["title"] == recipe.table:
      for values in table["rows"]:
        row = dict(zip(table["columns"], values))
        if all(row.get(k) == v for k, v in recipe.where.items()):
          return recipe.per_second(row)
  return None


def time_block(records):
  """docs/fine-tuning.md's table: the original's BERT-Base recipes at the
  speed of a BERT-Base step recorded on each machine, newest first."""
  rows = []
  for recipe in RECIPES:
    seen = set()
    for entry in records:  # newest first: the first rate per machine
      machine = results.machine_key(entry["machine"])
      rate = None if machine in seen else recipe_rate(entry, recipe)
      if rate:
        seen.add(machine)
        rows.append([recipe.name, machine, round(rate, 2),
                     duration(recipe.sequences / rate),
                     "%s, %s" % (recipe.benchmark, day(entry))])
  if not rows:
    return ("Not recorded yet: `make benchmark` measures the BERT-Base steps "
            "these times come from.")
  return markdown_table({"title": None, "rows": rows, "columns": [
      "BERT-Base, float32", "machine", "sequences/s", "time", "record"]})


# bench_classifier's table of each precision's speed over float32's.
BFLOAT16_SPEED = "ours against ours float32"


def bfloat16_units(machine):
  """Whether a record's CPU has bfloat16 units (AVX512-BF16 or AMX)."""
  flags = machine.get("flags", {})
  return bool(flags.get("avx512_bf16") or flags.get("amx_bf16"))


def bfloat16_speed_block(records):
  """docs/training.md's table: what --precision=bfloat16 does to the speed
  of a fine-tuning step on each machine (bench_classifier), beside
  whether its CPU has bfloat16 units."""
  rows = []
  for key, entries in by_machine(
      [e for e in records if e["benchmark"] == "bench_classifier"]):
    units = "yes" if bfloat16_units(entries[0]["machine"]) else "no"
    for entry in entries:
      for table in entry["tables"]:
        if table["title"] != BFLOAT16_SPEED:
          continue
        for precision, speed_up in table["rows"]:
          rows.append([key, units, entry["settings"].get("shape", "base"),
                       precision, speed_up, day(entry)])
  if not rows:
    return "Not recorded yet: run `make benchmark`."
  return markdown_table({
      "title": None, "rows": rows,
      "columns": ["machine", "bfloat16 units", "shape", "precision",
                  "speed / float32's", "date"]}) + (
                      "\n\nbench_classifier's fine-tuning step (batch 32, "
                      "seq 128), ours in each precision against ours in "
                      "float32; below 1: slower.")


def newest_tables_block(records, benchmark, script):
  """A page's measurements: the newest record of benchmark on each
  machine, its tables whole; script: what makes the record (its path
  under benchmarks/)."""
  parts = []
  for key, entries in by_machine(
      [e for e in records if e["benchmark"] == benchmark]):
    entry = entries[0]
    parts.append(machine_heading(key, entry["machine"]).replace(
        "### ", "#### ", 1))
    parts.append("%s (`benchmarks/%s`)." % (provenance(entry), script))
    parts += [markdown_table(t) for t in entry["tables"]]
  if not parts:
    return "Not recorded yet: run `benchmarks/%s`." % script
  return "\n\n".join(parts)


def memory_table(entry, title):
  """The table of a bench_memory record whose title starts with title.

  Raises:
    ReportError: it has none.
  """
  for table in entry["tables"]:
    if (table["title"] or "").startswith(title):
      return table
  raise ReportError("benchmarks/results/%s.jsonl: a record of %s has no "
                    "table titled %r..." % (MEMORY, entry["date"], title))


def seq_columns_sorted(table):
  """table with its "seq N" columns in increasing N (records before
  bench_memory sorted them kept --points' order: 128, 512, 384)."""
  columns = table["columns"]
  seq = [i for i, c in enumerate(columns) if str(c).startswith("seq ")]
  order = [i for i in range(len(columns)) if i not in seq] + sorted(
      seq, key=lambda i: int(columns[i].split()[1]))
  return dict(table, columns=[columns[i] for i in order],
              rows=[[row[i] for i in order] for row in table["rows"]])


def memory_entries(records):
  """[(machine key, its newest bench_memory record)], newest first."""
  return [(key, entries[0]) for key, entries in
          by_machine([e for e in records if e["benchmark"] == MEMORY])]


def memory_block(records):
  """Per machine, the newest bench_memory record's largest-batch table and
  notes; the figure's link."""
  entries = memory_entries(records)
  if not entries:
    return ("Not recorded yet: run `.venv/bin/python "
            "benchmarks/speed/bench_memory.py`.")
  parts = []
  for key, entry in entries:
    parts.append("On %s (%s, %s cores), %s:" % (
        key, entry["machine"]["cpu"], entry["machine"]["cores"],
        provenance(entry)))
    parts.append(markdown_table(seq_columns_sorted(
        memory_table(entry, MEMORY_LARGEST))))
    parts.append(markdown_table(memory_table(entry, MEMORY_FITS)))
    parts += ["Note: %s" % note for note in entry.get("notes", [])]
  parts.append(
      "![Peak memory of a training step against batch size](%s)\n\n"
      "Measured peaks (dots) and their fit (lines) per side, the budgets as "
      "dashed lines; the whole record, with every measured point, is in "
      "[benchmarks.md](benchmarks.md)." % MEMORY_FIGURE_LINK)
  return "\n\n".join(parts)


def memory_series(entry):
  """[(panel title, {side: ([batch], [peak GB], (fixed, per example GB) or
  None)})] of a bench_memory record, one panel per model, sequence length
  and precision, in the points table's order."""
  points = memory_table(entry, MEMORY_POINTS)
  fits = memory_table(entry, MEMORY_FITS)
  column = {name: i for i, name in enumerate(points["columns"])}
  fit_column = {name: i for i, name in enumerate(fits["columns"])}
  panels = {}
  for row in points["rows"]:
    title = "%s, seq %s, %s, %s" % (row[column["model"]], row[column["seq"]],
                                    row[column["head"]],
                                    row[column["precision"]])
    side = panels.setdefault(title, {}).setdefault(
        row[column["side"]], [[], [], None])
    side[0].append(row[column["batch"]])
    side[1].append(row[column["peak GB"]])
  for row in fits["rows"]:
    title = "%s, seq %s, %s, %s" % (
        row[fit_column["model"]], row[fit_column["seq"]],
        row[fit_column["head"]], row[fit_column["precision"]])
    fixed = row[fit_column["fixed GB"]]
    per_example = row[fit_column["per example MB"]]
    if title in panels and row[fit_column["side"]] in panels[title] and (
        fixed is not None):
      panels[title][row[fit_column["side"]]][2] = (fixed, per_example / 1e3)
  budgets = [float(c.split()[2]) for c in fits["columns"]
             if c.startswith("batch in ")]
  return list(panels.items()), budgets


def draw_memory(entry):
  """PNG bytes: peak memory against batch size, a panel per point of the
  newest machine's record, a dashed line per budget."""
  import matplotlib  # pylint: disable=g-import-not-at-top
  matplotlib.use("Agg")
  from matplotlib import figure  # pylint: disable=g-import-not-at-top
  panels, budgets = memory_series(entry)
  columns = 2
  rows = -(-len(panels) // columns)
  fig = figure.Figure(figsize=(FIGURE_WIDTH, 3.2 * rows))
  axes = fig.subplots(rows, columns, squeeze=False)
  colors = {"ours": "#dd8452", "ours, recomputation": "#4c72b0",
            "Model Garden": "#7f7f7f"}
  for ax, (title, sides) in zip(axes.flat, panels):
    largest = max(max(b) for b, _, _ in sides.values())
    for side, (batches, peaks, fitted) in sides.items():
      color = colors.get(side, "black")
      ax.plot(batches, peaks, "o", color=color, markersize=4)
      if fitted:
        top = max(largest, (max(budgets) - fitted[0]) / fitted[1]
                  if fitted[1] > 0 else largest)
        xs = [1, min(top, 4 * largest)]
        ax.plot(xs, [fitted[0] + fitted[1] * x for x in xs], "-",
                color=color, linewidth=1, label=side)
    for budget in budgets:
      ax.axhline(budget, color="black", linestyle="--", linewidth=0.7)
      ax.text(1, budget, " %g GB" % budget, va="bottom", fontsize=7)
    ax.set_ylim(0, max(budgets) * 1.3)
    ax.set_title(title, fontsize=9, loc="left")
    ax.set_xlabel("batch size", fontsize=8)
    ax.set_ylabel("peak GB", fontsize=8)
    ax.tick_params(labelsize=7)
    ax.legend(fontsize=7, loc="lower right")
  for ax in list(axes.flat)[len(panels):]:
    ax.set_visible(False)
  fig.tight_layout()
  buffer = io.BytesIO()
  fig.savefig(buffer, format="png", dpi=FIGURE_DPI,
              metadata={"Software": None})
  return buffer.getvalue()


def output_block(records, name):
  """A command's recorded output, fenced, with where and when it ran."""
  entries = [e for e in records if e["benchmark"] == name]
  if not entries:
    return ("Not recorded yet: `make quickstarts` runs %s and records "
            "its output." % OUTPUTS[name])
  entry = entries[0]
  lines = None
  for table in entry["tables"]:
    if table["columns"] == ["output"]:
      lines = [str(row[0]) for row in table["rows"]]
      break
  if lines is None:
    raise ReportError("benchmarks/results/%s.jsonl: its newest record has no "
                      "table with the one column 'output'." % name)
  seconds = [table["rows"][0][0] for table in entry["tables"]
             if table["columns"] == ["seconds"]]
  fence = "```"
  while any(fence in line for line in lines):
    fence += "`"
  return "%stext\n%s\n%s\n(recorded on %s, %s, %scommit %s)" % (
      fence, "\n".join(lines), fence, results.machine_key(entry["machine"]),
      day(entry), "took %d s, " % seconds[0] if seconds else "",
      entry.get("commit") or "unknown")


def render(records):
  """Every block's text and the figure's bars, from all records.

  Records from an uncommitted tree are left out: a page's number must be
  one that its commit can reproduce.

  Returns:
    (dict (page, block) -> markdown, speed_ratios() of the records).
  """
  committed = [e for e in records if not e.get("dirty")]
  kept = newest(committed)
  bars = speed_ratios(kept)
  blocks = {(BENCHMARKS_PAGE, "benchmarks"): benchmarks_block(kept),
            (BENCHMARKS_PAGE, "benchmarks-figure"): figure_block(bars),
            (RESULTS_PAGE, "results"): results_block(kept),
            (TRAINING_PAGE, "bfloat16-speed"): bfloat16_speed_block(kept),
            (TRAINING_PAGE, "memory"): memory_block(kept),
            (FINE_TUNING_PAGE, "time"): time_block(kept),
            (SERVING_PAGE, "serving-precision"): newest_tables_block(
                kept, SERVING_PRECISION, "speed/bench_serving_precision.py"),
            (TRAINING_PAGE, "unpadded"): newest_tables_block(
                kept, REAL_TEXT, "speed/bench_pretraining.py"),
            (FINE_TUNING_PAGE, "long-text"): newest_tables_block(
                kept, LONG_TEXT, "quality/long_text.py"),
            (README, "glance"): glance_block(kept)}
  for name in OUTPUTS:
    blocks[OUTPUT_PAGES.get(name, README), name] = output_block(kept, name)
  return blocks, bars


# ------------------------------------------------------------------ pages


def markers(name):
  return ("<!-- report:begin %s -->" % name, "<!-- report:end %s -->" % name)


def block_span(text, page, name):
  """(start, end) of the text between a block's markers in a page.

  Raises:
    ReportError: a marker missing, repeated or out of order.
  """
  begin, end = markers(name)
  for marker in (begin, end):
    count = text.count(marker)
    if count != 1:
      raise ReportError("%s: block %s needs the line %s exactly once (found "
                        "%d)." % (page, name, marker, count))
  start = text.index(begin) + len(begin)
  stop = text.index(end)
  if stop < start:
    raise ReportError("%s: block %s ends before it begins." % (page, name))
  return start, stop


def replace_blocks(text, page, blocks):
  """text with each block's markers enclosing its new content; blocks:
  dict name -> markdown. Only the text between the markers changes."""
  for name, content in blocks.items():
    start, stop = block_span(text, page, name)
    text = text[:start] + "\n\n" + content + "\n\n" + text[stop:]
  return text


def read_page(root, page, names):
  path = os.path.join(root, page)
  if not os.path.exists(path):
    raise ReportError("%s: no such page (it holds the blocks %s)." % (
        page, ", ".join(names)))
  with open(path, encoding="utf-8", newline="") as f:
    return f.read()


def pages(blocks):
  """dict page -> {block name -> markdown}, in BLOCKS order."""
  grouped = {}
  for page, name in BLOCKS:
    grouped.setdefault(page, {})[name] = blocks[page, name]
  return grouped


def check(root):
  """What differs between the pages under root and their records.

  Returns:
    a list of one-line descriptions, empty where all agree.

  Raises:
    ReportError: a record, page or marker missing or malformed.
  """
  records = load_records(os.path.join(root, "benchmarks", "results"))
  blocks, bars = render(records)
  memory = memory_entries(newest(records))
  problems = []
  for page, contents in pages(blocks).items():
    text = read_page(root, page, list(contents))
    for name, content in contents.items():
      start, stop = block_span(text, page, name)
      have = text[start:stop]
      want = "\n\n" + content + "\n\n"
      if have != want:
        changed = sum(1 for line in difflib.ndiff(
            have.splitlines(), want.splitlines()) if line[:1] in "+-")
        problems.append("%s: block %s differs from the records (%d lines)" %
                        (page, name, changed))
  if bars and not os.path.exists(os.path.join(root, FIGURE)):
    problems.append("%s: missing (the records have speed ratios)" % FIGURE)
  if memory and not os.path.exists(os.path.join(root, MEMORY_FIGURE)):
    problems.append("%s: missing (bench_memory has a record)" %
                    MEMORY_FIGURE)
  return problems


def draw(bars):
  """PNG bytes of the speed-ratio figure: one group of horizontal bars
  per machine, a line at 1."""
  import matplotlib  # pylint: disable=g-import-not-at-top
  matplotlib.use("Agg")
  from matplotlib import figure  # pylint: disable=g-import-not-at-top
  counts = [len(values) for _, values in bars]
  fig = figure.Figure(figsize=(FIGURE_WIDTH,
                               0.9 + BAR_HEIGHT * sum(counts) +
                               0.6 * len(bars)))
  axes = fig.subplots(len(bars), 1, sharex=True, squeeze=False,
                      gridspec_kw={"height_ratios": counts})[:, 0]
  everything = [float(value) for _, values in bars for _, value in values]
  low, high = min(everything + [1.0]) / 1.25, max(everything + [1.0]) * 1.4
  for ax, (key, values) in zip(axes, bars):
    names = [name for name, _ in values][::-1]
    ratios = [float(value) for _, value in values][::-1]
    # Bars from 1 on a log scale: 2x faster and 2x slower look alike.
    ax.barh(range(len(ratios)), [r - 1 for r in ratios], left=1.0,
            height=0.7,
            color=["#4c72b0" if r >= 1 else "#dd8452" for r in ratios])
    ax.set_yticks(range(len(ratios)), names, fontsize=8)
    for y, ratio in enumerate(ratios):
      ax.text(max(ratio, 1.0), y, " %.2f" % ratio, va="center", fontsize=7)
    ax.axvline(1.0, color="black", linewidth=0.8)
    ax.set_xscale("log")
    ax.set_xlim(low, high)
    ax.set_title(key, fontsize=9, loc="left")
  ticks = [t for t in (0.1, 0.2, 0.5, 1, 2, 5, 10, 20, 50, 100)
           if low <= t <= high]
  axes[-1].set_xticks(ticks, ["%g" % t for t in ticks])
  axes[-1].minorticks_off()
  axes[-1].set_xlabel("speed ratio, ours / peer (log scale; > 1: ours "
                      "faster)")
  fig.tight_layout()
  buffer = io.BytesIO()
  # No software version or date in the file: the same records, the same
  # bytes.
  fig.savefig(buffer, format="png", dpi=FIGURE_DPI,
              metadata={"Software": None})
  return buffer.getvalue()


def write_file(path, data):
  """Writes bytes to path through a temporary name, if they differ.

  Returns:
    whether the file changed.
  """
  if os.path.exists(path):
    with open(path, "rb") as f:
      if f.read() == data:
        return False
  os.makedirs(os.path.dirname(path), exist_ok=True)
  with open(path + ".tmp", "wb") as f:
    f.write(data)
  os.replace(path + ".tmp", path)
  return True


def write(root):
  """Rewrites the pages' blocks and the figure under root.

  Returns:
    the paths (relative to root) that changed.

  Raises:
    ReportError: as check().
  """
  records = load_records(os.path.join(root, "benchmarks", "results"))
  blocks, bars = render(records)
  memory = memory_entries(newest(records))
  updated = {}
  # Every page and marker is checked before any file is written.
  for page, contents in pages(blocks).items():
    updated[page] = replace_blocks(read_page(root, page, list(contents)),
                                   page, contents)
  changed = [page for page, text in updated.items()
             if write_file(os.path.join(root, page), text.encode("utf-8"))]
  if bars and write_file(os.path.join(root, FIGURE), draw(bars)):
    changed.append(FIGURE)
  if memory and write_file(os.path.join(root, MEMORY_FIGURE),
                           draw_memory(memory[0][1])):
    changed.append(MEMORY_FIGURE)
  return changed


def main(argv):
  if len(argv) > 1:
    raise app.UsageError("Unexpected arguments: %s" % argv[1:])
  try:
    if FLAGS.check:
      problems = check(REPO)
      for problem in problems:
        print(problem)
      if problems:
        print("Run .venv/bin/python benchmarks/report.py to rewrite them.")
        sys.exit(1)
    else:
      for path in write(REPO):
        print("wrote %s" % path)
    uncommitted = uncommitted_count(load_records(
        os.path.join(REPO, "benchmarks", "results")))
    if uncommitted:
      print("%d %s in benchmarks/results/ came from an uncommitted tree: "
            "not shown on any page (run the benchmark again from a "
            "commit)." % (uncommitted,
                          "record" if uncommitted == 1 else "records"))
  except ReportError as e:
    sys.exit("report.py: %s" % e)


if __name__ == "__main__":
  app.run(main)
