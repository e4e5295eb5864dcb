"""README.md and docs/*.md: commands, make targets, links, length, report blocks.

Every command in a ```shell / ```bash block that runs one of our scripts
(`.venv/bin/python SCRIPT.py ...`) must name a script that exists and pass
only flags it defines; every `make TARGET` must be a Makefile target; every
relative link must reach a file (and its #anchor a heading there, by
GitHub's slug rules); README.md stays within 250 lines; and the blocks that
benchmarks/report.py fills are well-formed marker pairs with known names.

A top-level runner's flags come from its own `--helpfull` (run once per
script per session, in parallel: it imports TensorFlow, so that test is
marked slow); a benchmark's or the demo's from its source (absl DEFINEs,
argparse arguments, `--name` literals of hand-parsed argv), following the
project modules it imports. Nothing here imports TensorFlow.
"""

import ast
import concurrent.futures
import glob
import os
import re
import shlex

import pytest

from tests import conftest
from tests.conftest import REPO_ROOT

README = "README.md"
MAX_README_LINES = 250

# The blocks benchmarks/report.py fills, by page.
REPORT_BLOCKS = {
    "README.md": {"glance", "quickstart-mrpc", "quickstart-pretrain",
                  "quickstart-serving"},
    "docs/results.md": {"results", "demo"},
    "docs/benchmarks.md": {"benchmarks", "benchmarks-figure"},
    "docs/training.md": {"bfloat16-speed", "memory", "unpadded"},
    "docs/fine-tuning.md": {"time", "long-text"},
    "docs/serving.md": {"serving-precision"},
}

# absl's own flags, which every absl script accepts (app, logging, flags).
ABSL_FLAGS = frozenset(
    ("help helpfull helpshort helpxml only_check_args pdb pdb_post_mortem "
     "profile_file run_with_pdb run_with_profiling use_cprofile_for_profiling "
     "alsologtostderr log_dir logger_levels logtostderr showprefixforinfo "
     "stderrthreshold verbosity v flagfile undefok").split())
ABSL_BOOLEANS = frozenset(
    ("help helpfull helpshort helpxml only_check_args pdb pdb_post_mortem "
     "run_with_pdb run_with_profiling use_cprofile_for_profiling "
     "alsologtostderr logtostderr showprefixforinfo").split())

_FENCE = re.compile(r"^(```+|~~~+)\s*([\w+-]*)")
_SHELL_LANGUAGES = ("shell", "bash", "sh")
_HEREDOC = re.compile(r"<<-?\s*(['\"]?)(\w+)\1")
_SEPARATORS = frozenset(("&&", "||", ";", "|", "&", "(", ")", ";;"))
_REDIRECTS = re.compile(r"^[<>]+&?$")
_MARKER = re.compile(r"^<!-- report:(begin|end) ([a-z0-9][a-z0-9-]*) -->$")
_LINK = re.compile(r"!?\[(?:[^\]\[]|\[[^\]]*\])*\]\(\s*<?([^)\s>]+)>?"
                   r"(?:\s+\"[^\"]*\")?\s*\)")
_INLINE_CODE = re.compile(r"(`+)(.+?)\1", re.S)
_HEADING = re.compile(r"^ {0,3}(#{1,6})\s+(.*?)\s*#*\s*$")


def doc_files():
  """README.md and docs/*.md, relative to the repo root."""
  return [README] + sorted(
      os.path.relpath(p, REPO_ROOT)
      for p in glob.glob(os.path.join(REPO_ROOT, "docs", "*.md")))


def read(relpath):
  with open(os.path.join(REPO_ROOT, relpath), encoding="utf-8") as f:
    return f.read()


# --- Markdown structure ---------------------------------------------------


