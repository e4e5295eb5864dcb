"""Create masked LM / next sentence TFRecords for BERT pre-training.

The original command line works unchanged and, with one worker, writes the
original's records, record for record:

  python create_pretraining_data.py --input_file=./sample_text.txt \
    --output_file=/tmp/tf_examples.tfrecord --vocab_file=$BERT_BASE_DIR/vocab.txt \
    --do_lower_case=True --max_seq_length=128 --max_predictions_per_seq=20 \
    --masked_lm_prob=0.15 --random_seed=12345 --dupe_factor=5

Input: one sentence per line, a blank line between documents. With
--num_workers=N > 1 (a Dask cluster of N processes started here) or
--dask_scheduler=tcp://HOST:PORT (the workers of a running Dask cluster)
the corpus is cut into shards of
--shard_bytes, each made and written by a worker to
OUTPUT-00012-of-00480, with OUTPUT.manifest.json beside them (see
runner_lib/pretraining/sharding.py): the same statistics as the original,
not the same records, and the same records whatever the workers.

With --dynamic_masking it writes unmasked records (masked_lm_candidates in
place of the masked_lm_* features) for run_pretraining.py --dynamic_masking
to mask as it reads them (docs/pre-training.md, Dynamic masking).

No TensorFlow here (on local files): the 2018 tokenizer in pure Python, the
records framed by hand. Importing TensorFlow would cost more time than
tokenizing tens of MB.
"""

import os
import random
import time

if __name__ == "__main__":
  # TensorFlow would import Keras 3 as it starts (~1.2 s); Keras here is
  # tf_keras, so tf.keras may be too (docs/contributing.md, Keras).
  os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")
# pylint: disable=g-import-not-at-top

from absl import flags
from absl import logging

from runner_lib.core import errors
from runner_lib.core import gfile
from runner_lib.core.cli import progress
from runner_lib.core.files import fileio
from runner_lib.core.inputs import text_input
from runner_lib.core.inputs import tfrecord_writer
from runner_lib.pretraining import documents as pretraining_documents
from runner_lib.pretraining import instances as pretraining_instances
from runner_lib.pretraining import sharded_run
from runner_lib.pretraining import sharding
from tokenization import wordpiece

FLAGS = flags.FLAGS

# Required.
flags.DEFINE_string("input_file", None,
                    "Required. Input raw text file (or comma-separated list "
                    "of files or globs).")
flags.DEFINE_string("output_file", None,
                    "Required. Output TF example file (or comma-separated "
                    "list of files, written round robin).")
flags.DEFINE_string("vocab_file", None,
                    "Required. The vocabulary file that the BERT model was "
                    "trained on.")

# Optional, as the original.
flags.DEFINE_bool("do_lower_case", True,
                  "Whether to lower case the input text. Should be True for "
                  "uncased models and False for cased models.")
flags.DEFINE_bool("do_whole_word_mask", False,
                  "Whether to use whole word masking rather than "
                  "per-WordPiece masking.")
flags.DEFINE_integer("max_seq_length", 128, "Maximum sequence length.")
flags.DEFINE_integer("max_predictions_per_seq", 20,
                     "Maximum number of masked LM predictions per sequence.")
flags.DEFINE_integer("random_seed", 12345, "Random seed for data generation.")
flags.DEFINE_integer("dupe_factor", 10,
                     "Number of times to duplicate the input data (with "
                     "different masks).")
flags.DEFINE_float("masked_lm_prob", 0.15, "Masked LM probability.")
flags.DEFINE_float("short_seq_prob", 0.1,
                   "Probability of creating sequences which are shorter than "
                   "the maximum length.")

# Optional, new here.
flags.DEFINE_integer("num_workers", 1,
                     "Processes. 1 reproduces the original exactly; more "
                     "make shards of --shard_bytes on a Dask cluster of "
                     "that many processes started here, each shard "
                     "written by its worker to OUTPUT-NNNNN-of-NNNNN.")
flags.DEFINE_string("dask_scheduler", None,
                    "tcp://HOST:PORT (or tls://) of a Dask scheduler: its "
                    "workers make the shards, as --num_workers does "
                    "locally (the same files).")
flags.DEFINE_integer("shard_bytes", sharding.SHARD_BYTES,
                     "Input text per shard when sharded; the records depend "
                     "on it (and not on the workers).")
flags.DEFINE_bool("dynamic_masking", False,
                  "Write unmasked records (real tokens in input_ids and "
                  "masked_lm_candidates, no masked_lm_* features) for "
                  "run_pretraining.py --dynamic_masking to mask anew each "
                  "time it reads them; --masked_lm_prob, "
                  "--max_predictions_per_seq and --do_whole_word_mask then "
                  "belong to run_pretraining.py. False: the original's "
                  "masked records.")
