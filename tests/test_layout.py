"""The layout keeps the architecture readable (docs/architecture.md, "Layers"): no module
too long to hold in one's head, no function too long to read at once, and tests where
a newcomer looks for them.

- No module of ``eventq/``, ``streams/`` or ``tools/`` is over ``MAX_MODULE_LINES``.
- No function or method there is over ``MAX_FUNCTION_LINES`` (its ``def`` to its last
  line; decorators excluded).
- ``tests/`` mirrors the packages: each folder of tests but the cross-cutting ones
  (``CROSS_CUTTING``) is named for a package of the code (a module's tests are
  ``test_<module>.py`` or ``test_<module>_<aspect>.py`` in its package's folder; a test
  of a feature across a package's modules is named for the feature).
- ``bench/`` imports nothing of ``tests/``: what benchmarks share with tests is in
  ``tools/``.
"""

from __future__ import annotations

import ast
import functools
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
CODE = ("eventq", "streams", "tools")
MAX_MODULE_LINES = 700
MAX_FUNCTION_LINES = 120
# Folders of tests that are not one package's: whole servers (e2e), the contract of the
# folds (contract), the helpers (support).
CROSS_CUTTING = ("e2e", "contract", "support")


def code_files(root: Path = ROOT) -> list[Path]:
    return sorted(p for package in CODE for p in (root / package).rglob("*.py"))


@functools.cache
def source(path: Path) -> str:
    return path.read_text(encoding="utf-8")


def long_modules(root: Path = ROOT) -> list[str]:
    found = []
    for path in code_files(root):
        lines = len(source(path).splitlines())
        if lines > MAX_MODULE_LINES:
            found.append(f"{path.relative_to(root)}: {lines} lines")
    return found


def long_functions(root: Path = ROOT) -> list[str]:
    found = []
    for path in code_files(root):
        for node in ast.walk(ast.parse(source(path), str(path))):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                lines = (node.end_lineno or node.lineno) - node.lineno + 1
                if lines > MAX_FUNCTION_LINES:
                    found.append(f"{path.relative_to(root)}:{node.lineno} {node.name}: "
                                 f"{lines} lines")
    return found


def package_of_tests(folder: Path, root: Path = ROOT) -> Path:
    """The code package a folder of tests mirrors: tests/streams/faust -> streams/faust,
    tests/tools/faults -> tools/faults, tests/state -> eventq/state."""
    parts = folder.relative_to(root / "tests").parts
    if parts and parts[0] in ("streams", "tools"):
        return root.joinpath(*parts)
    return root.joinpath("eventq", *parts)


def misplaced_tests(root: Path = ROOT) -> list[str]:
    """Folders of tests that mirror no package of the code."""
    found = []
    for folder in sorted(p for p in (root / "tests").rglob("*") if p.is_dir()):
        relative = folder.relative_to(root / "tests")
        if relative.parts[0] in CROSS_CUTTING or "__pycache__" in relative.parts:
            continue
        package = package_of_tests(folder, root)
        if not (package / "__init__.py").exists():
            found.append(f"tests/{relative.as_posix()}: no package {package.relative_to(root)}")
    return found


def bench_imports_of_tests(root: Path = ROOT) -> list[str]:
    helpers = {p.stem for p in (root / "tests").rglob("*.py")} | {"support"}
    found = []
    for path in sorted((root / "bench").glob("*.py")):
        text = path.read_text(encoding="utf-8")
        if '"tests"' in text or "'tests'" in text:
            found.append(f"{path.relative_to(root)}: puts tests/ on sys.path")
        for node in ast.walk(ast.parse(text, str(path))):
            names = ([a.name for a in node.names] if isinstance(node, ast.Import)
                     else [node.module or ""] if isinstance(node, ast.ImportFrom) else [])
            for name in names:
                if name.split(".")[0] in helpers | {"tests"}:
                    found.append(f"{path.relative_to(root)}:{node.lineno} imports {name}")
    return found


def test_no_module_is_over_the_line_limit():
    assert not long_modules(), "split these by concept:\n" + "\n".join(long_modules())


def test_no_function_is_over_the_line_limit():
    assert not long_functions(), "split these into named steps:\n" + "\n".join(long_functions())


def test_tests_mirror_the_packages():
    assert not misplaced_tests(), "\n".join(misplaced_tests())


def test_benchmarks_import_tools_not_tests():
    assert not bench_imports_of_tests(), "\n".join(bench_imports_of_tests())


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    (tmp_path / "eventq" / "state").mkdir(parents=True)
    (tmp_path / "eventq" / "__init__.py").write_text("")
    (tmp_path / "eventq" / "state" / "__init__.py").write_text("")
    (tmp_path / "eventq" / "state" / "waiters.py").write_text("x = 1\n")
    (tmp_path / "streams").mkdir()
    (tmp_path / "tools").mkdir()
    (tmp_path / "tests" / "state").mkdir(parents=True)
    (tmp_path / "tests" / "e2e").mkdir()
    (tmp_path / "bench").mkdir()
    return tmp_path


def test_the_checkers_find_what_they_forbid(tree: Path):
    body = "\n".join(f"    x = {n}" for n in range(MAX_FUNCTION_LINES))
    (tree / "eventq" / "state" / "big.py").write_text(
        "def f():\n" + body + "\n" + "\n" * MAX_MODULE_LINES)
    assert [line.split(":")[0] for line in long_modules(tree)] == ["eventq/state/big.py"]
    assert long_functions(tree) == [f"eventq/state/big.py:1 f: {MAX_FUNCTION_LINES + 1} lines"]
    (tree / "tests" / "nowhere").mkdir()  # a folder for no package
    (tree / "tests" / "e2e" / "whole").mkdir()  # cross-cutting: anything below
    assert misplaced_tests(tree) == ["tests/nowhere: no package eventq/nowhere"]
    (tree / "bench" / "b.py").write_text(
        'import sys\nsys.path.insert(0, "tests")\nfrom support.servers import x\n')
    assert bench_imports_of_tests(tree) == ["bench/b.py: puts tests/ on sys.path",
                                            "bench/b.py:3 imports support.servers"]
