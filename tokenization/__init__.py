"""WordPiece tokenization with the original release's API and output.

Names are imported on first use (PEP 562), not here: importing TensorFlow
takes seconds, and worker processes and scripts that only need the
TensorFlow-free modules (wordpiece, text, vocab_learning,
wordpiece_learner) must not pay for it. `tokenization.FullTokenizer`,
`from tokenization import GraphTokenizer` and the like work as before; the
first one that needs TensorFlow imports it.
"""

import importlib

# Exported name -> the submodule that defines it.
_EXPORTS = {
    "convert_to_unicode": "text",
    "printable_text": "text",
    "whitespace_tokenize": "text",
    "BasicTokenizer": "wordpiece",
    "check_vocab_tokens": "wordpiece",
    "convert_by_vocab": "wordpiece",
    "convert_ids_to_tokens": "wordpiece",
    "convert_tokens_to_ids": "wordpiece",
    "IdTokenizer": "wordpiece",
    "load_vocab": "wordpiece",
    "read_vocab_tokens": "wordpiece",
    "VocabError": "wordpiece",
    "WordpieceTokenizer": "wordpiece",
    "FullTokenizer": "tokenizers",
    "validate_case_matches_checkpoint": "tokenizers",
    "GraphTokenizer": "graph",
    "BertPreprocessor": "preprocessing",
    "pack_inputs": "preprocessing",
}

# The original module's private character classes, which its own tests and
# code written against it call: name here -> (submodule, name there).
_ORIGINAL_PRIVATE = {
    "_is_whitespace": ("text", "is_whitespace"),
    "_is_control": ("text", "is_control"),
    "_is_punctuation": ("text", "is_punctuation"),
}

# Submodules reachable as attributes (tokenization.graph) without an import
# statement of their own, as when this file imported them all.
_SUBMODULES = ("graph", "preprocessing", "text", "tokenizers",
               "vocab_learning", "wordpiece", "wordpiece_learner")

__all__ = sorted(_EXPORTS)


def __getattr__(name):
  if name in _EXPORTS:
    value = getattr(importlib.import_module("tokenization." + _EXPORTS[name]),
                    name)
  elif name in _ORIGINAL_PRIVATE:
    module, there = _ORIGINAL_PRIVATE[name]
    value = getattr(importlib.import_module("tokenization." + module), there)
  elif name in _SUBMODULES:
    value = importlib.import_module("tokenization." + name)
  else:
    raise AttributeError("module 'tokenization' has no attribute %r" % name)
  # Later lookups find it in the module's dict, without this call.
  globals()[name] = value
  return value


def __dir__():
  return sorted(set(globals()) | set(_EXPORTS) | set(_ORIGINAL_PRIVATE) |
                set(_SUBMODULES))