flags.DEFINE_bool("gzip", False, "Write GZIP-compressed TFRecords.")
flags.DEFINE_bool("skip_invalid_lines", False,
                  "Skip (and count) input lines that are not UTF-8 instead of "
                  "stopping at the first.")


def check_flags():
  """Validates flag values before any work.

  Returns:
    pretraining_instances.InstanceOptions.

  Raises:
    errors.InputError: naming the flag (errors.OutputError: an
      --output_file cannot be written).
  """
  if FLAGS.max_seq_length < 5:
    raise errors.InputError(
        "--max_seq_length=%d is too small: [CLS] A [SEP] B [SEP] needs at "
        "least 5." % FLAGS.max_seq_length)
  if not 0.0 < FLAGS.masked_lm_prob < 1.0:
    raise errors.InputError("--masked_lm_prob must be in (0, 1), got %s." %
                            FLAGS.masked_lm_prob)
  if not 0.0 <= FLAGS.short_seq_prob <= 1.0:
    raise errors.InputError("--short_seq_prob must be in [0, 1], got %s." %
                            FLAGS.short_seq_prob)
  for name in ("max_predictions_per_seq", "dupe_factor", "num_workers",
               "shard_bytes"):
    if FLAGS[name].value < 1:
      raise errors.InputError("--%s must be at least 1, got %d." %
                              (name, FLAGS[name].value))
  if sharded() and "," in FLAGS.output_file:
    raise errors.InputError(
        "--output_file=%s: a sharded run (--num_workers > 1 or "
        "--dask_scheduler) takes one prefix for its shards, not a list." %
        FLAGS.output_file)
  for path in FLAGS.output_file.split(","):
    fileio.check_output_file(path)
  if FLAGS.dynamic_masking:
    check_dynamic_masking_flags()
  expected = int(round(FLAGS.max_seq_length * FLAGS.masked_lm_prob))
  if not FLAGS.dynamic_masking and FLAGS.max_predictions_per_seq < expected:
    logging.warning(
        "--max_predictions_per_seq=%d is below max_seq_length x "
        "masked_lm_prob = %d: full-length sequences get fewer masks than "
        "masked_lm_prob asks for.", FLAGS.max_predictions_per_seq, expected)
  return pretraining_instances.InstanceOptions(
      FLAGS.max_seq_length, FLAGS.short_seq_prob, FLAGS.masked_lm_prob,
      FLAGS.max_predictions_per_seq, FLAGS.do_whole_word_mask,
      FLAGS.dynamic_masking)


# Flags that choose masks: with --dynamic_masking run_pretraining.py's.
MASKING_FLAGS = ("masked_lm_prob", "max_predictions_per_seq",
                 "do_whole_word_mask")


def check_dynamic_masking_flags():
  """Refuses masking flags that unmasked records would ignore; warns that
  copies (--dupe_factor > 1) now vary only the instances, not the masks.

  Raises:
    errors.InputError: a masking flag given with --dynamic_masking.
  """
  given = [name for name in MASKING_FLAGS if FLAGS[name].present]
  if given:
    # Never accept a flag and ignore it: the original has no
    # --dynamic_masking, so no command of the original is refused.
    raise errors.InputError(
        "--dynamic_masking writes unmasked records: %s choose masks, give "
        "them to run_pretraining.py --dynamic_masking instead." %
        ", ".join("--" + name for name in given))
  if FLAGS.dupe_factor > 1:
    # Not "1 is enough": the copies still draw other instance lengths and
    # next-sentence pairs, which one file fixes (docs/pre-training.md,
    # Dynamic masking: with --dupe_factor=1 the next-sentence loss
    # overfitted the file's pairs).
    logging.warning(
        "--dupe_factor=%d with --dynamic_masking: run_pretraining.py draws "
        "new masks on every pass, so the copies vary only the instances' "
        "lengths and next-sentence pairs (worth it for --objective=mlm_nsp; "
        "for --objective=mlm, --dupe_factor=1 is enough).",
        FLAGS.dupe_factor)


def sharded():
  return FLAGS.num_workers > 1 or bool(FLAGS.dask_scheduler)


# The flags a sharded run's records depend on (its manifest holds them).
RECORD_FLAGS = ("do_lower_case", "do_whole_word_mask", "max_seq_length",
                "max_predictions_per_seq", "random_seed", "dupe_factor",
                "masked_lm_prob", "short_seq_prob", "gzip",
                "skip_invalid_lines")


