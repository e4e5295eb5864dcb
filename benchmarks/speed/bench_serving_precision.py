"""Serving in each precision: our exports against ONNX Runtime on the same
weights, and what each precision does to dev accuracy.

Speed. A classifier with random weights (BERT-Base's and MiniLM's shapes,
seq 128) is written as a checkpoint and exported as a user exports it
(export_saved_model.py --precision=float32, bfloat16 and int8, the int8
calibrated on the first 300 MRPC train pairs). Sides, each from raw
sentence pairs to probabilities:
- tf_float32, tf_bfloat16: the SavedModels' serving_default (the bfloat16
  one stores its matmul weights in bfloat16);
- ov_bfloat16, ov_int8: the same exports served with the OpenVINO model
  beside them (runner_lib/serving/openvino_model.py);
- ort_float32, ort_int8: the same checkpoint's classifier converted with
  tf2onnx, and that converted with onnxruntime.quantization's
  quantize_dynamic (int8 weights, activations quantized per call), as a
  user would do it, run by ONNX Runtime with its default session options,
  fed ids from our in-graph tokenizer (its time counted on their side) and
  trimmed batches as ours.
Inputs: "full", MRPC dev pairs repeated past 128 tokens (every sequence
128 long), and "mrpc", the real pairs (batches trimmed to their longest).
Calls alternate; p50 and p90 over --repeats, examples/s at p50, and the
p50 ratios to tf_float32 and ort_int8 (> 1: faster).

Accuracy (--mrpc_dir, --sst2_dir, --squad_dir): fine-tuned models exported
in each precision and run on the whole dev set through the serving path
(OpenVINO for bfloat16 and int8, and the bfloat16 SavedModel); accuracy
(and F1) or SQuAD exact match and F1, beside float32's, and the share of
labels equal to float32's. The models (their own recipe, recorded in the
settings):
- --mrpc_dir / --sst2_dir: run_classifier.py output directories, fine-tuned
  from all-MiniLM-L6-v2 (--minilm_dir: convert_checkpoint.py's folder),
  max_seq_length 128; int8 calibrated on the first 300 train examples.
- --squad_dir: make demo's output folder (DEMO_OUTPUT): its vocab, config,
  squad_output/ and squad_dev.json; int8 calibrated on the first 300
  questions of its squad_train.json.

  .venv/bin/python benchmarks/speed/bench_serving_precision.py
      [--shapes=base,minilm] [--batches=1,32] [--repeats=10]
      [--minilm_dir=DIR --mrpc_dir=DIR --sst2_dir=DIR] [--squad_dir=DIR]
"""

import json
import os
import subprocess
import sys
import tempfile

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")
ROOT = os.path.abspath(os.path.join(__file__, "../../.."))
sys.path.insert(0, ROOT)

from absl import app  # pylint: disable=g-import-not-at-top
from absl import flags
import numpy as np
import tensorflow as tf
import tensorflow_text  # pylint: disable=unused-import

from benchmarks.lib import results
from benchmarks.lib import timing
from benchmarks.lib.shapes import SHAPES
import modeling
from runner_lib.classifier import data as classifier_data
from runner_lib.serving import modules
from runner_lib.serving import openvino_model
from runner_lib.squad import evaluation as squad_evaluation
import tokenization
from tests import reference
from tests.conftest import SHARED_DATA

FLAGS = flags.FLAGS
flags.DEFINE_list("shapes", ["base", "minilm"], "Model shapes (speed).")
flags.DEFINE_list("batches", ["1", "32"], "Batch sizes (speed).")
flags.DEFINE_list("inputs", ["full", "mrpc"], "full: every sequence 128 "
                  "long; mrpc: real MRPC dev pairs, trimmed.")
flags.DEFINE_integer("repeats", 10, "Timed calls per side (alternated).")
flags.DEFINE_string("minilm_dir", None, "The fine-tuned classifiers' "
                    "Google folder (vocab.txt, bert_config.json).")
flags.DEFINE_string("mrpc_dir", None, "A fine-tuned MRPC run_classifier.py "
                    "output directory (accuracy).")
flags.DEFINE_string("sst2_dir", None, "A fine-tuned SST-2 "
                    "run_classifier.py output directory (accuracy).")
flags.DEFINE_string("squad_dir", None, "make demo's output folder "
                    "(accuracy of its SQuAD model).")
results.define_flags()

SEQ = 128
CALIBRATION = 300
# A bound on each export or conversion process (BERT-Base's int8 export
# and tf2onnx took about 2 minutes each here).
SUBPROCESS_SECONDS = 1800
PRECISIONS = ("float32", "bfloat16", "int8")
VOCAB = os.path.join(SHARED_DATA, "vocab", "uncased_vocab.txt")
GLUE = os.path.join(SHARED_DATA, "glue")
SPEED_TITLE = "Serving from raw text in each precision (seq %d)" % SEQ
ACCURACY_TITLE = "Dev accuracy of each precision's export"


