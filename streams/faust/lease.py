"""How long this process may still act as the owner of its partitions (docs/fencing.md,
"The three fences").

The consumer group's coordinator hands a member's partitions to others only once that
member's session has expired: ``session_timeout_ms`` after the last heartbeat the
coordinator received from it. A heartbeat (or the SyncGroup of a rebalance) answered
without error was received after it was sent, so until ``sent + session_timeout`` no
other process can own this one's partitions. That is the lease: the gateway answers
from a partition's state, and the processor applies its records, only while it holds.

A process that was paused (SIGSTOP, a long GC pause, a frozen VM) or cut off from the
brokers finds its lease expired when it runs again, before it has heard that it lost
its partitions; it then stops reading, writing and answering at once, instead of
serving from state that others have moved on from. Kafka's own fencing (the changelog's
transactions, streams/faust/transactions.py) refuses what it writes after that; the lease
keeps it from *answering*, which no broker can refuse.

The lease is renewed from the Kafka consumer's thread (eventq patches aiokafka's
group coordinator: ``install``) and read on the main loop: one float, written by one
thread.
"""

from __future__ import annotations

import logging
import time
from typing import Any, Callable

from streams.faust.monkeypatch import original_of, replace

log = logging.getLogger(__name__)

# Subtracted from the session timeout: the clocks of this machine and of the group
# coordinator may run at slightly different rates, and a new owner needs at least this
# long after the session expired before it can serve (a rebalance, its recovery).
LEASE_MARGIN_S = 1.0


class OwnershipLease:
    def __init__(
        self, session_timeout_s: float, clock: Callable[[], float] = time.monotonic,
        margin_s: float = LEASE_MARGIN_S,
    ) -> None:
        if session_timeout_s <= margin_s:
            raise ValueError("the session timeout must be longer than the lease margin")
        self._length_s = session_timeout_s - margin_s
        self._clock = clock
        self._until = float("-inf")
        self.renewals = 0

    def renew(self, sent_at: float) -> None:
        """The coordinator answered a heartbeat or SyncGroup sent at ``sent_at``
        (``clock`` time) without error."""
        until = sent_at + self._length_s
        if until > self._until:
            self._until = until
        self.renewals += 1

    def valid(self) -> bool:
        return self._clock() < self._until

    def remaining_s(self) -> float:
        return max(0.0, self._until - self._clock())

    def end(self) -> None:
        """This process gave its partitions up (or lost them): invalid until renewed."""
        self._until = float("-inf")


# group id -> the lease its member's heartbeats renew (one consumer group per process:
# faust's; the bulk lane's own group, streams/faust/admission.py, has none).
_LEASES: dict[str, OwnershipLease] = {}


def register(group_id: str, lease: OwnershipLease) -> None:
    _LEASES[group_id] = lease


def unregister(group_id: str) -> None:
    _LEASES.pop(group_id, None)


def install() -> None:
    """Renew the registered group's lease on every heartbeat and SyncGroup that the
    coordinator answered without error (aiokafka 0.14's GroupCoordinator)."""
    from aiokafka.consumer import group_coordinator as module

    coordinator_class = module.GroupCoordinator
    rebalance_class = module.CoordinatorGroupRebalance
    if original_of(coordinator_class._do_heartbeat) is not None:
        return
    heartbeat = coordinator_class._do_heartbeat
    sync = rebalance_class._send_sync_group_request

    # ``self``: aiokafka's GroupCoordinator, then its CoordinatorGroupRebalance (aiokafka
    # has no types), patched: streams/faust/monkeypatch.py.
    async def do_heartbeat(self: Any) -> Any:
        sent_at = time.monotonic()
        rejoin_pending = self._rejoin_needed_fut.done()
        answered = await heartbeat(self)
        # aiokafka answers True for REBALANCE_IN_PROGRESS too (the member stays alive
        # during the rebalance) and then asks for a rejoin: only a heartbeat that left
        # no rejoin behind was answered without error. A pending rejoin renews nothing.
        if answered and not rejoin_pending and not self._rejoin_needed_fut.done():
            lease = _LEASES.get(self.group_id)
            if lease is not None:
                lease.renew(sent_at)
        return answered

    async def send_sync_group_request(self: Any, request: Any) -> Any:
        sent_at = time.monotonic()
        assignment = await sync(self, request)
        if assignment is not None:  # aiokafka returns None on every error
            lease = _LEASES.get(self.group_id)
            if lease is not None:
                lease.renew(sent_at)
        return assignment

    replace(coordinator_class, "_do_heartbeat", do_heartbeat)
    replace(rebalance_class, "_send_sync_group_request", send_sync_group_request)
