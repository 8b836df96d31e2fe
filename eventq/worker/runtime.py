"""The worker runtime: lease jobs, run their handlers, keep their leases alive, report.

Each of ``concurrency`` slots leases a job of the worker's queues, runs the queue's
handler (an async callable in the event loop, a plain callable in a thread or, with
``processes=True``, a process pool; an external ``Program``), touches the lease every
third of its TTR while the handler runs (docs/protocol.md, "eventq extensions", touch), and completes the job
with the handler's return value or fails it with the error. One log line per job.

A queue whose handler declares ``inputs=True`` has each job's inputs fetched
(``inputs <id>``, docs/workflows.md, "Inputs") after the lease and before the
handler, under the same heartbeat: the handler reads them as ``job.inputs``
(eventq/worker/job.py), a program in ``$EVENTQ_INPUTS`` (eventq/worker/program.py). A
fetch the server could not answer is retried as a report is (``RETRY_S``); a job gone
meanwhile is dropped, as one whose lease is lost.

Stopping (SIGTERM or SIGINT, or ``stop()``): no new leases (one in flight is let end, at
most ``lease_wait_ms``, and a job it brings runs as the others); running jobs may finish
until their lease deadline (heartbeats stop, so that is at most one TTR); a second
signal, or that deadline, ends them: each is failed with a result saying so (and an
external program is killed).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import inspect
import json
import logging
import signal
import ssl
import sys
import threading
import time
import traceback
from dataclasses import dataclass, field
from typing import Any, Awaitable, Callable, TextIO, TypeVar

from eventq.client import AsyncClient
from eventq.client.connecting import Reminder
from eventq.client.errors import (
    ClientError,
    DuplicateResult,
    EventqError,
    NotFound,
    ServerError,
    TimedOut,
    Unavailable,
)
from eventq.client.models import Job, Result
from eventq.worker.job import WorkerJob
from eventq.worker.output import CLEAR_LINE, default_output, terminal_or_none
from eventq.worker.program import JobFailed, Program
from eventq.worker.status import Tally

log = logging.getLogger("eventq.worker")

LEASE_WAIT_MS = 1_000  # a slot's lease waits this long, then asks again
HEARTBEAT_FRACTION = 3  # touch at a third of the TTR (docs/protocol.md, "touch")
MIN_HEARTBEAT_S = 0.05
# Waits between attempts to report a job's outcome (and to fetch its inputs).
RETRY_S = (0.1, 0.5, 1.0, 2.0, 5.0)
STATUS_EVERY_S = 0.5
LEASE_REPLY_GRACE_S = 1.0  # at a stop, a lease in flight is let end its wait and this
DRAIN_MARGIN_S = 0.5  # end a draining job this long before its lease deadline
TRACEBACK_CHARS = 2_000
# Worker(status=...): stderr when it is a terminal and the program configured no logging
# (the README's worker promises a status line on a terminal).
STATUS_AUTO = "auto"


# A handler: any callable of a WorkerJob (Any: what it returns is the result, as_result).
HandlerFn = TypeVar("HandlerFn", bound=Callable[[WorkerJob], Any])


@dataclass(frozen=True)
class Handler:
    """A queue's handler: ``fn(job)`` returns the result (bytes, str, None or anything
    JSON can encode) or raises to fail the job; ``limit_s``: fail it after this long
    (None: no limit while the heartbeat holds the lease); ``inputs``: fetch each job's
    inputs for it first (``job.inputs``)."""

    fn: Callable[[WorkerJob], Any]
    limit_s: float | None = None
    inputs: bool = False

    @property
    def is_async(self) -> bool:
        return inspect.iscoroutinefunction(self.fn) or isinstance(self.fn, Program)


def as_result(value: Any) -> bytes:
    """A handler's return value as the job's result."""
    if value is None:
        return b""
    if isinstance(value, (bytes, bytearray, memoryview)):
        return bytes(value)
    if isinstance(value, str):
        return value.encode("utf-8")
    return json.dumps(value).encode("utf-8")


def failure_of(error: BaseException) -> bytes:
    """A handler's exception as the failed job's result: its type, message and the
    tail of its traceback."""
    if isinstance(error, JobFailed):
        return error.result
    text = "".join(traceback.format_exception(error))
    return (f"{type(error).__name__}: {error}\n" + text[-TRACEBACK_CHARS:]).encode()


class Unreported(Exception):
    """The job ends unreported, as "lost": it is gone before its handler ran, or its
    inputs could not be fetched (its TTR then times the attempt out, as for a report
    that could not be sent)."""


@dataclass(eq=False)
class Running:
    """A job being handled: its handler's task, when its lease ends (monotonic), and why
    the worker ended it early (None while it may finish)."""

    job: Job
    work: asyncio.Future
    deadline_s: float
    ended: str | None = None
    heartbeat: asyncio.Task | None = None


@dataclass
class _Stop:
    requests: int = 0
    first: asyncio.Event = field(default_factory=asyncio.Event)
    second: asyncio.Event = field(default_factory=asyncio.Event)


class Worker:
    """Runs handlers for jobs of named queues::

        from eventq.worker import Worker

        worker = Worker(port=9922, concurrency=8)

        @worker.handler("emails")
        def send(job):                      # or `async def`
            deliver(job.json())
            return b"sent"                  # the job's result; raise to fail it

        @worker.handler("report", inputs=True)
        def report(job):                    # a job added with after=[a, b]
            return b"+".join(upstream.data for upstream in job.inputs)  # a's, then b's

        worker.run()                        # until SIGTERM / Ctrl-C
    """

    def __init__(self, host: str = "127.0.0.1", port: int = 9922, *, concurrency: int = 8,
                 processes: bool = False, lease_wait_ms: int = LEASE_WAIT_MS,
                 status: TextIO | None | str = STATUS_AUTO, token: str | None = None,
                 tls: ssl.SSLContext | None = None) -> None:
        if concurrency < 1:
            raise ValueError("concurrency must be at least 1")
        self.host, self.port = host, port
        # Presented with `auth` on each connection (docs/security.md, "Tokens and roles").
        self.token = token
        self.tls = tls  # a server speaking TLS: eventq.client.tls_context(...)
        self.concurrency = concurrency
        self.processes = processes
        self.lease_wait_ms = lease_wait_ms
        # A terminal to draw the live status line on (None: none; STATUS_AUTO: run()
        # decides).
        self.status_stream = status
        self.handlers: dict[str, Handler] = {}
        self.tally = Tally()
        self._running: dict[object, Running] = {}
        self._leasing: set[asyncio.Task] = set()
        self._stop = _Stop()  # a new one for each serve()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._client: AsyncClient | None = None
        self._executor: concurrent.futures.Executor | None = None
        self._started_s = time.monotonic()
        # Leases that keep failing are said once, then at growing intervals.
        self._lease_failures = Reminder(report_after_s=0.0)

    # --- configuration --------------------------------------------------------------

    def handler(self, queue: str, *, timeout_ms: int | None = None, inputs: bool = False,
                ) -> Callable[[HandlerFn], HandlerFn]:
        """Decorate a callable to handle the jobs of ``queue`` (see ``add_handler``)."""

        def register(fn: HandlerFn) -> HandlerFn:
            self.add_handler(queue, fn, timeout_ms=timeout_ms, inputs=inputs)
            return fn

        return register

    def add_handler(self, queue: str, fn: Callable[[WorkerJob], Any], *,
                    timeout_ms: int | None = None, inputs: bool = False) -> None:
        """``fn(job)`` handles the jobs of ``queue`` (failed past ``timeout_ms``).
        ``inputs=True``: each job's inputs are fetched for it (one more request per
        job), a tuple of ``Result`` in -after order as ``job.inputs``."""
        if queue in self.handlers:
            raise ValueError(f"queue {queue!r} already has a handler")
        self.handlers[queue] = Handler(fn, None if timeout_ms is None else timeout_ms / 1000,
                                       inputs)

    def add_program(self, queue: str, argv: list[str], *, timeout_ms: int | None = None,
                    inputs: bool = False) -> None:
        """Run ``argv`` for each job of ``queue`` (payload on stdin, result from stdout;
        killed at ``timeout_ms``, default the job's TTR). ``inputs=True``: the job's
        inputs are files in the directory ``$EVENTQ_INPUTS`` (eventq/worker/program.py)."""
        limit_s = None if timeout_ms is None else timeout_ms / 1000
        self.add_handler(queue, Program(tuple(argv), limit_s, inputs), inputs=inputs)

    # --- running --------------------------------------------------------------------

    def run(self) -> int:
        """Serve until stopped (SIGTERM, SIGINT); 0 once every job is accounted for.
        In a program that configured no logging, the worker's lines go to stderr (and
        its status line, on a terminal) as ``eventq worker``'s do."""
        chosen = self.status_stream
        with default_output() as ours:
            if chosen == STATUS_AUTO:
                self.status_stream = terminal_or_none(sys.stderr) if ours else None
            try:
                asyncio.run(self.serve())
            finally:
                self.status_stream = chosen
        return 0

    def stop(self) -> None:
        """Ask the worker to stop, from any thread (a second call ends running jobs)."""
        if self._loop is not None:
            self._loop.call_soon_threadsafe(self._request_stop)

    def _request_stop(self) -> None:
        self._stop.requests += 1
        if self._stop.requests == 1:
            log.warning("stopping: no new jobs; %d running may finish until their TTR "
                        "(stop again to end them now)", len(self._running))
            self._stop.first.set()
        else:
            self._stop.second.set()

    async def serve(self) -> None:
        if not self.handlers:
            raise ValueError("no handlers: add one with @worker.handler(queue) or add_program")
        self._loop = loop = asyncio.get_running_loop()
        self._stop = _Stop()
        self._started_s = time.monotonic()
        signals = self._install_signals(loop)
        # A slot holds one connection at a time, its heartbeat and its log's lookup one
        # each.
        self._client = AsyncClient(self.host, self.port, pool_size=3 * self.concurrency + 2,
                                   token=self.token, tls=self.tls)
        self._executor = self._make_executor()
        slots = [asyncio.create_task(self._slot()) for _ in range(self.concurrency)]
        status = (asyncio.create_task(self._show_status())
                  if self._status_line_stream() is not None else None)
        try:
            await self._stop.first.wait()
            # A lease in flight is let finish (its wait, lease_wait_ms, and a grace), and a
            # job it brings runs as the running ones do: cancelling it could drop a reply
            # the server already sent, and the job would wait out its TTR (CI, 2026-11-27).
            # Past that it cannot be a reply on its way (a server that is down: the lease
            # is still connecting), so it is cancelled.
            loop.call_later(self.lease_wait_ms / 1000 + LEASE_REPLY_GRACE_S,
                            self._cancel_leases)
            await self._drain(slots)
        finally:
            for task in slots:
                task.cancel()
            await asyncio.gather(*slots, return_exceptions=True)
            if status is not None:
                status.cancel()
                self._draw_status(final=True)
            for sig in signals:
                loop.remove_signal_handler(sig)
            self._executor.shutdown(wait=False, cancel_futures=True)
            await self._client.close()
        log.warning("stopped: %s", self.tally.line(time.monotonic(), self._started_s))

    def _install_signals(self, loop: asyncio.AbstractEventLoop) -> list[int]:
        if threading.current_thread() is not threading.main_thread():
            return []  # signals reach the main thread only: use stop()
        installed: list[int] = []
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, self._request_stop)
            installed.append(sig)
        return installed

    def _make_executor(self) -> concurrent.futures.Executor:
        if self.processes:
            return concurrent.futures.ProcessPoolExecutor(self.concurrency)
        return concurrent.futures.ThreadPoolExecutor(self.concurrency, "eventq-handler")

    async def _drain(self, slots: list[asyncio.Task]) -> None:
        """Let running jobs, and leases in flight, finish until their lease deadlines;
        end the rest."""
        for running in self._running.values():
            if running.heartbeat is not None:
                running.heartbeat.cancel()  # "until their TTR": the lease is not extended
        second: asyncio.Future[object] = asyncio.ensure_future(self._stop.second.wait())
        try:
            while True:
                now = time.monotonic()
                overdue = [r for r in self._running.values()
                           if r.ended is None and r.deadline_s - DRAIN_MARGIN_S <= now]
                for running in overdue:
                    self._end(running, "the worker stopped and the job did not finish "
                                       "before its lease ended (TTR)")
                pending = [r.deadline_s for r in self._running.values() if r.ended is None]
                timeout = max(0.0, min(pending) - DRAIN_MARGIN_S - now) if pending else 0.1
                busy = [slot for slot in slots if not slot.done()]
                if not busy:
                    return
                done, _ = await asyncio.wait(
                    [second, *busy], timeout=timeout, return_when=asyncio.FIRST_COMPLETED)
                if second in done:
                    self._cancel_leases()  # given back by the server
                    for running in list(self._running.values()):
                        self._end(running, "the worker was stopped (a second stop signal) "
                                           "before the job finished")
                    second = asyncio.ensure_future(asyncio.sleep(3600))
        finally:
            second.cancel()

    def _cancel_leases(self) -> None:
        for lease in list(self._leasing):
            lease.cancel()

    def _end(self, running: Running, why: str) -> None:
        if running.ended is None:
            running.ended = why
            running.work.cancel()

    # --- a slot: lease, handle, report ----------------------------------------------

    @property
    def _server(self) -> AsyncClient:
        """The client of the server, while serve() runs."""
        assert self._client is not None, "only while serving"
        return self._client

    async def _slot(self) -> None:
        names = list(self.handlers)
        failures = 0
        while not self._stop.first.is_set():
            lease = asyncio.ensure_future(self._server.lease(names, self.lease_wait_ms))
            self._leasing.add(lease)
            try:
                job = await lease
            except TimedOut:
                continue
            except asyncio.CancelledError:
                if self._stop.first.is_set():
                    return  # stopping: the server gives back a lease it could not deliver
                raise
            except (ServerError, OSError) as error:  # ConnectionLost, Unavailable too
                failures += 1
                wait_s = RETRY_S[min(failures, len(RETRY_S)) - 1]
                self._lease_failed(error)
                await self._sleep_unless_stopping(wait_s)
                continue
            finally:
                self._leasing.discard(lease)
            failures = 0
            self._lease_worked()
            await self._handle(job)

    def _lease_failed(self, error: BaseException) -> None:
        """Said once for all slots, then at growing intervals, not a line per slot and
        attempt (docs/architecture.md, "Feedback to users"). A connection that cannot be
        made is the client's to say (eventq/client/connecting.py): it says so within
        seconds, and reminds."""
        if isinstance(error, Unavailable):
            return
        now = time.monotonic()
        if not self._lease_failures.failed(now):
            return
        failing_s = self._lease_failures.failing_for(now)
        if self._lease_failures.reports == 1:
            log.warning("lease failed (%s); retrying with backoff", error)
        else:
            log.warning("leases still failing after %.0fs (%s); retrying", failing_s, error)

    def _lease_worked(self) -> None:
        failed_s = self._lease_failures.recovered(time.monotonic())
        if failed_s is not None:
            log.warning("leasing works again, after %.0fs", failed_s)

    async def _sleep_unless_stopping(self, seconds: float) -> None:
        try:
            async with asyncio.timeout(seconds):
                await self._stop.first.wait()
        except TimeoutError:
            pass

    async def _handle(self, job: Job) -> None:
        handler = self.handlers[job.name]
        began = time.monotonic()
        # The attempt number is not in a lease reply (workq's bytes): the log line reads
        # it meanwhile, a read per job (about 12% of the jobs/s of trivial jobs), so
        # only when the line is written (not with --quiet).
        attempt = (asyncio.ensure_future(self._server.inspect_job(job.id))
                   if log.isEnabledFor(logging.INFO) else None)
        work = asyncio.ensure_future(self._work(handler, job))
        running = Running(job, work, began + job.ttr_ms / 1000)
        self._running[work] = running
        if not self._stop.first.is_set():
            running.heartbeat = asyncio.create_task(self._heartbeat(running))
        self.tally.running += 1
        ok: bool | None  # None: the job ends unreported
        group = None  # a failure's group (JobFailed's), None: the default
        try:
            try:
                ok, result = True, as_result(await work)
            except asyncio.CancelledError:
                if running.ended is None:
                    raise  # the slot itself is cancelled
                ok, result = False, running.ended.encode()
            except Unreported:
                ok, result = None, b""
            except Exception as error:  # the handler failed the job
                ok, result, group = False, failure_of(error), getattr(error, "group", None)
            finally:
                if running.heartbeat is not None:
                    running.heartbeat.cancel()
            outcome = "lost" if ok is None else await self._report(job, ok, result, group)
        except BaseException:
            if attempt is not None:
                attempt.cancel()
            raise
        finally:
            self.tally.running -= 1
            del self._running[work]
            if not work.done():
                work.cancel()
        took = time.monotonic() - began
        self.tally.finished(outcome, time.monotonic())
        if attempt is not None:
            log.info("job %s queue=%s attempt=%s duration=%.3fs outcome=%s%s", job.id,
                     job.name, await _attempt_of(attempt), took, outcome,
                     "" if ok is not False
                     else " result=" + repr(result[:120].decode("utf-8", "replace")))

    async def _work(self, handler: Handler, job: Job) -> Any:
        """What the handler returns for the job, its inputs fetched first if it asked
        for them. One task from the lease on, so the heartbeat holds the lease and a
        stop ends the job during the fetch too."""
        inputs = await self._inputs_of(job) if handler.inputs else None
        call = asyncio.ensure_future(self._call(handler, WorkerJob.of(job, inputs)))
        try:
            return await self._limited(call, handler)
        finally:
            call.cancel()  # ended from outside (a stop): the handler goes with it

    async def _inputs_of(self, job: Job) -> tuple[Result, ...]:
        """The job's inputs (``inputs <id>``), asked again as a report is
        (``_report``). ``Unreported`` when the job is gone (deleted, TTL) or the server
        could not answer; a refusal (a workq server has no ``inputs``) fails the job."""
        for wait_s in (0.0, *RETRY_S):
            if wait_s:
                await asyncio.sleep(wait_s)
            try:
                return tuple(await self._server.inputs(job.id))
            except NotFound:
                raise Unreported("gone before its handler ran") from None
            except ClientError as error:
                raise JobFailed(f"its inputs could not be read: {error}") from None
            except ServerError as error:  # ConnectionLost, Unavailable too
                log.warning("job %s: fetching its inputs failed (%s); retrying", job.id, error)
        log.error("job %s: its inputs could not be fetched; its TTR will time it out", job.id)
        raise Unreported("its inputs could not be fetched")

    async def _limited(self, work: asyncio.Future[Any], handler: Handler) -> Any:
        if handler.limit_s is None:  # add_program: the Program kills itself at its limit
            return await work
        try:
            async with asyncio.timeout(handler.limit_s):
                return await asyncio.shield(work)
        except TimeoutError:
            work.cancel()
            raise JobFailed(f"the handler ran over its time limit of {handler.limit_s:g}s")

    def _call(self, handler: Handler, job: WorkerJob) -> Awaitable[Any]:
        if handler.is_async:
            awaitable: Awaitable[Any] = handler.fn(job)
            return awaitable
        return asyncio.get_running_loop().run_in_executor(self._executor, handler.fn, job)

    async def _heartbeat(self, running: Running) -> None:
        """Touch the lease every third of its TTR while the handler runs."""
        job = running.job
        every_s = max(job.ttr_ms / 1000 / HEARTBEAT_FRACTION, MIN_HEARTBEAT_S)
        while True:
            await asyncio.sleep(every_s)
            try:
                await self._server.touch(job.id)
                running.deadline_s = time.monotonic() + job.ttr_ms / 1000
            except NotFound:
                log.warning("job %s: its lease is gone (timed out or deleted); the result "
                            "will not count", job.id)
                return
            except ServerError as error:  # ConnectionLost too
                log.warning("job %s: heartbeat failed (%s); trying again", job.id, error)

    async def _report(self, job: Job, ok: bool, result: bytes, group: str | None = None) -> str:
        """Complete or fail the job (in ``group``, when the failure names one); "lost"
        when its lease is gone. A report whose connection broke is sent again (a
        Duplicate result then means it arrived)."""
        for attempt, wait_s in enumerate((0.0, *RETRY_S)):
            if wait_s:
                await asyncio.sleep(wait_s)
            try:
                if ok:
                    await self._server.complete(job.id, result)
                elif group is None:  # as a workq server takes it
                    await self._server.fail(job.id, result)
                else:
                    await self._server.fail(job.id, result, group=group)
                return "completed" if ok else "failed"
            except NotFound:
                return "lost"
            except DuplicateResult:
                return ("completed" if ok else "failed") if attempt else "lost"
            except ServerError as error:  # ConnectionLost too
                log.warning("job %s: reporting its outcome failed (%s); retrying", job.id, error)
        log.error("job %s: its outcome could not be reported; its TTR will time it out", job.id)
        return "lost"

    # --- the status line --------------------------------------------------------------

    async def _show_status(self) -> None:
        while True:
            self._draw_status()
            await asyncio.sleep(STATUS_EVERY_S)

    def _status_line_stream(self) -> TextIO | None:
        stream = self.status_stream
        return None if isinstance(stream, str) else stream  # STATUS_AUTO: run() decides

    def _draw_status(self, final: bool = False) -> None:
        stream = self._status_line_stream()
        if stream is None:
            return
        line = self.tally.line(time.monotonic(), self._started_s,
                               stopping=self._stop.first.is_set())
        stream.write(CLEAR_LINE + line + ("\n" if final else ""))
        stream.flush()


async def _attempt_of(lookup: asyncio.Future) -> str:
    try:
        return str((await lookup).attempts)
    except (EventqError, OSError):
        return "?"
