"""NER fine-tuning examples/s: ours vs tf-models-official's
BertTokenClassifier.

CoNLL-2003's shape (nine tags, seq 128, batch 32), BERT-Base unless
--small; the same masked cross-entropy over first word-pieces and AdamW with
clipping on both sides, one fixed batch. Runs alternate; medians and the
ratio are printed.

  .venv/bin/python benchmarks/speed/bench_ner.py [--repeats=5] [--small]
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

from official.nlp.modeling import models

from benchmarks.lib import model_garden
from benchmarks.lib import results
from benchmarks.lib import timing
import modeling
from runner_lib.core import training
from runner_lib.ner import data
from runner_lib.ner import task as ner_task
from tests import reference

FLAGS = flags.FLAGS
flags.DEFINE_integer("repeats", 5, "Timed steps per model.")
flags.DEFINE_bool("small", False, "L=4 H=256 instead of BERT-Base.")
flags.DEFINE_bool("jit_compile", False, "XLA on both sides.")
results.define_flags()


def main(argv):
  del argv
  fields = (dict(hidden_size=256, num_hidden_layers=4, num_attention_heads=4,
                 intermediate_size=1024) if FLAGS.small else {})
  config = modeling.BertConfig(vocab_size=30522, type_vocab_size=2, **fields)
  batch_size, seq_length = 32, 128
  num_labels = len(data.LABELS)
  rng = np.random.RandomState(0)
  lengths = rng.randint(20, seq_length + 1, [batch_size])
  mask = (np.arange(seq_length)[None] < lengths[:, None]).astype(np.int32)
  # About one word in four spans two pieces: its second piece is unlabelled.
  label_mask = mask * (rng.rand(*mask.shape) < 0.8)
  batch = {"input_ids": tf.constant(rng.randint(1000, 30000, mask.shape) *
                                    mask, tf.int32),
           "input_mask": tf.constant(mask),
           "segment_ids": tf.zeros_like(tf.constant(mask)),
           "label_ids": tf.constant(rng.randint(0, num_labels, mask.shape) *
                                    label_mask, tf.int32),
           "label_mask": tf.constant(label_mask, tf.int32)}

  task = ner_task.NerTask(config, seq_length, data.LABELS)
  trainer = training.Trainer(
      tf.distribute.get_strategy(), task.build_model, task.loss,
      training.TrainingConfig(output_dir=tempfile.mkdtemp(),
                              learning_rate=5e-5, num_train_steps=10000,
                              num_warmup_steps=100,
                              jit_compile=FLAGS.jit_compile))
  ours = tf.function(lambda: trainer.train_step(batch))

  theirs_model = models.BertTokenClassifier(
      reference.model_garden_encoder(config), num_classes=num_labels,
      dropout_rate=0.1)
  # The same loss as ours: cross-entropy over the labelled pieces only.
  theirs = model_garden.train_step(
      theirs_model, batch,
      lambda outputs: task.loss(
          lambda batch, training: (outputs["logits"] if isinstance(
              outputs, dict) else outputs), batch, True),
      5e-5, FLAGS.jit_compile)

  m = timing.alternated_medians(
      {"ours": lambda: float(ours()), "model_garden": lambda: float(theirs())},
      FLAGS.repeats)
  print("L=%d H=%d seq=%d batch=%d xla=%s: ours %.1f examples/s, "
        "model_garden %.1f examples/s, ratio ours/model_garden = %.3f" %
        (config.num_hidden_layers, config.hidden_size, seq_length, batch_size,
         FLAGS.jit_compile, batch_size / m["ours"],
         batch_size / m["model_garden"], m["model_garden"] / m["ours"]))
  if FLAGS.record:
    ratio = round(m["model_garden"] / m["ours"], 3)
    results.record(
        "bench_ner",
        [results.table(
            "NER fine-tuning examples/s",
            ["L", "H", "seq", "batch", "xla", "ours", "model_garden",
             "ours/model_garden"],
            [[config.num_hidden_layers, config.hidden_size, seq_length,
              batch_size, FLAGS.jit_compile,
              round(batch_size / m["ours"], 1),
              round(batch_size / m["model_garden"], 1), ratio]])],
        results.flag_settings(FLAGS),
        headline={"NER fine-tuning %s%s: ours/Model Garden" % (
            "L=4 H=256" if FLAGS.small else "BERT-Base",
            " XLA" if FLAGS.jit_compile else ""): ratio})


if __name__ == "__main__":
  app.run(main)
