"""Layers that point one way (docs/architecture.md, "Layers"): which part of eventq may
import which.

Every module of ``eventq/`` and ``streams/`` is parsed with ``ast`` and every import
in it is checked, at module level or inside a function alike (a lazy import is still
a dependency). The rules:

1. Nothing runs back up: each package has its place in ``LAYERS`` (bottom first) and
   imports only from its own place or below.
2. The pure modules (``PURE``: the domain, the wire format, the indexes, the client's
   calls, Spark's row functions, the dashboard's pages) import no I/O or framework
   (``IO``) and, from eventq, only each other.
3. ``streams`` (the fold) and ``eventq.gateway`` (the protocol server) never import
   each other; only the wiring (``WIRING``, ``eventq.run``) imports both.
4. ``streams`` outside ``streams.faust`` imports no faust, mode or aiokafka: the code
   that touches those frameworks lives in ``streams.faust`` (and the wiring that
   starts them).
5. Nothing of the live server (``LIVE_SERVER``) imports ``eventq.spark`` (pyspark and
   the batch jobs).
6. No module of ``eventq.gateway`` imports another in a cycle (directly or through
   others): the wiring builds its parts and hands them to each other.
7. The lease protocol (``eventq.gateway.leasing``) imports neither side that uses it
   (``LEASE_USERS``: this process's answers, the cluster's, the dispatch).

A broken rule fails naming the module, the line and the import.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("eventq", "streams")

# Bottom first. A module may import its own place's modules and those below it.
LAYERS = (
    ("eventq", "eventq.errors", "eventq.limits", "eventq.address", "eventq.console"),
    ("eventq.core", "eventq.protocol", "eventq.cmdlog"),
    ("eventq.kafka", "eventq.state"),
    ("eventq.settings",),
    ("eventq.gateway", "streams", "eventq.client", "eventq.worker", "eventq.spark",
     "eventq.migrate"),
    ("eventq.observe",),  # the dashboard reads through the gateway, the metrics the processor
    ("eventq.run",),
    ("eventq.cli",),
)
PURE = (
    "eventq.errors", "eventq.limits", "eventq.address", "eventq.core", "eventq.protocol",
    "eventq.state.indexes", "eventq.client.calls", "eventq.client.models",
    "eventq.client.errors", "eventq.spark.rows", "eventq.spark.ids", "eventq.observe.pages",
    "eventq.state.livestats",
    "eventq.spark.arrow", "eventq.spark.enqueue_rows", "eventq.spark.state_rows",
)
IO = (
    "asyncio", "socket", "selectors", "select", "ssl", "subprocess", "threading",
    "multiprocessing", "os", "http", "urllib.request", "uvloop", "faust", "mode", "aiokafka",
    "kafka", "confluent_kafka", "pyspark", "rocksdict",
)  # fmt: skip
FRAMEWORKS = ("faust", "mode", "aiokafka")
FRAMEWORK_GLUE = "streams.faust"
WIRING = ("eventq.run",)  # builds the processors (streams) and the gateway together
LIVE_SERVER = ("eventq.run.serve", "eventq.observe", "eventq.gateway", "eventq.state",
               "streams")
LEASING = "eventq.gateway.leasing"
LEASE_USERS = ("eventq.gateway.handlers", "eventq.gateway.cluster_answers",
               "eventq.gateway.dispatch")


def layer_of(module: str) -> int | None:
    """The place of a module in ``LAYERS`` (the longest prefix that names it)."""
    best, place = -1, None
    for index, names in enumerate(LAYERS):
        for name in names:
            if is_under(module, name) and len(name) > best:
                best, place = len(name), index
    return place


@dataclass(frozen=True)
class Import:
    module: str  # the importing module
    path: str  # its file, relative to the repository
    line: int
    target: str  # the module imported (for ``from m import n``: m.n if n is a module)

    def __str__(self) -> str:
        return f"{self.module} ({self.path}:{self.line}) imports {self.target}"


def module_files(root: Path = ROOT) -> dict[str, Path]:
    """Dotted module name -> file, for every module of ``PACKAGES``."""
    found = {}
    for package in PACKAGES:
        for path in sorted((root / package).rglob("*.py")):
            parts = list(path.relative_to(root).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            found[".".join(parts)] = path
    return found


def is_under(name: str, prefixes) -> bool:
    if isinstance(prefixes, str):
        prefixes = (prefixes,)
    return any(name == p or name.startswith(p + ".") for p in prefixes)


def imports_of(module: str, path: Path, known: set[str], root: Path = ROOT) -> list[Import]:
    """Every import of a module, wherever it is in the file (each module once a line)."""
    is_package = path.name == "__init__.py"
    shown = str(path.relative_to(root))
    found: dict[tuple[int, str], Import] = {}
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Import):
            for alias in node.names:
                found[node.lineno, alias.name] = Import(module, shown, node.lineno, alias.name)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:  # relative: from the importing module's package
                package = module.split(".")
                if not is_package:
                    package.pop()
                package = package[: len(package) - (node.level - 1)]
                base = ".".join(package + ([base] if base else []))
            for alias in node.names:
                submodule = f"{base}.{alias.name}"
                target = submodule if submodule in known else base
                found[node.lineno, target] = Import(module, shown, node.lineno, target)
    return list(found.values())


def all_imports(root: Path = ROOT) -> list[Import]:
    files = module_files(root)
    known = set(files)
    return [i for module, path in files.items() for i in imports_of(module, path, known, root)]


def reaches(imports: list[Import], start: str, goal: str) -> bool:
    """Whether ``start`` imports ``goal``, directly or through other modules."""
    targets: dict[str, set[str]] = {}
    for i in imports:
        targets.setdefault(i.module, set()).add(i.target)
    seen, stack = {start}, [start]
    while stack:
        for target in targets.get(stack.pop(), ()):
            if target == goal:
                return True
            if target not in seen:
                seen.add(target)
                stack.append(target)
    return False


def import_cycles(imports: list[Import], within: str) -> list[Import]:
    """The imports among the modules under ``within`` that close a cycle: the target
    imports the importing module back, directly or not."""
    inside = [i for i in imports if is_under(i.module, within) and is_under(i.target, within)]
    return [i for i in inside if i.target == i.module or reaches(inside, i.target, i.module)]


def broken_rules(imports: list[Import]) -> list[str]:
    """One line per import that breaks a rule (empty: every rule holds)."""
    broken = []

    def breaks(rule: str, which) -> None:
        broken.extend(f"{i}: {rule}" for i in imports if which(i))

    def runs_back_up(i: Import) -> bool:
        here, there = layer_of(i.module), layer_of(i.target)
        return here is not None and there is not None and there > here

    breaks("nothing runs back up: a layer imports only its own place in LAYERS or below",
           runs_back_up)
    breaks(
        "the pure modules (" + ", ".join(PURE) + ") import no I/O or framework",
        lambda i: is_under(i.module, PURE) and is_under(i.target, IO),
    )
    breaks(
        "the pure modules import, from eventq, only each other",
        lambda i: is_under(i.module, PURE) and is_under(i.target, PACKAGES)
        and not is_under(i.target, PURE) and i.target != "eventq",
    )
    breaks(
        "streams (the fold) never imports eventq.gateway (the protocol server)",
        lambda i: is_under(i.module, "streams") and is_under(i.target, "eventq.gateway"),
    )
    breaks(
        "eventq.gateway never imports streams",
        lambda i: is_under(i.module, "eventq.gateway") and is_under(i.target, "streams"),
    )
    breaks(
        "nothing in eventq imports streams but the wiring (" + ", ".join(WIRING) + ")",
        lambda i: is_under(i.module, "eventq") and is_under(i.target, "streams")
        and not is_under(i.module, WIRING),
    )
    breaks(
        f"streams outside {FRAMEWORK_GLUE} imports no " + ", ".join(FRAMEWORKS),
        lambda i: is_under(i.module, "streams") and not is_under(i.module, FRAMEWORK_GLUE)
        and is_under(i.target, FRAMEWORKS),
    )
    breaks(
        "the live server (" + ", ".join(LIVE_SERVER) + ") never imports eventq.spark",
        lambda i: is_under(i.module, LIVE_SERVER) and is_under(i.target, "eventq.spark"),
    )
    broken.extend(
        f"{i}: no module of eventq.gateway imports another in a cycle ({i.target} imports "
        f"{i.module} back)"
        for i in import_cycles(imports, "eventq.gateway")
    )
    breaks(
        f"the lease protocol ({LEASING}) imports neither side that uses it ("
        + ", ".join(LEASE_USERS) + ")",
        lambda i: i.module == LEASING and is_under(i.target, LEASE_USERS),
    )
    return broken


def test_every_layer_imports_only_what_its_rules_allow():
    broken = broken_rules(all_imports())
    assert not broken, "imports that break the layering rules:\n  " + "\n  ".join(broken)


def test_the_wiring_exists_and_wires_both_layers():
    """The rules name real modules and packages, every package has its place, and the
    wiring is where the two layers meet."""
    files = module_files()
    for name in (*PURE, *LIVE_SERVER, *(n for names in LAYERS for n in names),
                 "eventq.gateway", "eventq.spark", FRAMEWORK_GLUE, LEASING, *LEASE_USERS):
        assert name in files, f"the rules name {name}, which is not a module"
    unplaced = sorted(m for m in files if layer_of(m) is None)
    assert not unplaced, f"modules with no place in LAYERS: {unplaced}"
    targets = {i.target for i in all_imports() if is_under(i.module, WIRING)}
    assert any(is_under(t, "streams") for t in targets)
    assert any(is_under(t, "eventq.gateway") for t in targets)


@pytest.mark.parametrize(
    ("module", "source", "expected"),
    [
        ("eventq.core.fake", "def f():\n    import asyncio\n", "import no I/O"),
        ("eventq.protocol.fake", "from eventq.gateway import handlers\n",
         "only each other"),
        ("eventq.state.indexes.fake", "import socket\n", "import no I/O"),
        ("streams.fake", "from eventq.gateway.cluster import Cluster\n",
         "never imports eventq.gateway"),
        ("eventq.gateway.fake", "def f():\n    from streams import store\n",
         "eventq.gateway never imports streams"),
        ("eventq.observe.fake", "from streams.store import slims_of\n", "but the wiring"),
        ("streams.fake", "from faust.types import TP\n", "imports no faust"),
        ("streams.fake", "import aiokafka.structs\n", "imports no faust"),
        ("eventq.observe.fake", "from ..spark.rows import JobFold\n",
         "never imports eventq.spark"),
        ("streams.fake", "from eventq.run import serve\n", "nothing runs back up"),
        ("eventq.settings", "from eventq.run.localkafka import broker\n",
         "nothing runs back up"),
        ("eventq.core.fake", "from eventq.kafka import topics\n", "nothing runs back up"),
        ("eventq.gateway.leasing", "def f():\n    from .cluster_answers import ClusterAnswers\n",
         "the lease protocol (eventq.gateway.leasing) imports neither"),
    ],
)
def test_a_broken_rule_names_the_module_and_its_import(tmp_path, module, source, expected):
    """The checker itself: a module that breaks a rule (in a function, relatively,
    as ``from package import module``) is reported by name and line."""
    known = set(module_files()) | {"eventq.run.serve", "streams.store", "eventq.spark.rows"}
    path = tmp_path / (module.replace(".", "/") + ".py")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(source)
    broken = broken_rules(imports_of(module, path, known, tmp_path))
    assert any(expected in line for line in broken), broken
    assert all(line.startswith(f"{module} ({path.relative_to(tmp_path)}") for line in broken)


def test_gateway_modules_that_import_each_other_are_a_cycle(tmp_path):
    """Two gateway modules importing each other, one of them inside a function (as
    handlers.py and everywhere.py did), break rule 8 at both imports; a third that
    imports one of them without being imported back does not."""
    gateway = tmp_path / "eventq" / "gateway"
    gateway.mkdir(parents=True)
    (gateway / "__init__.py").write_text("")
    (gateway / "first.py").write_text("from eventq.gateway.second import Second\n")
    (gateway / "second.py").write_text("def f():\n    from eventq.gateway import first\n")
    (gateway / "third.py").write_text("from eventq.gateway import first, second\n")
    broken = broken_rules(all_imports(tmp_path))
    assert sorted(line.split(" ")[0] for line in broken) == [
        "eventq.gateway.first", "eventq.gateway.second"], broken
    assert all("in a cycle" in line for line in broken)
