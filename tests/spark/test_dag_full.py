"""The full size: the DAG of 100,000 jobs (1,000 chains of 100) of
tests/spark/test_dag.py, enqueued from Spark and worked to the end by the worker
runtime, every job once and in edge order as the command log shows.

It takes minutes of the machine (8m46s on 2 busy cores), so it runs *beside* the rest of
the suite (tests/support/beside.py): a pytest of its own runs test_spark_dag.py with
EVENTQ_DAG_JOBS=100000 from when collection ends, with its own broker, server and Spark,
and this test collects its outcome last. In a run that has this test, test_spark_dag.py's
smaller default size is not run again in the suite itself (``INSTEAD_OF``)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from support import beside
from support.beside import Beside

# the full size; EVENTQ_DAG_FULL_JOBS sets another (a multiple of 100) to try it quickly
FULL_JOBS = int(os.environ.get("EVENTQ_DAG_FULL_JOBS", 100_000))
DAG_TEST = "tests/spark/test_dag.py"
INSTEAD_OF = (DAG_TEST,)  # tests/conftest.py leaves these to this run
BESIDE_ORDER = 2  # last: the heaviest (tests/support/beside.py)
TIMEOUT_S = 3_600  # test_spark_dag.py allows 30 s per 1,000 jobs on a busy machine

pytestmark = [pytest.mark.spark, pytest.mark.kafka, pytest.mark.slow, pytest.mark.beside,
              pytest.mark.timeout(TIMEOUT_S + 120)]


def start_beside(directory: Path) -> Beside:
    return beside.start(directory, [
        "-m", "pytest", "-q", "-s", "-p", "no:cacheprovider", "--basetemp",
        str(directory / "tmp"), DAG_TEST], env={"EVENTQ_DAG_JOBS": str(FULL_JOBS)})


def test_a_dag_of_100000_jobs_from_spark_is_worked_once_each_in_edge_order(request):
    run = beside.started(request)
    status = run.wait(TIMEOUT_S)
    print(run.output_tail(2000))
    assert status == 0, run.output_tail()
    assert f"DAG of {FULL_JOBS:,} jobs" in run.output_tail(100_000), run.output_tail()
