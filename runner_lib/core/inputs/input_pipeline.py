"""tf.data input from TFRecord files, checked before training starts."""

import struct

from absl import logging
import tensorflow as tf

from runner_lib.core import errors
from runner_lib.core.inputs import tfrecord

# Records in the shuffle buffer after interleaving (the original used 100),
# for streams read without epochs (record_dataset).
SHUFFLE_BUFFER = 1000
# Epochs permute all their records in memory up to this size; a larger
# train file is shuffled within a window of this many bytes of records.
EPOCH_SHUFFLE_BYTES = 2 << 30


def traced_as_written(fn):
  """fn, for tf.data to trace without AutoGraph: none of the pipeline's
  functions has Python control flow on tensors, and converting one costs
  about 0.15 s of each process's start.

  Args:
    fn: a function of tensors.

  Returns:
    fn, marked for AutoGraph to leave alone.
  """
  return tf.autograph.experimental.do_not_convert(fn)


def epoch_buffer(files, num_records):
  """The shuffle buffer that permutes an epoch of num_records records from
  files: all of them, or as many as fit in EPOCH_SHUFFLE_BYTES (logged)."""
  size = sum(tf.io.gfile.stat(f).length for f in files)
  if size <= EPOCH_SHUFFLE_BYTES:
    return max(num_records, 1)
  buffer = max(SHUFFLE_BUFFER, int(num_records * EPOCH_SHUFFLE_BYTES / size))
  logging.info("Training records take %.1f GiB: each epoch is shuffled "
               "within a window of %d of its %d records.", size / 2**30,
               buffer, num_records)
  return buffer


def check_record_files(files, name_to_features, flag_names,
                       missing_hints=None):
  """Fails early, naming the file, on truncated files or another schema.

  Args:
    files: list of TFRecord paths.
    name_to_features: dict of FixedLenFeature the pipeline will parse.
    flag_names: dict feature name -> flag that sets its length, for messages.
    missing_hints: dict feature name -> what its absence suggests (the
      flag for such records), added to the message.

  Raises:
    errors.InputError: a file is missing, truncated, empty, or its first
      record has a feature missing or of another length.
  """
  for path in files:
    if not tf.io.gfile.exists(path):
      raise errors.InputError("Input file %s does not exist." % path)
    compression = tfrecord.compression_of(path)
    if not compression:
      _check_not_truncated(path)
    first = next(iter(tf.data.TFRecordDataset(path, compression)), None)
    if first is None:
      raise errors.InputError("Input file %s holds no records." % path)
    example = tf.train.Example.FromString(first.numpy())
    for name, spec in name_to_features.items():
      feature = example.features.feature.get(name)
      if feature is None:
        hint = (missing_hints or {}).get(name)
        raise errors.InputError(
            "Input file %s: records have no feature %r%s." %
            (path, name, " (%s)" % hint if hint else ""))
      length = len(feature.int64_list.value or feature.float_list.value)
      if length != spec.shape[0]:
        raise errors.InputError(
            "Input file %s: feature %r has %d values but --%s=%d. Use the "
            "value the data was created with." %
            (path, name, length, flag_names.get(name, "?"), spec.shape[0]))


def _check_not_truncated(path):
  """Walks the record headers of an uncompressed TFRecord file."""
  size = tf.io.gfile.stat(path).length
  offset = 0
  with tf.io.gfile.GFile(path, "rb") as f:
    while offset < size:
      f.seek(offset)
      header = f.read(8)
      if len(header) < 8:
        break
      (length,) = struct.unpack("<Q", header)
      # length, its CRC, the data, the data's CRC.
      offset += 8 + 4 + length + 4
  if offset != size:
    raise errors.InputError(
        "Input file %s is truncated (a record runs past the end, at byte "
        "%d of %d); it was probably cut short while being written." %
        (path, min(offset, size), size))