def split_fences(text):
  """Markdown as (kind, language, lines, first line number) pieces: kind
  "code" for a fenced block's content, "text" for what lies between."""
  pieces, lines, start = [], [], 1
  fence, language = None, ""
  for number, line in enumerate(text.splitlines(), 1):
    match = _FENCE.match(line)
    if fence is None and match:
      pieces.append(("text", "", lines, start))
      fence, language, lines, start = match.group(1), match.group(2), [], (
          number + 1)
    elif fence is not None and line.strip() == fence:
      pieces.append(("code", language, lines, start))
      fence, lines, start = None, [], number + 1
    else:
      lines.append(line)
  pieces.append(("code" if fence else "text", language, lines, start))
  return pieces


def shell_blocks(text):
  """(first line number, lines) of each ```shell / ```bash block."""
  return [(start, lines) for kind, language, lines, start in split_fences(text)
          if kind == "code" and language in _SHELL_LANGUAGES]


def prose(text):
  """The text outside fenced blocks, inline code spans blanked out."""
  parts = ["\n".join(lines) for kind, _, lines, _ in split_fences(text)
           if kind == "text"]
  return _INLINE_CODE.sub(" ", "\n".join(parts))


def slug(heading):
  """GitHub's anchor for a heading's text: markup dropped, lower case,
  every character but letters, digits, spaces, '-' and '_' dropped, spaces
  to '-'."""
  text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", heading)
  text = text.replace("`", "").lower()
  text = "".join(c for c in text if c.isalnum() or c in " -_")
  return text.replace(" ", "-")


def anchors(text):
  """Every heading's anchor in a page, with GitHub's -1, -2 ... suffixes
  for repeats."""
  seen, result = {}, set()
  for kind, _, lines, _ in split_fences(text):
    if kind != "text":
      continue
    for line in lines:
      match = _HEADING.match(line)
      if not match:
        continue
      base = slug(match.group(2))
      count = seen.get(base, 0)
      seen[base] = count + 1
      result.add(base if count == 0 else "%s-%d" % (base, count))
  return result


# --- Shell commands -------------------------------------------------------


def logical_lines(start, lines):
  """A shell block's commands as (line number, text): backslash
  continuations joined, heredoc bodies left out, comment lines dropped."""
  result, pending, pending_start, heredoc = [], "", None, None
  for number, line in enumerate(lines, start):
    if heredoc is not None:
      if line.strip() == heredoc:
        heredoc = None
      continue
    if pending_start is None:
      pending_start = number
    if line.rstrip().endswith("\\"):
      pending += line.rstrip()[:-1] + " "
      continue
    command = pending + line
    pending, first = "", pending_start
    pending_start = None
    match = _HEREDOC.search(command)
    if match:
      heredoc = match.group(2)
    if command.strip() and not command.strip().startswith("#"):
      result.append((first, command))
  if pending.strip():
    result.append((pending_start, pending))
  return result


def simple_commands(command):
  """A command line's simple commands, each a list of words (redirections
  and their targets dropped).

  Raises:
    ValueError: the line does not parse as shell words (an unclosed quote).
  """
  lexer = shlex.shlex(command, posix=True, punctuation_chars=True)
  lexer.whitespace_split = True
  lexer.commenters = "#"
  commands, words, skip_next = [], [], False
  for token in lexer:
    if skip_next:
      skip_next = False
      continue
    if token in _SEPARATORS or token.endswith("$"):
      # "$(" arrives as "...$" then "(": a substitution opens a command.
      if token.endswith("$") and token not in _SEPARATORS and token[:-1]:
        words.append(token[:-1])
      if words:
        commands.append(words)
      words = []
    elif _REDIRECTS.match(token):
      if words and words[-1].isdigit():
        words.pop()  # the file descriptor of 2>FILE
      skip_next = not token.endswith("&")
    else:
      words.append(token)
  if words:
    commands.append(words)
  return commands


def program_and_args(words):
  """(program, args) of a simple command, leading NAME=value dropped."""
  while words and re.match(r"^\w+=", words[0]):
    words = words[1:]
  if not words:
    return None, []
  return words[0], words[1:]


def script_invocation(words):
  """(script path, args) where a simple command runs a .py file with
  Python, else None."""
  program, args = program_and_args(words)
  if program is None or not re.match(r"^python[\d.]*$",
                                     os.path.basename(program)):
    return None
  if not args or not args[0].endswith(".py"):
    return None  # python -c / -m / - (a heredoc): not a script.
  return args[0], args[1:]


