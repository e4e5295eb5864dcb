"""run_classifier.py --long_text: truncate against windows on pairs longer
than 512 tokens whose label only the text past the cut carries.

The built set of tests/test_classifier_windows.py (long_text_folder) at
full scale: MRPC-format pairs whose text_a is --min_words to --max_words
filler words (one WordPiece each) with --keywords label keywords among
its last --keyword_span words, text_b 2 to 4 filler words; 256 training
pairs, 128 balanced dev pairs. A
tiny BERT (2 layers, hidden size 32) from random weights, trained 20
epochs at --max_seq_length. Truncated, the model never sees a keyword: it
should stay at chance (0.5). With windows (--window_stride's default,
--max_windows enough to cover every text) it reads them. Prints and
records the dev accuracy of each mode and seed, and their means.

--optimizer=adamw_corrected (Adam's bias correction): each window's
logits enter the example's mean with a weight of one over the windows,
and so does their gradient; with the original's AdamW (no bias
correction) some seeds stay at chance for 20 epochs (the test's comment).
With 3 keywords among the last 20 (the test's, at seq 32) in texts of
520-600 the tiny model found no keyword in 20 epochs at seq 128 (0.5 on
seed 1, and 0.625 after 40 epochs); 20 among the last 100 it finds.

  .venv/bin/python benchmarks/quality/long_text.py [--seeds=1,2,3]
"""

import json
import os
import pathlib
import statistics
import subprocess
import sys
import tempfile

ROOT = os.path.abspath(os.path.join(__file__, "../../.."))
sys.path.insert(0, ROOT)

from absl import app  # pylint: disable=g-import-not-at-top
from absl import flags

from benchmarks.lib import results
from tests import conftest
from tests import test_classifier_windows
from tests import test_run_classifier

FLAGS = flags.FLAGS
flags.DEFINE_list("seeds", ["1", "2", "3"], "Seeds of the data and runs.")
flags.DEFINE_integer("max_seq_length", 128, "Window length.")
flags.DEFINE_integer("min_words", 520, "Shortest text_a, in WordPieces.")
flags.DEFINE_integer("max_words", 600, "Longest text_a, in WordPieces.")
flags.DEFINE_integer("keywords", 20, "Label keywords in each text_a.")
flags.DEFINE_integer("keyword_span", 100, "The keywords are among text_a's "
                     "last this many words.")
flags.DEFINE_integer("max_windows", 10, "--max_windows of the windows runs "
                     "(enough for --max_words at the default stride).")
flags.DEFINE_string("optimizer", "adamw_corrected", "--optimizer.")
results.define_flags()

MODES = ("truncate", "windows")


def accuracy(folder, output_dir, mode, seed):
  """Dev accuracy of run_classifier.py in one mode."""
  args = test_run_classifier.base_args(
      folder, output_dir, max_seq_length=str(FLAGS.max_seq_length),
      do_train="true", do_eval="true", num_train_epochs="20",
      optimizer=FLAGS.optimizer, long_text=mode, seed=str(seed))
  if mode == "windows":
    args["max_windows"] = str(FLAGS.max_windows)
  result = subprocess.run(
      [sys.executable, os.path.join(ROOT, "run_classifier.py")] +
      ["--%s=%s" % item for item in args.items()], capture_output=True,
      text=True, timeout=1800, check=False)
  if result.returncode:
    raise SystemExit("run_classifier.py --long_text=%s failed:\n%s" %
                     (mode, result.stderr[-3000:]))
  return conftest.read_results(
      os.path.join(output_dir, "eval_results.txt"))["eval_accuracy"]


def main(argv):
  del argv
  work = pathlib.Path(tempfile.mkdtemp())
  rows = []
  for seed in [int(s) for s in FLAGS.seeds]:
    folder, _ = test_classifier_windows.long_text_folder(
        work / ("data_%d" % seed), seed,
        (FLAGS.min_words, FLAGS.max_words), FLAGS.max_seq_length,
        (FLAGS.keywords, FLAGS.keyword_span))
    # The tests' tiny config, with positions for a whole window.
    config = json.loads((folder / "bert_config.json").read_text())
    config["max_position_embeddings"] = FLAGS.max_seq_length
    (folder / "bert_config.json").write_text(json.dumps(config))
    row = [seed] + [round(accuracy(folder, str(work / ("%s_%d" % (m, seed))),
                                   m, seed), 3) for m in MODES]
    print("seed %d: truncate %.3f, windows %.3f" % tuple(row), flush=True)
    rows.append(row)
  means = [round(statistics.mean(r[i + 1] for r in rows), 3)
           for i in range(len(MODES))]
  print("mean over %d seeds: truncate %.3f, windows %.3f" %
        tuple([len(rows)] + means))
  if FLAGS.record:
    results.record(
        "long_text",
        [results.table(
            "Dev accuracy, 128 balanced pairs: text_a of %d to %d "
            "WordPieces, the label only in %d keywords among its last %d, "
            "max_seq_length %d" % (FLAGS.min_words, FLAGS.max_words,
                                   FLAGS.keywords, FLAGS.keyword_span,
                                   FLAGS.max_seq_length),
            ["seed"] + list(MODES), rows + [["mean"] + means])],
        results.flag_settings(FLAGS),
        headline={"long texts: windows dev accuracy": means[1],
                  "long texts: truncate dev accuracy": means[0]})


if __name__ == "__main__":
  app.run(main)
