"""Peak memory of a training step and the largest batch that fits a budget:
ours with and without --gradient_checkpointing beside Model Garden.

The original README's "Out-of-memory issues" table (Titan X, 12 GB, TF
1.11, run_classifier.py / run_squad.py) gives the largest batch that fits;
this benchmark measures the same thing here. Each measurement is one
training step (the model, the loss, AdamW with the original's settings,
random weights of the real sizes) in a fresh process. Its number is
TensorFlow's own allocator peak during the step
(tf.config.experimental.get_memory_info("CPU:0"), reset just before it):
the weights, optimizer slots, activations, gradients and temporaries that
TensorFlow allocates, i.e. what a GPU's memory would have to hold (the
runtime's code and the graph are not counted). The process's peak
resident memory growth over the step (VmHWM less VmRSS before it) is
printed beside it as a check.

Which allocator counts: TensorFlow's CPU allocator keeps statistics only
where it is a BFC allocator. oneDNN's is one, but TensorFlow turns oneDNN
on only on CPUs with AVX512-VNNI, AVX512-BF16 or AMX; elsewhere (AVX2-only
CPUs) the CPU allocator is plain malloc and keeps none. So each measuring
process runs TensorFlow's own BFC CPU allocator (TF_CPU_ALLOCATOR_USE_BFC,
set in its environment before TensorFlow loads; --allocator=bfc, the
default): the same allocator and the same count on every CPU, with oneDNN
on or off. It counts what the tensors occupy, as the GPU's BFC allocator
does; the process's peak resident memory (the other way to measure
without statistics) would add the runtime and malloc's caching, which
differ between machines. --allocator=default keeps the runtime's own
allocator (oneDNN's where it is on), to compare the two.

Each row is measured at batch 1, 2, 4, ... until its peak grows linearly
(at small batches the optimizer update's memory sets the peak, which does
not grow with the batch); on that linear part peak = fixed + per_example
x batch is fitted (least squares), and the largest batch whose predicted peak fits each
--budgets value is printed in the original's table layout, and the 12 GB
prediction of each of our rows is confirmed with one run at that batch
where it fits this machine. A budget of 12 GB is 12e9 bytes, about what
TensorFlow can allocate on a 12 GB card once the CUDA context is made.
A run that would not fit this machine's memory is not started (or is
stopped), and its row says so. The step-time cost of recomputation is
timed in the same run (BERT-Base, seq 512, SQuAD head, steps alternated).

Measured on CPUs only: no GPU with TensorFlow is reachable here. On a GPU
TensorFlow's allocator holds the same tensors; its executor runs one op
at a time per stream, where the CPU's may run independent branches side
by side, so these peaks are if anything high.

  .venv/bin/python benchmarks/speed/bench_memory.py
      [--points=base:128,...,large:512] [--precisions=float32,mixed_bfloat16]
      [--max_batch=64] [--budgets=12,16] [--noconfirm] [--time_repeats=3]
"""

import json
import os
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.abspath(os.path.join(__file__, "../../..")))

from absl import app  # pylint: disable=g-import-not-at-top
from absl import flags

from benchmarks.lib import results

FLAGS = flags.FLAGS
flags.DEFINE_list("points", ["base:128", "base:384", "base:512",
                             "large:128", "large:384", "large:512"],
                  "model:seq_length points, model base (BERT-Base) or "
                  "large (BERT-Large); seq 128 uses the classifier head, "
                  "longer ones SQuAD's.")
flags.DEFINE_list("precisions", ["float32", "mixed_bfloat16"],
                  "float32; mixed_bfloat16: Keras' mixed_bfloat16 policy, "
                  "what --precision=bfloat16 runs on a GPU or TPU; "
                  "bfloat16: what it runs on a CPU (the matmuls only).")
flags.DEFINE_list("bfloat16_points", ["large:512"],
                  "model:seq points measured in the precisions other than "
                  "float32 (all: every point).")
flags.DEFINE_integer("max_batch", 64, "Each row is measured at batch 1, "
                     "2, 4, ... up to this, until its peak grows linearly.")
flags.DEFINE_list("budgets", ["12", "16"], "Memory budgets, GB (1e9 "
                  "bytes).")
flags.DEFINE_bool("confirm", True, "Run ours at the batch predicted for the "
                  "first budget, to confirm the prediction.")
