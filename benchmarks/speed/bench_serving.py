"""Serving from raw strings: our classifier SavedModel vs tf-models-official's.

Ours takes the raw sentence pairs (tokenizer, packing and model in one
graph). Theirs is Model Garden's BertClassifier exported with an ids
signature (as its serving modules give sentence-pair tasks), fed ids from
the same in-graph tokenizer, whose time counts on its side. Both are loaded
from disk as a server would; calls alternate; medians, examples/s and the
ratio (> 1: ours faster) are printed for batch 1 and 32, BERT-Base's shape
and a small one (seq 128).

With --precision=float32,bfloat16, ours is also exported as
`export_saved_model.py --precision=bfloat16` exports its SavedModel
(bfloat16 matmuls over weights stored in bfloat16, float32 outputs;
records made before it stored them cast float32 weights per call), from
the same weights, and timed beside the
float32 one; the line gives its speed-up and how far its probabilities
and labels are from float32's on the same pairs. --init_checkpoint (with
--bert_config_file) serves those weights instead of random ones: a
fine-tuned MRPC classifier makes the agreement mean something, measured
on the first --agreement_rows MRPC dev pairs.

  .venv/bin/python benchmarks/speed/bench_serving.py [--repeats=10]
      [--precision=float32,bfloat16] [--shapes=small,base]
      [--init_checkpoint=DIR/model.ckpt-N --bert_config_file=CONFIG.json]
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

from benchmarks.lib import results
from benchmarks.lib import timing
from benchmarks.lib.shapes import SHAPES
import modeling
from runner_lib.classifier import task as classifier_task
from runner_lib.serving import modules
import tokenization
from tests import reference
from tests.conftest import SHARED_DATA

FLAGS = flags.FLAGS
flags.DEFINE_integer("repeats", 10, "Timed calls per model and shape.")
flags.DEFINE_string("shapes", "small,base", "Comma-separated: small, base.")
flags.DEFINE_string("precision", "float32",
                    "Comma-separated: float32, bfloat16 (ours only).")
flags.DEFINE_string("init_checkpoint", None,
                    "A classifier checkpoint to serve (with "
                    "--bert_config_file): its shape replaces --shapes.")
flags.DEFINE_string("bert_config_file", None, "The checkpoint's config.")
flags.DEFINE_integer("agreement_rows", 408,
                     "MRPC dev pairs compared between the precisions.")
results.define_flags()

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


def export_ours(config, vocab_file, path, precision, weights=None):
  """Exports our classifier (random weights, or weights: a list as
  get_weights gives, or a checkpoint prefix) computing in precision.

  Returns:
    the model's weights (get_weights()), to export the other precision with.
  """
  task = classifier_task.ClassificationTask(config, SEQ, ["0", "1"])
  model = task.build_model(modeling.ComputeOptions(getattr(tf, precision)))
  if isinstance(weights, str):
    modeling.load_checkpoint(model, weights)
  elif weights is not None:
    model.set_weights(weights)
  weights = model.get_weights()
  module = modules.ClassifierModule(model, vocab_file, True, SEQ,
                                    ["0", "1"], pair=True)
  if precision == "bfloat16":
    # As export_saved_model.py --precision=bfloat16: weights stored in
    # bfloat16, no per-call cast.
    module.store_kernels(tf.bfloat16)
  tf.saved_model.save(module, path, signatures=module.signatures())
  return weights


def agreement(ours, ours_bf16, rows):
  """(largest probability difference, share of equal labels) of the two
  precisions' SavedModels on the first rows MRPC dev pairs, batch 32."""
  a, b = sentence_pairs(rows)
  want, got = [], []
  for start in range(0, len(a), 32):
    inputs = dict(text_a=tf.constant(a[start:start + 32]),
                  text_b=tf.constant(b[start:start + 32]))
    want.append(ours(**inputs)["probabilities"].numpy())
    got.append(ours_bf16(**inputs)["probabilities"].numpy())
  want, got = np.concatenate(want), np.concatenate(got)
  return (float(np.abs(want - got).max()),
          float((want.argmax(-1) == got.argmax(-1)).mean()), len(want))