def record_dataset(files, is_training, seed, input_context=None,
                   skip_records=0, cycle_length=4, num_records=None):
  """Serialized records, shuffled and repeated for training.

  Deterministic for a seed, so a resumed run can skip what was consumed.

  Training reads one of two ways. With num_records (a fine-tuning runner's
  own train file, whose size it knows), in epochs: each a fresh seeded
  permutation of every record, so after E epochs' steps each record was
  seen E times, in an order unrelated to the file's. Without it (pre-
  training's many files of unknown size), the original's stream: files
  shuffled and repeated, records shuffled within SHUFFLE_BUFFER. There a
  record's count varies (2 epochs of 2000 records in file order: 16% seen
  once, 17% three times, 9 never) and the first steps see only the file's
  first records. From real weights the change moved six-seed means within
  the seeds' spread (docs/differences.md lists it).

  Args:
    files: list of str.
    is_training: bool; shuffle files and records and repeat forever. Eval
      repeats in file order, as the original (max_eval_steps bounds it).
    seed: int, shuffle seed (training only).
    input_context: tf.distribute.InputContext or None; each input pipeline
      reads its share of files (or of records, with fewer files).
    skip_records: int, records this pipeline already consumed.
    cycle_length: int, files read at once.
    num_records: int or None, the records in files (training only): read
      them in epochs, holding up to EPOCH_SHUFFLE_BYTES of them in memory
      to permute.

  Returns:
    tf.data.Dataset of scalar strings.
  """
  compression = tfrecord.compression_of(files[0])
  dataset = tf.data.Dataset.from_tensor_slices(files)
  shard_records = False
  if input_context and input_context.num_input_pipelines > 1:
    if len(files) >= input_context.num_input_pipelines:
      dataset = dataset.shard(input_context.num_input_pipelines,
                              input_context.input_pipeline_id)
    else:
      shard_records = True
  in_epochs = is_training and num_records is not None
  if is_training and not in_epochs:
    dataset = dataset.shuffle(len(files), seed=seed).repeat()
  dataset = dataset.interleave(
      traced_as_written(lambda f: tf.data.TFRecordDataset(f, compression)),
      cycle_length=min(cycle_length, len(files)),
      num_parallel_calls=tf.data.AUTOTUNE, deterministic=True)
  if in_epochs:
    # Reshuffled on each repetition (seeded, so deterministic).
    dataset = dataset.shuffle(epoch_buffer(files, num_records),
                              seed=seed).repeat()
  elif is_training:
    dataset = dataset.shuffle(SHUFFLE_BUFFER, seed=seed)
  else:
    dataset = dataset.repeat()
  if shard_records:
    # After the (seeded, identical) shuffle: the pipelines split one stream,
    # so together they see what a single pipeline would.
    dataset = dataset.shard(input_context.num_input_pipelines,
                            input_context.input_pipeline_id)
  return dataset.skip(skip_records)


# A trimmed batch ends at a multiple of this many positions, so a run sees
# at most max_seq_length / TRIM_MULTIPLE shapes (traces, XLA programs).
TRIM_MULTIPLE = 16


def trim_batch(batch, names, multiple=TRIM_MULTIPLE):
  """Cuts a batch's padding after its longest sequence.

  Attention masks padded positions, so every real position's output, the
  loss and the predictions are those of the full-length batch (to float32
  rounding), for a fraction of the cost on short sentences. The records
  keep the original's fixed length; only the batch in memory is cut.

  Args:
    batch: dict of Tensors with "input_mask" int [..., T].
    names: the features to cut on their last axis (Task.sequence_features).
    multiple: int, the cut is rounded up to a multiple of this (at most T).

  Returns:
    dict like batch, names' last axis T' <= T (dynamic).
  """
  if not names:
    return batch
  mask = batch["input_mask"]
  longest = tf.reduce_max(tf.reduce_sum(tf.cast(mask, tf.int32), axis=-1))
  length = tf.minimum((longest + multiple - 1) // multiple * multiple,
                      tf.shape(mask)[-1])
  return {key: value[..., :length] if key in names else value
          for key, value in batch.items()}