def make_targets_used(words):
  """The targets of a `make ...` simple command, or []."""
  program, args = program_and_args(words)
  if program != "make":
    return []
  return [a for a in args if not a.startswith("-") and "=" not in a]


def doc_commands(relpath, text):
  """Every simple command in a page's shell blocks, as (where, words):
  where is "FILE:LINE"; unparseable lines as (where, None)."""
  result = []
  for start, lines in shell_blocks(text):
    for number, command in logical_lines(start, lines):
      where = "%s:%d" % (relpath, number)
      try:
        for words in simple_commands(command):
          result.append((where, words))
      except ValueError:
        result.append((where, None))
  return result


def flags_passed(args):
  """The names of the --flags in args (--name, --name=value)."""
  return [a[2:].split("=", 1)[0] for a in args
          if a.startswith("--") and len(a) > 2]


def unknown_flags(args, defined, booleans):
  """The flags in args that the script does not define: --name must be
  defined, --noname must be a boolean's negation."""
  unknown = []
  for name in flags_passed(args):
    if name in defined:
      continue
    if name.startswith("no") and name[2:] in booleans:
      continue
    unknown.append(name)
  return unknown


# --- Flags a script defines ------------------------------------------------


def parse_helpfull(output):
  """(flags, booleans) from absl's --helpfull text."""
  names, booleans = set(), set()
  for match in re.finditer(r"^\s+(?:-\w+,)?--(\[no\])?(\w+):", output, re.M):
    names.add(match.group(2))
    if match.group(1):
      booleans.add(match.group(2))
  return names, booleans


def helpfull(script):
  """(flags, booleans) of a top-level runner, from its --helpfull."""
  result = conftest.run_script(script, ["--helpfull"], cwd=REPO_ROOT)
  names, booleans = parse_helpfull(result.stdout)
  if "helpfull" not in names:
    raise AssertionError("%s --helpfull printed no flags (exit %d):\n%s" %
                         (script, result.returncode, result.stderr[-2000:]))
  return names, booleans


def _module_file(module):
  """The repo file of a dotted module name, or None outside the repo."""
  base = os.path.join(REPO_ROOT, *module.split("."))
  for path in (base + ".py", os.path.join(base, "__init__.py")):
    if os.path.isfile(path):
      return path
  return None


def _imported_files(tree):
  """Repo files a module imports (absolute imports only)."""
  files = []
  for node in ast.walk(tree):
    if isinstance(node, ast.Import):
      modules = [alias.name for alias in node.names]
    elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
      modules = [node.module] + ["%s.%s" % (node.module, alias.name)
                                 for alias in node.names]
    else:
      continue
    files.extend(f for f in map(_module_file, modules) if f)
  return files


def static_flags(path):
  """(flags, booleans) a non-runner script accepts, read from its source
  and the repo modules it imports: absl DEFINE_* calls with literal names,
  argparse add_argument("--name"), and "--name" string literals (argv
  parsed by hand). absl's own flags where absl is used."""
  names, booleans, uses_absl = set(), set(), False
  todo, done = [path], set()
  while todo:
    current = todo.pop()
    if current in done:
      continue
    done.add(current)
    with open(current, encoding="utf-8") as f:
      tree = ast.parse(f.read(), current)
    todo.extend(_imported_files(tree))
    for node in ast.walk(tree):
      if isinstance(node, (ast.Import, ast.ImportFrom)):
        modules = ([a.name for a in node.names] if isinstance(node, ast.Import)
                   else [node.module or ""])
        uses_absl |= any(m == "absl" or m.startswith("absl.")
                         for m in modules)
      if isinstance(node, ast.Call) and node.args and isinstance(
          node.args[0], ast.Constant) and isinstance(node.args[0].value, str):
        function = node.func
        called = (function.attr if isinstance(function, ast.Attribute) else
                  getattr(function, "id", ""))
        first = node.args[0].value
        if called.startswith("DEFINE_"):
          names.add(first)
          if called in ("DEFINE_bool", "DEFINE_boolean"):
            booleans.add(first)
        elif called == "add_argument" and first.startswith("--"):
          names.add(first[2:])
      if isinstance(node, ast.Constant) and isinstance(node.value, str):
        match = re.match(r"^--(\w+)(=|$)", node.value)
        if match:
          names.add(match.group(1))
  if uses_absl:
    names |= ABSL_FLAGS
    booleans |= ABSL_BOOLEANS
  return names, booleans


