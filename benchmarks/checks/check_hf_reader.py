"""Checkpoints of ours through HuggingFace's reader of Google checkpoints.

Writes pre-training checkpoints as a user does (create_pretraining_data.py
on ../shared/data/corpus/sample_text.txt, then run_pretraining.py on a
tiny config with dropout on, with --optimizer=adamw and --optimizer=lamb,
each stopped halfway and resumed), then runs
benchmarks/peers/hf_load_checkpoint.py in .venv-hf (`make .venv-hf-tf`) on
every model.ckpt-N: transformers' load_tf_weights_in_bert must load each
one without error, every weight it fills must equal ours and none may be
overwritten by training-only state.
Earlier versions failed here: the reader stopped at `dropout_rng/N`, and
a LAMB checkpoint's `lamb_m` / `lamb_v` went into weights of the same shape.

  .venv/bin/python benchmarks/checks/check_hf_reader.py [--work_dir=DIR]
"""

import glob
import json
import os
import subprocess
import sys

ROOT = os.path.abspath(os.path.join(__file__, "../../.."))
sys.path.insert(0, ROOT)

from absl import app  # pylint: disable=g-import-not-at-top
from absl import flags

from benchmarks.lib import results
from tests.conftest import SHARED_DATA

FLAGS = flags.FLAGS
flags.DEFINE_string("work_dir", os.path.join(ROOT, "benchmarks", "output",
                                             "hf_reader"),
                    "Where the records and checkpoints go.")
results.define_flags()

HF_PYTHON = os.path.join(ROOT, ".venv-hf", "bin", "python")

CONFIG = {"attention_probs_dropout_prob": 0.1, "hidden_act": "gelu",
          "hidden_dropout_prob": 0.1, "hidden_size": 32,
          "initializer_range": 0.02, "intermediate_size": 64,
          "max_position_embeddings": 64, "num_attention_heads": 2,
          "num_hidden_layers": 2, "type_vocab_size": 2}


def run(args):
  result = subprocess.run([sys.executable] + args, capture_output=True,
                          text=True, cwd=ROOT)
  if result.returncode:
    sys.exit("%s failed:\n%s" % (args[0], result.stderr[-3000:]))


def main(argv):
  del argv
  if not os.path.exists(HF_PYTHON):
    sys.exit("No %s: make .venv-hf-tf installs PyTorch, transformers and "
             "TensorFlow there." % HF_PYTHON)
  vocab = os.path.join(SHARED_DATA, "vocab", "uncased_vocab.txt")
  os.makedirs(FLAGS.work_dir, exist_ok=True)
  config_file = os.path.join(FLAGS.work_dir, "bert_config.json")
  with open(vocab, encoding="utf-8") as f:
    vocab_size = sum(1 for _ in f)
  with open(config_file, "w") as f:
    json.dump(dict(CONFIG, vocab_size=vocab_size), f)
  records = os.path.join(FLAGS.work_dir, "examples.tfrecord")
  run(["create_pretraining_data.py",
       "--input_file=" + os.path.join(SHARED_DATA, "corpus",
                                      "sample_text.txt"),
       "--output_file=" + records, "--vocab_file=" + vocab,
       "--max_seq_length=64", "--max_predictions_per_seq=10"])
  prefixes = []
  for optimizer in ("adamw", "lamb"):
    output_dir = os.path.join(FLAGS.work_dir, optimizer)
    for steps in (10, 20):  # The second run resumes the first.
      run(["run_pretraining.py", "--input_file=" + records,
           "--output_dir=" + output_dir, "--do_train",
           "--bert_config_file=" + config_file, "--train_batch_size=8",
           "--max_seq_length=64", "--max_predictions_per_seq=10",
           "--num_train_steps=%d" % steps, "--num_warmup_steps=2",
           "--save_checkpoints_steps=10", "--optimizer=" + optimizer])
    prefixes += sorted(p[:-len(".index")] for p in glob.glob(
        os.path.join(output_dir, "model.ckpt-*[0-9].index")))
  # Its JSON lines pass through as they come, and are kept for the record.
  checker = subprocess.Popen(
      [HF_PYTHON,
       os.path.join(ROOT, "benchmarks", "peers", "hf_load_checkpoint.py"),
       "--bert_config_file=" + config_file] + prefixes,
      stdout=subprocess.PIPE, text=True)
  checked = []
  for line in checker.stdout:
    sys.stdout.write(line)
    sys.stdout.flush()
    try:
      checked.append(json.loads(line))
    except ValueError:
      pass
  returncode = checker.wait()
  if FLAGS.record:
    record(checked, returncode, FLAGS.work_dir, results.flag_settings(FLAGS))
  sys.exit(returncode)


def record(checked, returncode, work_dir, settings):
  """Appends pass/fail per checkpoint (hf_load_checkpoint.py's JSON lines,
  checkpoints under work_dir) and the checker's exit status, run with
  settings (the flags), to benchmarks/results/."""
  rows = [[os.path.relpath(c["checkpoint"], work_dir),
           "pass" if c["ok"] else "FAIL", c.get("loaded"),
           len(c.get("untouched", [])), ", ".join(c.get("wrong", [])),
           c.get("error", "")] for c in checked]
  versions = sorted({c["transformers"] for c in checked
                     if "transformers" in c})
  results.record(
      "check_hf_reader",
      [results.table(
          "transformers' load_tf_weights_in_bert on our checkpoints: %s "
          "(exit status %d)" % ("passed" if returncode == 0 else "FAILED",
                                returncode),
          ["checkpoint", "result", "weights loaded", "left untouched",
           "wrong", "error"], rows)],
      settings, notes=["transformers %s" % v for v in versions])


if __name__ == "__main__":
  app.run(main)
