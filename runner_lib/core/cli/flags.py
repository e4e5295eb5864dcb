"""Flag definitions shared by runners, each defined here once, and the
checks of their values that runners make before any work. What a runner
then does with them (build the Trainer, train, predict, write results) is
in runner.py."""

from absl import flags
from absl import logging

from runner_lib.core import errors
from runner_lib.core.files import fileio
from runner_lib.core.inputs import input_pipeline
from runner_lib.core.inputs import model_inputs

FLAGS = flags.FLAGS


def define_model_flags(max_seq_length=128):
  """bert_config_file, vocab_file, init_checkpoint, do_lower_case, ..."""
  flags.DEFINE_string(
      "bert_config_file", None,
      "Required. The config json file corresponding to the pre-trained BERT "
      "model. This specifies the model architecture.")
  flags.DEFINE_string(
      "vocab_file", None,
      "Required. The vocabulary file that the BERT model was trained on.")
  flags.DEFINE_string(
      "init_checkpoint", None,
      "Initial checkpoint (usually from a pre-trained BERT model), given as "
      "its prefix, e.g. $BERT_BASE_DIR/bert_model.ckpt.")
  flags.DEFINE_bool(
      "do_lower_case", True,
      "Whether to lower case the input text. Should be True for uncased "
      "models and False for cased models.")
  flags.DEFINE_integer(
      "max_seq_length", max_seq_length,
      "The maximum total input sequence length after WordPiece tokenization. "
      "Sequences longer than this will be truncated, and sequences shorter "
      "than this will be padded.")


def define_tpu_flags():
  """use_tpu and the flags that say which TPU (see distribute.py)."""
  flags.DEFINE_bool("use_tpu", False, "Whether to use TPU or GPU/CPU.")
  flags.DEFINE_string(
      "tpu_name", None,
      "The Cloud TPU to use: its name or a grpc://ip.address.of.tpu:8470 "
      "url. Only with --use_tpu.")
  flags.DEFINE_string(
      "tpu_zone", None,
      "GCE zone of the Cloud TPU. If not given, it is detected from "
      "metadata. Only with --use_tpu.")
  flags.DEFINE_string(
      "gcp_project", None,
      "Project name of the Cloud TPU-enabled project. If not given, it is "
      "detected from metadata. Only with --use_tpu.")
  flags.DEFINE_string(
      "master", None,
      "The address of the TPU master (same as --tpu_name). Only with "
      "--use_tpu.")
  flags.DEFINE_integer(
      "num_tpu_cores", 8,
      "Total number of TPU cores. Only with --use_tpu; checked against the "
      "cores the TPU reports when given explicitly.")


def config_and_tokenizer():
  """The BertConfig and FullTokenizer that define_model_flags' flags name,
  checked against each other (model_inputs.load_config_and_tokenizer)."""
  return model_inputs.load_config_and_tokenizer(
      FLAGS.bert_config_file, FLAGS.vocab_file, FLAGS.do_lower_case,
      FLAGS.init_checkpoint, FLAGS.max_seq_length)


def tpu_flag_values():
  """The TPU flags (and --strategy, where defined) as distribute.get_strategy
  arguments; --num_tpu_cores only when given."""
  values = {name: FLAGS[name].value for name in
            ("use_tpu", "tpu_name", "tpu_zone", "gcp_project", "master")}
  if FLAGS["num_tpu_cores"].present:
    values["num_tpu_cores"] = FLAGS.num_tpu_cores
  if "strategy" in FLAGS:
    values["strategy"] = FLAGS.strategy
  return values


# do_<mode> and <mode>_batch_size, as the original names them: (help of
# do_<mode>, default batch size, help of <mode>_batch_size).
_MODES = {
    "train": ("Whether to run training.", 32, "Total batch size for training."),
    "eval": ("Whether to run eval on the dev set.", 8,
             "Total batch size for eval."),
    "predict": ("Whether to run the model in inference mode on the test set.",
                8, "Total batch size for predict."),
}


