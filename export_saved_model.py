"""Exports a trained model as a SavedModel that takes raw strings.

The graph holds the tokenizer (FullTokenizer's output, in TensorFlow Text
ops), the runner's packing and truncation, the model and its
post-processing; a loaded model needs only TensorFlow and TensorFlow Text:

  python export_saved_model.py --task=classifier --task_name=MRPC \
    --vocab_file=$BERT_BASE_DIR/vocab.txt \
    --bert_config_file=$BERT_BASE_DIR/bert_config.json \
    --init_checkpoint=/tmp/mrpc_output/ --max_seq_length=128 \
    --export_dir=/tmp/mrpc_saved_model

Tasks: classifier (run_classifier.py's checkpoints; --task_name gives the
labels and whether it takes text_b), squad (run_squad.py's checkpoints and
flags: question and context in, predictions.json's answer out), swag, ner
(fine-tuned), encoder (any checkpoint: BertModel's outputs, like TF Hub's
BERT encoders), preprocessor (TF Hub's BERT preprocessing interface; no
checkpoint needed).

--precision=bfloat16 or int8 also writes an OpenVINO model beside the
SavedModel (int8 calibrated on --calibration_file), served between the
SavedModel's own tokenizer and post-processing
(runner_lib/serving/openvino_model.py, docs/serving.md); a bfloat16
SavedModel stores its matmul weights in bfloat16.

--task=classifier --long_text=windows (with run_classifier.py's
--window_stride and --max_windows) windows long texts in the graph as
run_classifier.py does, one result per example (float32 only).
"""

import os

if __name__ == "__main__":
  # TensorFlow would import Keras 3 as it starts (~1.2 s); Keras here is
  # tf_keras, so tf.keras may be too (docs/contributing.md, Keras).
  os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")
# pylint: disable=g-import-not-at-top

from absl import flags
import tensorflow as tf

import modeling
from runner_lib.classifier import data as classifier_data
from runner_lib.classifier import options as classifier_options
from runner_lib.classifier import task as classifier_task
from runner_lib.core import errors
from runner_lib.core.cli import flags as runner_flags
from runner_lib.core.training import precision
from runner_lib.ner import options as ner_options
from runner_lib.serving import export
from runner_lib.serving import hub
from runner_lib.serving import modules
from runner_lib.serving import openvino_model
from runner_lib.serving import squad as squad_serving
from runner_lib.squad import options as squad_options
from runner_lib.squad import task as squad_task
from runner_lib.swag import task as swag_task
import tokenization

FLAGS = flags.FLAGS

TASKS = ("classifier", "encoder", "ner", "preprocessor", "squad", "swag")

flags.DEFINE_enum("task", None, TASKS, "Required. Which model the "
                  "checkpoint holds, and so the signatures.")
flags.DEFINE_string("export_dir", None,
                    "Required. Where to write the SavedModel.")
flags.DEFINE_bool("overwrite", False,
                  "Replace an existing, non-empty --export_dir.")
flags.DEFINE_string("task_name", None, "--task=classifier: the GLUE / XNLI "
                    "task, as run_classifier.py's --task_name.")
runner_flags.define_model_flags()
runner_flags.define_inference_precision_flag(int8=True)
flags.DEFINE_string("calibration_file", None,
                    "--precision=int8: JSON lines, each an instance of the "
                    "serving signature's inputs as TensorFlow Serving's "
                    "REST requests carry them (e.g. {\"text_a\": ..., "
                    "\"text_b\": ...}), the task's own examples; the "
                    "first %d calibrate the activations' int8 ranges." %
                    openvino_model.MAX_CALIBRATION)
# --task=classifier: run_classifier.py's --long_text windows.
classifier_options.define_long_text_flags()
# --task=ner: run_ner.py's tags and tagger (fine-tuned or feature-based).
ner_options.define_model_flags()
# --task=squad: run_squad.py's windows, n-best search and threshold.
squad_options.define_window_flags()
squad_options.define_answer_flags()
squad_options.define_version_2_flags()


