"""The OpenVINO model an export writes beside its SavedModel
(export_saved_model.py --precision=bfloat16 or int8), and serving with it.

The task model's core (the model inputs to its float32 outputs) converted
by OpenVINO, for int8 quantized by NNCF from calibration examples; it is
served between the SavedModel's own prepare and finish functions, so the
tokenizer, packing and post-processing stay TensorFlow's and the tokens and
answers are the SavedModel's:

  model = openvino_model.load("/tmp/mrpc_int8")
  model(text_a=["He said so."], text_b=["He did."])["label"]

Why OpenVINO (docs/serving.md, measured in benchmarks/speed/
bench_serving.py): TensorFlow 2.20's oneDNN int8 matmul ran slower than
its float32 one at BERT's shapes, and ONNX Runtime's dynamic int8 ran
BERT-Base 2.7x slower than OpenVINO's static int8 on the same CPU; OpenVINO
cannot read the tokenizer's TensorFlow Text ops, hence the split.
"""

import json
import os

from absl import logging
import numpy as np
import tensorflow as tf

from runner_lib.core import errors
from runner_lib.core.training import precision

DIRECTORY = "openvino"
MODEL = "model.xml"
SETTINGS = "settings.json"
# NNCF's default number of calibration samples; more cost export time.
MAX_CALIBRATION = 300
# What the precisions compute in: int8 matmuls with the rest in float32,
# or everything OpenVINO can in bfloat16.
INFERENCE_PRECISION = {"int8": "f32", "bfloat16": "bf16"}


def read_instances(path, input_names):
  """Calibration examples: JSON lines, each an instance as TensorFlow
  Serving's REST "instances" carry them, a dict of the signature's string
  inputs (e.g. {"text_a": "...", "text_b": "..."}).

  Args:
    path: str.
    input_names: list of str, the signature's inputs.

  Returns:
    list of dicts (at most MAX_CALIBRATION).

  Raises:
    errors.InputError: naming the line and what was wrong.
  """
  instances = []
  with tf.io.gfile.GFile(path) as f:
    for number, line in enumerate(f, 1):
      if not line.strip():
        continue
      try:
        instance = json.loads(line)
      except ValueError as e:
        raise errors.InputError("--calibration_file %s line %d is not JSON: "
                                "%s" % (path, number, e)) from None
      if not isinstance(instance, dict) or set(instance) != set(input_names):
        raise errors.InputError(
            "--calibration_file %s line %d: expected an object with the "
            "signature's inputs %s, got %.200s" %
            (path, number, ", ".join(sorted(input_names)), line.strip()))
      instances.append(instance)
      if len(instances) == MAX_CALIBRATION:
        break
  if not instances:
    raise errors.InputError("--calibration_file %s holds no instance." %
                            path)
  return instances


def _calibration_inputs(module, instances):
  """Each instance's model inputs (batch 1), as prepare makes them.

  Returns:
    list of dicts name -> int32 numpy array.
  """
  batches = []
  for instance in instances:
    inputs, _ = module.prepare(**{name: tf.constant([value])
                                  for name, value in instance.items()})
    batches.append({name: value.numpy() for name, value in inputs.items()})
  return batches


def write(module, export_dir, precision, instances=None, computes=None):
  """Writes the module's core as an OpenVINO model under export_dir.

  Adds the stages to module (ServingModule.add_stages), so the SavedModel
  saved after this call carries prepare and finish.

  Args:
    module: a modules.ServingModule (or hub.EncoderModule), weights loaded.
    export_dir: str, the SavedModel's directory (being written).
    precision: "bfloat16" or "int8".
    instances: for int8, the calibration instances (read_instances).
    computes: the float32 module whose model is converted, where module
      computes in bfloat16 (OpenVINO converts no bfloat16 cast; it
      rounds the float32 weights to bfloat16 itself); default module.
  """
  import openvino as ov  # pylint: disable=g-import-not-at-top
  core = module.add_stages(computes)
  model = ov.convert_model(core)
  # Ports named as the model's inputs and outputs, for the calibration
  # batches and whoever reads the model.
  for ports, names in ((model.inputs, core.structured_input_signature[0][0]),
                       (model.outputs, core.structured_outputs)):
    for name, index in _port_indices(ports, names).items():
      ports[index].get_tensor().set_names({name})
  if precision == "int8":
    import nncf  # pylint: disable=g-import-not-at-top
    batches = _calibration_inputs(module, instances)
    # The matmuls' inputs in int8: weights per output channel, activations
    # with ranges from the task's own examples (static); the elementwise
    # ops (softmax, LayerNorm, GELU, adds) stay float, as NNCF's
    # transformer scheme leaves them.
    model = nncf.quantize(
        model, nncf.Dataset(batches), model_type=nncf.ModelType.TRANSFORMER,
        subset_size=len(batches),
        advanced_parameters=nncf.AdvancedQuantizationParameters(
            overflow_fix=nncf.OverflowFix.ENABLE))
  directory = os.path.join(export_dir, DIRECTORY)
  tf.io.gfile.makedirs(directory)
  # Weights kept float32: OpenVINO rounds them once to what it computes in.
  ov.save_model(model, os.path.join(directory, MODEL), compress_to_fp16=False)
  settings = {"precision": precision,
              "outputs": sorted(core.structured_outputs)}
  with tf.io.gfile.GFile(os.path.join(directory, SETTINGS), "w") as f:
    json.dump(settings, f, indent=2)
  logging.info("Wrote the OpenVINO model (%s) to %s.", precision, directory)


