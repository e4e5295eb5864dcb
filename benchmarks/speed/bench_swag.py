"""SWAG fine-tuning examples/s against run_classifier's on a pair task.

A SWAG example is four sequences, so at the same sequence length and batch
its step does four times a classifier step's work: the expected ratio of
examples/s is about 0.25, and less would mean overhead in the four-choice
path (reshapes, the per-choice softmax). Both are our Trainer's step, one
fixed batch each, the paper's SWAG batch of 16; runs alternate, medians and
the ratio are printed.

  .venv/bin/python benchmarks/speed/bench_swag.py [--repeats=5] [--small]
"""

import os
import sys
import tempfile

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
sys.path.insert(0, os.path.abspath(os.path.join(__file__, "../../..")))

from absl import app  # pylint: disable=g-import-not-at-top
from absl import flags
import numpy as np
import tensorflow as tf

from benchmarks.lib import results
from benchmarks.lib import timing
import modeling
from runner_lib.classifier import task as classifier
from runner_lib.core import training
from runner_lib.swag import task as swag

FLAGS = flags.FLAGS
flags.DEFINE_integer("repeats", 5, "Timed steps per task.")
flags.DEFINE_bool("small", False, "L=4 H=256 instead of BERT-Base.")
results.define_flags()


def pair_batch(rng, shape, seq_length):
  """Random [CLS] A [SEP] B [SEP]-shaped ids, 40..seq_length long."""
  lengths = rng.randint(40, seq_length + 1, shape)
  positions = np.arange(seq_length)
  mask = (positions < lengths[..., None]).astype(np.int32)
  return {"input_ids": tf.constant(rng.randint(1000, 30000, mask.shape) *
                                   mask, tf.int32),
          "input_mask": tf.constant(mask),
          "segment_ids": tf.constant((positions >= lengths[..., None] // 2) *
                                     mask, tf.int32)}


def trainer_step(task, batch):
  trainer = training.Trainer(
      tf.distribute.get_strategy(), task.build_model, task.loss,
      training.TrainingConfig(output_dir=tempfile.mkdtemp(),
                              learning_rate=2e-5, num_train_steps=10000,
                              num_warmup_steps=100))
  step = tf.function(lambda: trainer.train_step(batch))
  return lambda: float(step())


def main(argv):
  del argv
  fields = (dict(hidden_size=256, num_hidden_layers=4, num_attention_heads=4,
                 intermediate_size=1024) if FLAGS.small else {})
  config = modeling.BertConfig(vocab_size=30522, type_vocab_size=2, **fields)
  batch_size, seq_length = 16, 128
  rng = np.random.RandomState(0)
  pair = pair_batch(rng, [batch_size], seq_length)
  pair["label_ids"] = tf.constant(rng.randint(0, 2, [batch_size]), tf.int32)
  choices = pair_batch(rng, [batch_size, 4], seq_length)
  choices["label_ids"] = tf.constant(rng.randint(0, 4, [batch_size]),
                                     tf.int32)
  m = timing.alternated_medians({
      "classifier": trainer_step(classifier.ClassificationTask(
          config, seq_length, ["0", "1"]), pair),
      "swag": trainer_step(swag.SwagTask(config, seq_length), choices),
  }, FLAGS.repeats)
  print("L=%d H=%d seq=%d batch=%d: swag %.2f examples/s, classifier %.2f "
        "examples/s, ratio swag/classifier = %.3f (4 sequences per example: "
        "0.25 expected)" %
        (config.num_hidden_layers, config.hidden_size, seq_length, batch_size,
         batch_size / m["swag"], batch_size / m["classifier"],
         m["classifier"] / m["swag"]))
  if FLAGS.record:
    # Not a comparison with a peer: no headline.
    results.record(
        "bench_swag",
        [results.table(
            "SWAG against a pair classifier, examples/s (0.25 expected: "
            "4 sequences per example)",
            ["L", "H", "seq", "batch", "swag", "classifier",
             "swag/classifier"],
            [[config.num_hidden_layers, config.hidden_size, seq_length,
              batch_size, round(batch_size / m["swag"], 2),
              round(batch_size / m["classifier"], 2),
              round(m["classifier"] / m["swag"], 3)]])],
        results.flag_settings(FLAGS))


if __name__ == "__main__":
  app.run(main)
