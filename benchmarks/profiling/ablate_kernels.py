"""What each fused CPU kernel earns: BERT-Base training steps with every
kernel, with none (TensorFlow's own ops, --fused_kernels=false), and with
each kernel off in turn (modeling.ComputeOptions' kernels).

Workloads, BERT-Base (L=12 H=768), sequence length 128:
- pretraining: bench_pretraining's step (batch 8, 20 predictions, masked
  LM + next sentence, AdamW with clipping);
- fine-tuning: bench_classifier's step (a 2-class classifier, 40 to 128
  real tokens of 128) at --finetune_batch; with --skip_padding the
  encoder computes on the real tokens only, as the runners' trimmed
  batches without XLA do.
For each workload and precision, each variant is timed against "all"
(every kernel), their calls alternated, medians: two models alive at a
time, as BERT-Base trainers take about 2 GB each. "kernel saves" is the
median over rounds of t(variant) / t(all) - 1, each round's two calls
back to back (a drift of the machine's speed moves both), for the
variant without that kernel: the share of a step that kernel saves; for
"none", what all of them save together.

--measure=memory measures instead the peak memory of one step of each
variant, each in a fresh process running TensorFlow's BFC CPU allocator
(TF_CPU_ALLOCATOR_USE_BFC, as bench_memory.py: the tensors' bytes, with
oneDNN on or off), after a first step that traces it and makes the
optimizer's slots. "kernel saves MB" is peak(variant) - peak(all).

A kernel that saves less than 3% of a step in the precision it serves,
and no memory to speak of, does not earn its place (issue 54).

  .venv/bin/python benchmarks/profiling/ablate_kernels.py
      [--measure=time|memory] [--workloads=pretraining,fine-tuning]
      [--precisions=float32,bfloat16] [--repeats=3]
      [--variants=none,dropout,...]
"""

import gc
import json
import os
import statistics
import subprocess
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
sys.path.insert(0, os.path.abspath(os.path.join(__file__, "../../..")))

from absl import app  # pylint: disable=g-import-not-at-top
from absl import flags
import tensorflow as tf

from benchmarks.lib import results
from benchmarks.lib import timing
from benchmarks.lib import train_steps
import modeling
from modeling import fused_kernels
from modeling import options as options_lib

FLAGS = flags.FLAGS
flags.DEFINE_list("workloads", ["pretraining", "fine-tuning"],
                  "pretraining, fine-tuning.")
flags.DEFINE_list("precisions", ["float32", "bfloat16"],
                  "float32, bfloat16 (the runners' --precision on a CPU).")
flags.DEFINE_enum("shape", "base", ["base", "small"],
                  "BERT-Base, or L=4 H=256 (train_steps.SHAPES).")
flags.DEFINE_integer("finetune_batch", 8, "The fine-tuning step's batch.")
flags.DEFINE_bool("skip_padding", False, "The fine-tuning step's encoder "
                  "on real tokens only (BertModel.skip_padding).")
flags.DEFINE_integer("repeats", 3, "Timed steps of each variant and of "
                     "'all' beside it.")
flags.DEFINE_list("variants", None, "Only these variants: none, or a "
                  "kernel's name for the variant without it (default all).")
flags.DEFINE_enum("measure", "time", ["time", "memory"],
                  "time: step times beside 'all'; memory: each variant's "
                  "peak memory in a fresh process.")
flags.DEFINE_string("child", None, "Internal (--measure=memory): measure "
                    "one variant here, given as JSON [workload, precision, "
                    "kernels].")
results.define_flags()

# The kernels each precision's step runs (bias_add: between bfloat16
# matmuls only).
USED = {"float32": [k for k in options_lib.KERNELS if k != "bias_add"],
        "bfloat16": list(options_lib.KERNELS)}
COLUMNS = ["workload", "precision", "variant", "ms", "ms of all beside it",
           "kernel saves %"]
MEMORY_COLUMNS = ["workload", "precision", "variant", "peak MB",
                  "kernel saves MB"]
# The longest a --measure=memory process may take.
CHILD_SECONDS = 1800


def step(workload, precision, kernels):
  """A blocking call of one training step of workload, built with the
  fused kernels named."""
  fields, batch_size, seq_length, predictions = train_steps.SHAPES[
      FLAGS.shape]
  config = modeling.BertConfig(**fields)
  dtype = getattr(tf, precision)
  if workload == "pretraining":
    batch = train_steps.make_batch(config, batch_size, seq_length,
                                   predictions)
    fn = train_steps.ours_step(config, batch, seq_length, predictions,
                               False, dtype, kernels)
  else:
    batch = train_steps.classifier_batch(FLAGS.finetune_batch, seq_length,
                                         40)
    fn = train_steps.classifier_step(config, batch, False, dtype, kernels,
                                     FLAGS.skip_padding)
  return lambda: float(fn())


def variants(precision):
  """{"none" or the kernel left out: the kernels used} of a precision."""
  used = USED[precision]
  chosen = {"none": ()}
  chosen.update({k: [u for u in used if u != k] for k in used})
  if FLAGS.variants:
    chosen = {k: v for k, v in chosen.items() if k in FLAGS.variants}
  return chosen


