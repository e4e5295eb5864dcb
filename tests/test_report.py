"""benchmarks/report.py and benchmarks/lib/results.py: the pages' tables
come from the records, and only the text between the markers changes."""

import json
import os
import re

import pytest

from benchmarks import report
from benchmarks.lib import results
from tests.conftest import REPO_ROOT

INTEL = {"cpu": "Intel(R) Xeon(R) Platinum 8481C CPU @ 2.70GHz", "cores": 2,
         "flags": {"avx512f": True, "avx512_bf16": True, "amx_bf16": True,
                   "amx_tile": False},
         "tensorflow": "2.20.0", "python": "3.11.7", "os": "Linux 6.1"}
AMD = {"cpu": "AMD EPYC 9B14 96-Core Processor", "cores": 4,
       "flags": {"avx512f": True, "avx512_bf16": True, "amx_bf16": False},
       "tensorflow": "2.20.0", "python": "3.11.7", "os": "Linux 6.1"}


def entry(date, rows, machine=INTEL, repeats=3, headline=None,
          commit="abc1234", dirty=False, benchmark="bench_x"):
  """A record as results.record writes it, with a fixed machine."""
  return {"benchmark": benchmark, "settings": {"repeats": repeats},
          "tables": [{"title": "Speed", "columns": ["shape", "ours/peer"],
                      "rows": rows}],
          "headline": headline or {}, "commit": commit, "dirty": dirty,
          "date": date, "machine": machine}


# Two machines; on the Intel one a record superseded by a newer one with
# the same settings, and one with other settings; and a newer one still
# from an uncommitted tree, which no page shows.
RECORDS = [
    entry("2025-01-01T10:00:00Z", [["base", 1.5]],
          headline={"x base: ours/peer": 1.5}),
    entry("2025-02-01T10:00:00Z", [["base", 1.25]], commit="bcd2345",
          headline={"x base: ours/peer": 1.25}),
    entry("2025-03-01T10:00:00Z", [["base", 9.75]], dirty=True,
          headline={"x base: ours/peer": 9.75}),
    entry("2025-01-15T10:00:00Z", [["small", 0.9]], repeats=1,
          headline={"x small: ours/peer": 0.9}),
    entry("2025-01-10T10:00:00Z", [["base", 2]], machine=AMD,
          commit="def5678", headline={"x base: ours/peer": 2.0}),
]

EXPECTED_BENCHMARKS = """\
### Intel Xeon Platinum 8481C (AMX), 2 cores

Intel(R) Xeon(R) Platinum 8481C CPU @ 2.70GHz, 2 cores; avx512f, \
avx512_bf16, amx_bf16; oneDNN on; TensorFlow 2.20.0, Python 3.11.7, \
Linux 6.1.

#### bench_x

Commit bcd2345, 2025-02-01. Settings: `repeats=3`.

**Speed**

| shape | ours/peer |
| --- | ---: |
| base | 1.25 |

Commit abc1234, 2025-01-15. Settings: `repeats=1`.

**Speed**

| shape | ours/peer |
| --- | ---: |
| small | 0.9 |

### AMD EPYC 9B14 96-Core (AVX512-BF16), 4 cores

AMD EPYC 9B14 96-Core Processor, 4 cores; avx512f, avx512_bf16; oneDNN \
on; TensorFlow 2.20.0, Python 3.11.7, Linux 6.1.

#### bench_x

Commit def5678, 2025-01-10. Settings: `repeats=3`.

**Speed**

| shape | ours/peer |
| --- | ---: |
| base | 2 |"""

EXPECTED_GLANCE = """\
|  | value | machine | date |
| --- | ---: | --- | --- |
| x base: ours/peer | 1.25 | Intel Xeon Platinum 8481C (AMX), 2 cores | \
2025-02-01 |
| x small: ours/peer | 0.9 | Intel Xeon Platinum 8481C (AMX), 2 cores | \
2025-01-15 |

Speed ratios: ours / peer, above 1 where ours is faster."""


def write_records(root, records):
  directory = os.path.join(root, "benchmarks", "results")
  os.makedirs(directory, exist_ok=True)
  for record in records:
    with open(os.path.join(directory, record["benchmark"] + ".jsonl"),
              "a") as f:
      f.write(json.dumps(record) + "\n")