flags.DEFINE_integer("time_repeats", 3, "Timed steps with and without "
                     "recomputation (0: not timed).")
flags.DEFINE_integer("time_batch", 4, "Batch of the timed steps.")
flags.DEFINE_enum("allocator", "bfc", ["bfc", "default"],
                  "The CPU allocator whose peak is measured: bfc, "
                  "TensorFlow's BFC allocator (TF_CPU_ALLOCATOR_USE_BFC) on "
                  "every CPU; default, the runtime's own, which keeps "
                  "statistics only where oneDNN is on.")
flags.DEFINE_string("child", None, "Internal: one measurement, as JSON.")
results.define_flags()

SHAPES = {
    "base": dict(hidden_size=768, num_hidden_layers=12,
                 num_attention_heads=12, intermediate_size=3072),
    "large": dict(hidden_size=1024, num_hidden_layers=24,
                  num_attention_heads=16, intermediate_size=4096),
}
MODEL_NAMES = {"base": "BERT-Base", "large": "BERT-Large"}
SIDES = ("ours", "ours_recompute", "model_garden")
SIDE_NAMES = {"ours": "ours", "ours_recompute": "ours, recomputation",
              "model_garden": "Model Garden"}
# The original README's table: largest batch in 12 GB (Titan X, TF 1.11).
ORIGINAL_12GB = {("base", 64): 64, ("base", 128): 32, ("base", 256): 16,
                 ("base", 320): 14, ("base", 384): 12, ("base", 512): 6,
                 ("large", 64): 12, ("large", 128): 6, ("large", 256): 2,
                 ("large", 320): 1, ("large", 384): 0, ("large", 512): 0}
GB = 1e9
# A row's batches double until two of them peak at LINEAR_FROM x the
# smallest peak or more; the fit uses those points (linear_part).
LINEAR_FROM = 1.15
# What this machine keeps free beyond a run's predicted allocator peak:
# the runtime, the graph and the allocator's slack.
HEADROOM = 3 * GB


# ------------------------------------------------------------------ child


def head_of(seq_length):
  return "classifier" if seq_length <= 128 else "squad"


