"""Named-entity recognition on CoNLL-2003 (run_ner.py): the CoNLL reader,
word-piece tagging records (sentence or document context), the fine-tuned
and feature-based tasks, and conlleval-style outputs."""
