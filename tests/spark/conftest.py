"""Fixtures of the Spark tests: one local SparkSession for all of them.

Starting Spark takes seconds, so the session is shared by every module of tests/spark
(they run one after the other; the session stops when the test session ends). The
Kafka connector must be in kafka/lib/spark (`make deps`); without it these tests fail
and say so. Without the spark extra (pyspark, pandas, pyarrow) they are not collected.
"""

from __future__ import annotations

import pytest

try:
    import pandas  # noqa: F401
    import pyarrow  # noqa: F401
    import pyspark  # noqa: F401
except ImportError:  # pip install -e '.[spark]' (make deps does)
    collect_ignore_glob = ["test_*.py"]


@pytest.fixture(scope="session")
def spark():
    from eventq.spark.session import SparkOptions, spark_session

    session, created = spark_session(SparkOptions(app_name="eventq-tests"))
    yield session
    if created:
        session.stop()
