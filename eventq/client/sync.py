"""``Client``: the blocking client, a pool of sockets around the pure calls
(eventq/client/calls.py). Thread-safe: each call borrows a connection of its own."""

from __future__ import annotations

import functools
import select
import socket
import ssl
import threading
import time
import uuid
from typing import Callable, Concatenate, Iterable, ParamSpec, TypeVar

from eventq.client import calls
from eventq.client.calls import Call
from eventq.client.connecting import ConnectReporter, cannot_connect
from eventq.client.errors import ConnectionLost, EventqError, Unavailable
from eventq.client.models import NewJob
from eventq.protocol.reply_reader import Shape, reply_end

RECV_BYTES = 256 * 1024
FIRST_RETRY_S = 0.05  # reconnecting waits this, doubling up to MAX_RETRY_S
MAX_RETRY_S = 1.0
PIPELINE_WINDOW = 256  # add_many keeps at most this many requests unanswered

P = ParamSpec("P")  # a call's arguments
T = TypeVar("T")  # what its reply is parsed into
C = TypeVar("C")  # what connect_with_backoff connects


class Connection:
    """One socket and the bytes read ahead of the reply being read."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.buffer = bytearray()

    def send(self, data: bytes) -> None:
        self.sock.sendall(data)

    @property
    def usable(self) -> bool:
        """Not closed by the server while it sat idle (docs/operations.md, "Planned
        restarts"): an idle connection has nothing to read unless the server closed it
        (an end, or a TLS close), and a request sent on it would be lost without a word."""
        if self.buffer:
            return False
        try:
            readable, _, _ = select.select([self.sock], [], [], 0)
        except (OSError, ValueError):  # closed here
            return False
        return not readable

    def read(self, shape: Shape, timeout_s: float) -> bytes:
        deadline = time.monotonic() + timeout_s
        while True:
            end = reply_end(self.buffer, shape)
            if end is not None:
                reply = bytes(self.buffer[:end])
                del self.buffer[:end]
                return reply
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise ConnectionLost(f"no reply within {timeout_s:g}s")
            self.sock.settimeout(remaining)
            try:
                chunk = self.sock.recv(RECV_BYTES)
            except socket.timeout:
                continue
            if not chunk:
                raise ConnectionLost("the server closed the connection")
            self.buffer += chunk

    def close(self) -> None:
        try:
            self.sock.close()
        except OSError:
            pass


def connect_with_backoff(connect: Callable[[], C], timeout_s: float,
                         reporter: ConnectReporter) -> C:
    """``connect()`` until it works, waiting longer each time, for up to ``timeout_s``;
    ``reporter`` says so soon if it keeps failing (docs/architecture.md, "Feedback to
    users")."""
    started = time.monotonic()
    wait_s = FIRST_RETRY_S
    while True:
        try:
            connection = connect()
        except ssl.SSLError:
            raise  # a certificate refused: trying again changes nothing
        except OSError as error:
            reporter.failed(error)
            waited_s = time.monotonic() - started
            if waited_s + wait_s > timeout_s:
                raise Unavailable(cannot_connect(reporter.host, reporter.port, error,
                                                 waited_s)) from None
            time.sleep(wait_s)
            wait_s = min(wait_s * 2, MAX_RETRY_S)
            continue
        reporter.connected()
        return connection


def _sync(build: Callable[P, Call[T]]) -> Callable[Concatenate[Client, P], T]:
    """The blocking client's method of a call: build it, send it, its parsed reply."""

    @functools.wraps(build)
    def method(self: Client, /, *args: P.args, **kwargs: P.kwargs) -> T:
        return self.execute(build(*args, **kwargs))

    return method


class Client:
    """A blocking eventq (and workq) client::

        from eventq.client import Client

        with Client("127.0.0.1", 9922) as client:
            job_id = client.add("emails", b"hello", ttr_ms=30_000)
            job = client.lease("emails", wait_timeout_ms=1_000)
            client.complete(job.id, b"sent")
            print(client.result(job_id).text)       # "sent"

    Connections are pooled (``pool_size``), made on demand and replaced when they break;
    a server that is down is retried with backoff for ``connect_timeout_s``. Reads
    (inspect, result, touch, ...) are repeated on a new connection when one breaks;
    writes raise ``ConnectionLost`` (they may have taken effect). Every reply waits
    ``timeout_s`` beyond the request's own wait-timeout.
    """

    def __init__(self, host: str = "127.0.0.1", port: int = 9922, *, pool_size: int = 8,
                 timeout_s: float = 30.0, connect_timeout_s: float = 30.0,
                 token: str | None = None, tls: ssl.SSLContext | None = None) -> None:
        self.host, self.port = host, port
        # A server speaking TLS: eventq.client.tls_context(ca=...) (docs/security.md,
        # "TLS and client certificates").
        self._tls = tls
        # Sent with `auth` first on every connection; None: no auth (docs/security.md,
        # "Tokens and roles").
        self._auth = None if token is None else calls.auth(token)
        self.timeout_s = timeout_s
        self.connect_timeout_s = connect_timeout_s
        self._idle: list[Connection] = []
        self._slots = threading.BoundedSemaphore(pool_size)
        self._lock = threading.Lock()
        self._closed = False
        self._reporter = ConnectReporter(host, port)

    # --- the pool ----------------------------------------------------------------

    def _connect(self) -> Connection:
        def attempt() -> Connection:
            sock = socket.create_connection((self.host, self.port), timeout=self.timeout_s)
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            if self._tls is not None:
                try:
                    sock = self._tls.wrap_socket(sock, server_hostname=self.host)
                except BaseException:
                    sock.close()
                    raise
            return Connection(sock)

        connection = connect_with_backoff(attempt, self.connect_timeout_s, self._reporter)
        if self._auth is not None:
            try:
                connection.send(self._auth.data)
                self._auth.parse(connection.read(self._auth.shape, self.timeout_s))
            except BaseException:
                connection.close()
                raise
        return connection

    def _acquire(self) -> Connection:
        if self._closed:
            raise Unavailable("the client is closed")
        self._slots.acquire()
        while True:
            with self._lock:
                connection = self._idle.pop() if self._idle else None
            if connection is None:
                break
            if connection.usable:
                return connection
            connection.close()
        try:
            return self._connect()
        except BaseException:
            self._slots.release()
            raise

    def _release(self, connection: Connection | None) -> None:
        if connection is not None:
            with self._lock:
                if self._closed:
                    connection.close()
                else:
                    self._idle.append(connection)
        self._slots.release()

    def execute(self, call: Call[T]) -> T:
        """Send one call and return its parsed reply (the methods below use this)."""
        for attempt in (1, 2):
            connection = self._acquire()
            try:
                connection.send(call.data)
                reply = connection.read(call.shape, self.timeout_s + call.wait_s)
            except (OSError, ConnectionLost) as error:
                connection.close()
                self._release(None)
                if call.retry_safe and attempt == 1:
                    continue  # a read: ask again on a new connection
                if isinstance(error, ConnectionLost):
                    raise
                raise ConnectionLost(f"connection to {self.host}:{self.port} broke: {error}") from None
            self._release(connection)
            return call.parse(reply)
        raise AssertionError("unreachable")

    def close(self) -> None:
        with self._lock:
            self._closed = True
            idle, self._idle = self._idle, []
        for connection in idle:
            connection.close()

    def __enter__(self) -> "Client":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # --- the operations (eventq/client/calls.py documents each) ------------------

    add = _sync(calls.add)
    schedule = _sync(calls.schedule)
    run = _sync(calls.run)
    result = _sync(calls.result)
    inputs = _sync(calls.inputs)
    lease = _sync(calls.lease)
    complete = _sync(calls.complete)
    fail = _sync(calls.fail)
    delete = _sync(calls.delete)
    touch = _sync(calls.touch)
    pause = _sync(calls.pause)
    resume = _sync(calls.resume)
    inspect_job = _sync(calls.inspect_job)
    inspect_jobs = _sync(calls.inspect_jobs)
    inspect_tagged = _sync(calls.inspect_tagged)
    inspect_queue = _sync(calls.inspect_queue)
    inspect_queues = _sync(calls.inspect_queues)
    inspect_server = _sync(calls.inspect_server)
    digest = _sync(calls.digest)
    recur = _sync(calls.recur)
    unrecur = _sync(calls.unrecur)
    recurrences = _sync(calls.recurrences)
    retry = _sync(calls.retry)
    retry_group = _sync(calls.retry_group)
    inspect_failed = _sync(calls.inspect_failed)
    inspect_failed_jobs = _sync(calls.inspect_failed_jobs)

    def add_many(self, jobs: Iterable[NewJob]) -> list[uuid.UUID]:
        """Add many jobs pipelined on one connection (``PIPELINE_WINDOW`` in flight):
        their ids, in order. If any is refused, ``AddManyError`` says which (the others
        are added)."""
        prepared = prepare(jobs)
        sent = [item for item in prepared if isinstance(item, Call)]
        return added_or_raise(merge(prepared, pipeline(self, sent) if sent else []))


class AddManyError(EventqError):
    """Some jobs of ``add_many`` were refused: ``errors`` maps their index to the error;
    ``ids`` holds every job's id (the refused ones included)."""

    def __init__(self, errors: dict[int, EventqError], ids: list[uuid.UUID | None]) -> None:
        first = next(iter(errors.values()))
        super().__init__(f"{len(errors)} of {len(ids)} jobs were refused; first: {first!r}")
        self.errors = errors
        self.ids = ids


Prepared = Call[uuid.UUID] | EventqError  # a job's call, or its refusal before sending
Outcome = uuid.UUID | EventqError  # a job's id, or the error its reply raised


def prepare(jobs: Iterable[NewJob]) -> list[Prepared]:
    """Each job's call, or the error that refuses it before sending (a bad name)."""
    prepared: list[Prepared] = []
    for job in jobs:
        try:
            prepared.append(calls.add_job(job))
        except EventqError as error:
            prepared.append(error)
    return prepared


def merge(prepared: list[Prepared], replies: list[Outcome]) -> list[Outcome]:
    """The outcome of each prepared job: its reply's, or its refusal before sending."""
    answers = iter(replies)
    return [next(answers) if isinstance(item, Call) else item for item in prepared]


def added_or_raise(outcomes: list[Outcome]) -> list[uuid.UUID]:
    errors = {i: o for i, o in enumerate(outcomes) if isinstance(o, EventqError)}
    ids = [None if isinstance(o, EventqError) else o for o in outcomes]
    if errors:
        raise AddManyError(errors, ids)
    return [o for o in ids if o is not None]


def pipeline(client: Client, built: list[Call[uuid.UUID]]) -> list[Outcome]:
    """Send ``built`` on one connection with up to ``PIPELINE_WINDOW`` unanswered;
    each call's parsed reply, or the error it raised."""
    connection = client._acquire()
    outcomes: list[Outcome] = []
    try:
        sent = 0
        while len(outcomes) < len(built):
            burst = built[sent:len(outcomes) + PIPELINE_WINDOW]
            if burst:
                connection.send(b"".join(call.data for call in burst))
                sent += len(burst)
            call = built[len(outcomes)]
            reply = connection.read(call.shape, client.timeout_s + call.wait_s)
            try:
                outcomes.append(call.parse(reply))
            except EventqError as error:
                outcomes.append(error)
    except (OSError, ConnectionLost) as error:
        connection.close()
        client._release(None)
        raise ConnectionLost(f"add_many: the connection broke after {len(outcomes)} of "
                             f"{len(built)} replies ({error}); the rest may or may not be added")
    client._release(connection)
    return outcomes