def build_module(config, options):
  """The task's model (weights not loaded yet) in its serving module,
  computing as options (a modeling.ComputeOptions) says. Served batches
  are trimmed (modules.trim_padding), so the tasks that read no padding
  position let the encoder skip it (Task.model_builder)."""
  common = (FLAGS.vocab_file, FLAGS.do_lower_case, FLAGS.max_seq_length)
  if FLAGS.task == "classifier":
    if not FLAGS.task_name:
      raise errors.InputError("--task=classifier needs --task_name.")
    processor = classifier_data.get_processor(FLAGS.task_name)
    pair = processor.COLUMNS[1] is not None
    model = classifier_task.ClassificationTask(
        config, FLAGS.max_seq_length,
        processor.get_labels()).model_builder(skip_padding=True,
                                              options=options)()
    return modules.ClassifierModule(
        model, *common, processor.get_labels(), pair=pair,
        windows=classifier_options.windows_from_flags(pair))
  if FLAGS.task == "squad":
    squad_options.check_flags()
    model = squad_task.SquadTask(config,
                                 FLAGS.max_seq_length).build_model(options)
    return squad_serving.SquadModule(
        model, *common, doc_stride=FLAGS.doc_stride,
        max_query_length=FLAGS.max_query_length,
        n_best_size=FLAGS.n_best_size,
        max_answer_length=FLAGS.max_answer_length,
        version_2_with_negative=FLAGS.version_2_with_negative,
        null_score_diff_threshold=FLAGS.null_score_diff_threshold)
  if FLAGS.task == "swag":
    task = swag_task.SwagTask(config, FLAGS.max_seq_length)
    return modules.SwagModule(
        task.model_builder(skip_padding=True, options=options)(), *common)
  if FLAGS.task == "ner":
    task = ner_options.make_task(config)
    return modules.NerModule(
        task.model_builder(skip_padding=True, options=options)(), *common,
        task.label_list)
  return hub.EncoderModule(modeling.BertModel(config, options=options),
                               *common)


def check_flags():
  """--calibration_file goes with --precision=int8, which needs it."""
  if FLAGS.precision == "int8" and not FLAGS.calibration_file:
    raise errors.InputError(
        "--precision=int8 needs --calibration_file: JSON lines of the "
        "task's own examples (docs/serving.md, Precision).")
  if FLAGS.calibration_file and FLAGS.precision != "int8":
    raise errors.InputError("--calibration_file is for --precision=int8 "
                            "(got --precision=%s)." % FLAGS.precision)
  long_text = [name for name in ("long_text", "window_stride",
                                  "max_windows") if FLAGS[name].present]
  if long_text and FLAGS.task != "classifier":
    raise errors.InputError("--%s is for --task=classifier (got --task=%s)."
                            % (long_text[0], FLAGS.task))
  if FLAGS.long_text == "windows" and FLAGS.precision != "float32":
    # OpenVINO's model would take the windows' [B, W, T] inputs and their
    # mean, which nothing here has converted or checked.
    raise errors.InputError(
        "--long_text=windows exports in --precision=float32 only (got "
        "--precision=%s)." % FLAGS.precision)
  if FLAGS.precision != "float32" and FLAGS.task == "preprocessor":
    raise errors.InputError("--task=preprocessor has no model: "
                            "--precision does not apply.")


def main(_):
  check_flags()
  export.check_export_dir(FLAGS.export_dir, FLAGS.overwrite)
  if FLAGS.task == "preprocessor":
    # Only the vocab: check it as FullTokenizer does.
    tokenization.FullTokenizer(FLAGS.vocab_file, FLAGS.do_lower_case)
    export.save(hub.PreprocessorModule(
        FLAGS.vocab_file, FLAGS.do_lower_case, FLAGS.max_seq_length),
                FLAGS.export_dir, FLAGS.overwrite)
    return
  for name in ("bert_config_file", "init_checkpoint"):
    if not FLAGS[name].value:
      raise errors.InputError("--task=%s needs --%s." % (FLAGS.task, name))
  config, _ = runner_flags.config_and_tokenizer()
  module = build_module(config, precision.prediction_options(
      "float32" if FLAGS.precision == "int8" else FLAGS.precision))

  def load(module):
    """The names of the variables of module's model the checkpoint lacks."""
    return modeling.load_checkpoint(module.model, FLAGS.init_checkpoint,
                                    allow_partial=True).missing
  # Every variable the task's model has must be in the checkpoint: a
  # pre-training checkpoint has no task head to serve.
  missing = load(module)
  if missing:
    raise modeling.CheckpointError(
        "Checkpoint %s lacks %d variable(s) of the %s model: %s. Export a "
        "checkpoint fine-tuned for --task=%s." %
        (FLAGS.init_checkpoint, len(missing), FLAGS.task, ", ".join(missing),
         FLAGS.task))
  write_beside = None
  if FLAGS.precision != "float32":
    instances = None
    if FLAGS.precision == "int8":
      names = [spec.name for spec in
               module.signatures()["serving_default"].input_signature]
      instances = openvino_model.read_instances(FLAGS.calibration_file,
                                                names)

    computes = None
    if FLAGS.precision == "bfloat16":
      # OpenVINO converts no bfloat16 cast: it reads a float32 twin and
      # rounds the weights to bfloat16 itself.
      computes = build_module(config, modeling.ComputeOptions())
      load(computes)

    def write_beside(directory):
      openvino_model.write(module, directory, FLAGS.precision, instances,
                           computes)
      if FLAGS.precision == "bfloat16":
        # No per-call cast of the SavedModel's weights.
        module.store_kernels(tf.bfloat16)
  export.save(module, FLAGS.export_dir, FLAGS.overwrite, write_beside)

if __name__ == "__main__":
  flags.mark_flags_as_required(["task", "export_dir", "vocab_file"])
  errors.run(main)