def is_runner(script):
  """A top-level script: its flags come from --helpfull."""
  return os.path.dirname(os.path.normpath(script)) == ""


def script_uses():
  """Every script invocation in the docs: (where, script, args)."""
  uses = []
  for relpath in doc_files():
    for where, words in doc_commands(relpath, read(relpath)):
      invocation = words and script_invocation(words)
      if invocation:
        uses.append((where,) + invocation)
  return uses


def check_flags(uses, flags_of):
  """Problems with script invocations.

  Args:
    uses: list of (where, script, args).
    flags_of: function script -> (flags, booleans).

  Returns:
    list of str, one per missing script or unknown flag.
  """
  problems = []
  for where, script, args in uses:
    if not os.path.isfile(os.path.join(REPO_ROOT, script)):
      problems.append("%s: %s does not exist" % (where, script))
      continue
    defined, booleans = flags_of(script)
    for name in unknown_flags(args, defined, booleans):
      problems.append("%s: %s does not define --%s (command: %s %s)" %
                      (where, script, name, script, " ".join(args)))
  return problems


# --- Makefile, links, report blocks -----------------------------------------


def makefile_targets():
  targets = set()
  with open(os.path.join(REPO_ROOT, "Makefile"), encoding="utf-8") as f:
    for line in f:
      match = re.match(r"^([^\s#:=][^:=]*?)\s*::?(?!=)", line)
      if match:
        targets.update(match.group(1).split())
  return targets - {".PHONY"}


def make_uses(relpath, text):
  """(where, target) of every `make TARGET` in shell blocks and in inline
  code spans."""
  uses = []
  for where, words in doc_commands(relpath, text):
    for target in make_targets_used(words or []):
      uses.append((where, target))
  for kind, _, lines, start in split_fences(text):
    if kind != "text":
      continue
    for number, line in enumerate(lines, start):
      for span in re.findall(r"`make ([^`]+)`", line):
        for target in make_targets_used(["make"] + span.split()):
          uses.append(("%s:%d" % (relpath, number), target))
  return uses


def _exists(relpath):
  return os.path.exists(os.path.join(REPO_ROOT, relpath))


def link_problems(relpath, text, read_page=read, exists=_exists):
  """Relative links of a page that reach no file, or no heading there.

  Args:
    relpath: str, the page, relative to the repo root.
    text: str, its Markdown.
    read_page: function relpath -> Markdown of a linked page.
    exists: function relpath -> bool.

  Returns:
    list of str.
  """
  problems = []
  directory = os.path.dirname(relpath)
  for target in _LINK.findall(prose(text)):
    if re.match(r"^[a-zA-Z][\w+.-]*:", target):
      continue  # https:, mailto: ...
    path, _, anchor = target.partition("#")
    resolved = os.path.normpath(os.path.join(directory, path)) if path else (
        relpath)
    if not exists(resolved):
      problems.append("%s: link %s: no file %s" % (relpath, target, resolved))
      continue
    if anchor:
      if not resolved.endswith(".md"):
        problems.append("%s: link %s: an anchor into a non-Markdown file" %
                        (relpath, target))
      elif anchor not in anchors(read_page(resolved)):
        problems.append("%s: link %s: %s has no heading with anchor #%s" %
                        (relpath, target, resolved, anchor))
  return problems


