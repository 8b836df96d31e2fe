"""Workflows across partitions, end to end in the pure core: random DAGs folded in
simulated partitions with crashes, against a reference model written apart from it
(the world and the model: tests/support/dag_world.py)."""

from __future__ import annotations

import random
import uuid

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from eventq.core import Accepted, Input, State, UpstreamOutcome, input_key, upstream_failure
from eventq.core.batch import position
from eventq.core.step import step
from support.dag_world import (
    LONG_TTL,
    Dag,
    Table,
    World,
    apply_command,
    check_against_the_reference,
    check_the_fold_of_the_logs,
    dags,
    fail_result_of,
    inputs_of,
    result_of,
)


@given(dags(), st.randoms(use_true_random=False))
@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_workflows_across_partitions_end_as_the_reference_says(dag, rnd):
    world = World(dag, rnd)
    world.run()
    check_against_the_reference(world)
    check_the_fold_of_the_logs(world)


def test_a_diamond_with_a_failing_side_and_crashes():
    """One fixed run, to read: a -> (b, c) -> d, c fails; d fails naming c."""
    a, b, c, d = (uuid.UUID(int=n << 64 | 1) for n in range(1, 5))
    dag = Dag(
        (a, b, c, d), {a: (), b: (a,), c: (a,), d: (b, c)},
        {a: "complete", b: "complete", c: "fail", d: "complete"}, dict.fromkeys((a, b, c, d), LONG_TTL),
        3,
    )  # fmt: skip
    for seed in range(20):
        world = World(dag, random.Random(seed))
        world.run()
        check_against_the_reference(world)
        check_the_fold_of_the_logs(world)
        job_d = world.job(d)
        assert job_d.state is State.FAILED and job_d.result == upstream_failure(c, UpstreamOutcome.FAILED)
        assert inputs_of(world.part_of(d).table)[d, b] == Input(True, result_of(b))
        assert inputs_of(world.part_of(d).table)[d, c] == Input(False, fail_result_of(c))
        assert input_key(d, c) in world.part_of(d).table.side


def test_a_chain_behind_a_retried_job_comes_back_and_runs():
    """One fixed run, to read: a -> b -> c, a fails and is retried (docs/workflows.md,
    "retry"): b and c, failed in ``upstream-failed`` because of it, come back WAITING (a
    notice each, down the chain) and run once a completes; nothing ends FAILED."""
    a, b, c = (uuid.UUID(int=n << 64 | 7) for n in range(1, 4))
    dag = Dag(
        (a, b, c), {a: (), b: (a,), c: (b,)}, {a: "fail-retry", b: "complete", c: "complete"},
        dict.fromkeys((a, b, c), LONG_TTL), 2,
    )  # fmt: skip
    cascades = 0
    for seed in range(30):
        world = World(dag, random.Random(seed))
        world.run()
        check_against_the_reference(world)
        check_the_fold_of_the_logs(world)
        assert all(world.job(j).state is State.COMPLETED for j in (a, b, c))
        assert world.job(a).result == result_of(a) and world.job(a).attempts == 1
        for part in world.parts:  # the dependents a retry brought back from FAILED
            table = Table()
            for index, (command, at_ms) in enumerate(part.log):
                result = step(table.jobs.get(command.job_id), command, at_ms, position(index))
                apply_command(table, command, at_ms, position(index))
                if isinstance(result.outcome, Accepted) and type(
                    result.outcome.event).__name__ == "UpstreamRetried":
                    cascades += 1
    assert cascades >= 10  # b, and c behind it, failed and came back in most runs
