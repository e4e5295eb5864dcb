"""Inference speed: our BertModel vs tf-models-official's BertEncoder.

Both get the same config, the same weights' shapes and the same batch, and
run as tf.function graphs (optionally XLA). Timings alternate between the two
models so machine noise hits both alike; medians and the ratio are printed.

  .venv/bin/python benchmarks/speed/bench_encoder.py [--repeats=10] [--jit_compile]
"""

import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
sys.path.insert(0, os.path.abspath(os.path.join(__file__, "../../..")))

from absl import app  # pylint: disable=g-import-not-at-top
from absl import flags
import numpy as np
import tensorflow as tf

from benchmarks.lib import results
from benchmarks.lib import timing
import modeling
from tests import reference

FLAGS = flags.FLAGS
flags.DEFINE_integer("repeats", 10, "Timed runs per model and shape.")
flags.DEFINE_bool("jit_compile", False, "Compile both models with XLA.")
flags.DEFINE_string("shapes", "base,small", "Comma-separated: base, small.")
results.define_flags()

SHAPES = {
    # BERT-Base at the fine-tuning recipe's sequence length.
    "base": (dict(vocab_size=30522, hidden_size=768, num_hidden_layers=12,
                  num_attention_heads=12, intermediate_size=3072,
                  type_vocab_size=2), 8, 128),
    # A BERT-Small-like config (L=4, H=256), where per-op overhead shows.
    "small": (dict(vocab_size=30522, hidden_size=256, num_hidden_layers=4,
                   num_attention_heads=4, intermediate_size=1024,
                   type_vocab_size=2), 32, 128),
}


def make_batch(config, batch_size, seq_length):
  rng = np.random.RandomState(0)
  ids = rng.randint(1000, config.vocab_size, [batch_size, seq_length])
  # Realistic padding: lengths spread over the second half of the window.
  lengths = rng.randint(seq_length // 2, seq_length + 1, [batch_size])
  mask = (np.arange(seq_length)[None] < lengths[:, None]).astype(np.int32)
  segments = (np.arange(seq_length)[None] >= lengths[:, None] // 2) * mask
  return (tf.constant(ids * mask, tf.int32), tf.constant(mask),
          tf.constant(segments.astype(np.int32)))


def bench_shape(name):
  """Times both models at one shape; prints a line.

  Returns:
    the line's numbers, a row of main's table.
  """
  fields, batch_size, seq_length = SHAPES[name]
  config = modeling.BertConfig(**fields)
  ids, mask, segments = make_batch(config, batch_size, seq_length)
  ours = modeling.BertModel(config)
  theirs = reference.model_garden_encoder(config)

  @tf.function(jit_compile=FLAGS.jit_compile)
  def run_ours():
    out = ours({"input_ids": ids, "input_mask": mask, "segment_ids": segments},
               training=False)
    return out["sequence_output"], out["pooled_output"]

  @tf.function(jit_compile=FLAGS.jit_compile)
  def run_theirs():
    out = theirs({"input_word_ids": ids, "input_mask": mask,
                  "input_type_ids": segments}, training=False)
    return out["sequence_output"], out["pooled_output"]

  medians = timing.alternated_medians(
      {"ours": lambda: run_ours()[0].numpy(),
       "model_garden": lambda: run_theirs()[0].numpy()}, FLAGS.repeats)
  print("%-6s L=%d H=%d batch=%d seq=%d  ours %.1f ex/s  model_garden %.1f "
        "ex/s  ratio ours/model_garden = %.3f" %
        (name, config.num_hidden_layers, config.hidden_size, batch_size,
         seq_length, batch_size / medians["ours"],
         batch_size / medians["model_garden"],
         medians["model_garden"] / medians["ours"]), flush=True)
  return [name, config.num_hidden_layers, config.hidden_size, batch_size,
          seq_length, round(batch_size / medians["ours"], 1),
          round(batch_size / medians["model_garden"], 1),
          round(medians["model_garden"] / medians["ours"], 3)]


def main(argv):
  del argv
  print("TensorFlow %s, %d CPU threads, jit_compile=%s, %d repeats (medians)" %
        (tf.__version__, os.cpu_count(), FLAGS.jit_compile, FLAGS.repeats))
  rows = [bench_shape(name) for name in FLAGS.shapes.split(",")]
  if FLAGS.record:
    results.record(
        "bench_encoder",
        [results.table("Inference, examples/s (jit_compile=%s)" %
                       FLAGS.jit_compile,
                       ["shape", "L", "H", "batch", "seq", "ours",
                        "model_garden", "ours/model_garden"], rows)],
        results.flag_settings(FLAGS),
        headline={"inference BERT-Base%s: ours/Model Garden" %
                  (" XLA" if FLAGS.jit_compile else ""): row[-1]
                  for row in rows if row[0] == "base"})


if __name__ == "__main__":
  app.run(main)
