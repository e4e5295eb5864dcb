"""Evaluation metrics (GLUE's: accuracy, F1, Matthews correlation,
Pearson, Spearman) and the softmax that turns logits into the original's
probabilities, on NumPy arrays."""

import numpy as np


def softmax(logits):
  """float32 [..., N] probabilities of logits [..., N], over the last
  axis."""
  exp = np.exp(logits - logits.max(-1, keepdims=True))
  return (exp / exp.sum(-1, keepdims=True)).astype(np.float32)


def accuracy(labels, predictions):
  """Share of predictions equal to the labels."""
  labels, predictions = np.asarray(labels), np.asarray(predictions)
  return float(np.mean(labels == predictions))


def f1(labels, predictions, positive=1):
  """F1 of the positive class (MRPC, QQP); 0 when it is never predicted."""
  labels, predictions = np.asarray(labels), np.asarray(predictions)
  true_positive = np.sum((predictions == positive) & (labels == positive))
  predicted = np.sum(predictions == positive)
  actual = np.sum(labels == positive)
  if not true_positive:
    return 0.0
  precision, recall = true_positive / predicted, true_positive / actual
  return float(2 * precision * recall / (precision + recall))


def matthews_corrcoef(labels, predictions):
  """Matthews correlation of binary labels (CoLA); 0 if undefined."""
  labels = np.asarray(labels).astype(bool)
  predictions = np.asarray(predictions).astype(bool)
  tp = float(np.sum(labels & predictions))
  tn = float(np.sum(~labels & ~predictions))
  fp = float(np.sum(~labels & predictions))
  fn = float(np.sum(labels & ~predictions))
  denominator = np.sqrt((tp + fp) * (tp + fn) * (tn + fp) * (tn + fn))
  return float((tp * tn - fp * fn) / denominator) if denominator else 0.0


def pearson(x, y):
  """Pearson correlation (STS-B)."""
  x, y = np.asarray(x, np.float64), np.asarray(y, np.float64)
  x, y = x - x.mean(), y - y.mean()
  return float((x * y).sum() / np.sqrt((x * x).sum() * (y * y).sum()))


def _ranks(values):
  """Ranks from 1, ties sharing their average rank."""
  values = np.asarray(values, np.float64)
  order = np.argsort(values, kind="mergesort")
  ranks = np.empty(len(values))
  sorted_values = values[order]
  start = 0
  for end in range(1, len(values) + 1):
    if end == len(values) or sorted_values[end] != sorted_values[start]:
      ranks[order[start:end]] = (start + end + 1) / 2.0
      start = end
  return ranks


def spearman(x, y):
  """Spearman rank correlation (STS-B): Pearson of the (tied) ranks."""
  return pearson(_ranks(x), _ranks(y))
