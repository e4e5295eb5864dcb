"""Fine-tuning examples/s: ours vs tf-models-official's BertClassifier.

The MRPC recipe's shape (BERT-Base, seq 128, batch 32, two labels), the
same cross-entropy and AdamW with clipping on both sides, one fixed batch.
Runs alternate; medians and the ratio are printed.

  .venv/bin/python benchmarks/bench_classifier.py [--repeats=5] [--small]
"""

import os
import sys
import tempfile

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from absl import app  # pylint: disable=g-import-not-at-top
from absl import flags
import tensorflow as tf

from official.nlp.modeling import models

from benchmarks import model_garden
from benchmarks import timing
from benchmarks import train_steps
import modeling
from runner_lib.classifier import task as classifier
from runner_lib.core import training
from tests import reference

FLAGS = flags.FLAGS
flags.DEFINE_integer("repeats", 5, "Timed steps per model.")
flags.DEFINE_bool("small", False, "L=4 H=256 instead of BERT-Base.")
flags.DEFINE_bool("jit_compile", False, "XLA on both sides.")


def main(argv):
  del argv
  fields = (dict(hidden_size=256, num_hidden_layers=4, num_attention_heads=4,
                 intermediate_size=1024) if FLAGS.small else {})
  config = modeling.BertConfig(vocab_size=30522, type_vocab_size=2, **fields)
  batch_size, seq_length = 32, 128
  batch = train_steps.classifier_batch(batch_size, seq_length, 40)

  task = classifier.ClassificationTask(config, seq_length, ["0", "1"])
  trainer = training.Trainer(tf.distribute.get_strategy(), task.build_model,
                             task.loss, tempfile.mkdtemp(), 2e-5, 10000, 100,
                             jit_compile=FLAGS.jit_compile)
  ours = tf.function(lambda: trainer.train_step(batch))

  theirs_model = models.BertClassifier(reference.model_garden_encoder(config),
                                       num_classes=2, dropout_rate=0.1)
  theirs = model_garden.train_step(
      theirs_model, batch,
      lambda logits: tf.reduce_mean(
          task.per_example_loss(logits, batch["label_ids"])),
      2e-5, FLAGS.jit_compile)

  m = timing.alternated_medians(
      {"ours": lambda: float(ours()), "model_garden": lambda: float(theirs())},
      FLAGS.repeats)
  print("L=%d H=%d seq=%d batch=%d xla=%s: ours %.1f examples/s, "
        "model_garden %.1f examples/s, ratio ours/model_garden = %.3f" %
        (config.num_hidden_layers, config.hidden_size, seq_length, batch_size,
         FLAGS.jit_compile, batch_size / m["ours"],
         batch_size / m["model_garden"], m["model_garden"] / m["ours"]))


if __name__ == "__main__":
  app.run(main)
