"""SQuAD v1.1 / v2.0: reading the JSON (data.py), windowed features and
records (features.py), the span task (task.py), answers from logits
(predictions.py) and the official scores (evaluation.py)."""
