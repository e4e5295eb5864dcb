"""The import direction the layout promises: runners -> task packages ->
core -> modeling / tokenization. Read from the source, not run."""

import ast
import os

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


@pytest.mark.parametrize("package", TASK_PACKAGES)
def test_task_packages_import_no_other_task_package(package):
  others = [p for p in TASK_PACKAGES if p != package]
  for path in modules_of(os.path.join(LIBRARY, package)):
    for name in imported_modules(path):
      assert not any(name.startswith("runner_lib." + other)
                     for other in others), (path, name)


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
