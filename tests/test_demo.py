"""make demo on a clone with nothing beside it: every step runs, none is
skipped, and the labelled pairs it ships are what its PROVENANCE says."""

import hashlib
import os
import re
import subprocess

import pytest

from tests import conftest
from tests.conftest import REPO_ROOT
from tests.conftest import SHARED_DATA

DEMO = os.path.join(REPO_ROOT, "demo")
STEPS = 7


@pytest.mark.slow
def test_every_step_runs_without_shared_data(tmp_path):
  # DEMO_QUICK=1: the same commands at a few steps each; SHARED_DATA an
  # empty folder, as a user's machine has none. Python through the tests'
  # relay (a fork of a process that has imported TensorFlow) where there
  # is one: the script's dozen starts would each import it again.
  empty = tmp_path / "empty"
  empty.mkdir()
  relay = conftest.relay_command()
  env = conftest.script_env(DEMO_QUICK="1", DEMO_OUTPUT=str(tmp_path / "out"),
                            SHARED_DATA=str(empty))
  if relay:
    env["DEMO_PYTHON"] = " ".join(relay)
  result = subprocess.run(
      ["bash", os.path.join(DEMO, "run_demo.sh")], cwd=REPO_ROOT,
      capture_output=True, text=True, timeout=600, env=env)
  output = result.stdout + result.stderr
  assert result.returncode == 0, output[-5000:]
  assert "skipped" not in output.lower(), output[-5000:]
  for step in range(1, STEPS + 1):
    # Its title, then its time once it is done.
    assert re.search(r"(?m)^== %d/%d .* ==$" % (step, STEPS), result.stdout)
    assert re.search(r"(?m)^-- %d/%d .* took \d+ s$" % (step, STEPS),
                     result.stdout), result.stdout[-3000:]
  assert re.search(r"(?m)^== the demo took \d+ s ==$", result.stdout)
  # Both starts scored on the dev pairs; the export answered both queries.
  accuracies = re.findall(r"(?m)^  from .* (0\.\d{3}|1\.000)$", result.stdout)
  assert len(accuracies) == 2, result.stdout[-3000:]
  labels = re.findall(r"(?m)^  .* (entailment|not_entailment) \(p = 0\.\d+\)$",
                      result.stdout)
  assert len(labels) == 2, result.stdout[-3000:]
  assert (tmp_path / "out" / "qnli_saved_model" / "saved_model.pb").exists()


def test_nothing_the_demo_runs_names_the_projects_shared_folder():
  for name in sorted(os.listdir(DEMO)):
    if name.endswith((".sh", ".py")):
      with open(os.path.join(DEMO, name), encoding="utf-8") as f:
        assert "shared" not in f.read().lower(), name


def _provenance():
  """file name -> (rows, sha256 prefix) as demo/data/PROVENANCE.md lists."""
  with open(os.path.join(DEMO, "data", "PROVENANCE.md"),
            encoding="utf-8") as f:
    text = f.read()
  return {name: (int(rows), digest) for name, rows, digest in re.findall(
      r"(?m)^\| `(QNLI/\w+\.tsv)` \| (\d+) \| `([0-9a-f]{16})` \|", text)}


def test_the_shipped_pairs_are_as_their_provenance_says():
  listed = _provenance()
  assert sorted(listed) == ["QNLI/dev.tsv", "QNLI/train.tsv"]
  for name, (rows, digest) in listed.items():
    with open(os.path.join(DEMO, "data", name), "rb") as f:
      data = f.read()
    assert hashlib.sha256(data).hexdigest()[:16] == digest, name
    lines = data.decode("utf-8").split("\n")
    assert lines[0] == "index\tquestion\tsentence\tlabel" and lines[-1] == ""
    assert len(lines) - 2 == rows, name
    assert {line.split("\t")[3] for line in lines[1:-1]} == {
        "entailment", "not_entailment"}


def test_the_shipped_pairs_are_rows_of_glues_qnli_dev_set():
  source = os.path.join(SHARED_DATA, "glue", "QNLI", "dev.tsv")
  if not os.path.exists(source):
    pytest.skip("needs %s (GLUE's QNLI dev.tsv)" % source)
  with open(source, encoding="utf-8") as f:
    glue = f.read().split("\n")
  shipped = []
  for name in ("train", "dev"):
    with open(os.path.join(DEMO, "data", "QNLI", name + ".tsv"),
              encoding="utf-8") as f:
      lines = f.read().split("\n")
    assert lines[0] == glue[0]
    shipped += lines[1:-1]
  # Train is GLUE's first 2,000 dev rows, dev the next 1,000.
  assert shipped == glue[1:3001]
