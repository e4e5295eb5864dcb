"""The import direction the layout promises: runners -> task packages ->
core -> modeling / tokenization, where serving builds on the task packages
it serves, read from the source; and that the scripts keep TensorFlow from
importing Keras 3."""

import ast
import os
import subprocess
import sys

import pytest

from tests.conftest import REPO_ROOT

LIBRARY = os.path.join(REPO_ROOT, "runner_lib")
TASK_PACKAGES = sorted(
    name for name in os.listdir(LIBRARY)
    if name != "core" and os.path.isfile(os.path.join(LIBRARY, name,
                                                      "__init__.py")))


def imported_modules(path):
  """Dotted names a Python file imports (from-imports as package.name)."""
  with open(path) as f:
    tree = ast.parse(f.read(), path)
  names = set()
  for node in ast.walk(tree):
    if isinstance(node, ast.Import):
      names.update(alias.name for alias in node.names)
    elif isinstance(node, ast.ImportFrom) and node.module:
      names.update("%s.%s" % (node.module, alias.name)
                   for alias in node.names)
  return names


def modules_of(package_dir):
  for root, _, files in os.walk(package_dir):
    for name in files:
      if name.endswith(".py"):
        yield os.path.join(root, name)


def test_the_packages_are_there():
  assert TASK_PACKAGES == ["classifier", "extraction", "ner", "pretraining",
                           "serving", "squad", "swag"]


def test_core_imports_no_task_package():
  for path in modules_of(os.path.join(LIBRARY, "core")):
    for name in imported_modules(path):
      assert not any(name.startswith("runner_lib." + package)
                     for package in TASK_PACKAGES), (path, name)


CORE = os.path.join(LIBRARY, "core")
# core's rooms in import order (runner_lib/core/__init__.py): a module
# imports core's top-level modules, its own room and the rooms before it;
# a top-level module imports no room.
CORE_ROOMS = ["files", "inputs", "training", "cli"]


def core_room(name):
  """The room a dotted name imported from core is in; None for core's
  top-level modules and for names outside core."""
  parts = name.split(".")
  if parts[:2] == ["runner_lib", "core"] and len(parts) > 2 and (
      parts[2] in CORE_ROOMS):
    return parts[2]
  return None


def test_core_is_a_few_rooms():
  entries = sorted(name for name in os.listdir(CORE)
                   if name != "__pycache__")
  assert len(entries) <= 8, entries
  assert sorted(name for name in entries if os.path.isdir(
      os.path.join(CORE, name))) == sorted(CORE_ROOMS)


def test_core_rooms_import_only_the_rooms_before_them():
  for path in modules_of(CORE):
    room = os.path.relpath(path, CORE).split(os.sep)[0]
    allowed = (CORE_ROOMS[:CORE_ROOMS.index(room) + 1]
               if room in CORE_ROOMS else [])
    for name in imported_modules(path):
      assert core_room(name) in allowed + [None], (path, name)


@pytest.mark.parametrize(
    "package", [p for p in TASK_PACKAGES if p != "serving"])
def test_task_packages_import_no_other_task_package(package):
  # Serving among the others too: nothing it serves imports it.
  others = [p for p in TASK_PACKAGES if p != package]
  for path in modules_of(os.path.join(LIBRARY, package)):
    for name in imported_modules(path):
      assert not any(name.startswith("runner_lib." + other)
                     for other in others), (path, name)


def test_serving_builds_on_the_task_packages():
  # The one exception: a serving module takes its task's rules from the
  # task package (SQuAD's windows and n-best search are squad/graph.py's,
  # beside the Python they mirror). It imports no runner: the runner
  # export_saved_model.py imports it.
  runners = {name[:-3] for name in os.listdir(REPO_ROOT)
             if name.endswith(".py")}
  serving = os.path.join(LIBRARY, "serving")
  for path in modules_of(serving):
    for name in imported_modules(path):
      assert name.split(".")[0] not in runners, (path, name)
  assert "runner_lib.squad.graph" in imported_modules(
      os.path.join(serving, "squad.py"))


@pytest.mark.parametrize("package", ["modeling", "tokenization"])
def test_model_and_tokenizer_know_no_runner(package):
  for path in modules_of(os.path.join(REPO_ROOT, package)):
    names = imported_modules(path)
    assert not any(n.startswith("runner_lib") for n in names), path
    assert "absl.flags" not in names, path
  assert not any(n.startswith("modeling") for path in modules_of(
      os.path.join(REPO_ROOT, "tokenization"))
                 for n in imported_modules(path))