def write_pages(root, around="text {n}\n"):
  """Every page with its blocks' markers, `around` (numbered) between
  and around them; returns {page: text}."""
  texts = {}
  for page in (report.BENCHMARKS_PAGE, report.RESULTS_PAGE,
               report.TRAINING_PAGE, report.FINE_TUNING_PAGE,
               report.SERVING_PAGE, report.README):
    parts = [around.format(n=0)]
    for n, (block_page, name) in enumerate(report.BLOCKS, 1):
      if block_page == page:
        begin, end = report.markers(name)
        parts += [begin, "\nstale\n", end, around.format(n=n)]
    texts[page] = "".join(parts)
    path = os.path.join(root, page)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w", encoding="utf-8", newline="") as f:
      f.write(texts[page])
  return texts


def read(root, page):
  with open(os.path.join(root, page), encoding="utf-8", newline="") as f:
    return f.read()


def test_the_real_pages_agree_with_the_real_records():
  if not all(os.path.exists(os.path.join(REPO_ROOT, page))
             for page in (report.BENCHMARKS_PAGE, report.RESULTS_PAGE)):
    pytest.skip("docs pages not written yet")
  problems = report.check(REPO_ROOT)
  assert not problems, "\n".join(
      problems + ["Run .venv/bin/python benchmarks/report.py (make report)."])


def test_newest_record_per_machine_and_settings():
  kept = report.newest(RECORDS)
  assert [(e["date"][:10], e["settings"]["repeats"]) for e in kept] == [
      ("2025-03-01", 3), ("2025-01-15", 1), ("2025-01-10", 3)]


def test_benchmarks_block_one_section_per_machine():
  blocks, bars = report.render(RECORDS)
  assert blocks[report.BENCHMARKS_PAGE, "benchmarks"] == EXPECTED_BENCHMARKS
  assert bars == [
      ("Intel Xeon Platinum 8481C (AMX), 2 cores",
       [("x base: ours/peer", 1.25), ("x small: ours/peer", 0.9)]),
      ("AMD EPYC 9B14 96-Core (AVX512-BF16), 4 cores",
       [("x base: ours/peer", 2.0)])]
  assert blocks[report.BENCHMARKS_PAGE, "benchmarks-figure"].startswith(
      "![Speed ratios ours/peer per benchmark, one group per machine]"
      "(img/speed_ratios.png)")


def test_glance_takes_each_headline_from_its_newest_record():
  blocks, _ = report.render(RECORDS)
  assert blocks[report.README, "glance"] == EXPECTED_GLANCE


def test_glance_keeps_its_row_limit():
  many = [entry("2025-01-01T00:00:00Z", [["base", 1]], benchmark="bench_%d" % n,
                headline={"ratio %d" % n: 1.0}) for n in range(12)]
  table = report.render(many)[0][report.README, "glance"]
  assert len(re.findall(r"^\| ratio \d+ \|", table, re.M)) == 6


def test_results_block_and_empty_blocks():
  quality = entry("2025-03-01T00:00:00Z", [], benchmark="quality")
  quality["tables"] = [{
      "title": "Per task and path, over seeds",
      "columns": ["task", "path", "metric", "mean", "spread (max - min)",
                  "per seed"],
      "rows": [["MRPC", "default", "eval_accuracy", 0.8, 0.02,
                "0.7900 / 0.8100"],
               ["MRPC", "notrim", "eval_accuracy", 0.796, 0.032,
                "0.8140 / 0.7820"]]}]
  blocks, _ = report.render([quality])
  assert blocks[report.RESULTS_PAGE, "results"].endswith(
      "#### quality.py\n\n"
      "Commit abc1234, 2025-03-01. Settings: `repeats=3`.\n\n"
      "**Per task and path, over seeds**\n\n"
      "| task | path | metric | mean | spread (max - min) | per seed |\n"
      "| --- | --- | --- | ---: | ---: | --- |\n"
      "| MRPC | default | eval_accuracy | 0.8 | 0.02 | 0.7900 / 0.8100 |\n"
      "| MRPC | notrim | eval_accuracy | 0.796 | 0.032 | 0.8140 / 0.7820 |")
  assert blocks[report.BENCHMARKS_PAGE, "benchmarks"].startswith(
      "Not recorded yet: run `make benchmark`")
  assert blocks[report.README, "quickstart-mrpc"].startswith(
      "Not recorded yet: `make quickstarts` runs the MRPC quick start")
  empty, bars = report.render([])
  assert empty[report.RESULTS_PAGE, "results"] == (
      "Not recorded yet: run `make quality`.")
  assert bars == []


