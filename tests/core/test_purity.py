"""The core is pure: no I/O, no clocks, no frameworks (docs/architecture.md, "The core")."""

from __future__ import annotations

import ast
import pathlib

import pytest

import eventq.core

FORBIDDEN = {"asyncio", "socket", "time", "datetime", "threading", "random", "os",
             "kafka", "aiokafka", "confluent_kafka", "faust", "mode", "pyspark"}  # fmt: skip
CORE_DIR = pathlib.Path(eventq.core.__file__).parent
CORE_FILES = sorted(CORE_DIR.rglob("*.py"))  # the codec package's too


@pytest.mark.parametrize("path", CORE_FILES, ids=lambda p: p.relative_to(CORE_DIR).as_posix())
def test_core_module_imports_nothing_impure(path):
    tree = ast.parse(path.read_text())
    imported = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            imported |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            imported.add(node.module.split(".")[0])
    assert not imported & FORBIDDEN


def test_public_api_is_exported():
    for name in eventq.core.__all__:
        assert hasattr(eventq.core, name), name