def define_training_flags(modes=("train", "eval")):
  """The original's training flags plus what TF2 adds (strategy, XLA, ...).

  Args:
    modes: what the runner can do, from "train", "eval", "predict": each
      gets do_<mode> and <mode>_batch_size (run_squad.py, like the
      original, has no eval).
  """
  flags.DEFINE_string("output_dir", None,
                      "Required. The output directory where the model "
                      "checkpoints will be written.")
  for mode in modes:
    do_help, batch_size, batch_help = _MODES[mode]
    flags.DEFINE_bool("do_" + mode, False, do_help)
    flags.DEFINE_integer(mode + "_batch_size", batch_size, batch_help)
  flags.DEFINE_float("learning_rate", 5e-5, "The initial learning rate for "
                     "Adam.")
  flags.DEFINE_integer("save_checkpoints_steps", 1000,
                       "How often to save the model checkpoint.")
  flags.DEFINE_integer("iterations_per_loop", 1000,
                       "Steps run per call into the graph (between logs).")
  flags.DEFINE_integer("keep_checkpoint_max", 5,
                       "How many recent checkpoints to keep in output_dir.")
  flags.DEFINE_enum("strategy", "auto", ["auto", "default", "mirrored",
                                         "multi_worker_mirrored"],
                    "tf.distribute strategy when not on TPU: auto picks "
                    "multi_worker_mirrored when TF_CONFIG names several "
                    "tasks, mirrored with several GPUs, else default.")
  flags.DEFINE_enum("optimizer", "adamw", ["adamw", "adamw_corrected",
                                           "lamb"],
                    "adamw: the original AdamWeightDecay (no bias "
                    "correction). adamw_corrected: the same with Adam's "
                    "bias correction, PyTorch's AdamW update (smaller early "
                    "steps: 3.2x smaller at the first). lamb: LAMB, for "
                    "large batches.")
  flags.DEFINE_enum("precision", "float32",
                    ["float32", "bfloat16", "float16"],
                    "Compute precision; weights, optimizer, losses and "
                    "checkpoints stay float32. bfloat16: on CPUs the "
                    "matmuls and their gradients (the rest float32), on "
                    "GPU / TPU Keras' mixed_bfloat16. float16: Keras' "
                    "mixed_float16 with dynamic loss scaling.")
  flags.DEFINE_bool("use_xla", False,
                    "Compile the training step with XLA (jit_compile).")
  flags.DEFINE_bool("fused_kernels", True,
                    "On a CPU without XLA, train with this project's fused "
                    "kernels where they are built (modeling/"
                    "fused_kernels.py: bias + GELU, residual + LayerNorm, "
                    "attention softmax, dropout and the optimizer update, "
                    "in float32 and bfloat16 alike; in bfloat16 also the "
                    "bias add between two bfloat16 matmuls). false: "
                    "TensorFlow's own ops only, the arithmetic the checks "
                    "against the original run on.")
  flags.DEFINE_integer("gradient_accumulation_steps", 1,
                       "Micro-batches per update: each replica's batch is "
                       "split into this many, their gradients averaged "
                       "into one update of the whole batch.")
  flags.DEFINE_bool("gradient_checkpointing", False,
                    "Recompute activations: each Transformer layer keeps "
                    "only its input for the backward pass and computes "
                    "the rest again there. Far less memory (a longer "
                    "--max_seq_length or a larger batch fits) for about a "
                    "third more arithmetic per step; the same dropout "
                    "masks, so the same weights as without it.")
  flags.DEFINE_integer("seed", 12345, "Seed of initialization, dropout and "
                       "input shuffling.")


def define_finetuning_flags(modes=("train", "eval", "predict")):
  """The fine-tuning runners' flags: the training flags, and the epochs and
  warm-up share that set the steps (optimization.finetuning_steps).

  Args:
    modes: passed to define_training_flags.
  """
  define_training_flags(modes)
  flags.DEFINE_float("num_train_epochs", 3.0,
                     "Total number of training epochs to perform.")
  flags.DEFINE_float("warmup_proportion", 0.1,
                     "Proportion of training to perform linear learning rate "
                     "warmup for. E.g., 0.1 = 10% of training.")
  define_trim_flag()
  flags.DEFINE_bool(
      "bucket_by_length", False,
      "With --trim_padding: batch training examples of similar length "
      "together (each %d batches' examples sorted by length, the batches "
      "shuffled), so trimmed batches are shorter still. Every example is "
      "still seen once per epoch, but in other batches than the original's."
      % input_pipeline.BUCKET_CHUNK_BATCHES)


def define_inference_precision_flag(int8=False):
  """--precision for prediction and serving (precision.prediction_options);
  int8: export_saved_model.py's int8 choice too."""
  if int8:
    flags.DEFINE_enum(
        "precision", "float32", ["float32", "bfloat16", "int8"],
        "What the export computes in. float32: the SavedModel alone. "
        "bfloat16: the SavedModel's matmuls in bfloat16 over weights "
        "stored in bfloat16 (bfloat16 units: AMX, AVX512-BF16, a GPU's or "
        "TPU's), and an OpenVINO model beside it computing in bfloat16. "
        "int8: a float32 SavedModel, and an OpenVINO model beside it with "
        "int8 matmuls (weights per channel, activations calibrated on "
        "--calibration_file). docs/serving.md, Precision.")
    return
  flags.DEFINE_enum("precision", "float32", ["float32", "bfloat16"],
                    "Compute precision of the model's matmuls: bfloat16 "
                    "runs them on bfloat16 units (AMX, a GPU's or TPU's); "
                    "the rest and every output stay float32.")