def export(directory, precision, calibration=None, **flag_values):
  """Runs export_saved_model.py as a user does; returns the export dir."""
  os.makedirs(directory, exist_ok=True)
  export_dir = os.path.join(directory, "export_" + precision)
  args = [sys.executable, os.path.join(ROOT, "export_saved_model.py"),
          "--export_dir=" + export_dir, "--precision=" + precision,
          "--overwrite"] + ["--%s=%s" % item for item in flag_values.items()]
  if precision == "int8":
    path = os.path.join(directory, "calibration.jsonl")
    with open(path, "w") as f:
      f.writelines(json.dumps(instance) + "\n" for instance in calibration)
    args.append("--calibration_file=" + path)
  try:
    done = subprocess.run(args, capture_output=True, text=True, check=False,
                          timeout=SUBPROCESS_SECONDS)
  except subprocess.TimeoutExpired:
    sys.exit("export_saved_model.py ran past %d s: %s" %
             (SUBPROCESS_SECONDS, " ".join(args)))
  if done.returncode:
    sys.exit("export_saved_model.py failed:\n" + done.stderr[-3000:])
  return export_dir


def served(export_dir, precision):
  """{side: function(**inputs) -> dict of tensors} of one export."""
  sides = {}
  if precision != "int8":
    sides["tf_" + precision] = tf.saved_model.load(export_dir).signatures[
        "serving_default"]
  if precision != "float32":
    model = openvino_model.load(export_dir)
    sides["ov_" + precision] = lambda **inputs: model(**inputs)
  return sides


def classifier_examples(task_name, directory, split):
  processor = classifier_data.get_processor(task_name)
  read = (processor.get_train_examples if split == "train" else
          processor.get_dev_examples)
  return processor, read(directory)


def pair_instances(examples):
  return [{"text_a": e.text_a, "text_b": e.text_b} if e.text_b is not None
          else {"text_a": e.text_a} for e in examples]


def mrpc_pairs():
  _, examples = classifier_examples("MRPC", os.path.join(GLUE, "MRPC"),
                                    "dev")
  return [e.text_a for e in examples], [e.text_b for e in examples]


def random_checkpoint(config, path):
  """A classifier checkpoint (2 labels) with random weights, original
  names; returns its prefix."""
  weights = reference.random_weights(config, seed=5)
  rng = np.random.RandomState(6)
  weights["output_weights"] = (0.02 * rng.randn(2, config.hidden_size)
                               ).astype(np.float32)
  weights["output_bias"] = np.zeros([2], np.float32)
  return reference.write_tf1_checkpoint(path, weights)


def onnx_sides(config_file, prefix, directory):
  """ONNX Runtime on the checkpoint's classifier: float32 (tf2onnx) and
  quantize_dynamic's int8 (made by peers/onnx_classifier.py in its own
  process), each fed by our tokenizer, trimmed."""
  import onnxruntime  # pylint: disable=g-import-not-at-top
  done = subprocess.run(
      [sys.executable, os.path.join(ROOT, "benchmarks", "peers",
                                    "onnx_classifier.py"),
       config_file, prefix, "2", directory], capture_output=True, text=True,
      check=False, timeout=SUBPROCESS_SECONDS)
  if done.returncode:
    sys.exit("onnx_classifier.py failed:\n" + done.stderr[-3000:])
  preprocessor = tokenization.BertPreprocessor(VOCAB, True, SEQ)
  prepare = tf.function(
      lambda a, b: modules.trim_padding(preprocessor([a, b])))
  sides = {}
  for name, path in (("ort_float32", "model.onnx"),
                     ("ort_int8", "model_int8.onnx")):
    session = onnxruntime.InferenceSession(
        os.path.join(directory, path), providers=["CPUExecutionProvider"])

    def run(text_a, text_b, session=session):
      inputs = prepare(tf.constant(text_a), tf.constant(text_b))
      return {"probabilities": session.run(None, {
          name: value.numpy() for name, value in inputs.items()})[0]}

    sides[name] = run
  return sides


