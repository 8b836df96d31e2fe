"""Costly resources shared by the tests that use them, each started for the first of
them and stopped after the last (tests/conftest.py: the three-broker cluster, the three
eventq processes on it, Spark's session). Kept for the whole session instead, an idle
Spark took 16% of a core, and three idle brokers and servers a third of one, from every
test after theirs (CI run 2026-11-27, two xdist workers on two cores)."""

from __future__ import annotations

import pytest


class Shared:
    """A costly resource that starts for the first test that needs it and stops after
    the last test of the run of tests using it (``pytest_runtest_teardown``): the tests
    of one are one xdist group, and sorted together without xdist (``Groups``). A test
    uses it if it asks for it by fixture name, or if its module names it in
    ``SHARED_FIXTURES`` (a module-scoped fixture of its own takes it with ``shared``)."""

    def __init__(self, start, stop) -> None:
        self._start, self._stop = start, stop
        self._value = None

    def get(self):
        if self._value is None:
            self._value = self._start()
        return self._value

    def end(self) -> None:
        value, self._value = self._value, None
        if value is not None:
            self._stop(value)


SHARED_KEY = pytest.StashKey[dict]()  # name: Shared, made by tests/conftest.py
# A user before what it uses; each is a fixture of tests/conftest.py or tests/spark/.
SHARED_STOP_ORDER = ("eventq_cluster", "kafka_cluster", "spark")


def shared(config, name: str):
    return config.stash[SHARED_KEY][name]


def uses(item, name: str) -> bool:
    return name in item.fixturenames or name in getattr(item.module, "SHARED_FIXTURES", ())

