"""SavedModels that take raw strings (export_saved_model.py): one serving
module per task, each holding the in-graph tokenizer, the runner's packing,
the model and its post-processing."""