def main(argv):
  del argv
  vocab_file = os.path.join(SHARED_DATA, "vocab", "uncased_vocab.txt")
  if not os.path.exists(vocab_file):
    raise SystemExit("Needs ../shared/data/vocab/uncased_vocab.txt.")
  directory = tempfile.mkdtemp()
  preprocessor = tokenization.BertPreprocessor(vocab_file, True, SEQ)
  preprocess = tf.function(lambda a, b: preprocessor([a, b]))
  precisions = FLAGS.precision.split(",")
  if FLAGS.init_checkpoint:
    configs = {"checkpoint": modeling.BertConfig.from_json_file(
        FLAGS.bert_config_file)}
  else:
    configs = {shape: modeling.BertConfig(vocab_size=30522, type_vocab_size=2,
                                          **SHAPES[shape])
               for shape in FLAGS.shapes.split(",")}
  speed_rows, bf16_rows, agreement_rows = [], [], []
  for shape, config in configs.items():
    ours_path = os.path.join(directory, shape + "_ours")
    weights = export_ours(config, vocab_file, ours_path, "float32",
                          FLAGS.init_checkpoint)
    served = {"ours": tf.saved_model.load(ours_path).signatures[
        "serving_default"]}
    if "bfloat16" in precisions:
      export_ours(config, vocab_file, ours_path + "_bf16", "bfloat16",
                  weights)
      served["ours_bf16"] = tf.saved_model.load(
          ours_path + "_bf16").signatures["serving_default"]
    theirs_path = os.path.join(directory, shape + "_theirs")
    theirs_module = IdsClassifier(models.BertClassifier(
        reference.model_garden_encoder(config), num_classes=2))
    tf.saved_model.save(theirs_module, theirs_path,
                        signatures={"serving_default":
                                    theirs_module.serve.get_concrete_function()})
    theirs = tf.saved_model.load(theirs_path).signatures["serving_default"]
    for batch in (1, 32):
      a, b = sentence_pairs(batch)
      a, b = tf.constant(a), tf.constant(b)

      def run_theirs(a=a, b=b):
        inputs = preprocess(a, b)
        return theirs(input_word_ids=inputs["input_ids"],
                      input_mask=inputs["input_mask"],
                      input_type_ids=inputs["segment_ids"])[
                          "probabilities"].numpy()

      calls = {name: (lambda fn=fn, a=a, b=b: fn(text_a=a, text_b=b)[
          "probabilities"].numpy()) for name, fn in served.items()}
      calls["model_garden"] = run_theirs
      m = timing.alternated_medians(calls, FLAGS.repeats)
      print("%s (L=%d H=%d) seq=%d batch=%d: ours %.1f ms (%.1f examples/s), "
            "model_garden + tokenizer %.1f ms (%.1f examples/s), ratio "
            "ours/model_garden = %.3f" %
            (shape, config.num_hidden_layers, config.hidden_size, SEQ, batch,
             1000 * m["ours"], batch / m["ours"], 1000 * m["model_garden"],
             batch / m["model_garden"], m["model_garden"] / m["ours"]),
            flush=True)
      speed_rows.append([shape, config.num_hidden_layers,
                         config.hidden_size, SEQ, batch,
                         round(1000 * m["ours"], 1),
                         round(batch / m["ours"], 1),
                         round(1000 * m["model_garden"], 1),
                         round(batch / m["model_garden"], 1),
                         round(m["model_garden"] / m["ours"], 3)])
      if "ours_bf16" in m:
        print("%s batch=%d: ours bfloat16 %.1f ms (%.1f examples/s), ratio "
              "ours bfloat16/ours float32 = %.3f, /model_garden = %.3f" %
              (shape, batch, 1000 * m["ours_bf16"], batch / m["ours_bf16"],
               m["ours"] / m["ours_bf16"],
               m["model_garden"] / m["ours_bf16"]), flush=True)
        bf16_rows.append([shape, batch, round(1000 * m["ours_bf16"], 1),
                          round(batch / m["ours_bf16"], 1),
                          round(m["ours"] / m["ours_bf16"], 3),
                          round(m["model_garden"] / m["ours_bf16"], 3)])
    if "ours_bf16" in served:
      largest, agree, rows = agreement(served["ours"], served["ours_bf16"],
                                       FLAGS.agreement_rows)
      print("%s: bfloat16 vs float32 on %d MRPC dev pairs: labels agree on "
            "%.2f%%, probabilities differ by at most %.4f" %
            (shape, rows, 100 * agree, largest), flush=True)
      agreement_rows.append([shape, rows, round(100 * agree, 2),
                             round(largest, 4)])
  if FLAGS.record:
    tables = [results.table(
        "Serving from raw strings (seq %d): ours vs Model Garden + "
        "tokenizer" % SEQ,
        ["shape", "L", "H", "seq", "batch", "ours ms", "ours examples/s",
         "model_garden ms", "model_garden examples/s", "ours/model_garden"],
        speed_rows)]
    if bf16_rows:
      tables.append(results.table(
          "ours exported in bfloat16",
          ["shape", "batch", "ms", "examples/s", "ours bfloat16/ours float32",
           "ours bfloat16/model_garden"], bf16_rows))
    if agreement_rows:
      tables.append(results.table(
          "bfloat16 against float32 on MRPC dev pairs",
          ["shape", "pairs", "labels agree %", "max probability difference"],
          agreement_rows))
    results.record(
        "bench_serving", tables, results.flag_settings(FLAGS),
        headline={"serving BERT-Base batch %d: ours/Model Garden" % row[4]:
                  row[-1] for row in speed_rows if row[0] == "base"})


if __name__ == "__main__":
  app.run(main)
