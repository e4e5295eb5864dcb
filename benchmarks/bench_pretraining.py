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
import tempfile

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from absl import app  # pylint: disable=g-import-not-at-top
from absl import flags
import numpy as np
import tensorflow as tf
import tf_keras

from official.modeling import tf_utils
from official.nlp.modeling import layers as mg_layers
from official.nlp.modeling import models

from benchmarks import model_garden
from benchmarks import timing
import modeling
from runner_lib.core import training
from runner_lib.pretraining import task as pretraining
from tests import reference

FLAGS = flags.FLAGS
flags.DEFINE_integer("repeats", 10, "Timed steps per model and setting.")
flags.DEFINE_string("shapes", "small,base", "Comma-separated: small, base.")
flags.DEFINE_string("xla", "false,true", "Comma-separated jit_compile values.")

SHAPES = {
    "small": (dict(vocab_size=30522, hidden_size=256, num_hidden_layers=4,
                   num_attention_heads=4, intermediate_size=1024,
                   type_vocab_size=2), 32, 128, 20),
    "base": (dict(vocab_size=30522, hidden_size=768, num_hidden_layers=12,
                  num_attention_heads=12, intermediate_size=3072,
                  type_vocab_size=2), 8, 128, 20),
}


def make_batch(config, batch_size, seq_length, predictions):
  rng = np.random.RandomState(0)
  ids = rng.randint(1000, config.vocab_size, [batch_size, seq_length])
  positions = np.sort(np.stack([rng.choice(np.arange(1, seq_length - 1),
                                           predictions, replace=False)
                                for _ in range(batch_size)]), axis=1)
  return {
      "input_ids": tf.constant(ids, tf.int32),
      "input_mask": tf.ones([batch_size, seq_length], tf.int32),
      "segment_ids": tf.constant((np.arange(seq_length) >= seq_length // 2)
                                 [None].repeat(batch_size, 0), tf.int32),
      "masked_lm_positions": tf.constant(positions, tf.int32),
      "masked_lm_ids": tf.constant(
          np.take_along_axis(ids, positions, 1), tf.int32),
      "masked_lm_weights": tf.ones([batch_size, predictions], tf.float32),
      "next_sentence_labels": tf.constant(rng.randint(0, 2, [batch_size, 1]),
                                          tf.int32),
  }


def ours_step(config, batch, seq_length, predictions, jit_compile):
  task = pretraining.PretrainingTask(config, seq_length, predictions)
  trainer = training.Trainer(tf.distribute.get_strategy(), task.build_model,
                             task.loss, tempfile.mkdtemp(), 1e-4, 100000,
                             1000, jit_compile=jit_compile)
  return tf.function(lambda: trainer.train_step(batch))


def model_garden_step(config, batch, jit_compile):
  encoder = reference.model_garden_encoder(config)
  model = models.BertPretrainerV2(
      encoder_network=encoder,
      mlm_activation=tf_utils.get_activation(config.hidden_act),
      mlm_initializer=tf_keras.initializers.TruncatedNormal(stddev=0.02),
      classification_heads=[mg_layers.ClassificationHead(
          inner_dim=config.hidden_size, num_classes=2, activation="tanh",
          name="next_sentence")])
  schedule = tf_keras.optimizers.schedules.PolynomialDecay(1e-4, 100000, 0.0)

  def loss(outputs):
    mlm, _ = pretraining.masked_lm_loss(outputs["mlm_logits"],
                                        batch["masked_lm_ids"],
                                        batch["masked_lm_weights"])
    nsp, _ = pretraining.next_sentence_loss(outputs["next_sentence"],
                                            batch["next_sentence_labels"])
    return mlm + nsp

  return model_garden.train_step(model, batch, loss, schedule, jit_compile,
                                 extra_inputs=("masked_lm_positions",))


def bench(name, jit_compile):
  fields, batch_size, seq_length, predictions = SHAPES[name]
  config = modeling.BertConfig(**fields)
  batch = make_batch(config, batch_size, seq_length, predictions)
  runs = {"ours": ours_step(config, batch, seq_length, predictions,
                            jit_compile),
          "model_garden": model_garden_step(config, batch, jit_compile)}
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
