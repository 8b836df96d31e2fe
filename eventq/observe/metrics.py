"""Prometheus metrics, read from what eventq already counts (docs/architecture.md,
"Metrics and the dashboard").

Nothing here runs on the hot path: the processor and the gateway keep plain integers
and fixed histograms (eventq/state/buckets.py, livestats.py), and this collector
turns them into metric families only when ``/metrics`` is scraped. Its registry is
this process's own (no global registry: two servers in one test process stay apart).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable, Iterator, Protocol

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
)
from prometheus_client.registry import Collector

from eventq.core.events import EventType
from eventq.core.job import State
from eventq.state.buckets import Histogram
from eventq.state.livestats import LiveStats

if TYPE_CHECKING:
    from prometheus_client.metrics_core import Metric

    from eventq.gateway.server import GatewayStats
    from eventq.state.indexes import JobIndex

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
# Wait and run time buckets, seconds: edges of qless's buckets (livestats), so they are
# counted exactly from them.
DURATION_BOUNDS_S = (1, 2, 5, 10, 30, 60, 300, 900, 3600, 4 * 3600, 86_400, 3 * 86_400)
OUTCOMES = ("applied", "rejected", "ignored", "undecodable", "unappliable")


class Counts(Protocol):
    """The processor's counters the metrics read (streams/processor.py, Counters)."""

    @property
    def records(self) -> int: ...
    @property
    def evicted(self) -> int: ...
    @property
    def notices(self) -> int: ...
    @property
    def registrations(self) -> int: ...
    @property
    def fired(self) -> int: ...


class ProcessorView(Protocol):
    """What the metrics and the dashboard read of the processor (streams/processor.py,
    which observe does not import: docs/architecture.md, "Layers"). The counters of
    OUTCOMES are read by name."""

    @property
    def counters(self) -> Counts: ...
    @property
    def stats(self) -> LiveStats | None: ...
    @property
    def batch_commands(self) -> Histogram | None: ...
    def catch_up_remaining(self) -> dict[int, int]: ...


@dataclass
class Sources:
    """What the metrics read (streams/faust/app.py and eventq/run/serve.py hand them over)."""

    index: JobIndex
    processor: ProcessorView
    gateway_stats: GatewayStats
    lag: Callable[[], dict[int, tuple[int, int | None]]]  # partition -> (applied through, end)
    serving: Callable[[], bool]
    now_ms: Callable[[], int]


def records_behind(applied_through: int, end: int) -> int:
    """A partition's lag: records before ``end`` (its next offset) not yet applied."""
    return max(0, end - applied_through - 1)


def _histogram(name: str, doc: str, labels: list[str]) -> HistogramMetricFamily:
    return HistogramMetricFamily(name, doc, labels=labels)


def _buckets(histogram: Histogram) -> list[tuple[str, int]]:
    return [("+Inf" if le == float("inf") else repr(float(le)), n)
            for le, n in histogram.cumulative()]


