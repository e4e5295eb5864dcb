"""Writes the demo's pre-training corpus: Python's own documentation.

Nothing is downloaded: the text is the docstrings of standard-library
modules installed with the Python running this, one document per module,
one sentence per line, a blank line between documents (the input format of
create_pretraining_data.py).

  python demo/make_corpus.py OUTPUT_FILE [MAX_BYTES]
"""

import importlib
import inspect
import re
import sys

MODULES = (
    "abc argparse ast asyncio base64 bisect calendar cmd codecs collections "
    "concurrent.futures configparser contextlib copy csv dataclasses datetime "
    "decimal difflib email enum filecmp fnmatch fractions ftplib functools "
    "gettext glob gzip hashlib heapq hmac html http.client http.server "
    "imaplib inspect io ipaddress itertools json logging mailbox math "
    "mimetypes multiprocessing numbers operator optparse os pathlib pickle "
    "pkgutil platform plistlib poplib pprint queue random re sched secrets "
    "selectors shelve shlex shutil smtplib socket socketserver sqlite3 "
    "statistics string struct subprocess tarfile tempfile textwrap "
    "threading timeit tokenize trace traceback turtle typing unittest "
    "urllib.parse urllib.request uuid warnings wave weakref xml.dom.minidom "
    "zipfile zlib").split()

# A sentence ends at . ! or ? followed by white space and a capital letter.
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z])")


def sentences(text):
  """Splits docstring prose into sentences; drops code-like lines."""
  prose = []
  for paragraph in re.split(r"\n\s*\n", text):
    lines = [l.strip() for l in paragraph.splitlines()]
    if any(l.startswith((">>>", "...", "$")) for l in lines):
      continue
    joined = " ".join(l for l in lines if l)
    if len(joined.split()) >= 4:
      prose.extend(s.strip() for s in _SENTENCE_END.split(joined))
  return [s for s in prose if len(s.split()) >= 3]


def module_document(name):
  module = importlib.import_module(name)
  texts = [inspect.getdoc(module) or ""]
  for _, member in sorted(vars(module).items()):
    if (inspect.isclass(member) or inspect.isfunction(member)) and getattr(
        member, "__module__", None) == module.__name__:
      texts.append(inspect.getdoc(member) or "")
  return [s for text in texts for s in sentences(text)]


def main(output_file, max_bytes=600000):
  written = 0
  with open(output_file, "w", encoding="utf-8") as out:
    for name in MODULES:
      try:
        document = module_document(name)
      except ImportError:
        continue
      if len(document) < 2:
        continue
      text = "\n".join(document) + "\n\n"
      out.write(text)
      written += len(text.encode("utf-8"))
      if written >= max_bytes:
        break
  print("Wrote %s: %d bytes" % (output_file, written))


if __name__ == "__main__":
  main(sys.argv[1], *[int(a) for a in sys.argv[2:]])