def write_shards(tokens, input_files, input_sizes, options):
  """The sharded run: workers make and write the shards (sharded_run)."""
  # Workers (a Dask worker runs in a folder of its own) and the manifest
  # get absolute paths: a relative one means this process's folder.
  input_files = [gfile.absolute(p) for p in input_files]
  output_file = gfile.absolute(FLAGS.output_file)
  shards = sharding.plan(input_files, input_sizes, FLAGS.shard_bytes)
  settings = sharding.Settings(
      tuple(tokens), FLAGS.do_lower_case, options, FLAGS.dupe_factor,
      FLAGS.random_seed, FLAGS.skip_invalid_lines, FLAGS.gzip,
      output_file, len(shards))
  flag_values = {name: FLAGS[name].value for name in RECORD_FLAGS}
  if FLAGS.dynamic_masking:
    # Only where set: a manifest written before the flag existed still
    # matches a default run, which resumes it.
    flag_values["dynamic_masking"] = True
  spec = sharded_run.run_spec(flag_values, input_files, input_sizes,
                              FLAGS.vocab_file, FLAGS.shard_bytes,
                              len(shards))
  try:
    from runner_lib.pretraining import cluster  # pylint: disable=g-import-not-at-top
  except ImportError as e:
    raise errors.InputError(
        "A sharded run (--num_workers > 1 or --dask_scheduler) needs "
        "Dask's distributed package (%s): pip install -r requirements.txt." %
        e) from None
  if FLAGS.dask_scheduler:
    with cluster.connect(FLAGS.dask_scheduler) as client:
      workers = len(client.scheduler_info()["workers"])
      manifest = sharded_run.write(
          output_file, spec, shards,
          lambda todo: cluster.run(client, todo, settings),
          "a Dask cluster (%d workers now)" % workers)
  else:

    def make_here(todo):
      # The local cluster starts only when there are shards to make.
      with cluster.local(FLAGS.num_workers) as client:
        yield from cluster.run(client, todo, settings)

    manifest = sharded_run.write(output_file, spec, shards, make_here,
                                 "%d local workers" % FLAGS.num_workers)
  if not manifest["records"]:
    raise errors.InputError(
        "--input_file %s holds no text to make instances of." %
        FLAGS.input_file)
  return manifest


def main(_):
  options = check_flags()
  try:
    tokens = wordpiece.read_vocab_tokens(FLAGS.vocab_file)
    wordpiece.check_vocab_tokens(tokens, FLAGS.vocab_file)
  except wordpiece.VocabError as e:
    raise errors.InputError(str(e)) from None
  vocab = {token: index for index, token in enumerate(tokens)}
  masking_vocab = pretraining_documents.masking_vocab(vocab, FLAGS.vocab_file)
  input_files = text_input.expand_globs(FLAGS.input_file)
  input_sizes = [gfile.size(f) for f in input_files]
  total_bytes = sum(input_sizes)
  if not total_bytes:
    raise errors.InputError("--input_file %s: the files are empty." %
                            FLAGS.input_file)
  logging.info("*** Reading from %d input files (%.1f MB) ***",
               len(input_files), total_bytes / 1e6)
  start = time.time()
  if sharded():
    manifest = write_shards(tokens, input_files, input_sizes, options)
    logging.info("Wrote %d total instances to %d shards %s-* in %.1f s",
                 manifest["records"], manifest["num_shards"],
                 FLAGS.output_file, time.time() - start)
    return
  output_files = FLAGS.output_file.split(",")
  lines = text_input.read_lines(input_files, FLAGS.skip_invalid_lines)
  with tfrecord_writer.RoundRobinWriter(output_files, FLAGS.gzip) as writer:
    tokenizer = wordpiece.IdTokenizer(vocab, FLAGS.do_lower_case)
    documents = pretraining_documents.read_documents(
        lines, tokenizer.tokenize_ids,
        progress.Progress("Tokenizing", total_bytes / 1e6))
    logging.info("%d documents tokenized in %.1f s", len(documents),
                 time.time() - start)
    # Park instances beside the outputs, whose disk has room for them;
    # in $TMPDIR where the outputs go to a remote file system (gs://).
    spill_directory = None
    if not gfile.is_remote(output_files[0]):
      spill_directory = os.path.dirname(os.path.abspath(output_files[0]))
    records = pretraining_instances.create_training_records(
        documents, options, masking_vocab, FLAGS.dupe_factor,
        random.Random(FLAGS.random_seed), spill_directory)
    for record in records:
      writer.write(record)
    if not writer.num_written:
      raise errors.InputError(
          "--input_file %s holds no text to make instances of." %
          FLAGS.input_file)
  logging.info("Wrote %d total instances to %s in %.1f s", writer.num_written,
               ", ".join(output_files), time.time() - start)


if __name__ == "__main__":
  flags.mark_flags_as_required(["input_file", "output_file", "vocab_file"])
  errors.run(main)
