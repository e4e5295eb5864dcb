"""Pre-training steps/s: ours vs tf-models-official's BertPretrainerV2.

Same config, batch, sequence length, masked-LM + next-sentence losses and an
AdamW optimizer with global-norm clipping on both sides (Model Garden's
AdamWeightDecay applies bias correction, ours the original's update; the
cost is the same). One fixed batch, so only the step is timed. Runs
alternate between the two so that machine noise hits both; medians and the
ratio are printed, with and without XLA.

  .venv/bin/python benchmarks/bench_pretraining.py [--repeats=10]
"""

import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from absl import app  # pylint: disable=g-import-not-at-top
from absl import flags
import tensorflow as tf

from benchmarks import train_steps
from benchmarks import timing
import modeling

FLAGS = flags.FLAGS
flags.DEFINE_integer("repeats", 10, "Timed steps per model and setting.")
flags.DEFINE_string("shapes", "small,base", "Comma-separated: small, base.")
flags.DEFINE_string("xla", "false,true", "Comma-separated jit_compile values.")


def bench(name, jit_compile):
  fields, batch_size, seq_length, predictions = train_steps.SHAPES[name]
  config = modeling.BertConfig(**fields)
  batch = train_steps.make_batch(config, batch_size, seq_length,
                                       predictions)
  runs = {"ours": train_steps.ours_step(config, batch, seq_length,
                                              predictions, jit_compile),
          "model_garden": train_steps.model_garden_step(config, batch,
                                                              jit_compile)}
  medians = timing.alternated_medians(
      {k: (lambda fn=fn: float(fn())) for k, fn in runs.items()},
      FLAGS.repeats)
  print("%-5s L=%d H=%d batch=%d seq=%d xla=%-5s ours %.2f steps/s  "
        "model_garden %.2f steps/s  ratio ours/model_garden = %.3f" %
        (name, config.num_hidden_layers, config.hidden_size, batch_size,
         seq_length, jit_compile, 1 / medians["ours"],
         1 / medians["model_garden"],
         medians["model_garden"] / medians["ours"]), flush=True)


def main(argv):
  del argv
  print("TensorFlow %s, %d CPUs, %d repeats (medians)" %
        (tf.__version__, os.cpu_count(), FLAGS.repeats))
  for name in FLAGS.shapes.split(","):
    for xla in FLAGS.xla.split(","):
      bench(name, xla == "true")


if __name__ == "__main__":
  app.run(main)
