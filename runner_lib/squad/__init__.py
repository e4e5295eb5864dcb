"""SQuAD v1.1 / v2.0: reading the JSON (data.py), windowed features and
records (features.py), the span task (task.py), answers from logits
(predictions.py) and the official scores (evaluation.py); the same words,
windows and answer search as TensorFlow ops over a batch (graph.py), which
serving/squad.py's SavedModel runs."""
