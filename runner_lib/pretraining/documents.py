"""Pre-training text in: documents of tokenized sentences (no TensorFlow).

create_pretraining_data's input is one sentence per line with a blank line
between documents. Tokenized here, one line at a time, by the pure-Python
2018 tokenizer (tokenization/wordpiece.py): the same ids as TensorFlow
Text's batch path, without TensorFlow's 5 s import, and in any number of
worker processes.
"""

import array

from runner_lib.core import errors
from runner_lib.pretraining import instances

# Lines between progress updates (each update only reads a clock).
_PROGRESS_LINES = 4096


def masking_vocab(vocab, vocab_file):
  """instances.MaskingVocab of a vocab.

  Args:
    vocab: dict token -> id.
    vocab_file: str, named in the message.

  Raises:
    errors.InputError: the vocab has no [MASK].
  """
  if "[MASK]" not in vocab:
    raise errors.InputError(
        "vocab_file %s has no [MASK] token, which masked LM needs." %
        vocab_file)
  return instances.MaskingVocab(vocab)


def read_documents(lines, tokenize_ids, progress=None):
  """Tokenizes text, one sentence per line, blank lines between documents.

  As the original: a line blank after strip() starts a new document, a line
  with no tokens is skipped, documents run on across files, and empty
  documents are dropped.

  Args:
    lines: iterable of str.
    tokenize_ids: function str -> list of int, the 2018 FullTokenizer's ids
      (tokenization.wordpiece.IdTokenizer.tokenize_ids).
    progress: core.progress.Progress in MB, or None.

  Returns:
    list of documents, each a list of sentences as array('i') of ids.
  """
  documents = [[]]
  done_bytes = 0
  for number, line in enumerate(lines, 1):
    done_bytes += len(line)  # characters: bytes for ASCII, near enough
    line = line.strip()
    if not line:
      documents.append([])
      continue
    ids = tokenize_ids(line)
    if ids:
      documents[-1].append(array.array("i", ids))
    if progress and not number % _PROGRESS_LINES:
      progress.update(done_bytes / 1e6, documents=len(documents))
  return [d for d in documents if d]