def child(point):
  """Runs one measurement in this (fresh) process; prints a JSON line.

  point: dict with model, seq, precision, side, batch; or mode "time".
  """
  import numpy as np  # pylint: disable=g-import-not-at-top
  import tensorflow as tf
  import tf_keras

  from benchmarks.lib import model_garden
  from benchmarks.lib import timing
  import modeling
  from official.nlp.modeling import models
  from runner_lib.classifier import task as classifier
  from runner_lib.core import training
  from runner_lib.squad import task as squad
  from tests import reference

  config = modeling.BertConfig(vocab_size=30522, type_vocab_size=2,
                               max_position_embeddings=512,
                               **SHAPES[point["model"]])
  seq, batch_size = point["seq"], point["batch"]
  head = head_of(seq)
  rng = np.random.RandomState(0)
  batch = {"input_ids": tf.constant(rng.randint(1000, 30000,
                                                [batch_size, seq]), tf.int32),
           "input_mask": tf.ones([batch_size, seq], tf.int32),
           "segment_ids": tf.constant((np.arange(seq) >= seq // 4)[None]
                                      .repeat(batch_size, 0), tf.int32)}
  if head == "squad":
    task = squad.SquadTask(config, seq)
    batch["start_positions"] = tf.constant(rng.randint(0, seq, [batch_size]),
                                           tf.int32)
    batch["end_positions"] = tf.constant(rng.randint(0, seq, [batch_size]),
                                         tf.int32)
  else:
    task = classifier.ClassificationTask(config, seq, ["0", "1"])
    batch["label_ids"] = tf.constant(rng.randint(0, 2, [batch_size]),
                                     tf.int32)
  precision = point["precision"]

  def ours(recompute):
    options = modeling.ComputeOptions()
    if precision == "mixed_bfloat16":
      options = modeling.ComputeOptions(keras_policy="mixed_bfloat16")
    elif precision == "bfloat16":
      options = modeling.ComputeOptions(tf.bfloat16)
    import tempfile  # pylint: disable=g-import-not-at-top
    trainer = training.Trainer(
        tf.distribute.get_strategy(),
        task.model_builder(False, gradient_checkpointing=recompute,
                           options=options),
        task.loss, training.TrainingConfig(
            output_dir=tempfile.mkdtemp(), learning_rate=2e-5,
            num_train_steps=10000, num_warmup_steps=100,
            update="exact" if precision == "float32" else "fused"))
    return tf.function(lambda: trainer.train_step(batch))

  def theirs():
    if precision != "float32":
      tf_keras.mixed_precision.set_global_policy("mixed_bfloat16")
    encoder = reference.model_garden_encoder(config)
    if head == "squad":
      model = models.BertSpanLabeler(encoder)

      def loss(logits):
        start, end = [tf.cast(x, tf.float32) for x in logits]
        return (squad.span_loss(start, batch["start_positions"]) +
                squad.span_loss(end, batch["end_positions"])) / 2.0
    else:
      model = models.BertClassifier(encoder, num_classes=2, dropout_rate=0.1)

      def loss(logits):
        return tf.reduce_mean(task.per_example_loss(
            tf.cast(logits, tf.float32), batch["label_ids"]))
    return model_garden.train_step(model, batch, loss, 2e-5, False)

  if point.get("mode") == "time":
    steps = {"plain": ours(False), "recompute": ours(True)}
    medians = timing.alternated_medians(
        {name: (lambda s=s: float(s())) for name, s in steps.items()},
        point["repeats"], warmup=1)
    print(json.dumps(medians))
    return

  if point["side"] == "model_garden":
    step = theirs()
  else:
    step = ours(point["side"] == "ours_recompute")
  # Traced (and Model Garden's optimizer slots made) before measuring.
  step.get_concrete_function()
  rss_before = _status_kb("VmRSS")
  _reset_peak_rss()
  tf.config.experimental.reset_memory_stats("CPU:0")
  started = time.perf_counter()
  loss = float(step())
  seconds = time.perf_counter() - started
  peak = tf.config.experimental.get_memory_info("CPU:0")["peak"]
  print(json.dumps({"peak": peak, "loss": loss, "seconds": seconds,
                    "rss_growth": (_status_kb("VmHWM") - rss_before) * 1024}))


def _status_kb(field):
  with open("/proc/self/status") as f:
    for line in f:
      if line.startswith(field + ":"):
        return int(line.split()[1])
  raise RuntimeError("/proc/self/status has no " + field)


def _reset_peak_rss():
  """VmHWM back to the current VmRSS (Linux: clear_refs 5)."""
  with open("/proc/self/clear_refs", "w") as f:
    f.write("5")


# ----------------------------------------------------------------- parent


def available_memory():
  """Bytes this machine can give a run now (MemAvailable)."""
  with open("/proc/meminfo") as f:
    for line in f:
      if line.startswith("MemAvailable:"):
        return int(line.split()[1]) * 1024
  raise RuntimeError("/proc/meminfo has no MemAvailable")


ALLOCATOR_NAMES = {
    "bfc": "TensorFlow's BFC CPU allocator",
    "default": "the runtime's own CPU allocator (oneDNN's where it is on)"}


def child_env(allocator):
  """The measuring process's environment: allocator "bfc" turns on
  TensorFlow's BFC CPU allocator, read as TensorFlow loads."""
  env = dict(os.environ)
  if allocator == "bfc":
    env["TF_CPU_ALLOCATOR_USE_BFC"] = "true"
  return env


def run_child(point, rss_limit):
  """Runs child(point) in a fresh process, stopped if its resident memory
  passes rss_limit bytes (so this machine never swaps).

  Returns:
    the child's JSON dict, or None where it was stopped or failed (a
    reason printed).
  """
  process = subprocess.Popen(
      [sys.executable, os.path.abspath(__file__),
       "--child=" + json.dumps(point), "--norecord"],
      stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
      env=child_env(FLAGS.allocator))
  stopped = []

  def watch():
    while process.poll() is None:
      try:
        with open("/proc/%d/status" % process.pid) as f:
          rss = next(int(line.split()[1]) * 1024 for line in f
                     if line.startswith("VmRSS:"))
      except (OSError, StopIteration):
        return
      if rss > rss_limit:
        stopped.append(rss)
        process.kill()
        return
      time.sleep(0.2)

  watcher = threading.Thread(target=watch, daemon=True)
  watcher.start()
  stdout, stderr = process.communicate()
  watcher.join()
  if stopped:
    print("  stopped: resident memory passed %.1f GB, more than this "
          "machine has free" % (rss_limit / GB))
    return None
  if process.returncode:
    print("  failed (exit %d): %s" % (process.returncode,
                                      stderr.strip().splitlines()[-1:]))
    return None
  return json.loads(stdout.strip().splitlines()[-1])


def fit(points):
  """Least squares of peak = fixed + per_example * batch.

  Args:
    points: list of (batch, peak bytes), at least two batches.

  Returns:
    (fixed, per_example) in bytes.
  """
  n = len(points)
  mean_b = sum(b for b, _ in points) / n
  mean_p = sum(p for _, p in points) / n
  spread = sum((b - mean_b) ** 2 for b, _ in points)
  per_example = sum((b - mean_b) * (p - mean_p) for b, p in points) / spread
  return mean_p - per_example * mean_b, per_example


def largest_batch(fixed, per_example, budget):
  """The largest batch whose predicted peak is within budget (0: none)."""
  if per_example <= 0:
    return None
  return max(0, int((budget - fixed) // per_example))


def parsed_points():
  """[(model, seq)] from --points, in order."""
  points = []
  for point in FLAGS.points:
    model, _, seq = point.partition(":")
    if model not in SHAPES or not seq.isdigit() or int(seq) > 512:
      raise app.UsageError("--points: %r is not model:seq_length with model "
                           "base or large and seq_length <= 512." % point)
    points.append((model, int(seq)))
  return points


def models_and_lengths():
  """The models and the sequence lengths of --points, each once, in order."""
  points = parsed_points()
  return (list(dict.fromkeys(m for m, _ in points)),
          sorted({s for _, s in points}))


def wanted_points():
  """[(model, seq, precision)] in the order measured."""
  points = []
  for precision in FLAGS.precisions:
    for model, seq in parsed_points():
      if (precision == "float32" or "all" in FLAGS.bfloat16_points or
          "%s:%d" % (model, seq) in FLAGS.bfloat16_points):
        points.append((model, seq, precision))
  return points


def linear_part(measured):
  """The points where the step's activations set the peak.

  At small batches the peak is the update's (weights, slots, gradients
  and the update's temporaries) and does not grow with the batch; past
  it, the forward and backward passes' activations set it and it grows
  linearly. The points at least LINEAR_FROM x the smallest peak, or the
  two largest batches where fewer are.

  Args:
    measured: list of (batch, peak bytes), batches ascending.

  Returns:
    list of (batch, peak bytes), at least two where measured has two.
  """
  floor = min(p for _, p in measured)
  linear = [(b, p) for b, p in measured if p >= LINEAR_FROM * floor]
  return linear if len(linear) >= 2 else measured[-2:]


def measure_row(model, seq, precision, side, rss_limit):
  """Measures one row at batch 1, 2, 4, ... until the last two of at
  least three batches are on the linear part (linear_part), --max_batch,
  or what this machine can hold.

  Returns:
    (list of (batch, child's dict), note: str, "" where nothing stopped
    the row early).
  """
  measured, batch = [], 1
  while batch <= FLAGS.max_batch:
    if len(measured) >= 2:
      fixed, per_example = fit(linear_part(
          [(b, m["peak"]) for b, m in measured]))
      if fixed + per_example * batch + HEADROOM > rss_limit:
        return measured, ("batch %d not run: predicted %.1f GB, more than "
                          "this machine has free" %
                          (batch, (fixed + per_example * batch) / GB))
    print("%s seq %d %s %s, batch %d ..." % (MODEL_NAMES[model], seq,
                                             precision, SIDE_NAMES[side],
                                             batch), flush=True)
    result = run_child(dict(model=model, seq=seq, precision=precision,
                            side=side, batch=batch), rss_limit)
    if result is None:
      return measured, "batch %d did not fit this machine" % batch
    print("  peak %.2f GB (resident growth %.2f GB), %.1f s" % (
        result["peak"] / GB, result["rss_growth"] / GB, result["seconds"]))
    measured.append((batch, result))
    floor = min(m["peak"] for _, m in measured)
    if len(measured) >= 3 and all(m["peak"] >= LINEAR_FROM * floor
                                  for _, m in measured[-2:]):
      return measured, ""
    batch *= 2
  return measured, ""


def main(argv):
  del argv
  if FLAGS.child:
    child(json.loads(FLAGS.child))
    return
  budgets = [float(b) for b in FLAGS.budgets]
  rss_limit = available_memory() - 1 * GB
  print("This machine: %.1f GB available; a run is stopped past %.1f GB "
        "resident." % (available_memory() / GB, rss_limit / GB))

  points_rows, fit_rows, fits, peaks = [], [], {}, {}
  for model, seq, precision in wanted_points():
    for side in SIDES:
      measured, stopped = measure_row(model, seq, precision, side,
                                      rss_limit)
      peaks[model, seq, precision, side] = {b: m["peak"] for b, m in measured}
      for batch, m in measured:
        points_rows.append([MODEL_NAMES[model], seq, head_of(seq), precision,
                            SIDE_NAMES[side], batch,
                            round(m["peak"] / GB, 3),
                            round(m["rss_growth"] / GB, 3),
                            round(m["seconds"], 1)])
      if len(measured) < 2:
        fit_rows.append([MODEL_NAMES[model], seq, head_of(seq), precision,
                         SIDE_NAMES[side], None, None] +
                        [None] * len(budgets) + [None, None,
                                                 stopped or "one batch only"])
        continue
      fixed, per_example = fit(linear_part(
          [(b, m["peak"]) for b, m in measured]))
      fits[model, seq, precision, side] = (fixed, per_example)
      largest = [largest_batch(fixed, per_example, budget * GB)
                 for budget in budgets]
      confirmed, target, note = None, None, stopped
      if FLAGS.confirm and side != "model_garden" and largest[0]:
        linear = linear_part([(b, m["peak"]) for b, m in measured])
        # A run at the predicted batch; where it lands over the budget,
        # the fit again with that point and one more run at its batch.
        for _ in range(2):
          target = largest[0]
          if target in dict(measured):
            confirmed = dict(measured)[target]["peak"]
            break
          if fixed + per_example * target + HEADROOM > rss_limit:
            note = "; ".join(filter(None, [
                note, "not confirmed: more than this machine has free"]))
            target = None
            break
          print("  confirming batch %d ..." % target, flush=True)
          result = run_child(dict(model=model, seq=seq, precision=precision,
                                  side=side, batch=target), rss_limit)
          if result is None:
            note = "; ".join(filter(None, [
                note, "confirmation run stopped or failed"]))
            target = None
            break
          confirmed = result["peak"]
          measured.append((target, result))
          points_rows.append([MODEL_NAMES[model], seq, head_of(seq),
                              precision, SIDE_NAMES[side], target,
                              round(confirmed / GB, 3),
                              round(result["rss_growth"] / GB, 3),
                              round(result["seconds"], 1)])
          print("  peak %.2f GB at batch %d (predicted %.2f GB)" % (
              confirmed / GB, target, (fixed + per_example * target) / GB))
          if confirmed <= budgets[0] * GB:
            break
          linear.append((target, confirmed))
          fixed, per_example = fit(linear)
          fits[model, seq, precision, side] = (fixed, per_example)
          largest = [largest_batch(fixed, per_example, budget * GB)
                     for budget in budgets]
        if confirmed is not None and confirmed > budgets[0] * GB:
          note = "; ".join(filter(None, [
              note, "confirmed peak over %g GB" % budgets[0]]))
      fit_rows.append([MODEL_NAMES[model], seq, head_of(seq), precision,
                       SIDE_NAMES[side], round(fixed / GB, 3),
                       round(per_example / 1e6, 1)] + largest + [
                           target if confirmed is not None else None,
                           None if confirmed is None else
                           round(confirmed / GB, 3), note])

  tables = [
      results.table(
          "Peak memory of one training step (the allocator peak of %s, "
          "GB = 1e9 bytes; resident growth: the process's, as a check)" %
          ALLOCATOR_NAMES[FLAGS.allocator],
          ["model", "seq", "head", "precision", "side", "batch", "peak GB",
           "resident growth GB", "step s"], points_rows),
      results.table(
          "Fit: peak = fixed + per example x batch; largest batch within "
          "each budget",
          ["model", "seq", "head", "precision", "side", "fixed GB",
           "per example MB"] + ["batch in %g GB" % b for b in budgets] +
          ["confirmed batch", "its peak GB", "note"], fit_rows)]
  tables.append(original_table(fits, budgets))
  headline, notes = comparisons(fits, peaks, budgets)
  if FLAGS.time_repeats:
    print("Timing BERT-Base seq 512 steps with and without recomputation "
          "...", flush=True)
    medians = run_child(dict(mode="time", model="base", seq=512,
                             precision="float32", batch=FLAGS.time_batch,
                             repeats=FLAGS.time_repeats), rss_limit)
    if medians:
      cost = medians["recompute"] / medians["plain"]
      tables.append(results.table(
          "Step time with recomputation, BERT-Base seq 512 SQuAD float32, "
          "batch %d (medians of alternated steps)" % FLAGS.time_batch,
          ["without s", "with s", "with / without"],
          [[round(medians["plain"], 2), round(medians["recompute"], 2),
            round(cost, 3)]]))
      headline["BERT-Base seq 512 step time, recomputation / without"] = (
          round(cost, 3))
  for table in tables:
    print("\n" + table["title"])
    print(" | ".join(table["columns"]))
    for row in table["rows"]:
      print(" | ".join("" if c is None else str(c) for c in row))
  for note in notes:
    print(note)
  if FLAGS.record:
    results.record("bench_memory", tables, results.flag_settings(FLAGS),
                   headline=headline, notes=notes)


def original_table(fits, budgets):
  """The original README's layout: largest batch per model and sequence
  length, the original's 12 GB beside ours at each budget (float32)."""
  models, lengths = models_and_lengths()
  rows = []
  for model in models:
    for side in SIDES:
      for budget in budgets:
        row = ["%s, %s, %g GB" % (MODEL_NAMES[model], SIDE_NAMES[side],
                                  budget)]
        for seq in lengths:
          fitted = fits.get((model, seq, "float32", side))
          row.append(None if fitted is None else
                     largest_batch(fitted[0], fitted[1], budget * GB))
        rows.append(row)
    rows.insert(len(rows) - len(SIDES) * len(budgets),
                ["%s, the original README (Titan X 12 GB)" %
                 MODEL_NAMES[model]] +
                [ORIGINAL_12GB.get((model, s)) for s in lengths])
  return results.table(
      "Largest training batch (float32), the original README's table",
      ["model, side, budget"] + ["seq %d" % s for s in lengths],
      rows)


def comparisons(fits, peaks, budgets):
  """The targets as numbers: headline dict and note lines.

  Args:
    fits: dict (model, seq, precision, side) -> (fixed, per_example).
    peaks: dict (model, seq, precision, side) -> {batch: measured peak}.
    budgets: list of GB.
  """
  headline, notes = {}, []
  first = budgets[0]
  for model, seq in (("large", 512), ("large", 384), ("base", 512)):
    fitted = fits.get((model, seq, "float32", "ours_recompute"))
    if fitted:
      headline["%s seq %d largest batch in %g GB, recomputation" % (
          MODEL_NAMES[model], seq, first)] = largest_batch(
              fitted[0], fitted[1], first * GB)
  for model, seq in parsed_points():
    plain = fits.get((model, seq, "float32", "ours"))
    recompute = fits.get((model, seq, "float32", "ours_recompute"))
    name = "%s seq %d" % (MODEL_NAMES[model], seq)
    if plain and recompute:
      ratio = recompute[1] / plain[1]
      notes.append("%s: memory per example with recomputation / without: "
                   "%.3f" % (name, ratio))
      if (model, seq) == ("large", 512):
        headline["BERT-Large seq 512 memory per example, recomputation / "
                 "without"] = round(ratio, 3)
    ours_peaks = peaks.get((model, seq, "float32", "ours"), {})
    their_peaks = peaks.get((model, seq, "float32", "model_garden"), {})
    common = set(ours_peaks) & set(their_peaks)
    if common:
      batch = max(common)
      ratio = ours_peaks[batch] / their_peaks[batch]
      notes.append("%s: peak at batch %d, ours / Model Garden: %.3f" % (
          name, batch, ratio))
      headline["%s peak at batch %d, ours / Model Garden" % (
          name, batch)] = round(ratio, 3)
  return headline, notes


if __name__ == "__main__":
  app.run(main)