def define_trim_flag():
  """--trim_padding: batches cut after their longest sequence."""
  flags.DEFINE_bool(
      "trim_padding", True,
      "Cut each batch after its longest sequence (rounded up to a multiple "
      "of %d positions) instead of computing max_seq_length positions; "
      "prediction also batches records by length. The records keep the "
      "original's fixed length and the outputs are the same to float32 "
      "rounding. Off on TPU, whose programs need static shapes." %
      input_pipeline.TRIM_MULTIPLE)


def check_trim_flags():
  """--bucket_by_length needs --trim_padding (sorted batches gain nothing
  at full length).

  Raises:
    errors.InputError.
  """
  if FLAGS.bucket_by_length and not FLAGS.trim_padding:
    raise errors.InputError("--bucket_by_length needs --trim_padding: "
                            "batches of full length gain nothing from it.")


# Integer flags of define_training_flags that must be at least 1 (where
# the runner defines them).
POSITIVE_TRAINING_FLAGS = tuple(mode + "_batch_size" for mode in _MODES) + (
    "save_checkpoints_steps", "iterations_per_loop",
    "gradient_accumulation_steps")


def check_positive(names):
  """Checks that integer flags are at least 1.

  Args:
    names: flag names; those the runner does not define are skipped.

  Raises:
    errors.InputError: naming the first flag below 1.
  """
  for name in names:
    if name in FLAGS and FLAGS[name].value < 1:
      raise errors.InputError("--%s must be at least 1, got %d." %
                              (name, FLAGS[name].value))


def check_learning_flags():
  """With --do_train: --learning_rate above 0 and, where the runner defines
  them, --num_train_epochs above 0 and --warmup_proportion in [0, 1].

  The original accepted any value: a negative rate climbs the loss, and 0
  epochs still trained a step.

  Raises:
    errors.InputError: naming the flag.
  """
  if not FLAGS.do_train:
    return
  if not FLAGS.learning_rate > 0:
    raise errors.InputError("--learning_rate must be above 0, got %s." %
                            FLAGS.learning_rate)
  if "num_train_epochs" in FLAGS and not FLAGS.num_train_epochs > 0:
    raise errors.InputError("--num_train_epochs must be above 0, got %s." %
                            FLAGS.num_train_epochs)
  if "warmup_proportion" in FLAGS and not (
      0.0 <= FLAGS.warmup_proportion <= 1.0):
    raise errors.InputError("--warmup_proportion must be in [0, 1], got %s." %
                            FLAGS.warmup_proportion)


def warn_long_warmup(num_train_steps, num_warmup_steps):
  """Warns where warm-up outlasts training: the learning rate never reaches
  --learning_rate (the original ran so, silently)."""
  if num_warmup_steps > num_train_steps:
    # The last update, at step num_train_steps - 1, is still warming up.
    logging.warning(
        "--num_warmup_steps=%d is longer than the run (%d steps): the "
        "learning rate never exceeds %.2g x --learning_rate.",
        num_warmup_steps, num_train_steps,
        (num_train_steps - 1) / num_warmup_steps)


def per_replica_batch(name, strategy):
  """The global batch size in flag `name` split over the replicas.

  The training batch must further split into --gradient_accumulation_steps
  micro-batches.

  Raises:
    errors.InputError: naming the flag, where it does not split evenly.
  """
  global_batch = FLAGS[name].value
  replicas = strategy.num_replicas_in_sync
  micro_batches = (FLAGS.gradient_accumulation_steps
                   if name == "train_batch_size" else 1)
  per_replica = global_batch // replicas
  if global_batch % replicas or per_replica % micro_batches:
    raise errors.InputError(
        "--%s=%d must split evenly over %d replicas and then into %d "
        "micro-batches (--gradient_accumulation_steps)." %
        (name, global_batch, replicas, micro_batches))
  return per_replica


def check_finetuning_flags(strategy):
  """The checks every fine-tuning runner makes before any work.

  Args:
    strategy: tf.distribute.Strategy the batches split over.

  Returns:
    int, the per-replica training batch.

  Raises:
    errors.InputError: no do_train / do_eval / do_predict, an integer flag
      below 1, a learning flag out of range (check_learning_flags), a batch
      size that does not split over the replicas, or an --output_dir that
      cannot be written (fileio.check_output_dir).
  """
  if not (FLAGS.do_train or FLAGS.do_eval or FLAGS.do_predict):
    raise errors.InputError("At least one of `do_train`, `do_eval` or "
                            "`do_predict' must be True.")
  check_positive(POSITIVE_TRAINING_FLAGS)
  check_learning_flags()
  check_trim_flags()
  fileio.check_output_dir(FLAGS.output_dir)
  for name in ("eval_batch_size", "predict_batch_size"):
    per_replica_batch(name, strategy)
  return per_replica_batch("train_batch_size", strategy)