def project_modules():
  """The project's Python files: the library, the runners and the demo."""
  for package in ("modeling", "tokenization", "runner_lib", "demo"):
    yield from modules_of(os.path.join(REPO_ROOT, package))
  for name in sorted(os.listdir(REPO_ROOT)):
    if name.endswith(".py"):
      yield os.path.join(REPO_ROOT, name)


def keras_3_uses(path):
  """Where a file imports Keras 3 or reads tf.keras, as line numbers."""
  with open(path) as f:
    tree = ast.parse(f.read(), path)
  lines = []
  for node in ast.walk(tree):
    if isinstance(node, ast.Import):
      names = [alias.name for alias in node.names]
    elif isinstance(node, ast.ImportFrom):
      names = ["%s.%s" % (node.module, alias.name) for alias in node.names]
    elif (isinstance(node, ast.Attribute) and node.attr == "keras" and
          isinstance(node.value, ast.Name) and
          node.value.id in ("tf", "tensorflow")):
      names = ["tf.keras"]
    else:
      continue
    if any(n == "keras" or n.startswith(("keras.", "tensorflow.keras")) or
           n == "tf.keras" for n in names):
      lines.append(node.lineno)
  return lines


def test_no_module_uses_keras_3():
  # Keras here is tf_keras (shared/DESIGN.md); tf.keras is Keras 3. The
  # tests' processes run with TF_USE_LEGACY_KERAS=1 (conftest.py), where
  # tf.keras would be tf_keras: a use would pass there and fail for users.
  uses = {os.path.relpath(path, REPO_ROOT): lines
          for path in project_modules() for lines in [keras_3_uses(path)]
          if lines}
  assert not uses, uses


ROOT_SCRIPTS = sorted(name for name in os.listdir(REPO_ROOT)
                      if name.endswith(".py"))


def sets_legacy_keras_first(path):
  """Whether the script's first statement after its docstring and standard
  library imports is `if __name__ == "__main__":` setting
  TF_USE_LEGACY_KERAS (before anything can import TensorFlow)."""
  with open(path) as f:
    body = ast.parse(f.read(), path).body[1:]
  while body and isinstance(body[0], ast.Import) and all(
      alias.name in ("os", "random", "time") for alias in body[0].names):
    body = body[1:]
  if not body or not isinstance(body[0], ast.If):
    return False
  test = ast.unparse(body[0].test).replace("'", '"')
  return (test == '__name__ == "__main__"' and
          "TF_USE_LEGACY_KERAS" in ast.unparse(body[0]))


def test_scripts_keep_tensorflow_from_importing_keras_3():
  # Every script (docs/contributing.md, Keras), read from the source; one
  # run as a script, and imported as a module.
  assert len(ROOT_SCRIPTS) == 10
  assert not [name for name in ROOT_SCRIPTS if not sets_legacy_keras_first(
      os.path.join(REPO_ROOT, name))]
  environment = {k: v for k, v in os.environ.items()
                 if k != "TF_USE_LEGACY_KERAS"}
  probe = ("import runpy, sys\n"
           "script, run_name = sys.argv[1:]\n"
           "sys.argv = [script, '--helpshort']\n"
           "try:\n"
           "  runpy.run_path(script, run_name=run_name)\n"
           "except SystemExit:\n"
           "  pass\n"
           "import os\n"
           "print('keras' in sys.modules, 'tf_keras' in sys.modules,\n"
           "      os.environ.get('TF_USE_LEGACY_KERAS'))\n")
  for run_name, want in (("__main__", "False True 1"),
                         ("run_classifier", "True True None")):
    completed = subprocess.run(
        [sys.executable, "-c", probe, "run_classifier.py", run_name],
        cwd=REPO_ROOT, env=environment, capture_output=True, text=True,
        check=True)
    assert completed.stdout.split("\n")[-2] == want, completed.stdout


def test_one_writer_of_eval_results():
  # Every runner writes eval_results.txt through runner.write_eval_results
  # (global_step added, the chief only), from its task's eval_results hook.
  writers = []
  for path in list(project_modules()):
    with open(path) as f:
      if "fileio.write_eval_results(" in f.read():
        writers.append(os.path.relpath(path, REPO_ROOT))
  assert writers == [os.path.join("runner_lib", "core", "cli", "runner.py")]
  for name in ROOT_SCRIPTS:
    if name.startswith("run_"):
      with open(os.path.join(REPO_ROOT, name)) as f:
        text = f.read()
      assert "task.eval_results(" in text, name
      assert "runner.write_eval_results(" in text, name