def marker_problems(relpath, text, known):
  """Problems with a page's report blocks.

  Args:
    relpath: str, for messages.
    text: str, the page.
    known: set of str, the block names this page must hold.

  Returns:
    list of str.
  """
  problems, seen, open_name = [], set(), None
  for number, line in enumerate(text.splitlines(), 1):
    where = "%s:%d" % (relpath, number)
    if not (line.lstrip().startswith("<!--") and "report:" in line):
      continue
    match = _MARKER.match(line)
    if not match:
      problems.append("%s: malformed report marker %r (expected '<!-- "
                      "report:begin NAME -->' or '<!-- report:end NAME -->' "
                      "alone on its line)" % (where, line))
      continue
    kind, name = match.groups()
    if kind == "begin":
      if open_name is not None:
        problems.append("%s: begin %s inside block %s" %
                        (where, name, open_name))
      if name not in known:
        problems.append("%s: unknown report block %r (known here: %s)" %
                        (where, name, ", ".join(sorted(known)) or "none"))
      if name in seen:
        problems.append("%s: report block %s appears twice" % (where, name))
      seen.add(name)
      open_name = name
    else:
      if open_name != name:
        problems.append("%s: end %s without its begin (open: %s)" %
                        (where, name, open_name))
      open_name = None
  if open_name is not None:
    problems.append("%s: report block %s is never ended" %
                    (relpath, open_name))
  for name in sorted(known - seen):
    problems.append("%s: report block %s is missing" % (relpath, name))
  return problems


# --- The checks on the real pages -------------------------------------------


@pytest.fixture(scope="session")
def runner_flags():
  """script -> (flags, booleans) for every top-level runner the docs run,
  from --helpfull, the runs in parallel."""
  scripts = sorted({script for _, script, _ in script_uses()
                    if is_runner(script)
                    and os.path.isfile(os.path.join(REPO_ROOT, script))})
  with concurrent.futures.ThreadPoolExecutor(len(scripts) or 1) as pool:
    return dict(zip(scripts, pool.map(helpfull, scripts)))


@pytest.mark.slow
def test_runner_commands_use_only_flags_the_runner_defines(runner_flags):
  uses = [use for use in script_uses() if is_runner(use[1])]
  assert uses, "no runner commands found in the docs"
  problems = check_flags(uses, runner_flags.__getitem__)
  assert not problems, "\n".join(problems)


def test_other_script_commands_use_only_flags_the_script_defines():
  uses = [use for use in script_uses() if not is_runner(use[1])]
  problems = check_flags(
      uses, lambda script: static_flags(os.path.join(REPO_ROOT, script)))
  assert not problems, "\n".join(problems)


def test_every_shell_line_parses():
  problems = [where for relpath in doc_files()
              for where, words in doc_commands(relpath, read(relpath))
              if words is None]
  assert not problems, "unparseable shell lines: %s" % ", ".join(problems)


def test_make_targets_exist():
  targets = makefile_targets()
  problems = ["%s: make %s: no such Makefile target" % (where, target)
              for relpath in doc_files()
              for where, target in make_uses(relpath, read(relpath))
              if target not in targets]
  assert not problems, "\n".join(problems)


def test_relative_links_resolve():
  problems = [p for relpath in doc_files()
              for p in link_problems(relpath, read(relpath))]
  assert not problems, "\n".join(problems)


def test_readme_is_short():
  lines = len(read(README).splitlines())
  assert lines <= MAX_README_LINES, (
      "README.md has %d lines, over %d: move detail into docs/" %
      (lines, MAX_README_LINES))


def test_report_blocks_are_well_formed():
  problems = [p for relpath in doc_files()
              for p in marker_problems(relpath, read(relpath),
                                       REPORT_BLOCKS.get(relpath, set()))]
  assert not problems, "\n".join(problems)


def test_every_page_is_listed_in_the_readme():
  linked = set(_LINK.findall(prose(read(README))))
  missing = [p for p in doc_files()[1:]
             if p not in {t.partition("#")[0] for t in linked}]
  assert not missing, "docs pages not in README.md's index: %s" % missing


# --- The checks themselves fail where they should ------------------------------


