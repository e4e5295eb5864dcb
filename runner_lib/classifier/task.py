"""The classification task: model, loss, predict outputs and GLUE metrics."""

import tensorflow as tf

import modeling
from runner_lib.classifier import features
from runner_lib.core.training import metrics
from runner_lib.core.training import task


@task.register("classifier")
class ClassificationTask(task.LabelTask):
  """Fine-tuning on sentence(-pair) classification or, with no label list,
  a regression score (STS-B)."""

  HEADS = (modeling.ClassifierHead,)
  # Reads the [CLS] position only (of each window, with windows; a window
  # of padding alone is then skipped whole: BertClassifier.call_windows).
  SKIP_PADDING = True

  def __init__(self, config, max_seq_length, label_list, metric_names=(),
               max_windows=None):
    """Args:
      config: modeling.BertConfig.
      max_seq_length: int, the records' sequence length.
      label_list: list of str, the classes in the head's order; None for
        regression (one output, squared error).
      metric_names: names of core/training/metrics.py functions for eval_results
        beside accuracy (for regression: instead of it).
      max_windows: int, or None for the original's records of one sequence
        per example; with it (--long_text=windows), records of that many
        windows per example (features.convert_windowed_example), whose
        mean logits the loss, predictions and metrics read.
    """
    super().__init__(config, max_seq_length)
    self.label_list = label_list
    self.metric_names = tuple(metric_names)
    self.regression = label_list is None
    self.num_labels = 1 if self.regression else len(label_list)
    self.max_windows = max_windows

  def build_model(self, options=None):
    """BertClassifier with num_labels outputs."""
    return modeling.BertClassifier(self.config, self.num_labels,
                                   options=options)

  def name_to_features(self, is_training):
    """The same records for training, evaluation and prediction."""
    del is_training
    return features.name_to_features(self.max_seq_length, self.regression,
                                     self.max_windows)

  def sequence_features(self, is_training):
    """The ids, mask and segments (named: window_mask's [max_windows] may be
    as long as a sequence)."""
    del is_training
    return ("input_ids", "input_mask", "segment_ids")

  def per_example_loss(self, logits, labels):
    """Cross-entropy (squared error for a score), float32 [B]."""
    if self.regression:
      return tf.square(tf.cast(logits[:, 0], tf.float32) -
                       tf.cast(labels, tf.float32))
    return super().per_example_loss(logits, labels)

  def eval_results(self, outputs):
    """eval_results.txt values from predict()'s outputs over the dev set.

    Args:
      outputs: dict of numpy arrays, predict()'s keys, real examples only.

    Returns:
      dict name -> float: eval_loss and loss (the mean example loss),
      eval_accuracy (classification) and each of metric_names.
    """
    labels = outputs["label_ids"]
    if self.regression:
      loss = float(outputs["per_example_loss"].mean())
      scores = outputs["logits"][:, 0]
      return dict({"eval_loss": loss, "loss": loss}, **{
          name: getattr(metrics, name)(scores, labels)
          for name in self.metric_names})
    results = super().eval_results(outputs)
    predictions = outputs["logits"].argmax(-1)
    for name in self.metric_names:
      results[name] = getattr(metrics, name)(labels, predictions)
    return results
