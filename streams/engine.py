"""What the gateway asks of the event-sourced core: write a command to the log and wait
until the processor of this process has applied it.

``+OK`` therefore means "in the replicated log and applied" (docs/architecture.md, "The
gateway"). A write Kafka does not acknowledge within ``write_timeout_ms``, or a command
not applied within it, is a ``ServerError``: never a false ``+OK``.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import time
import uuid
from typing import Awaitable, Callable, Iterable

from eventq.core import Command, Job, QueueCommand, encode_command
from eventq.core.commands import (
    RECURRENCE_COMMANDS,
    CommandType,
    RecurrenceCommand,
    command_key,
)
from eventq.core.digest import StateDigest
from eventq.core.machine import Rejected
from eventq.core.partitioner import partition_for_key
from eventq.core.recurrence import Recurrence
from eventq.errors import (
    EventqError,
    MayTakeEffect,
    NotWritten,
    PartitionMoved,
    ServerError,
    Unserved,
)
from eventq.state import callers
from eventq.state.coalesce import Coalesced
from eventq.state.indexes import JobIndex
from eventq.state.offers import Offers
from eventq.state.waiters import Applied, Waiters
from streams.command_writer import CommandWriter
from streams.deadlines import Deadlines
from streams.store import JobStore, NotOwned, PinnedJobs

log = logging.getLogger(__name__)

NOT_HELD = ("this eventq process may no longer own its partitions (it was paused or cut "
            "off from Kafka); nothing happened: retry, at another process if this one "
            "does not answer soon")
APPEND_DEADLINE_S = 60.0  # a give-back waits this long for Kafka, then the TTR applies


# How an error names a command: its protocol request, where it has one.
_COMMAND_WORDS = {
    CommandType.START_ATTEMPT: "lease",
    CommandType.TIMEOUT_ATTEMPT: "timeout of an attempt",
    CommandType.RELEASE_ATTEMPT: "give-back of a lease",
}


def command_word(command: Command | QueueCommand | RecurrenceCommand) -> str:
    return _COMMAND_WORDS.get(command.type, command.type.name.lower().replace("_", "-"))


def command_record(command: Command | QueueCommand | RecurrenceCommand, *,
                   node: str | None = None, request_id: int | None = None,
                   issuer: str | None = None) -> bytes:
    """The command's record (eventq/core/codec/commands.py ``encode_command``, which encodes a
    recurrence's commands as well, though its signature names a job's and a queue's)."""
    return encode_command(command, node=node, request_id=request_id,  # type: ignore[arg-type]
                          issuer=issuer)


HOLD_CHECK_S = 0.5  # a command waited for this long: is its partition still ours?


def _abandoned(on_abandoned: Callable[[int], None] | None,
               written: asyncio.Future[int]) -> None:
    """Call ``on_abandoned`` with the command's log position once Kafka has taken it
    (at once if it has; never if it does not take it: then nothing is to be undone)."""
    if on_abandoned is None:
        return

    def in_log(future: asyncio.Future[int]) -> None:
        if not future.cancelled() and future.exception() is None:
            on_abandoned(future.result())

    if written.done():
        in_log(written)
    else:
        written.add_done_callback(in_log)


