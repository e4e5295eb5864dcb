"""The classification task: features, records, model, loss, metrics, outputs."""

import numpy as np
import tensorflow as tf

import modeling
from runner_lib import features as features_lib
from runner_lib import metrics
from runner_lib import tfrecord

# GLUE submission file names (the leaderboard's), per task.
SUBMISSION_NAMES = {"cola": "CoLA", "mnli": "MNLI-m", "mnli-mm": "MNLI-mm",
                    "mrpc": "MRPC", "sst-2": "SST-2", "sts-b": "STS-B",
                    "qqp": "QQP", "qnli": "QNLI", "rte": "RTE", "wnli": "WNLI",
                    "xnli": "XNLI"}
# The task's GLUE metric beside accuracy.
GLUE_METRICS = {"cola": ("matthews_corrcoef",), "mrpc": ("f1",),
                "qqp": ("f1",), "sts-b": ("pearson", "spearman")}


class InputFeatures(object):
  """An example as model input; is_real_example is 0 for batch padding."""

  def __init__(self, input_ids, input_mask, segment_ids, label_id,
               is_real_example=True):
    self.input_ids = input_ids
    self.input_mask = input_mask
    self.segment_ids = segment_ids
    self.label_id = label_id
    self.is_real_example = is_real_example


def convert_single_example(example, label_list, max_seq_length, tokenizer):
  """Tokenizes one example into [CLS] A [SEP] B [SEP], truncated, padded.

  Args:
    example: classifier_data.InputExample (label None for test examples).
    label_list: list of str, or None for regression.
    max_seq_length: int.
    tokenizer: tokenization.FullTokenizer.

  Returns:
    InputFeatures; label_id is the label's index (0 for test examples), or
    the float score for regression.
  """
  _, input_ids, input_mask, segment_ids = features_lib.encode_pair(
      tokenizer, example.text_a, example.text_b, max_seq_length)
  if label_list is None:
    label_id = float(example.label) if example.label is not None else 0.0
  else:
    label_id = label_list.index(example.label) if example.label else 0
  return InputFeatures(input_ids, input_mask, segment_ids, label_id)


def padding_features(max_seq_length, regression):
  """A fake example filling the last batch; excluded from every output."""
  zeros = [0] * max_seq_length
  return InputFeatures(zeros, zeros, zeros, 0.0 if regression else 0, False)


def name_to_features(max_seq_length, regression):
  seq = tf.io.FixedLenFeature([max_seq_length], tf.int64)
  return {"input_ids": seq, "input_mask": seq, "segment_ids": seq,
          "label_ids": tf.io.FixedLenFeature(
              [], tf.float32 if regression else tf.int64),
          "is_real_example": tf.io.FixedLenFeature([], tf.int64)}


def serialize(feature, regression):
  """The original's record (plus a float label for regression)."""
  label = (tfrecord.float_feature([feature.label_id]) if regression else
           tfrecord.int_feature([feature.label_id]))
  return tf.train.Example(features=tf.train.Features(feature={
      "input_ids": tfrecord.int_feature(feature.input_ids),
      "input_mask": tfrecord.int_feature(feature.input_mask),
      "segment_ids": tfrecord.int_feature(feature.segment_ids),
      "label_ids": label,
      "is_real_example": tfrecord.int_feature(
          [int(feature.is_real_example)]),
  })).SerializeToString(deterministic=True)


class ClassificationTask(object):
  """Model, loss and outputs of fine-tuning on a classification task."""

  def __init__(self, config, label_list):
    self.config = config
    self.label_list = label_list
    self.regression = label_list is None
    self.num_labels = 1 if self.regression else len(label_list)

  def build_model(self):
    return modeling.BertClassifier(self.config, self.num_labels)

  def per_example_loss(self, logits, labels):
    logits = tf.cast(logits, tf.float32)
    if self.regression:
      return tf.square(logits[:, 0] - tf.cast(labels, tf.float32))
    log_probs = tf.nn.log_softmax(logits, axis=-1)
    return -tf.reduce_sum(
        tf.one_hot(tf.cast(labels, tf.int32), self.num_labels) * log_probs,
        axis=-1)

  def loss(self, model, batch, training):
    """The original: mean cross-entropy (mean squared error for a score)."""
    logits = model(batch, training=training)
    return tf.reduce_mean(self.per_example_loss(logits, batch["label_ids"]))

  def predict(self, model, batch):
    """Per-replica outputs gathered over an evaluation or prediction pass."""
    logits = tf.cast(model(batch, training=False), tf.float32)
    return {"logits": logits, "label_ids": batch["label_ids"],
            "is_real_example": batch["is_real_example"],
            "per_example_loss": self.per_example_loss(logits,
                                                      batch["label_ids"])}

  def eval_results(self, outputs, task_name):
    """eval_results.txt values from the gathered outputs (real examples)."""
    real = outputs["is_real_example"] > 0
    losses = outputs["per_example_loss"][real]
    results = {"eval_loss": float(losses.mean()), "loss": float(losses.mean())}
    labels = outputs["label_ids"][real]
    if self.regression:
      scores = outputs["logits"][real, 0]
      results["pearson"] = metrics.pearson(scores, labels)
      results["spearman"] = metrics.spearman(scores, labels)
      return results
    predictions = outputs["logits"][real].argmax(-1)
    results["eval_accuracy"] = metrics.accuracy(labels, predictions)
    for name in GLUE_METRICS.get(task_name, ()):
      results[name] = getattr(metrics, name)(labels, predictions)
    return results

  def probabilities(self, logits):
    """float32 [N, num_labels] softmax (or the raw score for regression)."""
    if self.regression:
      return logits.astype(np.float32)
    exp = np.exp(logits - logits.max(-1, keepdims=True))
    return (exp / exp.sum(-1, keepdims=True)).astype(np.float32)
