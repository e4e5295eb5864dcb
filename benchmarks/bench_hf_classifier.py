"""End to end: run_classifier.py against HuggingFace's PyTorch BERT.

The MRPC recipe at the MiniLM-L6 shape (L=6, H=384, A=12, I=1536; real
../shared/data/glue/MRPC, max_seq_length 128, train batch 32, lr 2e-5,
one epoch, then dev evaluation at batch 8), both from the same initial
encoder weights (BERT's initializer; no pre-trained MiniLM is reachable
offline, so dev accuracy only shows the two learn alike). Each side is a
fresh process timed from start to exit, reading the TSVs itself:
- ours: `run_classifier.py --do_train --do_eval` as a user runs it
  (trimmed batches, the encoder skipping padding), with --notrim_padding
  (the original's shapes) and with --bucket_by_length;
- HuggingFace: benchmarks/hf_classifier.py in .venv-hf (PyTorch CPU
  build and transformers: `make .venv-hf`), batches padded to their
  longest sequence (DataCollatorWithPadding) and to 128.
Whole runs alternate (--repeats); medians and ratios are printed.

  .venv/bin/python benchmarks/bench_hf_classifier.py [--repeats=1]
"""

import json
import os
import subprocess
import sys
import tempfile
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from absl import app  # pylint: disable=g-import-not-at-top
from absl import flags
import numpy as np

import modeling
from tests import reference
from tests.conftest import SHARED_DATA

FLAGS = flags.FLAGS
flags.DEFINE_integer("repeats", 1, "Alternated whole runs per variant.")
flags.DEFINE_string("hf_python", os.path.join(ROOT, ".venv-hf", "bin",
                                              "python"),
                    "Python with torch and transformers (make .venv-hf).")

MINILM_L6 = dict(vocab_size=30522, hidden_size=384, num_hidden_layers=6,
                 num_attention_heads=12, intermediate_size=1536,
                 type_vocab_size=2)


def initial_checkpoint(directory):
  """(bert_config.json, TF1 checkpoint prefix, .npz) of one random
  encoder: normal(0, 0.02) weights (BERT's initializer range), LayerNorm
  gamma 1 and beta 0."""
  config = modeling.BertConfig(**MINILM_L6)
  weights = reference.random_weights(config, seed=1, heads=False, scale=0.02)
  for name in weights:
    if name.endswith("gamma"):
      weights[name] = np.ones_like(weights[name])
    if name.endswith("beta"):
      weights[name] = np.zeros_like(weights[name])
  config_file = os.path.join(directory, "bert_config.json")
  with open(config_file, "w", encoding="utf-8") as f:
    f.write(config.to_json_string())
  prefix = reference.write_tf1_checkpoint(
      os.path.join(directory, "init", "bert_model.ckpt"), weights)
  npz = os.path.join(directory, "init.npz")
  np.savez(npz, **weights)
  return config_file, prefix, npz


def timed(command, result):
  """Runs command; returns (seconds from start to exit, result(stdout))."""
  started = time.perf_counter()
  completed = subprocess.run(command, capture_output=True, text=True,
                             cwd=ROOT, check=False)
  seconds = time.perf_counter() - started
  if completed.returncode:
    raise SystemExit("%s failed:\n%s" % (" ".join(command),
                                         completed.stderr[-3000:]))
  return seconds, result(completed.stdout)


def main(argv):
  del argv
  data_dir = os.path.join(SHARED_DATA, "glue", "MRPC")
  vocab_file = os.path.join(SHARED_DATA, "vocab", "uncased_vocab.txt")
  if not os.path.exists(data_dir):
    raise SystemExit("Needs ../shared/data (GLUE MRPC).")
  if not os.path.exists(FLAGS.hf_python):
    raise SystemExit("Needs %s with torch and transformers: run "
                     "`make .venv-hf` first." % FLAGS.hf_python)
  directory = tempfile.mkdtemp()
  config_file, prefix, npz = initial_checkpoint(directory)

  def ours(trim, bucket=False):
    output_dir = tempfile.mkdtemp(dir=directory)

    def accuracy(_):
      with open(os.path.join(output_dir, "eval_results.txt"),
                encoding="utf-8") as f:
        return float(dict(line.split(" = ") for line in f.read().splitlines()
                         )["eval_accuracy"])
    return timed([
        os.path.join(ROOT, ".venv", "bin", "python"), "run_classifier.py",
        "--task_name=MRPC", "--do_train", "--do_eval",
        "--data_dir=" + data_dir, "--vocab_file=" + vocab_file,
        "--bert_config_file=" + config_file, "--init_checkpoint=" + prefix,
        "--max_seq_length=128", "--train_batch_size=32",
        "--learning_rate=2e-5", "--num_train_epochs=1",
        "--output_dir=" + output_dir,
        "--trim_padding" if trim else "--notrim_padding",
        "--bucket_by_length" if bucket else "--nobucket_by_length"], accuracy)

  def huggingface(padding):
    return timed([FLAGS.hf_python, "benchmarks/hf_classifier.py",
                  "--data_dir=" + data_dir, "--vocab_file=" + vocab_file,
                  "--config=" + config_file, "--weights=" + npz,
                  "--padding=" + padding],
                 lambda out: json.loads(out.splitlines()[-1])["eval_accuracy"])

  runs = {"ours": lambda: ours(True), "ours_full": lambda: ours(False),
          "ours_bucketed": lambda: ours(True, bucket=True),
          "hf_longest": lambda: huggingface("longest"),
          "hf_max_length": lambda: huggingface("max_length")}
  seconds = {name: [] for name in runs}
  accuracy = {}
  for _ in range(FLAGS.repeats):
    for name, run in runs.items():
      took, accuracy[name] = run()
      seconds[name].append(took)
  m = {name: float(np.median(t)) for name, t in seconds.items()}
  print("MRPC, MiniLM-L6 shape (L=6 H=384), 1 epoch + dev eval, end to end "
        "(%d cores), median of %d: ours %.1f s (full length %.1f s, "
        "--bucket_by_length %.1f s), HuggingFace PyTorch padded to the "
        "batch's longest %.1f s (to 128: %.1f s); ratio HF longest/ours = "
        "%.2f (bucketed: %.2f), HF 128/ours full = %.2f; dev accuracy ours "
        "%.4f, full %.4f, bucketed %.4f, HF longest %.4f, HF 128 %.4f" %
        (os.cpu_count(), FLAGS.repeats, m["ours"], m["ours_full"],
         m["ours_bucketed"], m["hf_longest"], m["hf_max_length"],
         m["hf_longest"] / m["ours"], m["hf_longest"] / m["ours_bucketed"],
         m["hf_max_length"] / m["ours_full"], accuracy["ours"],
         accuracy["ours_full"], accuracy["ours_bucketed"],
         accuracy["hf_longest"], accuracy["hf_max_length"]))


if __name__ == "__main__":
  app.run(main)
