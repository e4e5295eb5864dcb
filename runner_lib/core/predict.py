"""Prediction over a dataset under any strategy, in fixed-size batches.

The one way the last batch is filled: with all-zero examples, flagged as
padding in the pipeline and dropped from the outputs. Every batch then has
the same static shape (what a TPU needs, and one trace for tf.function and
XLA), and no feature value (an id, a label) has to be reserved to mark
padding.
"""

import numpy as np
import tensorflow as tf

from runner_lib.core import input_pipeline


def pad_and_batch(dataset, batch_size):
  """Batches of exactly batch_size examples, the last one filled with zeros.

  Args:
    dataset: tf.data.Dataset of examples: nests of Tensors of static shape.
    batch_size: int >= 1, the global batch size.

  Returns:
    tf.data.Dataset of (batch, is_real): batch the nest with a leading
    [batch_size] axis; is_real bool [batch_size], False for padding. The
    batches are ceil(n / batch_size) for n examples, in dataset order.
  """
  zeros = tf.nest.map_structure(lambda spec: tf.zeros(spec.shape, spec.dtype),
                                dataset.element_spec)
  # batch_size - 1 zeros fill the last batch; drop_remainder drops the rest.
  padding = tf.data.Dataset.from_tensors((zeros, False)).repeat(batch_size - 1)
  return dataset.map(lambda example: (example, True)).concatenate(
      padding).batch(batch_size, drop_remainder=True)


def predictor(strategy, predict_fn, batch_size):
  """Wraps a per-replica step to run over datasets under a strategy.

  Args:
    strategy: a tf.distribute.Strategy.
    predict_fn: function dict of Tensors -> nest of Tensors with a leading
      batch axis, the per-replica step (traced once by tf.function).
    batch_size: int, the global batch size, divisible by the number of
      replicas.

  Returns:
    A function dataset -> iterator of the same nest as numpy arrays, one per
    global batch, in dataset order, holding the real examples' rows only.
    The dataset yields single examples (see pad_and_batch).
  """
  step = tf.function(lambda batch, is_real: strategy.run(
      lambda b, r: (predict_fn(b), r), args=(batch, is_real)))

  def gather(per_replica):
    return np.concatenate(
        [t.numpy() for t in strategy.experimental_local_results(per_replica)])

  def run(dataset):
    batches = pad_and_batch(dataset, batch_size)
    for batch, is_real in strategy.experimental_distribute_dataset(batches):
      outputs, real = step(batch, is_real)
      real = gather(real)
      yield tf.nest.map_structure(lambda t: gather(t)[real], outputs)

  return run


def predict_all(strategy, predict_fn, dataset, batch_size):
  """Runs predictor(strategy, predict_fn, batch_size) over a whole dataset.

  Returns:
    dict of numpy arrays, each the outputs of every example of the dataset,
    in dataset order.
  """
  outputs = list(predictor(strategy, predict_fn, batch_size)(dataset))
  return {key: np.concatenate([o[key] for o in outputs])
          for key in outputs[0]}


def predict_records(strategy, predict_fn, path, name_to_features, batch_size,
                    num_records=None):
  """Runs predict_all over the records of a TFRecord file.

  Args:
    strategy: a tf.distribute.Strategy.
    predict_fn: per-replica step, as for predictor.
    path: str, the TFRecord file.
    name_to_features: dict of FixedLenFeature, the records' schema.
    batch_size: int, the global batch size.
    num_records: int or None; only the first num_records records.

  Returns:
    dict of numpy arrays, one row per record, in file order.
  """
  records = tf.data.TFRecordDataset(path)
  if num_records is not None:
    records = records.take(num_records)
  return predict_all(strategy, predict_fn,
                     input_pipeline.parse_records(records, name_to_features),
                     batch_size)
