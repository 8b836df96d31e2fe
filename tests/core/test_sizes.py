"""No module of the pure core, the protocol or the migration is over 700 lines, and no
function in them over 120 (a function's lines: its ``def`` node's, decorators excluded):
a module that grows past them is split by concept, as the codec and the machine were."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("eventq/core", "eventq/protocol", "eventq/migrate")
MAX_MODULE_LINES = 700
MAX_FUNCTION_LINES = 120
MODULES = sorted(path for package in PACKAGES for path in (ROOT / package).rglob("*.py"))


@pytest.mark.parametrize("path", MODULES, ids=lambda p: p.relative_to(ROOT).as_posix())
def test_module_and_functions_within_their_sizes(path):
    text = path.read_text()
    assert len(text.splitlines()) <= MAX_MODULE_LINES
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            assert node.end_lineno - node.lineno + 1 <= MAX_FUNCTION_LINES, node.name
