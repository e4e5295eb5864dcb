"""Sentence(-pair) classification: GLUE / XNLI readers (data.py), their
features and records (features.py) and the classification task
(task.py)."""
