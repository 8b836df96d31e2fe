"""Workers: ``Worker`` runs Python callables or external programs for jobs of named
queues, keeping their leases alive with ``touch`` (see eventq/worker/runtime.py).
``eventq worker`` is its command line."""

from eventq.worker.program import JobFailed, Program
from eventq.worker.runtime import Worker

__all__ = ["JobFailed", "Program", "Worker"]
