"""Converts a HuggingFace BERT folder to a Google BERT folder, and back.

  python convert_checkpoint.py --input_dir=all-MiniLM-L6-v2 \
    --output_dir=/tmp/minilm_google

A HuggingFace folder (config.json, model.safetensors or pytorch_model.bin,
vocab.txt) becomes a Google one (bert_config.json, vocab.txt,
bert_model.ckpt.index / .data-00000-of-00001 under the original variable
names, for --bert_config_file, --vocab_file and --init_checkpoint of every
runner) and the other way round; the direction is told by the config file
--input_dir holds. HuggingFace's hidden_act "gelu" (the exact erf form)
becomes "gelu_exact", its "gelu_new" (the tanh form) Google's "gelu".
A Google folder converted from HuggingFace also holds
huggingface_layout.json, so that converting it back restores every tensor
bit for bit under its original name, and config.json's keys.

From a Google checkpoint, the encoder and the pre-training heads
(cls/predictions, cls/seq_relationship) are converted; optimizer and
training state (adam_m, adam_v, global_step, ...) is left out silently,
fine-tuning heads (output_weights, cls/squad, ...) with a warning, and any
other variable is an error. The output folder appears only when complete.
"""

import os

if __name__ == "__main__":
  # TensorFlow would import Keras 3 as it starts (~1.2 s); Keras here is
  # tf_keras, so tf.keras may be too (docs/contributing.md, Keras).
  os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")
# pylint: disable=g-import-not-at-top

from absl import flags

from modeling import huggingface
from runner_lib.core import errors

FLAGS = flags.FLAGS

# Required.
flags.DEFINE_string(
    "input_dir", None,
    "Required. A HuggingFace BERT folder (config.json, model.safetensors or "
    "pytorch_model.bin, vocab.txt) or a Google one (bert_config.json, "
    "vocab.txt, bert_model.ckpt.*), on the local disk.")
flags.DEFINE_string(
    "output_dir", None,
    "Required. The folder to write. It appears only when complete.")

# Optional.
flags.DEFINE_enum(
    "to", None, huggingface.FORMATS,
    "The format to write. By default the one --input_dir is not: google "
    "for a folder holding config.json, huggingface for one holding "
    "bert_config.json.")
flags.DEFINE_bool(
    "overwrite", False,
    "Replace an existing, non-empty --output_dir (once the new folder is "
    "complete).")


def main(_):
  written = huggingface.convert_folder(FLAGS.input_dir, FLAGS.output_dir,
                                       FLAGS.to, FLAGS.overwrite)
  print("Wrote the %s BERT folder %s" % (
      {"google": "Google", "huggingface": "HuggingFace"}[written],
      FLAGS.output_dir))


if __name__ == "__main__":
  flags.mark_flags_as_required(["input_dir", "output_dir"])
  errors.run(main)
