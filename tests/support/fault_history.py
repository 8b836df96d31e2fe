"""Small histories for the fault checker's tests (tools/faults/checker.py): one method
per op kind, with times given as (invoke, return)."""

from __future__ import annotations

from tools.faults.checker import violations_text
from tools.faults.history import FAIL, NEW, OK, Args, BulkJob, Op, ReadBack, Reply

CONNECTION_LOST = "ConnectionResetError: reset by peer"
NOT_WRITTEN = ("-SERVER-ERROR the {} was not written: Kafka did not take it within 5s; "
               "nothing happened, retrying is safe")
MAY_TAKE_EFFECT = ("-SERVER-ERROR the {} was sent but Kafka did not acknowledge it within "
                   "5s: it may still take effect; check with `inspect job x` before retrying")
TTL_MS = 3_600_000


def payload_of(job: str) -> bytes:
    return f"payload of {job}".encode()


class History:
    """Builds small histories: one method per op kind, times given as (invoke, return);
    a return of None means no answer. Outcomes default to what the reply says."""

    def __init__(self) -> None:
        self.ops: list[Op] = []

    def op(self, kind, job, t, outcome, args=Args(), reply=Reply()) -> Op:
        invoke, returned = t
        op = Op(len(self.ops), 0, 0, kind, job, args, invoke, returned, outcome, reply)
        self.ops.append(op)
        return op

    def add(self, job, t, outcome=OK, queue="q", ttr=1000, ttl=TTL_MS, kind="add",
            max_fails=None, after=()) -> Op:
        args = Args(queues=(queue,), ttr_ms=ttr, ttl_ms=ttl, payload=payload_of(job),
                    max_fails=max_fails, after=tuple(after))
        return self.op(kind, job, t, outcome, args, _error_for(outcome))

    def bulk(self, jobs, t, outcome=OK, queue="q", ttr=1000, ttl=TTL_MS) -> Op:
        args = Args(jobs=tuple(BulkJob(j, queue, ttr, ttl, payload_of(j)) for j in jobs))
        return self.op("bulk", None, t, outcome, args, _error_for(outcome))

    def run(self, job, t, outcome=OK, result=(True, b"done"), queue="q", ttr=1000) -> Op:
        args = Args(queues=(queue,), ttr_ms=ttr, payload=payload_of(job), wait_ms=2000)
        reply = Reply(job_id=job, success=result[0], data=result[1]) if outcome == OK \
            else _error_for(outcome, "-TIMEOUT")
        return self.op("run", job, t, outcome, args, reply)

    def lease(self, job, t, outcome=OK, queues=("q",), ttr=1000, payload=None,
              error="-TIMEOUT") -> Op:
        args = Args(queues=queues, wait_ms=500)
        if outcome != OK:
            return self.op("lease", None, t, outcome, args, _error_for(outcome, error))
        name = queues[0]
        reply = Reply(job_id=job, name=name, ttr_ms=ttr,
                      payload=payload_of(job) if payload is None else payload)
        return self.op("lease", job, t, OK, args, reply)

    def complete(self, job, t, outcome=OK, result=b"done") -> Op:
        return self.op("complete", job, t, outcome, Args(result=result), _error_for(outcome))

    def fail(self, job, t, outcome=OK, result=b"failed", group=None) -> Op:
        return self.op("fail", job, t, outcome, Args(result=result, group=group),
                       _error_for(outcome))

    def delete(self, job, t, outcome=OK) -> Op:
        return self.op("delete", job, t, outcome, Args(), _error_for(outcome))

    def touch(self, job, t, outcome=OK) -> Op:
        return self.op("touch", job, t, outcome, Args(), _error_for(outcome))

    def result(self, job, t, answer, outcome=OK) -> Op:
        reply = Reply(job_id=job, success=answer[0], data=answer[1]) if outcome == OK \
            else _error_for(outcome)
        return self.op("result", job, t, outcome, Args(wait_ms=0), reply)

    def inspect(self, job, t, outcome=OK, **numbers) -> Op:
        fields = tuple((k, str(v).encode()) for k, v in numbers.items())
        reply = Reply(fields=fields) if outcome == OK else _error_for(outcome)
        return self.op("inspect", job, t, outcome, Args(), reply)

    def retry(self, job, t, outcome=OK, delay_ms=None) -> Op:
        reply = _error_for(outcome) if outcome != FAIL else Reply(error="-NOT-FOUND")
        return self.op("retry", job, t, outcome, Args(delay_ms=delay_ms), reply)

    def retry_group(self, group, t, outcome=OK, retried=1, count=5) -> Op:
        reply = Reply(fields=(("retried", str(retried).encode()),)) if outcome == OK \
            else _error_for(outcome)
        return self.op("retry-group", None, t, outcome, Args(group=group, count=count), reply)

    def not_found(self, kind, job, t) -> Op:
        args = Args(result=b"r") if kind in ("complete", "fail") else Args()
        return self.op(kind, job, t, FAIL, args, Reply(error="-NOT-FOUND"))


def _error_for(outcome, fail_line=NOT_WRITTEN.format("command")) -> Reply:
    """A definite failure says nothing was written unless told otherwise (a -NOT-FOUND
    is a read of its own: see History.not_found)."""
    if outcome == OK:
        return Reply()
    return Reply(error=fail_line if outcome == FAIL else CONNECTION_LOST)


def found(job, at=100.0, state=NEW, attempts=0, fails=0, result=None) -> ReadBack:
    fields = (("name", b"q"), ("attempts", str(attempts).encode()),
              ("fails", str(fails).encode()), ("state", str(state).encode()))
    if result is None:
        return ReadBack(job, "found", at, fields)
    return ReadBack(job, "found", at, fields, result[0], result[1])


def not_found(job, at=100.0) -> ReadBack:
    return ReadBack(job, "not-found", at)


def kinds_of(violations) -> list[str]:
    return [v.kind for v in violations]


def only(violations, kind):
    """The one violation there is, which must be of ``kind``."""
    assert kinds_of(violations) == [kind], violations_text(violations)
    return violations[0]


