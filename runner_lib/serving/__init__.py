"""SavedModels that take raw strings (export_saved_model.py): one serving
module per task, each holding the in-graph tokenizer, the runner's packing,
the model and its post-processing.

The one task package that imports others: a serving module builds on the
task package it serves (squad.py on squad/graph.py); no task package
imports serving."""