def _bf16_units():
  """Whether this CPU has bfloat16 units (True where its flags cannot be
  read: nothing to warn about)."""
  found = precision.cpu_flags()
  return found is None or bool(found.intersection(precision.BF16_CPU_FLAGS))


def _port_indices(ports, names):
  """dict name -> index of the port OpenVINO named after it ("name" or
  TensorFlow's "name:0")."""
  indices = {}
  for name in names:
    found = [i for i, port in enumerate(ports)
             if {name, name + ":0"} & set(port.get_names())]
    assert len(found) == 1, (name, [port.get_names() for port in ports])
    indices[name] = found[0]
  return indices


class Served(object):
  """An export's serving_default with its model computed by OpenVINO.

  Called with the signature's inputs (lists or arrays of strings), it
  returns the same dict of tensors as the SavedModel's serving_default.
  One call at a time: an instance is not thread-safe.
  """

  def __init__(self, export_dir, device="CPU", inference_precision=None):
    """Args: export_dir: str, an export_saved_model.py --precision=bfloat16
    or int8 directory; device: OpenVINO's device name;
    inference_precision: None (the export's: bf16 for bfloat16, f32 around
    int8's matmuls), or OpenVINO's "f32" / "bf16" instead (a bfloat16
    export's model holds float32 weights: "f32" computes in float32)."""
    import openvino as ov  # pylint: disable=g-import-not-at-top
    directory = os.path.join(export_dir, DIRECTORY)
    settings_path = os.path.join(directory, SETTINGS)
    if not tf.io.gfile.exists(settings_path):
      raise errors.InputError(
          "%s has no OpenVINO model (%s): export it with "
          "--precision=bfloat16 or --precision=int8." %
          (export_dir, settings_path))
    with tf.io.gfile.GFile(settings_path) as f:
      self.settings = json.load(f)
    inference_precision = (inference_precision or
                           INFERENCE_PRECISION[self.settings["precision"]])
    if inference_precision == "bf16" and device == "CPU" and not _bf16_units():
      logging.warning(
          "%s is a bfloat16 export, and this CPU has no bfloat16 units "
          "(its flags have none of %s): OpenVINO computes it in float32, "
          "with float32's speed.", export_dir,
          ", ".join(precision.BF16_CPU_FLAGS))
      inference_precision = "f32"
    self._saved = tf.saved_model.load(export_dir)
    self._compiled = ov.Core().compile_model(
        os.path.join(directory, MODEL), device,
        {"INFERENCE_PRECISION_HINT": inference_precision,
         "PERFORMANCE_HINT": "LATENCY"})

  def __call__(self, **inputs):
    """The signature's outputs (dict of tensors) for its inputs."""
    model_inputs, state = self._saved.prepare(
        **{name: tf.constant(value) for name, value in inputs.items()})
    results = self._compiled({name: value.numpy()
                              for name, value in model_inputs.items()})
    outputs = {name: tf.constant(np.asarray(results[name]))
               for name in self.settings["outputs"]}
    return self._saved.finish(outputs, state)


def load(export_dir, device="CPU", inference_precision=None):
  """Served(export_dir, device, inference_precision)."""
  return Served(export_dir, device, inference_precision)