def test_slug_follows_github():
  assert slug("Quick start 2: pre-train from your own corpus") == (
      "quick-start-2-pre-train-from-your-own-corpus")
  assert slug("A vocab: learn_vocab.py") == "a-vocab-learn_vocabpy"
  assert slug("Serving: `export_saved_model.py` and [TF Hub](x.md)") == (
      "serving-export_saved_modelpy-and-tf-hub")
  assert anchors("# A\n## A\n```\n# not a heading\n```\n") == {"a", "a-1"}


def test_commands_are_found_through_continuations_and_heredocs():
  text = ("```shell\n"
          "X=$(.venv/bin/python -c \"print(1)\")\n"
          ".venv/bin/python run_x.py --a=1 \\\n"
          "  --nob && make setup\n"
          "cat > f.json <<EOF\n"
          "--not_a_flag python fake.py --c\n"
          "EOF\n"
          "python other.py --d 2>/dev/null | grep y\n"
          "```\n")
  commands = doc_commands("T.md", text)
  invocations = [script_invocation(words) for _, words in commands]
  assert [i for i in invocations if i] == [
      ("run_x.py", ["--a=1", "--nob"]), ("other.py", ["--d"])]
  assert [t for _, w in commands for t in make_targets_used(w)] == ["setup"]
  assert [where for where, words in commands
          if words and script_invocation(words)] == ["T.md:3", "T.md:8"]


def test_unknown_flags_are_reported():
  defined, booleans = {"a", "b", "flag"}, {"b"}
  assert unknown_flags(["--a=1", "--nob", "--noa", "--c", "-v", "x"],
                       defined, booleans) == ["noa", "c"]
  problems = check_flags([("T.md:1", "run_classifier.py", ["--typo=1"]),
                          ("T.md:2", "no_such_script.py", [])],
                         lambda script: (defined, booleans))
  assert problems == [
      "T.md:1: run_classifier.py does not define --typo (command: "
      "run_classifier.py --typo=1)",
      "T.md:2: no_such_script.py does not exist"]


def test_helpfull_text_is_parsed():
  text = ("  --[no]do_train: Whether to run training.\n"
          "  --max_seq_length: The maximum.\n"
          "  -v,--verbosity: Logging verbosity level.\n")
  assert parse_helpfull(text) == ({"do_train", "max_seq_length", "verbosity"},
                                  {"do_train"})


def test_static_flags_read_a_benchmark():
  names, booleans = static_flags(
      os.path.join(REPO_ROOT, "benchmarks", "quality", "quality.py"))
  assert {"seeds", "tasks", "paths", "helpfull"} <= names
  assert "no_such_flag" not in names
  assert "logtostderr" in booleans


def test_broken_links_are_reported():
  pages = {"docs/a.md": "# Title\n## Sub part\n"}
  text = ("[ok](a.md#sub-part) [bad anchor](a.md#nope) [gone](b.md) "
          "[web](https://example.com) `[code](c.md)`\n"
          "```\n[in code](d.md)\n```\n")
  problems = link_problems("docs/x.md", text, read_page=pages.__getitem__,
                           exists=pages.__contains__)
  assert len(problems) == 2 and "#nope" in problems[0] and (
      "no file docs/b.md" in problems[1]), problems


def test_bad_report_markers_are_reported():
  known = {"one", "two"}
  good = ("<!-- report:begin one -->\n<!-- report:end one -->\n"
          "<!-- report:begin two -->\nrendered\n<!-- report:end two -->\n")
  assert marker_problems("P.md", good, known) == []
  bad = ("<!-- report:begin one -->\n<!-- report:begin two -->\n"
         "<!-- report:end one -->\n<!-- report:end  two-->\n"
         "<!-- report:begin three -->\n")
  problems = marker_problems("P.md", bad, known)
  assert any("inside block one" in p for p in problems), problems
  assert any("end one without its begin" in p for p in problems), problems
  assert any("malformed" in p for p in problems), problems
  assert any("unknown report block 'three'" in p for p in problems), problems
  assert any("never ended" in p for p in problems), problems
  assert marker_problems("P.md", "", known) == [
      "P.md: report block one is missing",
      "P.md: report block two is missing"]
