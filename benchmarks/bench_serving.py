"""Serving from raw strings: our classifier SavedModel vs tf-models-official's.

Ours takes the raw sentence pairs (tokenizer, packing and model in one
graph). Theirs is Model Garden's BertClassifier exported with an ids
signature (as its serving modules give sentence-pair tasks), fed ids from
the same in-graph tokenizer, whose time counts on its side. Both are loaded
from disk as a server would; calls alternate; medians, examples/s and the
ratio (> 1: ours faster) are printed for batch 1 and 32, BERT-Base's shape
and a small one (seq 128).

  .venv/bin/python benchmarks/bench_serving.py [--repeats=10]
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

from benchmarks import timing
from benchmarks.shapes import SHAPES
import modeling
from runner_lib.classifier import task as classifier_task
from runner_lib.serving import modules
import tokenization
from tests import reference
from tests.conftest import SHARED_DATA

FLAGS = flags.FLAGS
flags.DEFINE_integer("repeats", 10, "Timed calls per model and shape.")
flags.DEFINE_string("shapes", "small,base", "Comma-separated: small, base.")

SEQ = 128


def sentence_pairs(count):
  """Real MRPC pairs from ../shared/data, or a fixed English pair."""
  path = os.path.join(SHARED_DATA, "glue", "MRPC", "dev.tsv")
  if os.path.exists(path):
    with open(path) as f:
      rows = [line.rstrip("\n").split("\t") for line in f][1:count + 1]
    return [r[3] for r in rows], [r[4] for r in rows]
  text = "The quick brown fox jumps over the lazy dog near the river bank."
  return [text] * count, [text[::-1]] * count


class IdsClassifier(tf.Module):
  """Model Garden's BertClassifier behind an ids signature."""

  def __init__(self, model):
    super().__init__()
    self.model = model

  @tf.function(input_signature=[tf.TensorSpec([None, SEQ], tf.int32,
                                              name=name) for name in (
                                                  "input_word_ids",
                                                  "input_mask",
                                                  "input_type_ids")])
  def serve(self, input_word_ids, input_mask, input_type_ids):
    logits = self.model({"input_word_ids": input_word_ids,
                         "input_mask": input_mask,
                         "input_type_ids": input_type_ids}, training=False)
    return {"probabilities": tf.nn.softmax(logits, axis=-1)}


def main(argv):
  del argv
  vocab_file = os.path.join(SHARED_DATA, "vocab", "uncased_vocab.txt")
  if not os.path.exists(vocab_file):
    raise SystemExit("Needs ../shared/data/vocab/uncased_vocab.txt.")
  directory = tempfile.mkdtemp()
  preprocessor = tokenization.BertPreprocessor(vocab_file, True, SEQ)
  preprocess = tf.function(lambda a, b: preprocessor([a, b]))
  for shape in FLAGS.shapes.split(","):
    config = modeling.BertConfig(vocab_size=30522, type_vocab_size=2,
                                 **SHAPES[shape])
    ours_path = os.path.join(directory, shape + "_ours")
    model = classifier_task.ClassificationTask(config, SEQ,
                                               ["0", "1"]).build_model()
    module = modules.ClassifierModule(model, vocab_file, True, SEQ,
                                      ["0", "1"], pair=True)
    tf.saved_model.save(module, ours_path, signatures=module.signatures())
    theirs_path = os.path.join(directory, shape + "_theirs")
    theirs_module = IdsClassifier(models.BertClassifier(
        reference.model_garden_encoder(config), num_classes=2))
    tf.saved_model.save(theirs_module, theirs_path,
                        signatures={"serving_default":
                                    theirs_module.serve.get_concrete_function()})
    ours = tf.saved_model.load(ours_path).signatures["serving_default"]
    theirs = tf.saved_model.load(theirs_path).signatures["serving_default"]
    for batch in (1, 32):
      a, b = sentence_pairs(batch)
      a, b = tf.constant(a), tf.constant(b)

      def run_ours(a=a, b=b):
        return ours(text_a=a, text_b=b)["probabilities"].numpy()

      def run_theirs(a=a, b=b):
        inputs = preprocess(a, b)
        return theirs(input_word_ids=inputs["input_ids"],
                      input_mask=inputs["input_mask"],
                      input_type_ids=inputs["segment_ids"])[
                          "probabilities"].numpy()

      m = timing.alternated_medians({"ours": run_ours,
                                     "model_garden": run_theirs},
                                    FLAGS.repeats)
      print("%s (L=%d H=%d) seq=%d batch=%d: ours %.1f ms (%.1f examples/s), "
            "model_garden + tokenizer %.1f ms (%.1f examples/s), ratio "
            "ours/model_garden = %.3f" %
            (shape, config.num_hidden_layers, config.hidden_size, SEQ, batch,
             1000 * m["ours"], batch / m["ours"], 1000 * m["model_garden"],
             batch / m["model_garden"], m["model_garden"] / m["ours"]))


if __name__ == "__main__":
  app.run(main)
