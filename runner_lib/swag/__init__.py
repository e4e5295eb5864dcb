"""SWAG multiple choice (run_swag.py): the CSV reader, four-choice records,
the task and its outputs."""