def test_output_block_is_the_recorded_output():
  run = entry("2025-04-01T00:00:00Z", [], benchmark="quickstart-mrpc",
              commit="1234abc")
  run["tables"] = [results.output_table(["eval_accuracy = 0.86",
                                         "global_step = 343"])]
  blocks, _ = report.render([run])
  assert blocks[report.README, "quickstart-mrpc"] == (
      "```text\neval_accuracy = 0.86\nglobal_step = 343\n```\n"
      "(recorded on Intel Xeon Platinum 8481C (AMX), 2 cores, 2025-04-01, "
      "commit 1234abc)")
  # With its wall time (benchmarks/checks/quickstarts.py records it).
  run["tables"].append({"title": "Wall time", "columns": ["seconds"],
                        "rows": [[644]]})
  blocks, _ = report.render([run])
  assert blocks[report.README, "quickstart-mrpc"].endswith(
      "2 cores, 2025-04-01, took 644 s, commit 1234abc)")
  # A newer run from an uncommitted tree is not shown: the page keeps the
  # committed one, and says nothing of it where there is none.
  newer = dict(run, date="2025-05-01T00:00:00Z", dirty=True,
               tables=[results.output_table(["eval_accuracy = 0.99"])])
  blocks, _ = report.render([run, newer])
  assert "0.86" in blocks[report.README, "quickstart-mrpc"]
  blocks, _ = report.render([newer])
  assert blocks[report.README, "quickstart-mrpc"].startswith(
      "Not recorded yet:")


def test_write_keeps_text_outside_the_markers(tmp_path):
  root = str(tmp_path)
  write_records(root, RECORDS)
  # Odd line ends and trailing spaces must survive as they are.
  before = write_pages(root, around="  kept {n} \r\n\n| not | a table |  ")
  changed = report.write(root)
  assert sorted(changed) == sorted([report.BENCHMARKS_PAGE,
                                    report.RESULTS_PAGE, report.README,
                                    report.TRAINING_PAGE,
                                    report.FINE_TUNING_PAGE,
                                    report.SERVING_PAGE, report.FIGURE])
  for page, text in before.items():
    after = read(root, page)
    outside = re.split(r"<!-- report:begin [\w-]+ -->.*?"
                       r"<!-- report:end [\w-]+ -->", after, flags=re.S)
    assert outside == re.split(r"<!-- report:begin [\w-]+ -->.*?"
                               r"<!-- report:end [\w-]+ -->", text,
                               flags=re.S)
  start, stop = report.block_span(read(root, report.BENCHMARKS_PAGE),
                                  report.BENCHMARKS_PAGE, "benchmarks")
  assert read(root, report.BENCHMARKS_PAGE)[start:stop] == (
      "\n\n" + EXPECTED_BENCHMARKS + "\n\n")
  assert report.check(root) == []
  # The same records again: no file changes, the figure's bytes included.
  assert report.write(root) == []


def test_check_names_each_block_that_differs(tmp_path):
  root = str(tmp_path)
  write_records(root, RECORDS)
  write_pages(root)
  report.write(root)
  write_records(root, [entry("2025-05-01T00:00:00Z", [["base", 3.0]],
                             headline={"x base: ours/peer": 3.0})])
  problems = report.check(root)
  assert [line.split(" (")[0] for line in problems] == [
      "docs/benchmarks.md: block benchmarks differs from the records",
      "README.md: block glance differs from the records"]
  os.remove(os.path.join(root, report.FIGURE))
  assert report.check(root)[-1] == (
      "docs/img/speed_ratios.png: missing (the records have speed ratios)")


def test_a_missing_marker_or_page_is_named(tmp_path):
  root = str(tmp_path)
  write_pages(root)
  path = os.path.join(root, report.RESULTS_PAGE)
  with open(path) as f:
    text = f.read()
  with open(path, "w") as f:
    f.write(text.replace("<!-- report:end results -->", ""))
  for run in (report.check, report.write):
    with pytest.raises(report.ReportError,
                       match=r"^docs/results\.md: block results needs the "
                       r"line <!-- report:end results --> exactly once "
                       r"\(found 0\)\.$"):
      run(root)
  os.remove(path)
  with pytest.raises(report.ReportError,
                     match=r"^docs/results\.md: no such page"):
    report.check(root)


