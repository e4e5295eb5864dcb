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
