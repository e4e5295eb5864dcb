"""Prediction over a dataset under any strategy, in fixed-size batches.

The one way the last batch is filled: with all-zero examples, flagged as
padding in the pipeline and dropped from the outputs. Every batch then has
the same static shape (what a TPU needs, and one trace for tf.function and
XLA), and no feature value (an id, a label) has to be reserved to mark
padding.
"""

import numpy as np
import tensorflow as tf

from runner_lib.core.inputs import input_pipeline


def pad_batches(batches, batch_size):
  """Fills the last, short batch up to batch_size with zero examples.

  Args:
    batches: tf.data.Dataset of nests of Tensors with a leading batch axis
      of batch_size, but for the last batch, and static other axes.
    batch_size: int >= 1, the global batch size.

  Returns:
    tf.data.Dataset of (batch, is_real): batch the nest with a static
    leading [batch_size] axis; is_real bool [batch_size], False for padding.
  """

  def pad(batch):
    size = tf.shape(tf.nest.flatten(batch)[0])[0]

    def pad_tensor(tensor):
      padded = tf.pad(tensor, [[0, batch_size - size]] +
                      [[0, 0]] * (tensor.shape.rank - 1))
      return tf.ensure_shape(padded, [batch_size] + tensor.shape[1:])

    return (tf.nest.map_structure(pad_tensor, batch),
            tf.range(batch_size) < size)

  return batches.map(input_pipeline.traced_as_written(pad))


def pad_and_batch(dataset, batch_size, trim=()):
  """Batches of exactly batch_size examples, the last one filled with zeros.

  Args:
    dataset: tf.data.Dataset of examples: dicts of Tensors of static shape.
    batch_size: int >= 1, the global batch size.
    trim: features to cut after each batch's longest sequence
      (input_pipeline.trim_batch).

  Returns:
    tf.data.Dataset of (batch, is_real), as pad_batches: ceil(n /
    batch_size) batches for n examples, in dataset order.
  """
  batches = dataset.batch(batch_size)
  if trim:
    batches = batches.map(input_pipeline.traced_as_written(
        lambda batch: input_pipeline.trim_batch(batch, trim)))
  return pad_batches(batches, batch_size)


def predictor(strategy, predict_fn):
  """Wraps a per-replica step to run over padded batches under a strategy.

  Args:
    strategy: a tf.distribute.Strategy.
    predict_fn: function dict of Tensors -> nest of Tensors with a leading
      batch axis, the per-replica step (traced once by tf.function).

  Returns:
    A function (dataset of (batch, is_real) from pad_batches /
    pad_and_batch, with a batch size divisible by the number of replicas)
    -> iterator of predict_fn's nest as numpy arrays, one per global batch,
    in dataset order, holding the real examples' rows only.
  """
  # reduce_retracing: batches of a length met later run the trace for the
  # dataset's (dynamic) shape rather than a trace of their own.
  step = tf.function(lambda batch, is_real: strategy.run(
      lambda b, r: (predict_fn(b), r), args=(batch, is_real)),
                     reduce_retracing=True, autograph=False)

  def gather(per_replica):
    return np.concatenate(
        [t.numpy() for t in strategy.experimental_local_results(per_replica)])

  def run(batches):
    distributed = strategy.experimental_distribute_dataset(batches)
    # Traced once for the dataset's shapes (a trimmed batch's length is
    # dynamic), not again for each length met.
    step.get_concrete_function(*distributed.element_spec)
    for batch, is_real in distributed:
      outputs, real = step(batch, is_real)
      real = gather(real)
      yield tf.nest.map_structure(lambda t: gather(t)[real], outputs)

  return run


def _concatenate(outputs):
  """One dict of numpy arrays from per-batch dicts, on the batch axis."""
  outputs = list(outputs)
  return {key: np.concatenate([o[key] for o in outputs])
          for key in outputs[0]}


def predict_all(strategy, predict_fn, dataset, batch_size):
  """Runs predict_fn over every example of a dataset, in batches of
  batch_size (see pad_and_batch and predictor).

  Returns:
    dict of numpy arrays, each the outputs of every example of the dataset,
    in dataset order.
  """
  return _concatenate(predictor(strategy, predict_fn)(
      pad_and_batch(dataset, batch_size)))


