"""The agent's body: apply one command record to the `jobs` table.

For each record of `eventq.commands` (ARCHITECTURE.md, "The processor"): decode it, read
the job, ``decide``/``evolve`` with the pure core at the broker's LogAppendTime, write
the job (or a tombstone) to the table, update the derived indexes, and wake whoever
waits. It runs inside the faust agent's stream, the only place table writes are allowed
(it owns the event's partition there; writes name that partition explicitly).

At-least-once: after a crash the uncommitted tail of a partition is read again. A
present job skips commands at or below its ``version`` (the core does this). An absent
job cannot tell "never existed" from "deleted later", so every tombstone is preceded by
a per-partition watermark record (the offset of the command that removed a job): an
absent job's command at or below it was already applied. The watermark is written
before the tombstone, in the same changelog partition, so a crash between the two
leaves the job present and the delete is simply applied again.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from typing import Callable

from eventq.core import CodecError, Expired, correlation_of, decode_command
from eventq.core.job import is_final, is_ready
from eventq.core.machine import ALREADY_APPLIED, Accepted, Ignored
from eventq.core.step import Step, step, unappliable
from eventq.limits import MAX_STATE_RECORD_BYTES
from eventq.gateway.waiters import Applied, Waiters
from eventq.indexes import JobIndex
from streams.store import WATERMARK_KEY, JobStore, job_key

log = logging.getLogger(__name__)


def wall_clock_ms() -> int:
    return time.time_ns() // 1_000_000


@dataclass
class Counters:
    applied: int = 0
    rejected: int = 0
    ignored: int = 0
    undecodable: int = 0
    unappliable: int = 0  # decoded, but applying it failed: rejected, never retried
    evicted: int = 0


class Processor:
    def __init__(
        self,
        store: JobStore,
        index: JobIndex,
        waiters: Waiters,
        node: str,
        on_deadline: Callable[[int], None],
        clock_ms: Callable[[], int] = wall_clock_ms,
        max_state_record_bytes: int = MAX_STATE_RECORD_BYTES,
    ) -> None:
        self._store = store
        self._index = index
        self._waiters = waiters
        self._node = node
        self._on_deadline = on_deadline
        self._clock_ms = clock_ms
        self._max_state_record_bytes = max_state_record_bytes
        self._watermarks: dict[int, int] = {}
        self._catch_up: dict[int, int] = {}  # partition -> last offset to re-apply
        self._applied_through: dict[int, int] = {}  # partition -> last offset handled
        self._on_caught_up: Callable[[], None] = lambda: None
        self.counters = Counters()

    def expect_catch_up(self, targets: dict[int, int], on_caught_up: Callable[[], None]) -> None:
        """Call ``on_caught_up`` once every partition has been applied up to its target
        (the end of the log when the partitions were recovered)."""
        self._catch_up = {
            partition: target
            for partition, target in targets.items()
            if self._applied_through.get(partition, -1) < target
        }
        self._on_caught_up = on_caught_up
        if not self._catch_up:
            on_caught_up()

    def forget_watermarks(self) -> None:
        """Partitions were reassigned: read watermarks from the table again."""
        self._watermarks.clear()

    def _watermark(self, partition: int) -> int:
        mark = self._watermarks.get(partition)
        if mark is None:
            raw = self._store.read(partition, WATERMARK_KEY)
            mark = self._watermarks[partition] = int(raw) if raw else -1
        return mark

    def handle(self, message, value: bytes | None) -> None:
        """Apply one command record (``message`` is faust's Message of the event).

        Whatever goes wrong with this one command is contained here (issue 8): it is
        rejected, its issuer told why, the event logged and counted, and the processor
        moves on. Only the store may raise (it fails for every command alike: that is
        not this command's failure), and then nothing of this command was stored."""
        partition, offset = message.partition, message.offset
        try:
            decoded = decode_command(value)  # type: ignore[arg-type]
        except CodecError as error:
            self.counters.undecodable += 1
            self._contain(message, f"undecodable command: {error}", correlation_of(value))
            return
        command = decoded.command
        key = job_key(command.job_id)
        at_ms = round(message.timestamp * 1000)  # LogAppendTime, stamped by the broker
        # A failing read is the store's failure, not this command's: it raises (a
        # replay, which reads no store, would otherwise decide differently).
        raw = self._store.read(partition, key)
        job = self._store.decode(raw, partition, key) if raw is not None else None
        if job is None and offset <= self._watermark(partition):
            result = Step(Ignored(ALREADY_APPLIED), None)
        else:  # the pure core, its failures contained as rejections (eventq/core/step.py)
            result = step(job, command, at_ms, offset, self._max_state_record_bytes)
        outcome = result.outcome
        if isinstance(outcome, Accepted):
            self._store_job(key, partition, offset, outcome.event, result, command.job_id)
            self.counters.applied += 1
        elif isinstance(outcome, Ignored):
            self.counters.ignored += 1
        elif outcome.error.code == "SERVER-ERROR":
            self.counters.unappliable += 1
            self._log_contained(message, outcome.error.text)
        else:
            self.counters.rejected += 1
        if decoded.node == self._node and decoded.request_id is not None:
            self._waiters.on_applied(decoded.request_id, Applied(outcome, result.job))
        self._caught_up_to(partition, offset)

    def _contain(self, message, reason: str, issuer: tuple[str | None, int | None]) -> None:
        """A record that is not a command: reject it for its issuer, if known."""
        rejection = unappliable(reason)
        self._log_contained(message, rejection.error.text)
        node, request_id = issuer
        if node == self._node and request_id is not None:
            self._waiters.on_applied(request_id, Applied(rejection, None))
        self._caught_up_to(message.partition, message.offset)

    @staticmethod
    def _log_contained(message, reason: str) -> None:
        log.error(
            "command at %s[%d]@%d rejected: %s",
            message.topic, message.partition, message.offset, reason,
        )

    def _caught_up_to(self, partition: int, offset: int) -> None:
        self._applied_through[partition] = offset
        target = self._catch_up.get(partition)
        if target is not None and offset >= target:
            del self._catch_up[partition]
            if not self._catch_up:
                self._on_caught_up()

    def _store_job(self, key, partition, offset, event, result: Step, job_id) -> None:
        after = result.job
        if result.removes:
            self._watermarks[partition] = offset
            self._store.write(partition, WATERMARK_KEY, str(offset).encode())
            self._store.write(partition, key, None)
            self._index.remove(job_id)
            if isinstance(event, Expired) and event.evicted:
                self.counters.evicted += 1
            self._waiters.on_final(job_id, None)
            return
        assert after is not None and result.record is not None
        self._store.write(partition, key, result.record)
        now_ms = self._clock_ms()
        self._index.put(after, partition, now_ms)
        if is_final(after):
            self._waiters.on_final(job_id, after)
        elif is_ready(after, now_ms):
            self._waiters.on_ready((after.name,))
        for deadline in (after.lease_deadline_ms, after.expires_ms, after.scheduled_ms):
            if deadline is not None:
                self._on_deadline(deadline)
