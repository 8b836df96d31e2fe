"""The job a handler gets: the leased ``Job`` and, when its queue's handler declared
``inputs=True``, its inputs (docs/workflows.md, "Inputs"): the results of its -after
upstreams, in -after order.

Fetching them is one more request per job, so a worker makes it only for the queues
that ask (``Worker.handler(queue, inputs=True)``, ``add_handler`` and ``add_program``
alike, ``eventq worker --inputs``). A handler that reads ``job.inputs`` without having
asked gets ``InputsNotDeclared`` saying so, never an empty tuple that would read as a
job without upstreams. The client's ``Job`` stays what a lease returns: this is the
worker's.
"""

from __future__ import annotations

from dataclasses import dataclass

from eventq.client.models import Job, Result


class InputsNotDeclared(RuntimeError):
    """``job.inputs`` of a job whose handler did not ask for its inputs."""


@dataclass(frozen=True, slots=True)
class WorkerJob(Job):
    """A ``Job`` as a worker hands it to its handler: ``payload``, ``text``, ``json()``
    as before, and ``inputs``. ``fetched_inputs`` is None when the handler did not ask
    for them (a field, so the job pickles whole into a process pool)."""

    fetched_inputs: tuple[Result, ...] | None = None

    @classmethod
    def of(cls, job: Job, inputs: tuple[Result, ...] | None) -> WorkerJob:
        return cls(job.id, job.name, job.ttr_ms, job.payload, inputs)

    @property
    def inputs(self) -> tuple[Result, ...]:
        """Each finished upstream's ``Result`` in -after order (``id`` the upstream's,
        ``ok`` True for completed, ``data`` its result); ``()`` for a job without
        upstreams. A leased job's upstreams have all completed (docs/workflows.md, "Inputs")."""
        if self.fetched_inputs is None:
            raise InputsNotDeclared(
                f"job.inputs: the worker did not fetch the inputs of this job of queue "
                f"{self.name!r}; declare them on its handler with inputs=True "
                f"(@worker.handler({self.name!r}, inputs=True), add_handler(..., "
                f"inputs=True), add_program(..., inputs=True) or eventq worker --inputs)")
        return self.fetched_inputs
