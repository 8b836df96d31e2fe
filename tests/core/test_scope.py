"""Scope on ``depend`` (docs/security.md, "Queue-name prefixes";
docs/workflows.md, "Command types": a depend carries the dependent's scope, the upstream's
processor decides): an upstream whose queue is outside the dependent's scope is absent to
it. Random workflows of two tenants across 2 to 4 simulated partitions, with crashes and
repeated depends (tests/core/test_dag.py's world, its jobs in the tenants' queues, each
dependent added with its tenant's prefix or none): no dependent ever hears of an upstream
outside its scope (its link stays unfinished, it holds no input of it, it is never
released or failed by it), so no dependent holds another tenant's result; and folding each
partition's log again gives the same tables (replay derives the same state)."""

from __future__ import annotations

import dataclasses
import random
import uuid

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from eventq.core import (
    UPSTREAM_FAILED_GROUP,
    Add,
    Complete,
    Depend,
    Job,
    State,
    UpstreamOutcome,
    upstream_failure,
)
from eventq.core.batch import position
from eventq.core.followups import Register
from eventq.core.step import step
from support.dag_world import Dag, World, check_the_fold_of_the_logs, dags, inputs_of

TENANTS = ("acme.", "zed.")


@dataclasses.dataclass(frozen=True)
class Tenancy:
    queue: dict[uuid.UUID, str]  # each job's queue
    scope: dict[uuid.UUID, str | None]  # each job's add's scope


@st.composite
def tenancies(draw, dag: Dag) -> Tenancy:
    queue, scope = {}, {}
    for job_id in dag.fate:
        tenant = draw(st.sampled_from(TENANTS))
        queue[job_id] = tenant + draw(st.sampled_from(["q", "etl"]))
        scope[job_id] = draw(st.sampled_from([tenant, tenant, tenant[:2], None]))
    return Tenancy(queue, scope)


class ScopedWorld(World):
    """The DAG world, each add in its tenant's queue with its scope."""

    def __init__(self, dag: Dag, tenancy: Tenancy, rnd: random.Random) -> None:
        super().__init__(dag, rnd)
        self.tenancy = tenancy

    def actions(self) -> list:
        out = []
        for kind, job_id, command in super().actions():
            if isinstance(command, Add):
                command = dataclasses.replace(command, name=self.tenancy.queue[job_id],
                                              scope=self.tenancy.scope[job_id])
            out.append((kind, job_id, command))
        return out


def outside(tenancy: Tenancy, dependent: uuid.UUID, upstream: uuid.UUID) -> bool:
    scope = tenancy.scope[dependent]
    return scope is not None and not tenancy.queue[upstream].startswith(scope)


def check_nobody_hears_outside_its_scope(world: ScopedWorld) -> None:
    tenancy = world.tenancy
    live: dict[uuid.UUID, Job] = {i: j for p in world.parts for i, j in p.table.jobs.items()}
    inputs = {k for p in world.parts for k in inputs_of(p.table)}
    for job_id, job in live.items():
        assert job.scope == (tenancy.scope[job_id] if job.upstreams else None)
        hidden = [link for link in job.upstreams if outside(tenancy, job_id, link.id)]
        for link in hidden:
            assert link.outcome is UpstreamOutcome.UNFINISHED and link.change is None, (
                job, link)
            assert (job_id, link.id) not in inputs
            assert job.result != upstream_failure(link.id, UpstreamOutcome.FAILED)
        if hidden:
            assert job.released_ms is None, job  # never released: one it waits for is absent
            assert job.state is State.WAITING or job.group == UPSTREAM_FAILED_GROUP, job
    # Every notice in every log is for a dependent inside whose scope the upstream is.
    for part in world.parts:
        for command, _ in part.log:
            if type(command).__name__ == "Upstream":
                assert not outside(tenancy, command.dependent, command.upstream), command


@given(dags(), st.data(), st.randoms(use_true_random=False))
@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_an_upstream_outside_the_scope_never_tells_its_dependent(dag, data, rnd):
    world = ScopedWorld(dag, data.draw(tenancies(dag)), rnd)
    world.run()
    check_nobody_hears_outside_its_scope(world)
    check_the_fold_of_the_logs(world)


T0 = 1_700_000_000_000
UP, DEP = uuid.UUID(int=1 << 64 | 1), uuid.UUID(int=2 << 64 | 1)


def test_a_finished_upstream_outside_the_scope_registers_as_if_unfinished():
    """The depend's outcome is decided by the upstream's processor from the depend's
    scope and the upstream's queue: told at once inside it, registered only outside."""
    job = step(None, Add(UP, "zed.q", 1000, 60_000, b""), T0, position(1)).job
    job = step(job, Complete(UP, b"zed's secret"), T0, position(2)).job
    for scope, told in (("acme.", False), ("zed.", True), ("z", True), (None, True)):
        result = step(job, Depend(UP, DEP, 5, T0 + 60_000, scope), T0 + 1, position(3))
        assert isinstance(result.then, Register)
        assert (result.then.notice is not None) is told, scope
        if told:
            assert result.then.notice.result == b"zed's secret"


def test_a_dependents_scope_is_its_adds_and_its_depends_carry_it():
    result = step(None, Add(DEP, "acme.q", 1000, 60_000, b"", after=(UP,), scope="acme."),
                  T0, position(1))
    assert result.job.scope == "acme."
    assert [f.command.scope for f in result.follow_ups] == ["acme."]
    plain = step(None, Add(DEP, "acme.q", 1000, 60_000, b"", scope="acme."), T0, position(1))
    assert plain.job.scope is None  # a job without upstreams keeps no scope


def test_a_job_outside_the_scope_is_absent_to_every_command_about_it():
    """complete, fail, delete, retry and touch with a scope: -NOT-FOUND for a job whose
    queue is outside it, in any state (before Duplicate result), decided where it is."""
    from eventq.core import Delete, Fail, Retry, StartAttempt, Touch
    from eventq.core.machine import Accepted, Rejected
    from eventq.errors import NotFound

    leased = step(None, Add(UP, "zed.q", 1000, 60_000, b""), T0, position(1)).job
    leased = step(leased, StartAttempt(UP, 1), T0, position(2)).job
    done = step(leased, Complete(UP, b"r"), T0, position(3)).job
    failed = step(leased, Fail(UP, b"x"), T0, position(3)).job
    for job, command in ((leased, Complete(UP, b"r", "acme.")), (done, Complete(UP, b"r", "acme.")),
                         (leased, Fail(UP, b"x", None, "acme.")), (done, Delete(UP, "acme.")),
                         (failed, Retry(UP, 0, "acme.")), (leased, Touch(UP, 1, None, "acme."))):
        outcome = step(job, command, T0 + 1, position(9)).outcome
        assert outcome == Rejected(NotFound()), command
        inside = step(job, dataclasses.replace(command, scope="zed."), T0 + 1, position(9))
        assert inside.outcome != Rejected(NotFound()), command  # as without a scope
        assert inside.outcome == step(job, dataclasses.replace(command, scope=None), T0 + 1,
                                      position(9)).outcome
        assert isinstance(inside.outcome, (Accepted, Rejected))