def variant_name(kernel):
  return kernel if kernel == "none" else "without " + kernel


def ablate(workload, precision):
  """Rows of COLUMNS for one workload and precision."""
  everything = step(workload, precision, USED[precision])
  rows = []
  for kernel, kernels in variants(precision).items():
    name = variant_name(kernel)
    times = timing.alternated_times(
        {"all": everything, name: step(workload, precision, kernels)},
        FLAGS.repeats, warmup=1)
    medians = {k: statistics.median(t) for k, t in times.items()}
    saves = 100 * (timing.paired_ratio(times, name, "all") - 1)
    gc.collect()  # The variant's model, before the next is built.
    rows.append([workload, precision, name, round(1000 * medians[name], 1),
                 round(1000 * medians["all"], 1), round(saves, 1)])
    print("%-11s %-8s %-28s %8.1f ms (all %8.1f ms) saves %5.1f%%" %
          tuple(rows[-1]), flush=True)
  return rows


def peak_in_child(workload, precision, kernels):
  """Peak bytes of one step of a variant, measured in a fresh process
  (main with --child) running TensorFlow's BFC CPU allocator."""
  env = dict(os.environ, TF_CPU_ALLOCATOR_USE_BFC="true")
  try:
    # A BERT-Base child takes about 35 s on 2 cores: the bound is for a
    # hang, not a slow machine.
    result = subprocess.run(
        [sys.executable, os.path.abspath(__file__), "--norecord",
         "--shape=" + FLAGS.shape,
         "--finetune_batch=%d" % FLAGS.finetune_batch,
         "--skip_padding=%s" % FLAGS.skip_padding,
         "--child=" + json.dumps([workload, precision, list(kernels)])],
        env=env, capture_output=True, text=True, check=False,
        timeout=CHILD_SECONDS)
  except subprocess.TimeoutExpired:
    sys.exit("The measuring process of %s %s without %s ran past %d s." % (
        workload, precision, sorted(set(USED[precision]) - set(kernels)),
        CHILD_SECONDS))
  if result.returncode:
    sys.exit("The measuring process failed: %s" % result.stderr[-2000:])
  return json.loads(result.stdout.strip().splitlines()[-1])["peak"]


def measure_child():
  """--child: prints {"peak": bytes} of one step after a first one."""
  workload, precision, kernels = json.loads(FLAGS.child)
  fn = step(workload, precision, kernels)
  fn()  # Traced, the optimizer's slots made.
  gc.collect()
  tf.config.experimental.reset_memory_stats("CPU:0")
  fn()
  print(json.dumps(
      {"peak": tf.config.experimental.get_memory_info("CPU:0")["peak"]}))


def ablate_memory(workload, precision):
  """Rows of MEMORY_COLUMNS for one workload and precision."""
  mb = 1e-6
  everything = peak_in_child(workload, precision, USED[precision])
  rows = [[workload, precision, "all", round(everything * mb, 1), 0.0]]
  print("%-11s %-8s %-28s %8.1f MB" % tuple(rows[-1][:4]), flush=True)
  for kernel, kernels in variants(precision).items():
    peak = peak_in_child(workload, precision, kernels)
    rows.append([workload, precision, variant_name(kernel),
                 round(peak * mb, 1), round((peak - everything) * mb, 1)])
    print("%-11s %-8s %-28s %8.1f MB, kernel saves %8.1f MB" %
          tuple(rows[-1]), flush=True)
  return rows


def main(argv):
  del argv
  if FLAGS.child:
    measure_child()
    return
  if not fused_kernels.available():
    sys.exit("The fused kernels are not built (make setup).")
  unknown = set(FLAGS.variants or ()) - {"none", *options_lib.KERNELS}
  if unknown:
    sys.exit("--variants: unknown %s (expected none or one of %s)" % (
        ", ".join(sorted(unknown)), ", ".join(options_lib.KERNELS)))
  model = "BERT-Base" if FLAGS.shape == "base" else "L=4 H=256"
  if FLAGS.measure == "memory":
    print("TensorFlow %s, %s, peak memory of a step (BFC allocator)" % (
        tf.__version__, results.device_name()))
    rows = [row for workload in FLAGS.workloads
            for precision in FLAGS.precisions
            for row in ablate_memory(workload, precision)]
    table = results.table(
        "%s training steps' peak memory (TensorFlow's BFC CPU allocator), "
        "each fused kernel off in turn" % model, MEMORY_COLUMNS, rows)
  else:
    print("TensorFlow %s, %s, %d repeats (medians)" % (
        tf.__version__, results.device_name(), FLAGS.repeats))
    rows = [row for workload in FLAGS.workloads
            for precision in FLAGS.precisions
            for row in ablate(workload, precision)]
    table = results.table(
        "%s training steps, each fused kernel off in turn" % model, COLUMNS,
        rows)
  if FLAGS.record:
    results.record("ablate_kernels", [table], results.flag_settings(FLAGS))


if __name__ == "__main__":
  app.run(main)