def sequence_lengths(records, mask_spec, batch_size=4096):
  """Each record's real length (input_pipeline.record_lengths).

  Args:
    records: tf.data.Dataset of serialized tf.Examples.
    mask_spec: their FixedLenFeature for input_mask.
    batch_size: int, records parsed at once.

  Returns:
    int numpy array [num_records].
  """
  lengths = records.batch(batch_size).map(input_pipeline.traced_as_written(
      lambda batch: input_pipeline.record_lengths(batch, mask_spec)))
  return np.concatenate(list(lengths.as_numpy_iterator()) +
                        [np.zeros([0], np.int64)])


def predict_records(strategy, predict_fn, path, name_to_features, batch_size,
                    num_records=None, trim=()):
  """Runs predict_fn over the records of a TFRecord file.

  Records are parsed a batch at a time (parse_example is several times
  faster on a batch than on each record), then the last batch is padded.
  With trim, records are predicted shortest first, so that each batch
  holds sequences of similar length, and each batch is cut after its
  longest (input_pipeline.trim_batch); the outputs are put back in file
  order. An example's outputs do not depend on its batch-mates, so they are
  the full-length path's to float32 rounding.

  Args:
    strategy: a tf.distribute.Strategy.
    predict_fn: per-replica step, as for predictor.
    path: str, the TFRecord file.
    name_to_features: dict of FixedLenFeature, the records' schema.
    batch_size: int, the global batch size.
    num_records: int or None; only the first num_records records.
    trim: features to cut (Task.sequence_features), or () for the
      original's full-length batches in file order.

  Returns:
    dict of numpy arrays, one row per record, in file order.
  """
  records = tf.data.TFRecordDataset(path)
  if num_records is not None:
    records = records.take(num_records)
  order = None
  if trim:
    # Prediction files are small enough to hold (SQuAD's dev set: ~30 MB),
    # so the file is read once.
    serialized = tf.constant(list(records.as_numpy_iterator()), tf.string)
    order = np.argsort(sequence_lengths(
        tf.data.Dataset.from_tensor_slices(serialized),
        name_to_features["input_mask"]), kind="stable")
    records = tf.data.Dataset.from_tensor_slices(tf.gather(serialized,
                                                           order))
  batches = input_pipeline.parse_and_batch(records, name_to_features,
                                           batch_size, drop_remainder=False,
                                           trim=trim)
  outputs = _concatenate(predictor(strategy, predict_fn)(
      pad_batches(batches, batch_size)))
  if order is None:
    return outputs
  restored = {}
  for key, value in outputs.items():
    restored[key] = np.empty_like(value)
    restored[key][order] = value
  return restored


def evaluate_metrics(strategy, model, dataset_fn, metrics_fn, max_steps):
  """In-graph metrics over up to max_steps batches of an evaluation set.

  Args:
    strategy: tf.distribute.Strategy, with model built under its scope.
    model: the Keras model metrics_fn reads.
    dataset_fn: function (tf.distribute.InputContext) -> dataset of
      per-replica batches.
    metrics_fn: function (model, batch) -> dict name -> (weighted sum,
      weight), per replica.
    max_steps: int.

  Returns:
    dict name -> float, each sum over weight across all batches.
  """
  dataset = strategy.distribute_datasets_from_function(dataset_fn)

  @tf.function(autograph=False)
  def eval_step(batch):
    per_replica = strategy.run(lambda b: metrics_fn(model, b), args=(batch,))
    return strategy.reduce(tf.distribute.ReduceOp.SUM, per_replica,
                           axis=None)

  totals = {}
  for index, batch in enumerate(dataset):
    if index >= max_steps:
      break
    for name, (value, weight) in eval_step(batch).items():
      total = totals.setdefault(name, [0.0, 0.0])
      total[0] += float(value)
      total[1] += float(weight)
  return {name: value / weight if weight else 0.0
          for name, (value, weight) in totals.items()}