class EventqCollector(Collector):
    def __init__(self, sources: Sources) -> None:
        self._s = sources

    def collect(self) -> Iterator[Metric]:
        yield from self._queues()
        yield from self._processor()
        yield from self._durations()
        yield from self._requests()
        yield from self._partitions()

    def _queues(self) -> Iterator[Metric]:
        index, now_ms = self._s.index, self._s.now_ms()
        jobs = GaugeMetricFamily(
            "eventq_queue_jobs", "Live jobs of this process's partitions by queue and "
            "state (ready/scheduled: jobs due / not yet due; waiting: WAITING for their "
            "upstreams)", labels=["queue", "state"])
        paused = GaugeMetricFamily("eventq_queue_paused", "1 while the queue is paused",
                                   labels=["queue"])
        counts = index.state_counts()
        for name in sorted(counts.keys() | set(index.queue_names())):
            ready, scheduled = index.lengths(name, now_ms)
            by_state = counts.get(name, {})
            jobs.add_metric([name, "ready"], ready)
            jobs.add_metric([name, "scheduled"], scheduled)
            jobs.add_metric([name, "waiting"], index.waiting_len(name))
            for state in (State.LEASED, State.COMPLETED, State.FAILED):
                jobs.add_metric([name, state.name.lower()], by_state.get(state, 0))
            paused.add_metric([name], 1 if index.is_paused(name) else 0)
        yield jobs
        yield paused
        failed = GaugeMetricFamily(
            "eventq_failed_jobs", "FAILED jobs of this process's partitions by failure group "
            "(docs/workflows.md: failed, attempts-exhausted, upstream-failed or a fail's "
            "-group)", labels=["group"])
        for group, count in index.failed_groups():
            failed.add_metric([group], count)
        yield failed

    def _processor(self) -> Iterator[Metric]:
        processor = self._s.processor
        counters = processor.counters
        commands = CounterMetricFamily(
            "eventq_commands", "Commands of the log handled by this process, by outcome",
            labels=["outcome"])
        for outcome in OUTCOMES:
            commands.add_metric([outcome], getattr(counters, outcome))
        yield commands
        yield CounterMetricFamily("eventq_jobs_evicted", "Jobs expired before they finished",
                                  value=counters.evicted)
        yield CounterMetricFamily("eventq_log_records", "Records of the command log applied",
                                  value=counters.records)
        yield from self._workflows(counters)
        if processor.batch_commands is not None:
            batch = _histogram("eventq_processor_batch_commands",
                               "Commands per applied record of the command log", [])
            h = processor.batch_commands
            batch.add_metric([], _buckets(h), h.total)
            yield batch
        stats = processor.stats
        if stats is not None:
            events = CounterMetricFamily("eventq_queue_events",
                                         "Events applied, by queue and kind", labels=["queue", "event"])
            for name, queue in sorted(stats.queues.items()):
                for kind in EventType:
                    count = queue.events[kind]
                    if count:
                        events.add_metric([name, kind.name.lower()], count)
            yield events

    @staticmethod
    def _workflows(counters: Counts) -> Iterator[Metric]:
        """docs/architecture.md, "Workflows": what partitions told each other."""
        yield CounterMetricFamily(
            "eventq_upstream_notices",
            "upstream notices applied to their dependents (an upstream ended, went or "
            "was retried; duplicates not counted)", value=counters.notices)
        yield CounterMetricFamily(
            "eventq_dependents_registered",
            "depend commands that registered a dependent with its upstream (repeats not "
            "counted)", value=counters.registrations)
        yield CounterMetricFamily(
            "eventq_recurrences_fired",
            "slots of recurring jobs fired: each fire's add handed on to its job's "
            "partition (docs/workflows.md, Recurring jobs; a repeated or stale fire not "
            "counted)",
            value=counters.fired)

    def _durations(self) -> Iterator[Metric]:
        stats = self._s.processor.stats
        if stats is None:
            return
        families = {
            "wait": _histogram("eventq_job_wait_seconds",
                               "From ready to leased (the rule of eventq spark stats)", ["queue"]),
            "run": _histogram("eventq_job_run_seconds",
                              "From leased to completed or failed", ["queue"]),
        }
        for name, queue in sorted(stats.queues.items()):
            for metric, family in families.items():
                durations = getattr(queue, metric)
                buckets = [(repr(float(b)), durations.at_most(b)) for b in DURATION_BOUNDS_S]
                buckets.append(("+Inf", durations.count))
                family.add_metric([name], buckets, durations.sum_ms / 1000)
        yield from families.values()

    def _requests(self) -> Iterator[Metric]:
        stats = self._s.gateway_stats
        yield GaugeMetricFamily("eventq_clients", "Connected clients", value=stats.active_clients)
        yield GaugeMetricFamily("eventq_peer_connections",
                                "Connections from other eventq processes",
                                value=stats.peer_connections)
        timings = stats.request_seconds
        if timings is None:
            return
        family = _histogram("eventq_request_seconds",
                            "Gateway requests from read to reply, by verb", ["verb"])
        for verb, histogram in sorted(timings.items()):
            family.add_metric([verb], _buckets(histogram), histogram.total)
        yield family

    def _partitions(self) -> Iterator[Metric]:
        processor = self._s.processor
        lag = GaugeMetricFamily("eventq_consumer_lag",
                                "Records of the command log not yet applied, by partition",
                                labels=["partition"])
        applied = GaugeMetricFamily("eventq_applied_offset",
                                    "Last offset of the command log applied, by partition",
                                    labels=["partition"])
        for partition, (through, end) in sorted(self._s.lag().items()):
            applied.add_metric([str(partition)], through)
            if end is not None:
                lag.add_metric([str(partition)], records_behind(through, end))
        yield lag
        yield applied
        remaining = GaugeMetricFamily(
            "eventq_restore_remaining_records",
            "Records still to re-apply before serving (after a start or a rebalance)",
            labels=["partition"])
        for partition, left in sorted(processor.catch_up_remaining().items()):
            remaining.add_metric([str(partition)], left)
        yield remaining
        yield GaugeMetricFamily("eventq_serving",
                                "1 once state is recovered and requests are served",
                                value=1 if self._s.serving() else 0)


def registry_of(sources: Sources) -> CollectorRegistry:
    registry = CollectorRegistry(auto_describe=False)
    registry.register(EventqCollector(sources))
    return registry


def exposition(registry: CollectorRegistry) -> bytes:
    return generate_latest(registry)
