"""Jobs built by hand for the tests of the index and the lease path (importable because
pytest puts tests/ on sys.path): ``job()`` is a valid ``Job`` in the given state, made
at ``NOW`` unless told otherwise."""

from __future__ import annotations

import uuid

from eventq.core import Job, State

NOW = 1_800_000_000_000


def job(name="q", priority=0, created=NOW, scheduled=None, state=State.NEW, attempts=0,
        version=1, lease_deadline=None, ttl=60_000, job_id=None, tags=()) -> Job:
    start = scheduled if scheduled is not None else created
    final = state in (State.COMPLETED, State.FAILED)
    return Job(
        id=job_id or uuid.uuid4(), name=name, ttr_ms=1000, ttl_ms=ttl, payload=b"",
        priority=priority, max_attempts=0, max_fails=0, attempts=attempts, fails=0,
        state=state, created_ms=created, scheduled_ms=scheduled,
        expires_ms=start + ttl, lease_deadline_ms=lease_deadline,
        result=b"" if final else None, result_ok=(state is State.COMPLETED) if final else None,
        version=version, tags=tags,
    )