def restore_length(tensor, length, value=0):
  """Pads a per-position output of a trimmed batch back to full length.

  Args:
    tensor: [B, T', ...], T' <= length.
    length: int, max_seq_length.
    value: the padding's value.

  Returns:
    [B, length, ...].
  """
  paddings = [[0, 0], [0, length - tf.shape(tensor)[1]]] + [[0, 0]] * (
      tensor.shape.rank - 2)
  padded = tf.pad(tensor, paddings, constant_values=value)
  return tf.ensure_shape(padded, [None, length] + tensor.shape[2:])


def _parse(records, name_to_features):
  features = tf.io.parse_example(records, name_to_features)
  # int64 is slow or unsupported on accelerators; ids fit in int32.
  return {k: tf.cast(v, tf.int32) if v.dtype == tf.int64 else v
          for k, v in features.items()}


def numbered(dataset, start, input_context=None):
  """(example number, element) pairs of an input pipeline's stream.

  The number counts from the start of training, epochs and resumes
  included (start: the elements already consumed), and is unique across
  input pipelines: element i of pipeline p of n is number i * n + p.

  Args:
    dataset: tf.data.Dataset.
    start: int, the index of dataset's first element in the stream.
    input_context: tf.distribute.InputContext or None.

  Returns:
    tf.data.Dataset of (int64 scalar, element).
  """
  count, index = 1, 0
  if input_context:
    count = input_context.num_input_pipelines
    index = input_context.input_pipeline_id
  return dataset.enumerate(start).map(
      traced_as_written(lambda i, element: (i * count + index, element)))


def parse_each_and_batch(numbered_records, name_to_features, per_example,
                         batch_size, drop_remainder=True, trim=()):
  """Parses records one at a time, passes each through per_example, then
  batches them (see parse_and_batch).

  Args:
    numbered_records: tf.data.Dataset of (int64 example number, string).
    name_to_features: dict of FixedLenFeature.
    per_example: function (dict of one record's tensors, example number)
      -> dict of tensors, pure TensorFlow (e.g. masking drawn per example).
    batch_size: int.
    drop_remainder: bool.
    trim: as parse_and_batch.

  Returns:
    tf.data.Dataset of dict of [batch_size, ...] tensors.
  """

  def parse_one(number, record):
    features = tf.io.parse_single_example(record, name_to_features)
    return per_example(
        {k: tf.cast(v, tf.int32) if v.dtype == tf.int64 else v
         for k, v in features.items()}, number)

  examples = numbered_records.map(traced_as_written(parse_one),
                                  num_parallel_calls=tf.data.AUTOTUNE,
                                  deterministic=True)
  return examples.batch(batch_size, drop_remainder=drop_remainder).map(
      traced_as_written(lambda batch: trim_batch(batch, trim))).prefetch(
          tf.data.AUTOTUNE)


def parse_batches(batches, name_to_features, trim=()):
  """Parses batches of records (string [B]) into int32 / float32 tensors,
  the features in trim cut after each batch's longest sequence
  (trim_batch)."""
  return batches.map(
      traced_as_written(
          lambda records: trim_batch(_parse(records, name_to_features), trim)),
      num_parallel_calls=tf.data.AUTOTUNE).prefetch(tf.data.AUTOTUNE)


def parse_and_batch(dataset, name_to_features, batch_size,
                    drop_remainder=True, trim=()):
  """Parses records into int32 / float32 tensors, in batches of batch_size
  (the last one shorter where drop_remainder is False), the features in
  trim cut after each batch's longest sequence (trim_batch)."""
  return parse_batches(
      dataset.batch(batch_size, drop_remainder=drop_remainder),
      name_to_features, trim)


# --bucket_by_length sorts this many batches' records together.
BUCKET_CHUNK_BATCHES = 32


def record_lengths(records, mask_spec):
  """Real lengths of serialized records: the sum of input_mask (for several
  sequences per record, the longest).

  Args:
    records: string [N].
    mask_spec: the records' FixedLenFeature for input_mask.

  Returns:
    int64 [N].
  """
  mask = tf.io.parse_example(records, {"input_mask": mask_spec})["input_mask"]
  mask = tf.reshape(mask, [tf.shape(records)[0], -1, mask.shape[-1]])
  return tf.reduce_max(tf.reduce_sum(mask, axis=-1), axis=-1)


