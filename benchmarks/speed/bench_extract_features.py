"""extract_features.py end to end: ours vs ours writing JSON float by float
(the original's formatting) vs ours at full length.

Real input: the 872 sentences of SST-2 dev (../shared/data), one per line,
--layers=-1,-2,-3,-4 (the default), max_seq_length 128, batch 32, random
weights at BERT's initializer scale (values do not change the cost).
Variants:
- ours: trimmed batches, the encoder skipping padding, whole arrays
  formatted at once (jsonl.py);
- per_float_json: the same model run, each value written as the original
  writes it, json.dumps of round(x, 6) float by float;
- full_length: --trim_padding=false (every line computed at 128 positions).
Whole runs alternate (--repeats); medians and ratios are printed, and the
outputs compared: ours and per_float_json byte for byte, full_length's
values within float32 noise.

  .venv/bin/python benchmarks/speed/bench_extract_features.py [--shapes=small,base]
      [--repeats=3]
"""

import json
import os
import sys
import tempfile

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
sys.path.insert(0, os.path.abspath(os.path.join(__file__, "../../..")))

from absl import app  # pylint: disable=g-import-not-at-top
from absl import flags
from absl import logging
import numpy as np
import tensorflow as tf

from benchmarks.lib import results
from benchmarks.lib import timing
from benchmarks.lib.shapes import SHAPES
import extract_features
import modeling
from runner_lib.classifier import data as classifier_data
from runner_lib.extraction import jsonl
from tests import reference
from tests.conftest import SHARED_DATA

FLAGS = flags.FLAGS
flags.DEFINE_string("shapes", "small,base", "Comma-separated: small, base.")
flags.DEFINE_integer("repeats", 3, "Timed runs of each variant.")
results.define_flags()


def run(output_file, trim, formatter):
  """One extract_features.py run with the flags set, the formatter given."""
  FLAGS.output_file = output_file
  FLAGS.trim_padding = trim
  ours = jsonl.to_json_line
  jsonl.to_json_line = formatter
  try:
    extract_features.main(None)
  finally:
    jsonl.to_json_line = ours


def max_difference(path, other):
  """Largest |difference| between two outputs' values (same tokens)."""
  largest = 0.0
  with open(path) as f, open(other) as g:
    for line, other_line in zip(f, g):
      a, b = json.loads(line), json.loads(other_line)
      assert [t["token"] for t in a["features"]] == [
          t["token"] for t in b["features"]]
      for token, other_token in zip(a["features"], b["features"]):
        for layer, other_layer in zip(token["layers"], other_token["layers"]):
          largest = max(largest, float(np.max(np.abs(
              np.subtract(layer["values"], other_layer["values"])))))
  return largest


def bench(name, directory, num_lines):
  """Times the variants at one shape; prints a line and returns its
  numbers, a row."""
  config = modeling.BertConfig(vocab_size=30522, type_vocab_size=2,
                               **SHAPES[name])
  config_file = os.path.join(directory, name + "_config.json")
  with open(config_file, "w") as f:
    f.write(config.to_json_string())
  checkpoint = os.path.join(directory, name + ".ckpt")
  reference.write_tf1_checkpoint(
      checkpoint, reference.random_weights(config, seed=1, scale=0.02))
  FLAGS.bert_config_file = config_file
  FLAGS.init_checkpoint = checkpoint
  outputs = {variant: os.path.join(directory, "%s_%s.jsonl" % (name, variant))
             for variant in ("ours", "per_float_json", "full_length")}
  runs = {
      "ours": lambda: run(outputs["ours"], True, jsonl.to_json_line),
      "per_float_json": lambda: run(outputs["per_float_json"], True,
                                    reference.original_json_line),
      "full_length": lambda: run(outputs["full_length"], False,
                                 jsonl.to_json_line),
  }
  medians = timing.alternated_medians(runs, FLAGS.repeats, warmup=0)
  with open(outputs["ours"], "rb") as f, open(outputs["per_float_json"],
                                              "rb") as g:
    identical = f.read() == g.read()
  difference = max_difference(outputs["ours"], outputs["full_length"])
  print("%-5s L=%d H=%d, %s lines: ours %.1f s, per_float_json %.1f s "
        "(ratio %.2f, outputs byte-identical: %s), full_length %.1f s "
        "(ratio %.2f, max |value difference| %.1e)" % (
            name, config.num_hidden_layers, config.hidden_size,
            num_lines, medians["ours"], medians["per_float_json"],
            medians["per_float_json"] / medians["ours"], identical,
            medians["full_length"], medians["full_length"] / medians["ours"],
            difference), flush=True)
  return [name, config.num_hidden_layers, config.hidden_size, num_lines,
          round(medians["ours"], 1), round(medians["per_float_json"], 1),
          round(medians["per_float_json"] / medians["ours"], 2), identical,
          round(medians["full_length"], 1),
          round(medians["full_length"] / medians["ours"], 2),
          float("%.1e" % difference)]


def main(argv):
  del argv
  logging.set_verbosity(logging.WARNING)
  sst2 = os.path.join(SHARED_DATA, "glue", "SST-2")
  vocab = os.path.join(SHARED_DATA, "vocab", "uncased_vocab.txt")
  if not os.path.exists(sst2) or not os.path.exists(vocab):
    sys.exit("needs %s and %s (../shared/data)" % (sst2, vocab))
  directory = tempfile.mkdtemp()
  input_file = os.path.join(directory, "input.txt")
  sentences = [example.text_a for example in
               classifier_data.Sst2Processor().get_dev_examples(sst2)]
  with open(input_file, "w") as f:
    f.write("".join(s + "\n" for s in sentences))
  FLAGS.input_file = input_file
  FLAGS.vocab_file = vocab
  FLAGS.do_lower_case = True
  FLAGS.max_seq_length = 128
  FLAGS.batch_size = 32
  FLAGS.layers = "-1,-2,-3,-4"
  print("TensorFlow %s, %d CPUs, %d repeats (medians of whole runs)" %
        (tf.__version__, os.cpu_count(), FLAGS.repeats))
  rows = [bench(name, directory, len(sentences))
          for name in FLAGS.shapes.split(",")]
  if FLAGS.record:
    results.record(
        "bench_extract_features",
        [results.table(
            "extract_features.py end to end on SST-2 dev, seconds",
            ["shape", "L", "H", "lines", "ours", "per_float_json",
             "per_float_json/ours", "byte-identical", "full_length",
             "full_length/ours", "max |value difference|"], rows)],
        results.flag_settings(FLAGS),
        headline={"extract_features %s: ours/original JSON formatting" % (
            "BERT-Base" if row[0] == "base" else "L=%d H=%d" % (
                row[1], row[2])): row[6] for row in rows})


if __name__ == "__main__":
  app.run(main)