def test_record_appends_one_json_line(tmp_path):
  settings = {"repeats": 1, "shapes": "small"}
  tables = [results.table("Speed", ["shape", "ours/peer"],
                          [["small", 1.5]])]
  results.record("bench_x", tables, settings, headline={"x: ours/peer": 1.5},
                 directory=str(tmp_path))
  results.record("bench_x", tables, settings, directory=str(tmp_path))
  with open(tmp_path / "bench_x.jsonl") as f:
    lines = f.read().splitlines()
  assert len(lines) == 2
  first = json.loads(lines[0])
  assert first["benchmark"] == "bench_x"
  assert first["settings"] == settings
  assert first["tables"] == tables
  assert first["headline"] == {"x: ours/peer": 1.5}
  assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", first["date"])
  assert re.fullmatch(r"[0-9a-f]{4,40}", first["commit"])
  assert isinstance(first["dirty"], bool)
  assert set(first["machine"]) == {"cpu", "cores", "flags", "onednn",
                                   "tensorflow", "python", "os"}
  assert first["machine"]["cores"] >= 1
  assert set(first["machine"]["flags"]) == set(results.CPU_FLAGS)
  assert report.load_records(str(tmp_path))[0] == first


def test_record_flag_among_plain_arguments():
  assert results.record_wanted(["--megabytes=1"])
  assert not results.record_wanted(["--norecord"])
  assert not results.record_wanted(["--record=false"])
  assert results.record_wanted(["--norecord", "--record"])


def test_machine_key():
  assert results.machine_key(INTEL) == (
      "Intel Xeon Platinum 8481C (AMX), 2 cores")
  assert results.machine_key(AMD) == (
      "AMD EPYC 9B14 96-Core (AVX512-BF16), 4 cores")
  avx2 = dict(AMD, cpu="AMD EPYC 7B13", flags={"avx2": True})
  assert results.machine_key(avx2) == "AMD EPYC 7B13 (AVX2), 4 cores"
  # The CPU's default oneDNN state goes unsaid; the other gets a section.
  assert results.machine_key(dict(avx2, onednn=False)) == (
      "AMD EPYC 7B13 (AVX2), 4 cores")
  assert results.machine_key(dict(avx2, onednn=True)) == (
      "AMD EPYC 7B13 (AVX2), oneDNN on, 4 cores")
  assert results.machine_key(dict(AMD, onednn=False)) == (
      "AMD EPYC 9B14 96-Core (AVX512-BF16), oneDNN off, 4 cores")


def test_onednn_state_is_tensorflows():
  """results.onednn_enabled (no TensorFlow import) against TensorFlow's
  own answer in this process; the variable's spellings."""
  from tensorflow.python.util import _pywrap_util_port  # pylint: disable=g-import-not-at-top
  assert results.machine()["onednn"] == _pywrap_util_port.IsMklEnabled()
  assert results.onednn_enabled(["avx2"], {}) is False
  assert results.onednn_enabled(["avx2", "avx512_vnni"], {}) is True
  for value, state in (("1", True), ("true", True), ("0", False),
                       ("False", False)):
    assert results.onednn_enabled(["avx2"], {
        "TF_ENABLE_ONEDNN_OPTS": value}) is state
    assert results.onednn_enabled(["amx_bf16"], {
        "TF_ENABLE_ONEDNN_OPTS": value}) is state


def test_make_benchmark_runs_what_its_comment_lists():
  with open(os.path.join(REPO_ROOT, "Makefile")) as f:
    lines = f.read().splitlines()
  start = lines.index("benchmark: $(VENV_STAMP) $(KERNELS)")
  comment = []
  for line in reversed(lines[:start]):
    if not line.startswith("#"):
      break
    comment.insert(0, line[1:])
  listed = re.findall(r"bench_\w+", " ".join(comment).split("Not here:")[0])
  recipe = []
  for line in lines[start + 1:]:
    if not line.startswith("\t"):
      break
    recipe.append(line.strip())
  assert recipe[-1] == "$(PYTHON) benchmarks/report.py"
  # Each benchmark in the comment's order, some run again with flags.
  ran = []
  for line in recipe[:-1]:
    match = re.fullmatch(r"\$\(PYTHON\) benchmarks/speed/(bench_\w+)\.py"
                         r"( --[\w=,.-]+)*", line)
    assert match, line
    if not ran or ran[-1] != match.group(1):
      ran.append(match.group(1))
  assert ran == listed


def test_a_broken_record_is_named(tmp_path):
  directory = tmp_path / "benchmarks" / "results"
  directory.mkdir(parents=True)
  (directory / "bench_x.jsonl").write_text(
      json.dumps(RECORDS[0]) + "\n" + json.dumps({"benchmark": "bench_x"}) +
      "\n")
  with pytest.raises(report.ReportError,
                     match=r"bench_x\.jsonl:2 is not a record: it lacks "
                     r"settings, tables, date, machine\.$"):
    report.check(str(tmp_path))


