"""The README's quick starts and `make demo`, recorded as their expected output.

Runs each quick start's shell blocks as README.md has them (tests/
quickstarts.py: the `export NAME=/path/to/...` lines filled in, /tmp/ moved
to a fresh directory) with GLUE_DIR the real GLUE data of ../shared/data
and, for lack of a Google model on this machine, BERT_BASE_DIR the
all-MiniLM-L6-v2 weights converted by quick start 1's own conversion
block. What each prints on stdout is recorded (benchmarks/results/
quickstart-*.jsonl, /tmp/ put back in paths) and benchmarks/report.py
shows it under the quick start as its expected output. `--names=demo`
runs `make demo`'s script in a fresh output folder and records the end of
its output (from its SQuAD results on). The three quick starts take about
ten minutes on 2 cores (fine-tuning MiniLM on MRPC is most of it), the
demo about as long.

  make quickstarts     # --names=quickstart-mrpc,quickstart-pretrain,
                       #   quickstart-serving,demo, then the report
  .venv/bin/python benchmarks/checks/quickstarts.py [--names=...]
"""

import os
import re
import sys
import tempfile
import time

ROOT = os.path.abspath(os.path.join(__file__, "../../.."))
sys.path.insert(0, ROOT)

from absl import app  # pylint: disable=g-import-not-at-top
from absl import flags

from benchmarks.lib import results
from tests import quickstarts
from tests.conftest import SHARED_DATA

FLAGS = flags.FLAGS
flags.DEFINE_list("names", ["quickstart-mrpc", "quickstart-pretrain",
                            "quickstart-serving", "demo"],
                  "What to run, in order (serving exports what the MRPC "
                  "quick start trained; demo is make demo's script).")
results.define_flags()

# The demo's output is recorded from this line on: its results, not the
# progress of its steps.
DEMO_FROM = "== fine-tuning eval_results.txt"

# The title of a record's table of how long the run took (report.py shows
# it beside the output).
WALL_TIME = "Wall time"

# The block of quick start 1 that makes a Google folder from HuggingFace
# weights (the other way is a Google model of one's own).
CONVERT = "convert_checkpoint.py"


def scripts(found, work):
  """name -> the bash script that runs it in work (its /tmp/)."""
  mrpc = found["quickstart-mrpc"].blocks
  convert = [block for block in mrpc if CONVERT in block]
  if len(convert) != 1:
    sys.exit("README.md: expected one quick start 1 block running %s, found "
             "%d." % (CONVERT, len(convert)))
  fine_tune = [block for block in mrpc if CONVERT not in block]
  # The conversion prints its own lines: run it first, quietly, so that
  # the record holds what the fine-tuning block prints.
  return {
      "quickstart-mrpc": (
          "{\n%s\n} > /dev/null\n" % quickstarts.script(convert, work) +
          quickstarts.script(fine_tune, work)),
      "quickstart-pretrain": quickstarts.script(
          found["quickstart-pretrain"].blocks, work),
      # BERT_BASE_DIR as quick start 1's conversion block sets it.
      "quickstart-serving": (
          "export BERT_BASE_DIR=%s/minilm_google\n" % work.rstrip("/") +
          quickstarts.script(found["quickstart-serving"].blocks, work)),
      "demo": "DEMO_OUTPUT=%s/demo bash demo/run_demo.sh" % work.rstrip("/"),
  }


def main(argv):
  del argv
  glue = os.path.join(SHARED_DATA, "glue")
  if not os.path.isdir(os.path.join(glue, "MRPC")):
    sys.exit("No %s/MRPC: the real GLUE data this records on." % glue)
  found = quickstarts.quickstarts()
  work = tempfile.mkdtemp(prefix="quickstarts-")
  print("Working in %s (it stands for /tmp/)." % work)
  commands = scripts(found, work)
  for name in FLAGS.names:
    if name not in commands:
      sys.exit("--names: unknown quick start %r; known: %s." %
               (name, ", ".join(commands)))
    start = time.time()
    result = quickstarts.run(commands[name], {"GLUE_DIR": glue})
    seconds = time.time() - start
    if result.returncode:
      sys.stderr.write(result.stderr[-5000:])
      sys.exit("%s failed (exit %d) after %.0f s; nothing recorded." %
               (name, result.returncode, seconds))
    stdout = result.stdout
    if name == "demo":
      stdout = stdout[stdout.index(DEMO_FROM):]
      # Its training steps' last progress lines (absl's log format) vary
      # from run to run and say nothing of the results.
      stdout = re.sub(r"(?m)^[IWEF]\d{4} .*\n", "", stdout)
      stdout = stdout.replace(work.rstrip("/") + "/demo", "demo/output")
    lines = stdout.replace(work.rstrip("/") + "/", "/tmp/")
    lines = lines.rstrip("\n").split("\n")
    print("== %s (%.0f s)\n%s" % (name, seconds, "\n".join(lines)))
    if FLAGS.record:
      results.record(
          name, [results.output_table(lines),
                 {"title": WALL_TIME, "columns": ["seconds"],
                  "rows": [[round(seconds)]]}],
          results.flag_settings(FLAGS, names=[name]),
          notes=[describe(found, name) + " %.0f s." % seconds])


def describe(found, name):
  """What a record of name ran, for its notes."""
  if name == "demo":
    return ("make demo's script (demo/run_demo.sh), its QNLI pairs from "
            "demo/data;")
  return ("%s: README.md's blocks as written, BERT_BASE_DIR the converted "
          "all-MiniLM-L6-v2, GLUE_DIR ../shared/data/glue;" %
          found[name].title)


if __name__ == "__main__":
  app.run(main)