def speed(shape, directory, rows):
  """Times every side on shape's random classifier; appends table rows."""
  config = modeling.BertConfig(vocab_size=30522, type_vocab_size=2,
                               **SHAPES[shape])
  os.makedirs(directory, exist_ok=True)
  config_file = os.path.join(directory, "bert_config.json")
  with open(config_file, "w") as f:
    f.write(config.to_json_string())
  prefix = random_checkpoint(config, os.path.join(directory, "model.ckpt"))
  _, train = classifier_examples("MRPC", os.path.join(GLUE, "MRPC"), "train")
  # ONNX first: its conversion's process peaks before ours load.
  onnx = onnx_sides(config_file, prefix, directory)
  sides = {}
  for precision in PRECISIONS:
    sides.update(served(export(
        directory, precision, pair_instances(train[:CALIBRATION]),
        task="classifier", task_name="MRPC", vocab_file=VOCAB,
        bert_config_file=config_file, init_checkpoint=prefix,
        max_seq_length=SEQ), precision))
  sides.update(onnx)
  dev_a, dev_b = mrpc_pairs()
  for kind in FLAGS.inputs:
    for batch in [int(b) for b in FLAGS.batches]:
      a, b = dev_a[:batch], dev_b[:batch]
      if kind == "full":  # Past 128 pieces: truncated to full length.
        a, b = [" ".join([x] * 4) for x in a], [" ".join([x] * 4) for x in b]
      calls = {name: (lambda fn=fn: np.asarray(
          fn(text_a=a, text_b=b)["probabilities"])) for name, fn in
               sides.items()}
      want = calls["tf_float32"]()
      times = timing.alternated_times(calls, FLAGS.repeats)
      p50 = {name: np.percentile(t, 50) for name, t in times.items()}
      for name, t in times.items():
        agree = float((calls[name]().argmax(-1) == want.argmax(-1)).mean())
        row = [shape, kind, batch, name, round(1000 * p50[name], 1),
               round(1000 * np.percentile(t, 90), 1),
               round(batch / p50[name], 1),
               round(p50["tf_float32"] / p50[name], 3),
               round(p50["ort_int8"] / p50[name], 3), round(agree, 3)]
        print(" ".join(str(x) for x in row), flush=True)
        rows.append(row)


def tensorflow_matmuls(rows):
  """TensorFlow's own int8 matmul (oneDNN's, the one CPU kernel TensorFlow
  2.20 registers: uint8 x int8 -> float32, per-tensor ranges) against its
  float32 and bfloat16 matmuls at BERT-Base's feed-forward shape: why the
  int8 export is not a TensorFlow graph. Appends rows [rows, op, ms]."""
  for m in (128, 4096):
    x = tf.random.normal([m, 768])
    w = tf.random.normal([768, 3072])
    w_bf16 = tf.cast(w, tf.bfloat16)
    w_int8 = tf.cast(tf.clip_by_value(tf.round(w * 20.0), -127, 127), tf.qint8)

    @tf.function
    def int8(x):
      q, low, high = tf.quantization.quantize(
          x, tf.reduce_min(x), tf.reduce_max(x), tf.quint8,
          mode="MIN_FIRST")
      return tf.raw_ops.QuantizedMatMulWithBiasAndDequantize(
          a=q, b=w_int8, bias=tf.zeros([3072]), min_a=low, max_a=high,
          min_b=-127.0 / 20, max_b=127.0 / 20, min_freezed_output=-1.0,
          max_freezed_output=1.0, Toutput=tf.float32,
          input_quant_mode="MIN_FIRST")

    calls = {"float32": tf.function(lambda x: tf.matmul(x, w)),
             "bfloat16": tf.function(
                 lambda x: tf.matmul(tf.cast(x, tf.bfloat16), w_bf16)),
             "int8 (QuantizedMatMulWithBiasAndDequantize)": int8}
    medians = timing.alternated_medians(
        {name: (lambda fn=fn: fn(x).numpy()) for name, fn in calls.items()},
        FLAGS.repeats * 5)
    for name, seconds in medians.items():
      rows.append([m, name, round(1000 * seconds, 3)])
      print(" ".join(str(v) for v in rows[-1]), flush=True)


def classifier_accuracy(task_name, model_dir, directory):
  """Rows [task, precision, side, metrics...] of a fine-tuned classifier."""
  data_dir = os.path.join(GLUE, task_name)
  _, train = classifier_examples(task_name, data_dir, "train")
  processor, dev = classifier_examples(task_name, data_dir, "dev")
  labels = processor.get_labels()
  gold = np.array([labels.index(e.label) for e in dev])
  instances = pair_instances(dev)
  rows, reference_predicted = [], None
  for precision in PRECISIONS:
    export_dir = export(
        os.path.join(directory, task_name), precision,
        pair_instances(train[:CALIBRATION]), task="classifier",
        task_name=task_name, vocab_file=os.path.join(FLAGS.minilm_dir,
                                                     "vocab.txt"),
        bert_config_file=os.path.join(FLAGS.minilm_dir, "bert_config.json"),
        init_checkpoint=model_dir, max_seq_length=SEQ)
    for side, fn in served(export_dir, precision).items():
      predicted = []
      for start in range(0, len(instances), 32):
        batch = instances[start:start + 32]
        inputs = {key: [i[key] for i in batch] for key in batch[0]}
        predicted.append(np.asarray(fn(**inputs)["probabilities"]).argmax(-1))
      predicted = np.concatenate(predicted)
      if reference_predicted is None:
        reference_predicted = predicted
      accuracy = float((predicted == gold).mean())
      true_positive = float(((predicted == 1) & (gold == 1)).sum())
      f1 = 2 * true_positive / max(1.0, float((predicted == 1).sum() +
                                              (gold == 1).sum()))
      rows.append([task_name, len(gold), side, round(accuracy, 4),
                   round(f1, 4), round(float(
                       (predicted == reference_predicted).mean()), 4)])
      print(" ".join(str(x) for x in rows[-1]), flush=True)
  return rows


