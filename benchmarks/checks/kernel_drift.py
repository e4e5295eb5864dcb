"""How far training with the fused CPU kernels drifts from training with
TensorFlow's own ops (--fused_kernels=false): the same BERT-Base
pre-training steps from the same initial weights, dropout seeds and batch,
every fused kernel on and off, then every trainable weight compared.

The kernels define their own float32 arithmetic (modeling/fused_kernels.py),
so the two runs round differently and the differences grow with the steps;
docs/differences.md states the bound this measures:
- "max |on - off| / max |off|": per weight, the largest difference against
  the weight's largest entry; the maximum over weights;
- "|on - off| / |off - start|": per weight, the difference's norm against
  how far the steps moved it; the maximum over weights.
Both leave out the attention's key biases: their true gradient is 0 (a
bias added to every key adds the same q . b to each of a query's scores,
which the softmax ignores), so each run's gradient there is rounding
noise, which Adam scales to steps of the full learning rate in the noise's
direction; they are reported apart, as their largest |on - off| against
the learning rate times the steps (the most Adam can move a weight).

  .venv/bin/python benchmarks/checks/kernel_drift.py [--steps=4]
      [--batch_size=8] [--precision=float32]
"""

import functools
import os
import sys
import tempfile

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
sys.path.insert(0, os.path.abspath(os.path.join(__file__, "../../..")))

from absl import app  # pylint: disable=g-import-not-at-top
from absl import flags
import numpy as np
import tensorflow as tf
import tf_keras

from benchmarks.lib import results
from benchmarks.lib import train_steps
import modeling
from modeling import fused_kernels
from modeling import options as options_lib
from runner_lib.core import training
from runner_lib.core.training import precision
from runner_lib.pretraining import task as pretraining

FLAGS = flags.FLAGS
flags.DEFINE_integer("steps", 4, "Training steps of each run.")
flags.DEFINE_integer("batch_size", 8, "Sequences per step (length 128).")
flags.DEFINE_enum("precision", "float32", ["float32", "bfloat16"],
                  "The matmuls' type in both runs.")
results.define_flags()

LEARNING_RATE = 1e-4


def train(kernels):
  """FLAGS.steps steps of BERT-Base pre-training with the fused kernels
  named: (weights before, weights after, losses), weights by name."""
  fields, _, seq_length, predictions = train_steps.SHAPES["base"]
  config = modeling.BertConfig(**fields)
  batch = train_steps.make_batch(config, FLAGS.batch_size, seq_length,
                                 predictions)
  task = pretraining.PretrainingTask(config, seq_length, predictions)
  options = modeling.ComputeOptions(getattr(tf, FLAGS.precision), kernels)
  tf_keras.utils.set_random_seed(1)
  trainer = training.Trainer(
      tf.distribute.get_strategy(),
      functools.partial(task.build_model, options), task.loss,
      training.TrainingConfig(
          output_dir=tempfile.mkdtemp(), learning_rate=LEARNING_RATE,
          num_train_steps=1000, num_warmup_steps=0,
          update=precision.optimizer_update(options, FLAGS.precision)))
  start = {n: v.numpy() for n, v in zip(trainer.names, trainer.trainable)}
  step = tf.function(lambda: trainer.train_step(batch))
  losses = [float(step()) for _ in range(FLAGS.steps)]
  end = {n: v.numpy() for n, v in zip(trainer.names, trainer.trainable)}
  return start, end, losses


def main(argv):
  del argv
  if not fused_kernels.available():
    sys.exit("The fused kernels are not built (make setup).")
  start, off, off_losses = train(())
  fused_start, on, on_losses = train(options_lib.KERNELS)
  assert all(np.array_equal(start[n], fused_start[n]) for n in start)
  of_scale, of_update = {}, {}
  noise = [n for n in off if n.endswith("attention/self/key/bias")]
  noise_difference = max(float(np.abs(on[n] - off[n]).max()) for n in noise)
  for name in off:
    if name in noise:
      continue
    difference = np.abs(on[name] - off[name])
    of_scale[name] = float(difference.max() / np.abs(off[name]).max())
    moved = np.linalg.norm(off[name] - start[name])
    of_update[name] = (float(np.linalg.norm(difference) / moved)
                       if moved else 0.0)
  worst_scale = max(of_scale, key=of_scale.get)
  worst_update = max(of_update, key=of_update.get)
  differ = sum(int(np.any(on[n] != off[n])) for n in off)
  print("%s, %d steps, batch %d: losses off %s, on %s" % (
      FLAGS.precision, FLAGS.steps, FLAGS.batch_size,
      ["%.6f" % l for l in off_losses], ["%.6f" % l for l in on_losses]))
  print("weights that differ: %d of %d" % (differ, len(off)))
  print("max |on - off| / max |off|: %.3g (%s)" % (of_scale[worst_scale],
                                                   worst_scale))
  print("|on - off| / |off - start|: %.3g (%s)" % (of_update[worst_update],
                                                   worst_update))
  print("key biases (gradient 0): max |on - off| %.3g, learning rate x "
        "steps %.3g" % (noise_difference, LEARNING_RATE * FLAGS.steps))
  if FLAGS.record:
    rows = [[FLAGS.precision, FLAGS.steps, FLAGS.batch_size, differ,
             len(off), round(of_scale[worst_scale], 9), worst_scale,
             round(of_update[worst_update], 6), worst_update,
             round(max(abs(a - b) / abs(b)
                       for a, b in zip(on_losses, off_losses)), 9),
             "%.3g of %.3g" % (noise_difference,
                               LEARNING_RATE * FLAGS.steps)]]
    results.record(
        "kernel_drift",
        [results.table(
            "BERT-Base pre-training, fused kernels on against off",
            ["precision", "steps", "batch", "weights that differ",
             "weights", "max |on - off| / max |off|", "at",
             "|on - off| / |off - start|", "at",
             "loss, largest relative difference",
             "key biases: max |on - off| of learning rate x steps"], rows)],
        results.flag_settings(FLAGS),
        headline={"weights after %d steps, max |on - off| / max |off|" %
                  FLAGS.steps: round(of_scale[worst_scale], 9)})


if __name__ == "__main__":
  app.run(main)