class Engine:
    def __init__(
        self,
        *,
        commands_topic: str,
        partitions: int,
        write_timeout_ms: int,
        index: JobIndex,
        store: JobStore,
        waiters: Waiters,
        node: str,
        holds: Callable[[], bool] = lambda: True,
    ) -> None:
        self.commands_topic = commands_topic
        self.partitions = partitions
        self.write_timeout_s = write_timeout_ms / 1000
        self.index = index
        self.store = store
        self.waiters = waiters
        self.node = node
        # Whether this process still holds its partitions (streams/faust/lease.py): nothing is
        # read from their state, nor a command's outcome awaited, once it may not.
        self.holds = holds
        self.ready = asyncio.Event()  # set once owned partitions are recovered
        self.writer: CommandWriter | None = None  # set by the app on start
        self.started_ms = time.time_ns() // 1_000_000
        self.claimed: set[uuid.UUID] = set()  # jobs a lease is claiming right now
        self.offers = Offers()  # claims for other processes' leases, until confirmed
        self._request_ids = itertools.count(1)
        self._digest = Coalesced(self._compute_digest)  # O(jobs): one at a time
        # One timer for every submit's deadline, one for every check of the partitions
        # still held (streams/deadlines.py): not a timer, a timeout context and a
        # shielded future of each per submit.
        self._submit_deadlines = Deadlines(self.write_timeout_s)
        self.hold_checks = Deadlines(HOLD_CHECK_S)

    # --- writing -----------------------------------------------------------------

    def _write(self, command: Command | RecurrenceCommand,
               data: bytes) -> tuple[int, asyncio.Future[int]]:
        """Hand a command to the group-commit writer (streams/command_writer.py)."""
        if self.writer is None:
            raise NotWritten("eventq is starting: the Kafka producer is not ready yet; retry")
        key = command_key(command)  # a job's id, or a recurrence's recur:<name>
        partition = partition_for_key(key, self.partitions)
        return partition, self.writer.write(partition, key, data)

    async def send(self, command: Command | RecurrenceCommand) -> None:
        """Write a command nobody waits for (timers: one not written in time is taken
        back and produced again by the next timer pass)."""
        partition, written = self._write(command, command_record(command))  # eventq's own
        try:
            # asyncio.timeout, not wait_for: no task per write, and a cancellation is
            # never lost (3.11's wait_for can drop one, gh-86296).
            async with asyncio.timeout(self.write_timeout_s):
                await written
        except Exception as error:
            raise self._not_applied(command, partition, written, error, False) from error

    def append(self, command: Command) -> Awaitable[None]:
        """Queue a command that must not be taken back (a lease's give-back: nothing
        else would ever produce it) in its partition's lane **now**, ahead of anything
        queued after this call; the result waits at most ``APPEND_DEADLINE_S`` for
        Kafka to take it."""
        # A lease's give-back: its client's, when one is being served (audit).
        _, written = self._write(command, encode_command(command, issuer=callers.issuer()))

        async def in_log() -> None:
            async with asyncio.timeout(APPEND_DEADLINE_S):
                await asyncio.shield(written)

        return in_log()

    async def submit(
        self, command: Command | RecurrenceCommand,
        on_abandoned: Callable[[int], None] | None = None,
    ) -> Applied:
        """Write a command and wait until this process's processor has applied it: one
        deadline for both (the write and the apply), ``write_timeout_ms``.

        Past it the error says which it was (docs/architecture.md, "The gateway"):
        ``NotWritten`` when the command never left this process (nothing happened:
        retry), ``MayTakeEffect`` when it is or may be in the log (then it will be
        applied, later). ``on_abandoned`` is called
        when this call ends, by that error or by cancellation, with the command in the
        log or possibly so (docs/architecture.md, "Abandoned commands"), with the command's
        log position, as soon as Kafka has taken it (a compensation it writes then
        follows the command in the log); not at all if Kafka never takes it."""
        await self.wait_ready()
        request_id = next(self._request_ids)
        submission: _Submission | None = None
        partition, written = -1, None
        try:
            # [eventq] audit (docs/security.md, "Queue-name prefixes"): the name of the
            # token it is issued for.
            partition, written = self._write(command, command_record(
                command, node=self.node, request_id=request_id, issuer=callers.issuer()))
            # Before any await, so nothing can be applied yet; with its partition, which a
            # rebalance lets go of (``let_go``).
            submission = _Submission(self, self.waiters.expect(request_id, partition))
            self._deadlines_of_submits().add(submission.answer, submission.timed_out)
            # Its callback, never an await of the write: a timeout or a cancellation here
            # must not cancel the write (``withdraw`` takes back one that has not left;
            # one that has resolves with its position, which a give-back needs:
            # ``_abandoned``).
            written.add_done_callback(submission.written)
            return await submission.answer
        except EventqError:
            if submission is not None and submission.at is not None and written is not None:
                _abandoned(on_abandoned, written)  # in the log; its outcome is not known
            raise
        except asyncio.CancelledError:
            in_log = submission is not None and submission.at is not None
            if written is not None and (in_log or not self._withdraw(partition, written)):
                _abandoned(on_abandoned, written)  # on its way or in the log: nobody awaits it
            raise
        except Exception as error:
            in_log = submission is not None and submission.at is not None
            failure = self._not_applied(command, partition, written, error, in_log)
            if isinstance(failure, MayTakeEffect) and written is not None:
                _abandoned(on_abandoned, written)
            raise failure from None
        finally:
            self.waiters.forget(request_id)

    def _deadlines_of_submits(self) -> Deadlines:
        """The submits' deadlines, ``write_timeout_s`` each (as it is now)."""
        if self._submit_deadlines.delay_s != self.write_timeout_s:
            self._submit_deadlines = Deadlines(self.write_timeout_s)
        return self._submit_deadlines

    def _withdraw(self, partition: int, written: asyncio.Future[int]) -> bool:
        """Take a command back if it has not left its lane (``CommandWriter.withdraw``)."""
        return self.writer is not None and self.writer.withdraw(partition, written)

    def _not_applied(
        self, command: Command | RecurrenceCommand, partition: int,
        written: asyncio.Future[int] | None, error: Exception, in_log: bool,
    ) -> ServerError:
        what = command_word(command)
        if isinstance(command, RECURRENCE_COMMANDS):
            check = "check with `inspect recurring` before retrying"
        else:
            check = f"check with `inspect job {command.job_id}` before retrying"
        limit = f"{self.write_timeout_s:g}s"
        if not isinstance(error, TimeoutError):  # KafkaError: unreachable, not leader...
            return MayTakeEffect(
                f"Kafka failed the {what} ({type(error).__name__}); it was most likely "
                f"not written, but {check}"
            )
        if in_log:
            return MayTakeEffect(
                f"the {what} is in the log but was not applied within {limit} (a backlog): "
                f"it will still take effect; {check}"
            )
        if written is not None and self._withdraw(partition, written):
            return NotWritten(
                f"the {what} was not written: Kafka did not take it within {limit}; "
                "nothing happened, retrying is safe"
            )
        return MayTakeEffect(
            f"the {what} was sent but Kafka did not acknowledge it within {limit}: it may "
            f"still take effect; {check}"
        )

    def let_go(self, partitions: set[int]) -> None:
        """``partitions`` left this process (a rebalance). Commands it awaits there are
        applied by their new owner, never here: their callers hear now that they may
        take effect (a lease gives its claim back at once, right behind it in the log,
        before its TTR could count it). Claims offered to peers there are given back
        too: the new owner never heard of them (eventq/state/offers.py)."""
        lost = self.waiters.let_go(partitions, lambda request_id, partition: PartitionMoved(
            "this eventq process lost the job's partition to another process (a "
            "rebalance) before it applied the command: it is in the log and will still "
            "take effect; check with inspect job before retrying", request_id, partition))
        releases = self.offers.withdraw_partitions(partitions, self.store.partition_of)
        if lost or releases:
            log.info("partitions %s left: %d commands awaited there and %d offered "
                     "claims handed back", sorted(partitions), lost, len(releases))
        for release in releases:
            try:
                in_log = asyncio.ensure_future(self.append(release))
            except EventqError as error:  # no producer (stopping)
                log.warning("could not give back a claim offered to another process "
                            "(%s): its TTR will time the attempt out instead", error)
                continue
            in_log.add_done_callback(_log_failed_release)

    async def submit_everywhere(self, command: QueueCommand) -> None:
        """Write a queue command (pause, resume) to every partition and wait until it is
        in the log everywhere and applied in each partition this process owns (the
        others' owners apply it as they read on). A partition the write fails in fails
        the request; the command is then in some partitions, and repeating it is safe
        (pause and resume are idempotent)."""
        await self.wait_ready()
        if self.writer is None:
            raise NotWritten("eventq is starting: the Kafka producer is not ready yet; retry")
        key = b"queue:" + command.name.encode()
        owned = self.store.active
        issuer = callers.issuer()  # audit (docs/security.md, "Queue-name prefixes")
        expected: list[tuple[int, asyncio.Future[Applied]]] = []
        written: list[asyncio.Future[int]] = []
        try:
            for partition in range(self.partitions):
                request_id = next(self._request_ids)
                if partition in owned:
                    expected.append((request_id, self.waiters.expect(request_id)))
                data = encode_command(command, node=self.node, request_id=request_id,
                                      issuer=issuer)
                written.append(self.writer.write(partition, key, data))
            async with asyncio.timeout(self.write_timeout_s):
                await asyncio.gather(*written)
                for _, applied in expected:
                    outcome = (await applied).outcome
                    if isinstance(outcome, Rejected):
                        raise outcome.error
        except EventqError:
            raise
        except Exception as error:
            what = command_word(command)
            raise MayTakeEffect(
                f"the {what} of {command.name} did not reach every partition "
                f"({type(error).__name__}); it may have taken effect in some: repeat it"
            ) from None
        finally:
            for request_id, _ in expected:
                self.waiters.forget(request_id)

    def serving(self) -> bool:
        """Recovered, and still holding its partitions."""
        return self.ready.is_set() and self.holds()

    async def wait_ready(self) -> None:
        if not self.ready.is_set():
            try:
                async with asyncio.timeout(self.write_timeout_s):
                    await self.ready.wait()
            except TimeoutError:
                raise NotWritten(
                    "eventq is still recovering its state from Kafka; try again shortly"
                ) from None
        if not self.holds():
            raise NotWritten(NOT_HELD)

    # --- reading -----------------------------------------------------------------

    def job(self, job_id: uuid.UUID) -> Job | None:
        """The job's state from the table, if this process owns its partition."""
        self._check_serving()
        try:
            return self.store.get(job_id)
        except NotOwned as error:
            raise _moving(error) from None

    def recurrence(self, name: str) -> Recurrence | None:
        """Recurrence ``name``'s record, if this process owns its partition."""
        self._check_serving()
        try:
            return self.store.recurrence(name)
        except NotOwned as error:
            raise _moving(error) from None

    def dependents(self, job_id: uuid.UUID, limit: int) -> list[uuid.UUID]:
        """[eventq] Up to ``limit`` dependents registered with ``job_id`` (present or
        not), if this process owns its partition."""
        self._check_serving()
        try:
            return self.store.dependents(job_id, limit)
        except NotOwned as error:
            raise _moving(error) from None

    def pinned(self, job_ids: Iterable[uuid.UUID]) -> PinnedJobs:
        """The jobs as they are now, for a reply written over many event-loop turns."""
        self._check_serving()
        try:
            return self.store.pinned(job_ids)
        except NotOwned as error:
            raise ServerError(
                f"partition {error.args[0]} of a job is not served by this process "
                "right now (it is moving between eventq processes); retry"
            ) from None

    def _check_serving(self) -> None:
        # A read has no effect: nothing happened, and the gateway asks again while
        # partitions move (eventq/gateway/dispatch.py).
        if not self.ready.is_set():
            raise Unserved("eventq is still recovering its state from Kafka")
        if not self.holds():
            raise Unserved(NOT_HELD)

    async def digest(self) -> str:
        """The state digest of every job this process owns (eventq.core.digest),
        computed after the call; concurrent calls share one computation."""
        state, _ = await self._digest()
        return state.hexdigest()

    async def digest_part(self) -> tuple[StateDigest, list[int]]:
        """(StateDigest, partitions) of the jobs this process owns: a cluster's digest
        adds the parts of every process (docs/architecture.md, "Scaling out")."""
        return await self._digest()

    async def _compute_digest(self) -> tuple[StateDigest, list[int]]:
        partitions = sorted(self.store.active)

        def compute() -> tuple[StateDigest, list[int]]:
            jobs = (job for p in partitions for job in self.store.jobs_in(p))
            inputs = (entry for p in partitions for entry in self.store.inputs_in(p))
            return StateDigest(jobs, inputs), partitions

        return await asyncio.to_thread(compute)


