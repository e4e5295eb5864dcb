"""A classifier checkpoint as ONNX Runtime's user gets it: tf2onnx's
float32 model and onnxruntime.quantization's quantize_dynamic int8 of it.

The ONNX side of bench_serving_precision.py, in its own process: tf2onnx's
optimizer holds several copies of BERT-Base's graph (over 10 GB), which
beside the benchmark's loaded models ran out of memory. The model is our
classifier (BertModel and its output layer, float32, the original's ops)
from the checkpoint; inputs input_ids, input_mask, segment_ids (int32
[batch, length], any length); output the probabilities.

  .venv/bin/python benchmarks/peers/onnx_classifier.py CONFIG.json
      CHECKPOINT NUM_LABELS OUTPUT_DIR
"""

import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")
sys.path.insert(0, os.path.abspath(os.path.join(__file__, "../../..")))

import tensorflow as tf  # pylint: disable=g-import-not-at-top

import modeling
from runner_lib.classifier import task as classifier_task

FLOAT32 = "model.onnx"
INT8 = "model_int8.onnx"


def main(config_file, checkpoint, num_labels, output_dir):
  import tf2onnx  # pylint: disable=g-import-not-at-top
  from onnxruntime import quantization  # pylint: disable=g-import-not-at-top
  config = modeling.BertConfig.from_json_file(config_file)
  model = classifier_task.ClassificationTask(
      config, config.max_position_embeddings,
      [str(i) for i in range(int(num_labels))]).build_model(
          modeling.ComputeOptions())
  modeling.load_checkpoint(model, checkpoint)
  spec = [tf.TensorSpec([None, None], tf.int32, name=name)
          for name in ("input_ids", "input_mask", "segment_ids")]
  probabilities = tf.function(
      lambda ids, mask, segments: tf.nn.softmax(model(
          {"input_ids": ids, "input_mask": mask, "segment_ids": segments},
          training=False)), input_signature=spec)
  os.makedirs(output_dir, exist_ok=True)
  float32 = os.path.join(output_dir, FLOAT32)
  tf2onnx.convert.from_function(probabilities, input_signature=spec,
                                opset=17, output_path=float32)
  # Its defaults, as a user calls it: int8 weights per tensor, activations
  # quantized per call.
  quantization.quantize_dynamic(float32, os.path.join(output_dir, INT8),
                                weight_type=quantization.QuantType.QInt8)


if __name__ == "__main__":
  if len(sys.argv) != 5:
    sys.exit(__doc__)
  main(*sys.argv[1:])
