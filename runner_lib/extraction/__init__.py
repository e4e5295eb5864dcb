"""Feature extraction (extract_features.py): BERT as a fixed feature
extractor. Input lines to features (data.py) and layer outputs as the
original's JSON lines (jsonl.py)."""