def memory_record():
  """A bench_memory record: two sides of one point, their fits and the
  largest-batch table, as bench_memory.py writes them."""
  points = [["BERT-Large", 512, "squad", "float32", side, batch, peak, 0.0,
             1.0] for side, batch, peak in [
                 ("ours", 1, 7.0), ("ours", 2, 8.5), ("ours", 4, 11.5),
                 ("ours, recomputation", 8, 6.5),
                 ("ours, recomputation", 16, 7.7)]]
  fits = [["BERT-Large", 512, "squad", "float32", "ours", 5.5, 1500.0, 4, 7,
           4, 11.5, ""],
          ["BERT-Large", 512, "squad", "float32", "ours, recomputation", 5.3,
           150.0, 44, 71, 44, 11.9, ""]]
  largest = [["BERT-Large, the original README (Titan X 12 GB)", 0],
             ["BERT-Large, ours, 12 GB", 4],
             ["BERT-Large, ours, recomputation, 12 GB", 44]]
  record = entry("2025-03-01T10:00:00Z", [], benchmark="bench_memory",
                 headline={"BERT-Large seq 512 largest batch in 12 GB, "
                           "recomputation": 44})
  record["tables"] = [
      {"title": "Peak memory of one training step (GB)",
       "columns": ["model", "seq", "head", "precision", "side", "batch",
                   "peak GB", "resident growth GB", "step s"],
       "rows": points},
      {"title": "Fit: peak = fixed + per example x batch",
       "columns": ["model", "seq", "head", "precision", "side", "fixed GB",
                   "per example MB", "batch in 12 GB", "batch in 16 GB",
                   "confirmed batch", "its peak GB", "note"], "rows": fits},
      {"title": "Largest training batch (float32)",
       "columns": ["model, side, budget", "seq 512"], "rows": largest}]
  record["notes"] = ["BERT-Large seq 512: memory per example with "
                     "recomputation / without: 0.100"]
  return record


def test_memory_block_figure_and_no_speed_bars(tmp_path):
  record = memory_record()
  block = report.memory_block([record])
  assert "| BERT-Large, ours, recomputation, 12 GB | 44 |" in block
  assert "Note: BERT-Large seq 512: memory per example" in block
  assert "](img/memory.png)" in block
  # Batch sizes are not speed ratios: no bars, no glance row.
  assert report.speed_ratios([record]) == []
  assert "largest batch" not in report.glance_block([record])
  panels, budgets = report.memory_series(record)
  assert budgets == [12.0, 16.0]
  [(title, sides)] = panels
  assert title == "BERT-Large, seq 512, squad, float32"
  assert sides["ours, recomputation"] == [[8, 16], [6.5, 7.7], (5.3, 0.15)]
  assert report.draw_memory(record).startswith(b"\x89PNG")
  write_records(str(tmp_path), [record])
  write_pages(str(tmp_path))
  changed = report.write(str(tmp_path))
  assert report.MEMORY_FIGURE in changed
  assert report.check(str(tmp_path)) == []


def test_bfloat16_speed_block_per_machine_with_its_units():
  avx2 = dict(AMD, cpu="AMD EPYC 7B13", flags={"avx2": True})
  records = []
  for machine, speed_up in ((INTEL, 2.5), (avx2, 0.4)):
    record = entry("2025-03-01T10:00:00Z", [], machine=machine,
                   benchmark="bench_classifier")
    record["settings"] = {"shape": "minilm"}
    record["tables"] = [{"title": report.BFLOAT16_SPEED,
                         "columns": ["precision", "speed-up"],
                         "rows": [["bfloat16", speed_up]]}]
    records.append(record)
  block = report.bfloat16_speed_block(report.newest(records))
  assert ("| Intel Xeon Platinum 8481C (AMX), 2 cores | yes | minilm | "
          "bfloat16 | 2.5 | 2025-03-01 |") in block
  assert ("| AMD EPYC 7B13 (AVX2), 4 cores | no | minilm | bfloat16 | 0.4 | "
          "2025-03-01 |") in block
  assert report.bfloat16_speed_block([]).startswith("Not recorded yet")


