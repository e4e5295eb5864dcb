"""Writes the demo's fine-tuning task: SQuAD-format questions on Python's
own documentation.

Nothing is downloaded. For each public function and method of the demo's
standard-library modules whose docstring says what it returns, the context
is the docstring's first paragraph, the question "What does NAME return?"
and the answer the phrase after "Return(s)" up to the end of that sentence.
Every fourth question goes to dev, so dev questions are about functions the
fine-tuning never saw.

  python demo/make_squad.py TRAIN_JSON DEV_JSON
"""

import importlib
import inspect
import json
import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import make_corpus  # pylint: disable=g-import-not-at-top

# "Return(s) [a|an|the] ANSWER." as a sentence of its own.
_RETURNS = re.compile(
    r"(?:^|(?<=\. ))Returns? (?:(?:a|an|the) )?(?P<answer>.{3,80}?)\.(?= |$)")
MAX_CONTEXT_CHARS = 500


def public_functions(module):
  """(qualified name, function) for the module's own public functions and
  the public methods of its classes, sorted by name."""
  found = []
  for name, member in sorted(vars(module).items()):
    if name.startswith("_") or getattr(member, "__module__",
                                       None) != module.__name__:
      continue
    if inspect.isfunction(member):
      found.append((name, member))
    elif inspect.isclass(member):
      found.extend(("%s.%s" % (name, method), function)
                   for method, function in sorted(vars(member).items())
                   if inspect.isfunction(function) and
                   not method.startswith("_"))
  return found


def questions(module_name):
  """SQuAD paragraphs (context and one question each) for a module."""
  module = importlib.import_module(module_name)
  paragraphs = []
  for name, function in public_functions(module):
    doc = inspect.getdoc(function) or ""
    context = " ".join(doc.split("\n\n")[0].split())
    match = _RETURNS.search(context)
    if not match or len(context) > MAX_CONTEXT_CHARS:
      continue
    paragraphs.append({"context": context, "qas": [{
        "id": "%s.%s" % (module_name, name),
        "question": "What does %s return?" % name,
        "answers": [{"text": match.group("answer"),
                     "answer_start": match.start("answer")}]}]})
  return paragraphs


def main(train_file, dev_file):
  splits = {train_file: [], dev_file: []}
  count = 0
  for name in make_corpus.MODULES:
    try:
      paragraphs = questions(name)
    except ImportError:
      continue
    for path in splits:
      splits[path].append({"title": name, "paragraphs": []})
    for paragraph in paragraphs:
      target = dev_file if count % 4 == 3 else train_file
      splits[target][-1]["paragraphs"].append(paragraph)
      count += 1
  for path, articles in splits.items():
    articles = [a for a in articles if a["paragraphs"]]
    with open(path, "w", encoding="utf-8") as f:
      json.dump({"version": "1.1", "data": articles}, f, indent=1)
    count = sum(len(a["paragraphs"]) for a in articles)
    print("Wrote %s: %d questions" % (path, count))


if __name__ == "__main__":
  main(*sys.argv[1:3])
