"""Workers: ``Worker`` runs Python callables or external programs for jobs of named
queues, keeping their leases alive with ``touch`` (see eventq/worker/runtime.py). A
handler gets a ``WorkerJob``: the leased job and, when its queue's handler declared
``inputs=True``, its upstreams' results as ``job.inputs`` (eventq/worker/job.py).
``eventq worker`` is its command line."""

from eventq.worker.job import InputsNotDeclared, WorkerJob
from eventq.worker.program import JobFailed, Program
from eventq.worker.runtime import Worker

__all__ = ["InputsNotDeclared", "JobFailed", "Program", "Worker", "WorkerJob"]
