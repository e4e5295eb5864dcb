"""The README's quick starts as shell scripts to run.

test_quickstarts.py runs them on tiny data; benchmarks/checks/quickstarts.py
runs them on real data and records what they print, which the README then
shows as their expected output. Both run the blocks as the README has them,
with two changes a user makes too: the `export NAME=/path/to/...` lines
are the user's to fill in, so NAME comes from the environment instead; and
/tmp/ is a fresh directory of the run's own, so that runs never resume or
overwrite each other's output.
"""

import collections
import os
import re
import shlex
import subprocess

from tests import conftest
from tests.conftest import REPO_ROOT

README = os.path.join(REPO_ROOT, "README.md")

QuickStart = collections.namedtuple("QuickStart",
                                    ["name", "title", "blocks"])

_SECTION = re.compile(r"^## (Quick start \d+: .*)$", re.M)
_HEADING = re.compile(r"^## ", re.M)
_BLOCK = re.compile(r"^```(?:shell|bash|sh)\n(.*?)^```$", re.M | re.S)
# The block that shows a quick start's recorded output (benchmarks/report.py
# fills it from the record of the same name).
_OUTPUT = re.compile(r"^<!-- report:begin (quickstart-[\w-]+) -->$", re.M)
PLACEHOLDER = re.compile(r"^export (\w+)=/path/to/\S*\n", re.M)


def quickstarts(text=None):
  """The quick starts of the README.

  Args:
    text: str, the README's text; None reads README.md.

  Returns:
    dict name -> QuickStart: name is the section's output block
    (e.g. "quickstart-mrpc"), title its heading, blocks its shell blocks
    in order (str each).

  Raises:
    ValueError: a quick start section without exactly one output block.
  """
  if text is None:
    with open(README, encoding="utf-8") as f:
      text = f.read()
  found = {}
  for match in _SECTION.finditer(text):
    end = _HEADING.search(text, match.end())
    section = text[match.end():end.start() if end else len(text)]
    names = _OUTPUT.findall(section)
    if len(names) != 1:
      raise ValueError("README section %r has %d quickstart output blocks, "
                       "expected 1." % (match.group(1), len(names)))
    found[names[0]] = QuickStart(names[0], match.group(1),
                                 _BLOCK.findall(section))
  return found


def section_blocks(page, heading):
  """The shell blocks of a docs page's `## heading` section, in order.

  Args:
    page: str, a path relative to the repo, e.g. "docs/training.md".
    heading: str, the section's title after "## ".

  Raises:
    ValueError: the page has no such section, or it has no shell block.
  """
  with open(os.path.join(REPO_ROOT, page), encoding="utf-8") as f:
    text = f.read()
  match = re.search(r"^## %s$" % re.escape(heading), text, re.M)
  if not match:
    raise ValueError("%s has no section '## %s'." % (page, heading))
  end = _HEADING.search(text, match.end())
  blocks = _BLOCK.findall(text[match.end():end.start() if end else
                               len(text)])
  if not blocks:
    raise ValueError("%s: section '## %s' has no shell block." % (page,
                                                                  heading))
  return blocks


def placeholders(block):
  """The names a block's `export NAME=/path/to/...` lines leave to the
  user, in order."""
  return PLACEHOLDER.findall(block)


def script(blocks, tmp_dir, replacements=()):
  """The blocks as one bash script: placeholders dropped, /tmp/ moved.

  Args:
    blocks: list of str.
    tmp_dir: str, the directory that stands for /tmp.
    replacements: (old, new) pairs applied to the script after that, e.g.
      fewer steps; each old must occur (a README edit that drops it should
      fail the caller, not silently run the long version).

  Returns:
    str.

  Raises:
    ValueError: a replacement that does not occur.
  """
  text = PLACEHOLDER.sub("", "\n".join(blocks))
  text = text.replace("/tmp/", tmp_dir.rstrip("/") + "/")
  for old, new in replacements:
    if old not in text:
      raise ValueError("%r is not in the quick start any more." % old)
    text = text.replace(old, new)
  return text


# The interpreter as the docs' commands name it.
_PYTHON = re.compile(r"(?<![\w/.])\.venv/bin/python(?=\s)")


def run(text, env, timeout=1800, python=None):
  """Runs a script from script() in bash from the repo root, stopping at
  the first failing command.

  Args:
    text: str.
    env: dict of environment variables added to this process's.
    timeout: seconds.
    python: None, or a command (list of str) that the script's
      `.venv/bin/python` stands for, such as the tests' relay to a
      process that has imported TensorFlow (conftest.relay_command).

  Returns:
    subprocess.CompletedProcess with text stdout and stderr.
  """
  base = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2")
  if python:
    # The relay's runs fork only in the server's load-time environment.
    base = conftest.script_env()
    text = "_python() { %s \"$@\"; }\n%s" % (
        " ".join(shlex.quote(word) for word in python),
        _PYTHON.sub("_python", text))
  return subprocess.run(
      ["bash", "-euo", "pipefail", "-c", text], cwd=REPO_ROOT,
      capture_output=True, text=True, timeout=timeout,
      env=dict(base, **env))


def run_with_relay(text, env, timeout=1800):
  """run() with `.venv/bin/python` relayed to the tests' script server
  (conftest.relay_command): each command a fork of a process that has
  imported TensorFlow, as the tests' other scripts, without the ~5 s a
  fresh interpreter spends importing it."""
  return run(text, env, timeout, python=conftest.relay_command())
