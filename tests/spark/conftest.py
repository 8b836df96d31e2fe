"""Fixtures of the Spark tests: one local SparkSession for all of them.

Starting Spark takes seconds, so the session is shared by every module of tests/spark
(they run one after the other, and the session stops after the last: tests/support/shared.py). The
Kafka connector must be in kafka/lib/spark (`make deps`); without it these tests fail
and say so. Without the spark extra (pyspark, pandas, pyarrow) they are not collected.
"""

from __future__ import annotations

import pytest

from support.shared import shared

try:
    import pandas  # noqa: F401
    import pyarrow  # noqa: F401
    import pyspark  # noqa: F401
except ImportError:  # pip install -e '.[spark]' (make deps does)
    collect_ignore_glob = ["test_*.py"]


@pytest.fixture
def spark(request):
    session, _created = shared(request.config, "spark").get()
    return session
