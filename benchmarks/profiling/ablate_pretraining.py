"""Where a pre-training step's wall time goes: our step with one part taken
out at a time, against the whole step and Model Garden's BertPretrainerV2.

The same steps as bench_pretraining.py (config, batch, masked-LM +
next-sentence losses, AdamW with clipping). Each variant removes one
part of ours, so its time saved is that part's share of the wall time
(what an op profile's summed op times cannot tell on a machine whose cores
run ops in parallel):
- no_update: the optimizer's update (each gradient still computed and
  stored, so nothing upstream is pruned);
- no_update_no_clip: also the global-norm clipping;
- no_gelu, no_layer_norm, no_dropout: identity in place of each (Model
  Garden's step has all three too).
Steps alternate (--repeats); medians, each variant's saving and its ratio
to Model Garden are printed.

  .venv/bin/python benchmarks/profiling/ablate_pretraining.py [--shapes=small,base]
      [--repeats=8] [--jit_compile]
"""

import contextlib
import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
sys.path.insert(0, os.path.abspath(os.path.join(__file__, "../../..")))

from absl import app  # pylint: disable=g-import-not-at-top
from absl import flags
import tensorflow as tf
import tf_keras

from benchmarks.lib import results
from benchmarks.lib import timing
from benchmarks.lib import train_steps
import modeling
from modeling import layers
from runner_lib.core import training
from runner_lib.core.training import optimization
from runner_lib.core.training import step as step_lib

FLAGS = flags.FLAGS
flags.DEFINE_string("shapes", "small,base", "Comma-separated: small, base.")
flags.DEFINE_integer("repeats", 8, "Timed steps per variant.")
flags.DEFINE_bool("jit_compile", False, "XLA on every variant.")
flags.DEFINE_enum("precision", "float32", ["float32", "bfloat16"],
                  "Our matmuls' precision (bench_pretraining's); Model "
                  "Garden under Keras' mixed policy for bfloat16.")
results.define_flags()


@contextlib.contextmanager
def replaced(owner, name, value):
  """owner.name = value while the step is built (traced)."""
  original = getattr(owner, name)
  setattr(owner, name, value)
  try:
    yield
  finally:
    setattr(owner, name, original)


def store_gradient(self, variable, grad, m, v, learning_rate, step, decay,
                   grad_scale=None):
  """An update that only stores the gradient (in the m slot)."""
  del self, variable, v, learning_rate, step, decay, grad_scale
  return m.assign(grad)


def unclipped(grads, clip_norm=step_lib.CLIP_NORM, leave_scale=False):
  del clip_norm
  grads = [None if g is None else tf.convert_to_tensor(g) for g in grads]
  return (grads, [None] * len(grads)) if leave_scale else grads


VARIANTS = {
    "ours": [],
    "no_update": [(optimization.AdamWeightDecay, "_step", store_gradient)],
    "no_update_no_clip": [
        (optimization.AdamWeightDecay, "_step", store_gradient),
        (step_lib, "clip_gradients", unclipped)],
    "no_gelu": [],  # a config with hidden_act "linear"
    "no_layer_norm": [(layers.LayerNorm, "call",
                       lambda self, x, residual=None:
                       x if residual is None else x + residual)],
    "no_dropout": [],  # a config without dropout
}


def bench(name):
  """Times every variant at one shape; prints them and returns their
  numbers, a row each."""
  fields, batch_size, seq_length, predictions = train_steps.SHAPES[name]
  config = modeling.BertConfig(**fields)
  batch = train_steps.make_batch(config, batch_size, seq_length, predictions)
  steps = {}
  for variant, replacements in VARIANTS.items():
    variant_config = config
    if variant == "no_dropout":
      variant_config = modeling.BertConfig(
          **dict(fields, hidden_dropout_prob=0.0,
                 attention_probs_dropout_prob=0.0))
    elif variant == "no_gelu":
      variant_config = modeling.BertConfig(**dict(fields, hidden_act="linear"))
    with contextlib.ExitStack() as stack:
      for owner, attribute, value in replacements:
        stack.enter_context(replaced(owner, attribute, value))
      step = train_steps.ours_step(variant_config, batch, seq_length,
                                   predictions, FLAGS.jit_compile,
                                   getattr(tf, FLAGS.precision))
      float(step())  # traced with the replacements in place
    steps[variant] = step
  tf_keras.mixed_precision.set_global_policy(
      "float32" if FLAGS.precision == "float32" else "mixed_bfloat16")
  steps["model_garden"] = train_steps.model_garden_step(config, batch,
                                                        FLAGS.jit_compile)
  float(steps["model_garden"]())  # Built and traced under the policy.
  tf_keras.mixed_precision.set_global_policy("float32")
  medians = timing.alternated_medians(
      {k: (lambda fn=fn: float(fn())) for k, fn in steps.items()},
      FLAGS.repeats)
  print("%s L=%d H=%d batch=%d seq=%d xla=%s %s" % (
      name, config.num_hidden_layers, config.hidden_size, batch_size,
      seq_length, FLAGS.jit_compile, FLAGS.precision))
  rows = []
  for variant, seconds in medians.items():
    print("  %-18s %8.1f ms  saves %5.1f%% of ours  model_garden/this %.3f"
          % (variant, 1000 * seconds,
             100 * (1 - seconds / medians["ours"]),
             medians["model_garden"] / seconds), flush=True)
    rows.append([name, config.num_hidden_layers, config.hidden_size,
                 batch_size, seq_length, FLAGS.jit_compile, variant,
                 round(1000 * seconds, 1),
                 round(100 * (1 - seconds / medians["ours"]), 1),
                 round(medians["model_garden"] / seconds, 3)])
  return rows


def main(argv):
  del argv
  print("TensorFlow %s, %d CPUs, %d repeats (medians)" %
        (tf.__version__, os.cpu_count(), FLAGS.repeats))
  rows = [row for name in FLAGS.shapes.split(",") for row in bench(name)]
  if FLAGS.record:
    results.record(
        "ablate_pretraining",
        [results.table(
            "Pre-training step with one part taken out, ms per step",
            ["shape", "L", "H", "batch", "seq", "xla", "variant", "ms",
             "saves % of ours", "model_garden/this"], rows)],
        results.flag_settings(FLAGS))


if __name__ == "__main__":
  app.run(main)
