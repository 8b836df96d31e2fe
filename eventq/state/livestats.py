"""Statistics the processor keeps as it applies the log (pure; docs/architecture.md,
"Metrics and the dashboard").

Per queue: how many events of each kind were applied, and the wait and run time
distributions in qless's buckets, the same buckets as ``eventq spark stats``
(eventq/core/histogram.py) measured by the same rule (eventq/core/timing.py), so a
test compares the two. Jobs by state come from the index (eventq/state/indexes/counts.py), which
holds every live job of the owned partitions.

What a job's times need (when it became ready, when its attempt started) is mostly in
its state: ready = created or scheduled, or its backoff's retry time; only two things
are not, and only they are remembered, per job: the time a fail or a TTR timeout
requeued it, and the start of its current attempt (leased jobs only: as many as
workers hold). Both are forgotten when the job ends. After a restart or a partition
move those times are unknown for the jobs in flight then, and are estimated from the
state: the attempt's start as its lease deadline minus its TTR (exact unless it was
touched), the requeue time as the created/scheduled time (or the retry time).

These are the statistics of what *this process applied since it started*: the Spark
job reads the whole log.
"""

from __future__ import annotations

from eventq.core.events import Event, EventType
from eventq.core.histogram import bucket_of, label
from eventq.core.job import FINAL_STATES, Job, State
from eventq.core.timing import Since, advance, ready_from_state

# Jobs whose times are remembered (each ~150 bytes); past this the oldest are forgotten
# and estimated from their state when they end.
MAX_REMEMBERED_JOBS = 1_000_000
# Queues counted by name; the statistics of any further names are summed under
# OTHER_QUEUES (not a valid queue name), so random names cannot grow the server (or the
# metrics' label sets) without bound (the rule for empty queue names: docs/architecture.md,
# "Hostile inputs").
MAX_QUEUES = 10_000
OTHER_QUEUES = "(other queues)"
EVENT_KINDS = tuple(EventType)
_KIND_COUNT = max(EVENT_KINDS) + 1
METRICS = ("wait", "run")
_ADDED, _NEW = EventType.ADDED, State.NEW


class Durations:
    """Samples in qless's buckets (keyed by their lower bound in seconds: unique across
    the resolutions), with their count and sum."""

    __slots__ = ("buckets", "count", "sum_ms")

    def __init__(self) -> None:
        self.buckets: dict[int, int] = {}
        self.count = 0
        self.sum_ms = 0

    @property
    def mean_ms(self) -> float | None:
        return self.sum_ms / self.count if self.count else None

    def add(self, ms: int) -> None:
        lower = ms // 1000 if 0 <= ms < 60_000 else bucket_of(ms)[0]  # (the common case)
        buckets = self.buckets
        buckets[lower] = buckets.get(lower, 0) + 1
        self.count += 1
        self.sum_ms += max(ms, 0)

    def rows(self) -> list[tuple[int, int, str, int]]:
        """[(lower_s, width_s, label, count)] in order, as ``eventq spark stats``."""
        out = []
        for lower in sorted(self.buckets):
            width = bucket_of(lower * 1000)[1]
            out.append((lower, width, label(lower, width), self.buckets[lower]))
        return out

    def at_most(self, bound_s: float) -> int:
        """Samples in buckets wholly below ``bound_s`` seconds (bounds that are bucket
        edges, as Prometheus' ``le``; exact but for samples of exactly an edge)."""
        return sum(n for lower, n in self.buckets.items()
                   if lower + bucket_of(lower * 1000)[1] <= bound_s)


class QueueStats:
    __slots__ = ("events", "wait", "run")

    def __init__(self) -> None:
        self.events = [0] * _KIND_COUNT  # applied events, by EventType number
        self.wait = Durations()
        self.run = Durations()


class LiveStats:
    def __init__(self, max_remembered_jobs: int = MAX_REMEMBERED_JOBS,
                 max_queues: int = MAX_QUEUES) -> None:
        self.queues: dict[str, QueueStats] = {}
        self._max_queues = max_queues
        self._requeued: dict[int, int] = {}  # job id int -> when a fail/timeout requeued it
        self._started: dict[int, int] = {}  # job id int -> start of its current attempt
        self._max_remembered = max_remembered_jobs

    def queue(self, name: str) -> QueueStats:
        stats = self.queues.get(name)
        if stats is None:
            if len(self.queues) >= self._max_queues:
                name = OTHER_QUEUES
                stats = self.queues.get(name)
            if stats is None:
                stats = self.queues[name] = QueueStats()
        return stats

    def observe(self, event: Event, before: Job | None, after: Job | None, at_ms: int) -> None:
        """An accepted ``event`` took the job from ``before`` to ``after``."""
        job = after if after is not None else before
        if job is None:
            return
        stats = self.queues.get(job.name) or self.queue(job.name)
        kind = event.type
        stats.events[kind] += 1
        if kind is _ADDED and after is not None and after.state is _NEW:
            return  # the bulk of a load: no sample, its ready time is in its state
        key = event.job_id.int
        samples = advance(self._since(key, before), event, before, after, at_ms)
        if samples.wait_ms is not None:
            stats.wait.add(samples.wait_ms)
        if samples.run_ms is not None:
            stats.run.add(samples.run_ms)
        self._remember(key, samples.since, after)

    def _since(self, key: int, before: Job | None) -> Since:
        if before is None:
            return Since()
        ready = self._requeued.get(key)
        if ready is None:
            ready = _ready_estimate(before)
        started = self._started.get(key)
        if started is None and before.state is State.LEASED and before.lease_deadline_ms:
            started = before.lease_deadline_ms - before.ttr_ms  # estimated (see above)
        return Since(ready, started)

    def _remember(self, key: int, since: Since, after: Job | None) -> None:
        if after is None or after.state in FINAL_STATES:
            self._requeued.pop(key, None)
            self._started.pop(key, None)
            return
        if since.ready_ms is not None and since.ready_ms != _ready_estimate(after):
            self._keep(self._requeued, key, since.ready_ms)
        else:
            self._requeued.pop(key, None)
        if since.leased_ms is not None:
            self._keep(self._started, key, since.leased_ms)
        else:
            self._started.pop(key, None)

    def _keep(self, times: dict[int, int], key: int, value: int) -> None:
        times[key] = value
        if len(times) > self._max_remembered:
            del times[next(iter(times))]

    @property
    def remembered_jobs(self) -> int:
        return len(self._requeued) + len(self._started)

    def histogram_rows(self, queue: str | None = None) -> list[dict]:
        """Rows like ``eventq spark stats``' histogram: queue, metric, lower_s, width_s,
        label, count (queues and buckets in order)."""
        rows = []
        for name in sorted(self.queues):
            if queue is not None and name != queue:
                continue
            stats = self.queues[name]
            for metric in METRICS:
                for lower, width, text, count in getattr(stats, metric).rows():
                    rows.append({"queue": name, "metric": metric, "lower_s": lower,
                                 "width_s": width, "label": text, "count": count})
        return rows


def _ready_estimate(job: Job) -> int:
    """Since when ``job`` waits, as far as its state tells (after a restart, or for a job
    this process never saw requeued): its backoff's end, else ``ready_from_state``. A
    requeue time that differs from this estimate must be remembered, or the next lease
    would be measured from the estimate: a fail with a backoff requeues at the fail's
    time, and its state says only when the backoff ends (the rule of
    eventq/core/timing.py measures from the fail)."""
    return job.retry_ms if job.retry_ms is not None else ready_from_state(job)