def length_bucketed(records, batch_size, mask_spec, seed,
                    chunk_batches=BUCKET_CHUNK_BATCHES):
  """Batches of records of similar length, from a stream of records.

  The stream is cut into chunks of chunk_batches * batch_size records; each
  chunk is sorted by length and cut into batches, and the batches are
  shuffled (seeded) within a buffer of chunk_batches. Every record of the
  stream is in exactly one batch, its chunk's; what changes is which
  records share a batch (similar lengths, so trimmed batches are short).

  Args:
    records: tf.data.Dataset of serialized records.
    batch_size: int.
    mask_spec: the records' FixedLenFeature for input_mask.
    seed: int.
    chunk_batches: int.

  Returns:
    tf.data.Dataset of string [batch_size] (a finite stream's last batch
    may be shorter).
  """

  def sorted_batches(chunk):
    order = tf.argsort(record_lengths(chunk, mask_spec), stable=True)
    return tf.data.Dataset.from_tensor_slices(tf.gather(chunk, order)).batch(
        batch_size)

  return records.batch(batch_size * chunk_batches).flat_map(
      traced_as_written(sorted_batches)).shuffle(chunk_batches, seed=seed)


def training_dataset_fn(files, name_to_features, per_replica_batch, seed,
                        trim=(), bucket_by_length=False, num_records=None,
                        per_example=None):
  """A Trainer.train dataset_fn over TFRecord files: each input pipeline's
  shuffled, repeated, parsed batches, resuming past what was consumed.

  Args:
    files: list of str.
    name_to_features: dict of FixedLenFeature.
    per_replica_batch: int.
    seed: int.
    trim: features to cut after each per-replica batch's longest sequence
      (trim_batch); the batches themselves are the same.
    bucket_by_length: bool, batch records of similar length together
      (length_bucketed): other batches than the original's, shorter once
      trimmed.
    num_records: int or None, the records in files: train in epochs, each
      a permutation of all of them (record_dataset).
    per_example: None, or a function (dict of one record's tensors, int64
      example number) -> dict, applied to each record before batching
      (parse_each_and_batch); the numbers (numbered) continue across
      epochs and on resume. Not with bucket_by_length.

  Returns:
    function (input_context, step) -> tf.data.Dataset.
  """
  if per_example and bucket_by_length:
    raise ValueError("per_example does not combine with bucket_by_length")

  def dataset_fn(context, step):
    if per_example:
      skip = step * per_replica_batch
      return parse_each_and_batch(
          numbered(record_dataset(files, True, seed, context,
                                  skip_records=skip,
                                  num_records=num_records), skip, context),
          name_to_features, per_example, per_replica_batch, trim=trim)
    if not bucket_by_length:
      return parse_and_batch(
          record_dataset(files, True, seed, context,
                         skip_records=step * per_replica_batch,
                         num_records=num_records),
          name_to_features, per_replica_batch, trim=trim)
    # Resumed by skipping batches: the batches depend on the chunks, so the
    # stream is cut from its start as an uninterrupted run cuts it.
    batches = length_bucketed(
        record_dataset(files, True, seed, context, num_records=num_records),
        per_replica_batch,
        name_to_features["input_mask"], seed).skip(step)
    return parse_batches(batches, name_to_features, trim)

  return dataset_fn


def eval_dataset_fn(files, name_to_features, per_replica_batch,
                    per_example=None):
  """A Trainer.evaluate dataset_fn over TFRecord files: each input
  pipeline's parsed batches, in file order, repeated.

  Args:
    files: list of str.
    name_to_features: dict of FixedLenFeature.
    per_replica_batch: int.
    per_example: as training_dataset_fn's (numbered from 0 in file order).

  Returns:
    function (input_context) -> tf.data.Dataset.
  """
  if per_example:
    return lambda context: parse_each_and_batch(
        numbered(record_dataset(files, False, None, context), 0, context),
        name_to_features, per_example, per_replica_batch)
  return lambda context: parse_and_batch(
      record_dataset(files, False, None, context), name_to_features,
      per_replica_batch)
