"""The demo's fine-tuning data: valid SQuAD files, answers where they say,
dev questions disjoint from train."""

import json
import os
import subprocess
import sys

import pytest

from runner_lib.squad import data as squad_data
from tests.conftest import REPO_ROOT


@pytest.mark.slow
def test_demo_questions_are_valid_squad(tmp_path):
  train, dev = str(tmp_path / "train.json"), str(tmp_path / "dev.json")
  subprocess.run([sys.executable, os.path.join(REPO_ROOT, "demo",
                                               "make_squad.py"), train, dev],
                 check=True, capture_output=True, timeout=300)
  ids = {}
  for path in (train, dev):
    with open(path) as f:
      data = json.load(f)["data"]
    for article in data:
      for paragraph in article["paragraphs"]:
        (qa,) = paragraph["qas"]
        (answer,) = qa["answers"]
        start = answer["answer_start"]
        assert paragraph["context"][start:start + len(answer["text"])] == (
            answer["text"])
        assert paragraph["context"][:start].endswith(
            ("Return ", "Returns ", "a ", "an ", "the "))
    examples, skipped = squad_data.read_squad_examples(path, True, False)
    assert skipped == []
    ids[path] = {e.qas_id for e in examples}
  assert not ids[train] & ids[dev]
  # Every fourth question is a dev question.
  assert len(ids[dev]) * 3 <= len(ids[train]) <= len(ids[dev]) * 3 + 3
  assert len(ids[dev]) >= 50