def squad_accuracy(directory):
  """Rows of make demo's SQuAD model: exact match and F1 per side."""
  demo = FLAGS.squad_dir
  with open(os.path.join(demo, "squad_dev.json")) as f:
    data = json.load(f)["data"]
  with open(os.path.join(demo, "squad_train.json")) as f:
    train = json.load(f)["data"]
  calibration = [{"question": qa["question"], "context": p["context"]}
                 for article in train for p in article["paragraphs"]
                 for qa in p["qas"]][:CALIBRATION]
  questions = [(qa["id"], qa["question"], p["context"]) for article in data
               for p in article["paragraphs"] for qa in p["qas"]]
  rows, reference_answers = [], None
  for precision in PRECISIONS:
    export_dir = export(
        os.path.join(directory, "squad"), precision, calibration,
        task="squad", vocab_file=os.path.join(demo, "vocab.txt"),
        bert_config_file=os.path.join(demo, "bert_config.json"),
        init_checkpoint=os.path.join(demo, "squad_output"),
        max_seq_length=128, doc_stride=64, max_query_length=24)
    for side, fn in served(export_dir, precision).items():
      answers = {}
      for start in range(0, len(questions), 32):
        batch = questions[start:start + 32]
        texts = np.asarray(fn(question=[q for _, q, _ in batch],
                              context=[c for _, _, c in batch])[
                                  "answer_text"])
        answers.update((qid, text.decode("utf-8"))
                       for (qid, _, _), text in zip(batch, texts))
      if reference_answers is None:
        reference_answers = answers
      scores = squad_evaluation.evaluate_v1(data, answers)
      same = np.mean([answers[q] == reference_answers[q] for q in answers])
      rows.append(["SQuAD (demo)", len(answers), side,
                   round(scores["exact_match"], 2), round(scores["f1"], 2),
                   round(float(same), 4)])
      print(" ".join(str(x) for x in rows[-1]), flush=True)
  return rows


def main(argv):
  del argv
  if not os.path.exists(VOCAB):
    sys.exit("Needs ../shared/data (the uncased vocab and GLUE's MRPC).")
  if bool(FLAGS.mrpc_dir or FLAGS.sst2_dir) != bool(FLAGS.minilm_dir):
    sys.exit("--mrpc_dir / --sst2_dir go with --minilm_dir.")
  directory = tempfile.mkdtemp()
  speed_rows, accuracy_rows, matmul_rows = [], [], []
  tensorflow_matmuls(matmul_rows)
  for shape in FLAGS.shapes:
    speed(shape, os.path.join(directory, shape), speed_rows)
  for task_name, model_dir in (("MRPC", FLAGS.mrpc_dir),
                               ("SST-2", FLAGS.sst2_dir)):
    if model_dir:
      accuracy_rows += classifier_accuracy(task_name, model_dir, directory)
  if FLAGS.squad_dir:
    accuracy_rows += squad_accuracy(directory)
  if not FLAGS.record:
    return
  tables = [results.table(
      SPEED_TITLE,
      ["shape", "inputs", "batch", "side", "p50 ms", "p90 ms",
       "examples/s", "vs tf_float32", "vs ort_int8",
       "labels as tf_float32"], speed_rows)]
  tables.append(results.table(
      "TensorFlow's own matmuls, [rows, 768] x [768, 3072]",
      ["rows", "op", "ms"], matmul_rows))
  if accuracy_rows:
    tables.append(results.table(
        ACCURACY_TITLE,
        ["task", "dev examples", "side", "accuracy (SQuAD: EM)",
         "F1", "predictions as float32's"], accuracy_rows))
  headline = {}
  for row in speed_rows:
    shape, kind, batch, side = row[:4]
    if shape == "base" and kind == "full" and side == "ov_int8":
      headline["serving BERT-Base int8 batch %d: ours/ONNX Runtime int8" %
               batch] = row[8]
  results.record("bench_serving_precision", tables,
                 results.flag_settings(FLAGS), headline=headline)


if __name__ == "__main__":
  app.run(main)