def test_time_block_times_the_recipes_at_each_machines_speed():
  classifier = entry("2025-02-01T00:00:00Z", [], benchmark="bench_classifier")
  classifier["tables"] = [{
      "title": "Fine-tuning examples/s",
      "columns": ["L", "H", "seq", "batch", "xla", "precision", "ours"],
      # Only the BERT-Base float32 row without XLA times MRPC.
      "rows": [[6, 384, 128, 32, False, "float32", 50.0],
               [12, 768, 128, 32, False, "bfloat16", 9.0],
               [12, 768, 128, 32, False, "float32", 2.0]]}]
  pretraining = entry("2025-02-02T00:00:00Z", [],
                      benchmark="bench_pretraining")
  pretraining["tables"] = [{
      "title": "Pre-training steps/s",
      "columns": ["shape", "L", "H", "batch", "seq", "xla", "precision",
                  "variant", "steps/s"],
      "rows": [["base", 12, 768, 8, 128, False, "float32", "ours", 0.25]]}]
  block = report.time_block(report.newest([classifier, pretraining]))
  rows = [line.split(" | ") for line in block.splitlines()[2:]]
  # 3 x 3,668 pairs at 2 a second: 5,502 s; 256M sequences at 0.25 x 8.
  assert [(r[0].lstrip("| "), r[2], r[3]) for r in rows] == [
      ("MRPC: 3 epochs of 3,668 pairs, 128 tokens", "2.0", "1.5 hours"),
      ("Pre-training: 1,000,000 steps of 256 sequences, 128 tokens", "2.0",
       "4.1 years")]
  assert report.duration(59 * 60) == "59 minutes"
  assert report.duration(2 * 86400) == "2 days"


def test_scratch_folders_and_old_names_stay_out_of_the_pages():
  assert report.settings_text({"seeds": [1, 2], "work_dir": "../scratch"}) == (
      "`seeds=1,2`")
  assert report.cell("cast, GELU, cast (ours before)") == (
      "cast, GELU, cast (TensorFlow's ops)")


def test_a_measurement_repeated_by_a_newer_record_shows_once():
  table = lambda rows: [{"title": "Steps/s", "columns": [
      "shape", "precision", "steps/s"], "rows": rows}]
  old = entry("2025-01-01T00:00:00Z", [], repeats=3)
  old["tables"] = table([["base", "float32", 0.4], ["base", "bf16", 0.9],
                         ["small", "float32", 2.0]])
  new = entry("2025-02-01T00:00:00Z", [], repeats=5)
  new["tables"] = table([["base", "float32", 0.5], ["base", "bf16", 1.0]])
  again = entry("2025-01-15T00:00:00Z", [], repeats=4)
  again["tables"] = table([["base", "float32", 0.45]])
  shown = report.newest_rows(report.newest([old, new, again]))
  # The newest's rows; the oldest keeps only what no newer one measured;
  # the middle one, all of whose rows were measured again, is left out.
  assert [(e["date"][:10], t[0]["rows"], dropped)
          for e, t, dropped in shown] == [
              ("2025-02-01", [["base", "float32", 0.5], ["base", "bf16", 1.0]],
               0),
              ("2025-01-01", [["small", "float32", 2.0]], 2)]
  assert report.row_key(["bfloat16", 1428]) == ("bfloat16",)


def test_rows_of_another_corpus_size_are_other_measurements():
  # bench_create_pretraining_data_dask names its rows by way and scale (x1,
  # x2) of a corpus of --megabytes: a newer record at another size leaves
  # the older one's rows in; one at the same size replaces them.
  def run(date, megabytes, seconds):
    record = entry(date, [["local workers, 2 workers", 2 * megabytes,
                           seconds]], benchmark="bench_create_pretraining_"
                   "data_dask")
    record["settings"]["megabytes"] = megabytes
    return record

  old = run("2025-01-01T00:00:00Z", 500.0, 240.0)
  new = run("2025-02-01T00:00:00Z", 100.0, 48.0)
  shown = report.newest_rows(report.newest([old, new]))
  assert [(e["date"][:10], t[0]["rows"], dropped)
          for e, t, dropped in shown] == [
              ("2025-02-01", [["local workers, 2 workers", 200.0, 48.0]], 0),
              ("2025-01-01", [["local workers, 2 workers", 1000.0, 240.0]],
               0)]
  again = run("2025-03-01T00:00:00Z", 500.0, 250.0)
  again["settings"]["repeats"] = 2
  shown = report.newest_rows(report.newest([old, new, again]))
  assert [(e["date"][:10], dropped) for e, _, dropped in shown] == [
      ("2025-03-01", 0), ("2025-02-01", 0)]