LOST_BEFORE_APPLIED = (
    "this eventq process may have lost the job's partition to another process (it was "
    "paused or cut off from Kafka) before it applied the command: it is in the log and "
    "will still take effect; check with inspect job before retrying")


class _Submission:
    """What one ``submit`` waits for, delivered to ``answer``, the one future it awaits:
    Kafka's error, or once Kafka has taken the command (``at``, its position) this
    process's outcome of it (``applied``, from the waiters), or the deadline. While the
    outcome is awaited, every ``HOLD_CHECK_S`` it asks whether the partition is still
    held: once its lease has expired the outcome may be another process's to decide
    (streams/faust/lease.py), and the caller learns that it may take effect."""

    __slots__ = ("answer", "at", "_applied", "_engine")

    def __init__(self, engine: Engine, applied: asyncio.Future[Applied]) -> None:
        self.answer: asyncio.Future[Applied] = applied.get_loop().create_future()
        self.at: int | None = None
        self._applied = applied
        self._engine = engine

    def written(self, written: asyncio.Future[int]) -> None:
        answer = self.answer
        if answer.done():
            return
        if written.cancelled():
            answer.cancel()
            return
        error = written.exception()
        if error is not None:
            answer.set_exception(error)
            return
        self.at = written.result()
        if self._applied.done():
            self.outcome(self._applied)
            return
        self._applied.add_done_callback(self.outcome)
        self._engine.hold_checks.add(answer, self.check_hold)

    def outcome(self, applied: asyncio.Future[Applied]) -> None:
        answer = self.answer
        if answer.done():
            return
        if applied.cancelled():
            answer.cancel()
            return
        error = applied.exception()
        if error is not None:
            answer.set_exception(error)
        else:
            answer.set_result(applied.result())

    def check_hold(self) -> None:
        if self._engine.holds():
            self._engine.hold_checks.add(self.answer, self.check_hold)
        else:
            self.answer.set_exception(MayTakeEffect(LOST_BEFORE_APPLIED))

    def timed_out(self) -> None:
        self.answer.set_exception(TimeoutError())


def _moving(error: NotOwned) -> ServerError:
    return Unserved(
        f"partition {error.args[0]} of this job is not served by this process right now "
        "(it is moving between eventq processes); retry")


def _log_failed_release(in_log: asyncio.Future[None]) -> None:
    if not in_log.cancelled() and in_log.exception() is not None:
        log.warning("could not give back a claim offered to another process (%s): its "
                    "TTR will time the attempt out instead", in_log.exception())
