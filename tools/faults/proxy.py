"""A TCP fault proxy for the fault campaign, run in its own OS process.

The proxy forwards many *routes*: each listens on a loopback port and forwards every
connection it accepts to a target (127.0.0.1:port). Each route has a *mode* that its
controller changes at run time:

``pass``
    forward everything at once.
``blackhole``
    forward nothing in either direction: connections stay open and what arrives is
    held (not dropped), new connections are accepted but nothing flows. On a heal the
    held bytes flow on in order, as TCP's retransmissions would after a partition
    heals. Once ``HOLD_LIMIT_BYTES`` are held in a direction the proxy stops reading
    it, so the sender's socket buffers fill and it blocks, as behind a real partition.
``reset``
    close every current connection with a RST (SO_LINGER 0) on both sides, and RST new
    connections at once.
``delay <ms>``
    forward every chunk ``ms`` after it arrived (to the event loop's millisecond), order
    kept per direction (bytes held by a blackhole that ends in a delay count from their
    arrival, so they flow at once). Connection set-up is not delayed.

A FIN or RST from one side is held behind that side's bytes like them. Held bytes
wait for as long as the blackhole lasts: the proxy never times a connection out.

A mode may be restricted to the connections opened by a set of processes
(``only_pids``); the route's other connections pass. The proxy finds the process that
opened an accepted connection through /proc: the peer's port is a local port in
/proc/net/tcp (or tcp6: Java's sockets are IPv6) with a socket inode, and one of the
given pids has ``socket:[inode]`` among /proc/<pid>/fd.

The control channel is the proxy process's stdin and stdout, one JSON object a line:
every request gets exactly one reply, sent once the request is applied.

    (on start)                                          -> {"ok": true, "ready": true, "pid": 123}
    {"op": "add_route", "name": "proc0->broker1", "target_port": 9092,
     "listen_port": 0}                                  -> {"ok": true, "port": 40123}
    {"op": "set_mode", "name": "proc0->broker1", "mode": "delay", "ms": 200,
     "only_pids": [4242]}                               -> {"ok": true}
    {"op": "set_modes", "changes": [<set_mode's fields>, ...]}   (applied in one step)
    {"op": "stats"}                                     -> {"ok": true, "routes": {name: {...}}}
    {"op": "quit"}                                      -> {"ok": true}, then the proxy exits
    (a request that fails)                              -> {"ok": false, "error": "why"}

The proxy exits when its stdin closes (its controller is gone). ``FaultProxy`` below is
the controller. Everything above the "The proxy process" line is pure and unit tested.
"""

from __future__ import annotations

import asyncio
import collections
import json
import logging
import os
import select
import socket
import struct
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path

PASS, BLACKHOLE, RESET, DELAY = "pass", "blackhole", "reset", "delay"
MODE_KINDS = (PASS, BLACKHOLE, RESET, DELAY)
MAX_DELAY_MS = 600_000
LOOPBACK = "127.0.0.1"
PROC = Path("/proc")


# --- modes (pure) -----------------------------------------------------------------


@dataclass(frozen=True)
class RouteMode:
    """A route's mode; ``only_pids`` None means every connection of the route."""

    kind: str = PASS
    delay_ms: int = 0
    only_pids: frozenset[int] | None = None

    def applies_to(self, owner_pid: int | None) -> bool:
        """Whether the mode governs a connection opened by ``owner_pid`` (None: the
        owner is not one of ``only_pids``, or not known)."""
        return self.only_pids is None or owner_pid in self.only_pids

    def describe(self) -> str:
        text = self.kind + (f" {self.delay_ms}ms" if self.kind == DELAY else "")
        if self.only_pids is not None:
            text += " only pids " + ",".join(map(str, sorted(self.only_pids)))
        return text


PASS_MODE = RouteMode()


def parse_mode(kind: str, ms: int | None = None, only_pids=None) -> RouteMode:
    """A validated mode from set_mode's arguments; ValueError says what is wrong."""
    if kind not in MODE_KINDS:
        raise ValueError(f"mode must be one of {', '.join(MODE_KINDS)}, not {kind!r}")
    if kind == DELAY:
        if ms is None or isinstance(ms, bool) or not isinstance(ms, int):
            raise ValueError(f"delay needs a whole number of milliseconds, not {ms!r}")
        if not 0 <= ms <= MAX_DELAY_MS:
            raise ValueError(f"delay must be 0..{MAX_DELAY_MS} ms, not {ms}")
    elif ms is not None:
        raise ValueError(f"only delay takes ms (got {kind} with ms={ms})")
    pids = None
    if only_pids is not None:
        pids = frozenset(only_pids)
        if not pids or not all(isinstance(p, int) and p > 0 for p in pids):
            raise ValueError(f"only_pids must be a non-empty list of pids, not {only_pids!r}")
    return RouteMode(kind, ms if kind == DELAY else 0, pids)


def effective_mode(mode: RouteMode, owner_pid: int | None) -> RouteMode:
    """The mode one connection sees: the route's, or pass if the route's mode is for
    other processes."""
    return mode if mode.applies_to(owner_pid) else PASS_MODE


def release_time(arrival_s: float, mode: RouteMode) -> float | None:
    """When a chunk that arrived at ``arrival_s`` may be forwarded under ``mode``
    (None: not while it lasts)."""
    if mode.kind == BLACKHOLE:
        return None
    if mode.kind == DELAY:
        return arrival_s + mode.delay_ms / 1000
    return arrival_s


class ModeTable:
    """Every route's current mode (routes not named are in pass)."""

    def __init__(self) -> None:
        self._modes: dict[str, RouteMode] = {}

    def set(self, route: str, mode: RouteMode) -> RouteMode:
        """Set a route's mode; returns the mode it replaces."""
        previous = self.get(route)
        if mode == PASS_MODE:
            self._modes.pop(route, None)
        else:
            self._modes[route] = mode
        return previous

    def get(self, route: str) -> RouteMode:
        return self._modes.get(route, PASS_MODE)

    def faulty(self) -> dict[str, RouteMode]:
        """The routes not in pass, by name."""
        return dict(self._modes)


# --- which process owns a connection (pure, /proc readers beside) ---------------------


@dataclass(frozen=True)
class TcpSocket:
    """One line of /proc/net/tcp or /proc/net/tcp6."""

    local_ip: str
    local_port: int
    remote_ip: str
    remote_port: int
    state: int
    inode: int


def decode_proc_address(text: str, byteorder: str = sys.byteorder) -> tuple[str, int]:
    """``0100007F:1F90`` -> ("127.0.0.1", 8080). The address is printed as 32-bit words
    in the kernel's byte order (reversed on little-endian machines), the port in hex."""
    address_hex, port_hex = text.split(":")
    raw = bytes.fromhex(address_hex)
    if len(raw) not in (4, 16):
        raise ValueError(f"not an IPv4 or IPv6 address: {text!r}")
    if byteorder == "little":
        raw = b"".join(raw[i:i + 4][::-1] for i in range(0, len(raw), 4))
    family = socket.AF_INET if len(raw) == 4 else socket.AF_INET6
    return socket.inet_ntop(family, raw), int(port_hex, 16)


def parse_proc_net_tcp_line(line: str, byteorder: str = sys.byteorder) -> TcpSocket | None:
    """A socket from a /proc/net/tcp{,6} line; None for the header and blank lines."""
    fields = line.split()
    if len(fields) < 10 or not fields[0].endswith(":") or not fields[0][:-1].isdigit():
        return None
    local_ip, local_port = decode_proc_address(fields[1], byteorder)
    remote_ip, remote_port = decode_proc_address(fields[2], byteorder)
    return TcpSocket(local_ip, local_port, remote_ip, remote_port, int(fields[3], 16),
                     int(fields[9]))


def find_socket_inode(sockets, local_port: int, remote_port: int) -> int | None:
    """The inode of the socket connected from ``local_port`` to ``remote_port`` (the
    peer's end of a connection the proxy accepted on ``remote_port``)."""
    for entry in sockets:
        if entry.local_port == local_port and entry.remote_port == remote_port and entry.inode:
            return entry.inode
    return None


def socket_inode_of_link(link: str) -> int | None:
    """``socket:[12345]`` (what /proc/<pid>/fd/N points to) -> 12345; None otherwise."""
    if link.startswith("socket:[") and link.endswith("]"):
        return int(link[len("socket:["):-1])
    return None


def read_tcp_sockets(proc: Path = PROC) -> list[TcpSocket]:
    sockets = []
    for table in ("tcp", "tcp6"):
        try:
            lines = (proc / "net" / table).read_text().splitlines()
        except FileNotFoundError:  # no IPv6 here
            continue
        sockets += filter(None, map(parse_proc_net_tcp_line, lines))
    return sockets


def socket_inodes_of_pid(pid: int, proc: Path = PROC) -> set[int]:
    """The inodes of every socket a process holds open (empty if it is gone)."""
    inodes = set()
    try:
        fds = os.listdir(proc / str(pid) / "fd")
    except (FileNotFoundError, PermissionError, ProcessLookupError):
        return inodes
    for fd in fds:
        try:
            inode = socket_inode_of_link(os.readlink(proc / str(pid) / "fd" / fd))
        except OSError:  # closed meanwhile
            continue
        if inode is not None:
            inodes.add(inode)
    return inodes


def owners_of_connections(peers: list[tuple[int, int]], pids, proc: Path = PROC,
                          inodes_by_pid: dict[int, set[int]] | None = None
                          ) -> list[int | None]:
    """For each accepted connection (peer port, listen port), which of ``pids`` opened
    it (None: none of them). Reads each table once for the whole batch; a JVM has
    hundreds of fds to look at, so a caller changing several routes at once passes one
    ``inodes_by_pid`` cache for all of them."""
    sockets = read_tcp_sockets(proc)
    if inodes_by_pid is None:
        inodes_by_pid = {}
    for pid in pids:
        if pid not in inodes_by_pid:
            inodes_by_pid[pid] = socket_inodes_of_pid(pid, proc)
    inodes_by_pid = {pid: inodes_by_pid[pid] for pid in pids}
    owners = []
    for peer_port, listen_port in peers:
        inode = find_socket_inode(sockets, peer_port, listen_port)
        owners.append(next((pid for pid, inodes in inodes_by_pid.items()
                            if inode is not None and inode in inodes), None))
    return owners


# --- the controller (runs in the campaign's process) ---------------------------------

PROXY_START_TIMEOUT_S = 20.0
CONTROL_REPLY_TIMEOUT_S = 20.0
PROXY_STOP_TIMEOUT_S = 10.0


class ProxyError(RuntimeError):
    """The proxy refused a request or did not answer; the message says why."""


@dataclass(frozen=True)
class ModeChange:
    """One route's new mode, for ``FaultProxy.set_modes``."""

    name: str
    mode: str
    ms: int | None = None
    only_pids: frozenset[int] | list[int] | None = None

    def request(self) -> dict:
        parse_mode(self.mode, self.ms, self.only_pids)  # fail here, in the caller
        pids = None if self.only_pids is None else sorted(self.only_pids)
        return {"name": self.name, "mode": self.mode, "ms": self.ms, "only_pids": pids}


class FaultProxy:
    """Starts the proxy process and drives it (thread-safe: one request at a time)."""

    def __init__(self, log_path: Path) -> None:
        self.log_path = Path(log_path)
        self.process: subprocess.Popen | None = None
        self._ports: dict[str, int] = {}
        self._lock = threading.Lock()
        self._pending = b""  # read from the proxy's stdout, not yet a whole reply
        self._out_of_step = False  # a reply came too late: the channel cannot be trusted

    @property
    def pid(self) -> int:
        if self.process is None:
            raise ProxyError("the proxy is not started")
        return self.process.pid

    def start(self, timeout_s: float = PROXY_START_TIMEOUT_S) -> "FaultProxy":
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        with open(self.log_path, "ab") as log:
            self.process = subprocess.Popen(
                [sys.executable, str(Path(__file__).resolve())],
                stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=log,
                start_new_session=True,  # a Ctrl-C meant for pytest must not kill it first
            )
        hello = self._read_reply(timeout_s)
        if not hello.get("ready"):
            raise ProxyError(f"the proxy did not start: {hello}")
        return self

    def add_route(self, name: str, target_port: int, listen_port: int = 0) -> int:
        """Listen for ``name`` (on ``listen_port``, 0: any free port) and forward to
        127.0.0.1:``target_port``; returns the port it listens on."""
        reply = self._request({"op": "add_route", "name": name, "target_port": target_port,
                               "listen_port": listen_port})
        self._ports[name] = reply["port"]
        return reply["port"]

    def port(self, name: str) -> int:
        return self._ports[name]

    @property
    def routes(self) -> dict[str, int]:
        """Every route's listen port, by name."""
        return dict(self._ports)

    def set_mode(self, name: str, mode: str, ms: int | None = None, only_pids=None) -> None:
        """Change one route's mode; returns once the proxy applies it."""
        self.set_modes([ModeChange(name, mode, ms, only_pids)])

    def set_modes(self, changes: list[ModeChange]) -> None:
        """Change several routes' modes in one step of the proxy's event loop."""
        self._request({"op": "set_modes", "changes": [c.request() for c in changes]})

    def heal_all(self) -> None:
        self.set_modes([ModeChange(name, PASS) for name in self._ports])

    def stats(self) -> dict[str, dict]:
        """Per route: open and accepted connections, bytes each way, bytes held, mode."""
        return self._request({"op": "stats"})["routes"]

    def stop(self) -> None:
        """Stop the proxy (idempotent): every connection through it closes."""
        if self.process is None or self.process.poll() is not None:
            return
        try:
            self._request({"op": "quit"}, timeout_s=PROXY_STOP_TIMEOUT_S)
            self.process.wait(PROXY_STOP_TIMEOUT_S)
        except (ProxyError, OSError, subprocess.TimeoutExpired):
            self.process.kill()
            self.process.wait(PROXY_STOP_TIMEOUT_S)
        finally:
            for pipe in (self.process.stdin, self.process.stdout):
                pipe.close()

    def __enter__(self) -> "FaultProxy":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    def _request(self, request: dict, timeout_s: float = CONTROL_REPLY_TIMEOUT_S) -> dict:
        with self._lock:
            if self.process is None or self.process.poll() is not None:
                raise ProxyError(f"the proxy is not running; its log: {self.log_path}")
            if self._out_of_step:
                raise ProxyError("an earlier request got no answer in time, so replies "
                                 f"cannot be matched to requests; its log: {self.log_path}")
            try:
                self.process.stdin.write(json.dumps(request).encode() + b"\n")
                self.process.stdin.flush()
            except OSError as error:
                raise ProxyError(f"the proxy is gone ({error}); its log: {self.log_path}")
            try:
                reply = self._read_reply(timeout_s)
            except ProxyError:
                self._out_of_step = True
                raise
        if not reply.get("ok"):
            raise ProxyError(f"{request.get('op')} refused: {reply.get('error')}")
        return reply

    def _read_reply(self, timeout_s: float) -> dict:
        """One reply line (a raw read with a deadline: a hung proxy must not hang the
        campaign)."""
        deadline = time.monotonic() + timeout_s
        fd = self.process.stdout.fileno()
        while b"\n" not in self._pending:
            remaining = deadline - time.monotonic()
            if remaining <= 0 or not select.select([fd], [], [], remaining)[0]:
                raise ProxyError(f"the proxy did not answer in {timeout_s}s; "
                                 f"its log: {self.log_path}")
            chunk = os.read(fd, 65536)
            if not chunk:
                raise ProxyError(f"the proxy exited; its log: {self.log_path}")
            self._pending += chunk
        line, self._pending = self._pending.split(b"\n", 1)
        return json.loads(line)


# --- the proxy process ---------------------------------------------------------------

# Bytes held per direction before the proxy stops reading it (the sender then blocks).
HOLD_LIMIT_BYTES = 4 * 1024 * 1024
CONNECT_TIMEOUT_S = 10.0
CONNECT_FAILURE_LOG_INTERVAL_S = 5.0
EOF, ABORT = object(), object()  # markers queued behind the bytes of a direction

log = logging.getLogger("faultproxy")


def set_linger_zero(transport: asyncio.Transport) -> None:
    """Make the next close send a RST instead of a FIN."""
    sock = transport.get_extra_info("socket")
    if sock is not None:
        try:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        except OSError:  # already gone
            pass


def abort_with_rst(transport: asyncio.Transport | None) -> None:
    if transport is not None and not transport.is_closing():
        set_linger_zero(transport)
        transport.abort()


class Side(asyncio.Protocol):
    """One of a link's two TCP connections: the accepted one or the upstream one."""

    def __init__(self, link: "Link") -> None:
        self.link = link
        self.transport: asyncio.Transport | None = None
        self.gone = False

    def connection_made(self, transport) -> None:
        self.transport = transport

    def data_received(self, data: bytes) -> None:
        self.link.outgoing(self).push(data)

    def eof_received(self) -> bool:
        self.link.outgoing(self).push(EOF)
        return True  # half-closed: the other way may still carry bytes

    def connection_lost(self, exc) -> None:
        self.gone = True
        self.link.side_lost(self, exc)

    def pause_writing(self) -> None:
        self.link.incoming(self).set_dest_paused(True)

    def resume_writing(self) -> None:
        self.link.incoming(self).set_dest_paused(False)


class AcceptedSide(Side):
    def __init__(self, route: "Route") -> None:
        super().__init__(Link(route, self))

    def connection_made(self, transport) -> None:
        super().connection_made(transport)
        self.link.accepted()


class Direction:
    """The bytes flowing one way through a link, held in order while its mode says so."""

    def __init__(self, link: "Link", source: Side, dest: Side | None, name: str) -> None:
        self.link = link
        self.source, self.dest = source, dest
        self.name = name  # "up" (client to target) or "down"
        self.queue: collections.deque = collections.deque()  # (arrival_s, chunk/EOF/ABORT)
        self.queued_bytes = 0
        self.timer: asyncio.TimerHandle | None = None
        self.timer_due = 0.0
        self.dest_paused = False
        self.reading_paused = False
        self.finished = False  # its EOF or abort was delivered, or its receiver is gone

    def push(self, chunk) -> None:
        if self.finished:
            return
        if isinstance(chunk, bytes):
            self.link.route.count_bytes(self.name, len(chunk))
        if (not self.queue and self.dest is not None and isinstance(chunk, bytes)
                and self.link.mode().kind == PASS):
            self.dest.transport.write(chunk)  # the common case, without queueing
            return
        self.queue.append((asyncio.get_running_loop().time(), chunk))
        if isinstance(chunk, bytes):
            self.queued_bytes += len(chunk)
        self.flush()

    def flush(self) -> None:
        """Forward what the mode lets go now; wake up again when the next chunk is due."""
        if self.dest is None or self.finished or self.link.closed:
            self.update_reading()
            return
        mode, now = self.link.mode(), asyncio.get_running_loop().time()
        while self.queue and not self.finished:
            due = release_time(self.queue[0][0], mode)
            if due is None:
                break
            if due > now:
                self.schedule(due)
                break
            self.forward(self.queue.popleft()[1])
        self.update_reading()

    def forward(self, chunk) -> None:
        transport = self.dest.transport
        if chunk is EOF:
            if transport.can_write_eof() and not transport.is_closing():
                transport.write_eof()
            self.finish()
        elif chunk is ABORT:
            abort_with_rst(transport)
            self.finish()
        else:
            self.queued_bytes -= len(chunk)
            transport.write(chunk)

    def schedule(self, due: float) -> None:
        if self.timer is not None and self.timer_due <= due:
            return
        if self.timer is not None:
            self.timer.cancel()
        self.timer_due = due
        self.timer = asyncio.get_running_loop().call_at(due, self.on_timer)

    def on_timer(self) -> None:
        self.timer = None
        self.flush()

    def finish(self) -> None:
        self.finished = True
        self.drop()
        self.link.maybe_done()

    def drop(self) -> None:
        """Forget what is held: its receiver is gone."""
        self.queue.clear()
        self.queued_bytes = 0
        if self.timer is not None:
            self.timer.cancel()
            self.timer = None

    def set_dest_paused(self, paused: bool) -> None:
        self.dest_paused = paused
        self.update_reading()

    def update_reading(self) -> None:
        """Read the source only while the receiver keeps up and little is held."""
        transport = self.source.transport if self.source is not None else None
        if transport is None or transport.is_closing():
            return
        pause = self.dest_paused or self.queued_bytes >= HOLD_LIMIT_BYTES
        if pause != self.reading_paused:
            self.reading_paused = pause
            (transport.pause_reading if pause else transport.resume_reading)()


class Link:
    """One proxied connection: the accepted side, the upstream side, both directions."""

    def __init__(self, route: "Route", client: Side) -> None:
        self.route = route
        self.client = client
        self.upstream: Side | None = None
        self.up = Direction(self, client, None, "up")
        self.down = Direction(self, None, client, "down")
        self.owner_pid: int | None = None
        self.checked_pids: set[int] = set()  # pids known not to own it
        self.closed = False
        self.peer_port = 0
        self.connecting: asyncio.Task | None = None

    def mode(self) -> RouteMode:
        return effective_mode(self.route.mode, self.owner_pid)

    def outgoing(self, side: Side) -> Direction:
        return self.up if side is self.client else self.down

    def incoming(self, side: Side) -> Direction:
        return self.down if side is self.client else self.up

    def accepted(self) -> None:
        peer = self.client.transport.get_extra_info("peername")
        self.route.accepted(self)
        if peer is None:  # the client is gone already
            self.reset()
            return
        self.peer_port = peer[1]
        if self.route.mode.only_pids is not None:
            self.route.resolve_owners([self])
        if self.mode().kind == RESET:
            self.route.resets += 1
            self.reset()
            return
        # Held here: the loop keeps only a weak reference to its tasks.
        self.connecting = asyncio.get_running_loop().create_task(self.connect_upstream())

    async def connect_upstream(self) -> None:
        loop = asyncio.get_running_loop()
        try:
            _, side = await asyncio.wait_for(
                loop.create_connection(lambda: Side(self), *self.route.target),
                CONNECT_TIMEOUT_S)
        except (OSError, asyncio.TimeoutError) as error:
            self.route.connect_failed(error)
            # The client gets the target's "connection refused" as a RST, when the
            # route's mode lets it through (a blackhole holds it like any byte).
            self.up.finish()
            self.down.push(ABORT)
            return
        if self.closed:
            abort_with_rst(side.transport)
            return
        self.upstream = side
        self.up.dest = side
        self.down.source = side
        self.down.update_reading()
        self.up.flush()

    def mode_changed(self) -> None:
        if self.mode().kind == RESET:
            self.route.resets += 1
            self.reset()
        else:
            self.up.flush()
            self.down.flush()

    def reset(self) -> None:
        """Close both connections at once with a RST."""
        self.closed = True
        for direction in (self.up, self.down):
            direction.drop()
        abort_with_rst(self.client.transport)
        abort_with_rst(self.upstream.transport if self.upstream else None)
        self.route.links.discard(self)

    def side_lost(self, side: Side, exc) -> None:
        """A side closed: what it sent still flows (then its FIN, or a RST if it was
        reset); what was on its way to it is dropped."""
        if self.closed:
            self.route.links.discard(self)
            return
        self.incoming(side).finish()
        self.outgoing(side).push(ABORT if exc is not None else EOF)
        self.maybe_done()

    def maybe_done(self) -> None:
        if self.closed or not (self.up.finished and self.down.finished):
            return
        self.closed = True
        for side in (self.client, self.upstream):
            if side is not None and side.transport is not None:
                side.transport.close()
        self.route.links.discard(self)


class Route:
    """A listening port forwarded to a target, its mode and its connections."""

    def __init__(self, name: str, target: tuple[str, int]) -> None:
        self.name = name
        self.target = target
        self.mode = PASS_MODE
        self.links: set[Link] = set()
        self.server: asyncio.AbstractServer | None = None
        self.port = 0
        self.accepted_total = 0
        self.resets = 0
        self.connect_failures = 0
        self.bytes = {"up": 0, "down": 0}
        self._last_failure_log = 0.0

    async def listen(self, port: int) -> int:
        loop = asyncio.get_running_loop()
        self.server = await loop.create_server(lambda: AcceptedSide(self), LOOPBACK, port,
                                               backlog=512)
        self.port = self.server.sockets[0].getsockname()[1]
        return self.port

    def accepted(self, link: Link) -> None:
        self.accepted_total += 1
        self.links.add(link)

    def count_bytes(self, direction: str, size: int) -> None:
        self.bytes[direction] += size

    def connect_failed(self, error: BaseException) -> None:
        self.connect_failures += 1
        now = time.monotonic()
        if now - self._last_failure_log >= CONNECT_FAILURE_LOG_INTERVAL_S:
            self._last_failure_log = now
            log.info("%s: cannot reach %s:%d (%s); %d failures so far", self.name,
                     *self.target, error, self.connect_failures)

    def set_mode(self, mode: RouteMode, inodes_by_pid: dict[int, set[int]]) -> None:
        self.mode = mode
        if mode.only_pids is not None:
            self.resolve_owners(list(self.links), inodes_by_pid)
        for link in list(self.links):
            link.mode_changed()

    def resolve_owners(self, links: list[Link],
                       inodes_by_pid: dict[int, set[int]] | None = None) -> None:
        """Find which of the mode's pids opened each link (once per pid and link)."""
        pids = self.mode.only_pids or frozenset()
        todo = [link for link in links
                if link.owner_pid is None and not pids <= link.checked_pids]
        if not todo:
            return
        owners = owners_of_connections([(link.peer_port, self.port) for link in todo], pids,
                                       inodes_by_pid=inodes_by_pid)
        for link, owner in zip(todo, owners):
            link.owner_pid = owner
            link.checked_pids |= pids

    def stats(self) -> dict:
        held = sum(d.queued_bytes for link in self.links for d in (link.up, link.down))
        return {"port": self.port, "target": list(self.target), "mode": self.mode.describe(),
                "open": len(self.links), "accepted": self.accepted_total,
                "resets": self.resets, "connect_failures": self.connect_failures,
                "bytes_up": self.bytes["up"], "bytes_down": self.bytes["down"],
                "held_bytes": held}


class Proxy:
    """Every route, and the requests of the control channel."""

    def __init__(self) -> None:
        self.routes: dict[str, Route] = {}
        self.table = ModeTable()

    async def handle(self, request: dict) -> dict:
        op = request.get("op")
        if op == "add_route":
            return {"ok": True, "port": await self.add_route(
                request["name"], int(request["target_port"]), int(request.get("listen_port", 0)))}
        if op == "set_mode":
            self.set_modes([request])
            return {"ok": True}
        if op == "set_modes":
            self.set_modes(request["changes"])
            return {"ok": True}
        if op == "stats":
            return {"ok": True, "routes": {n: r.stats() for n, r in self.routes.items()}}
        if op == "quit":
            return {"ok": True}
        raise ValueError(f"unknown op {op!r}")

    async def add_route(self, name: str, target_port: int, listen_port: int) -> int:
        if name in self.routes:
            raise ValueError(f"route {name!r} exists already")
        route = Route(name, (LOOPBACK, target_port))
        port = await route.listen(listen_port)
        self.routes[name] = route
        log.info("route %s: 127.0.0.1:%d -> 127.0.0.1:%d", name, port, target_port)
        return port

    def set_modes(self, changes: list[dict]) -> None:
        """Validate every change before applying any: all or nothing."""
        parsed = []
        for change in changes:
            if change["name"] not in self.routes:
                raise ValueError(f"no route {change['name']!r}")
            parsed.append((self.routes[change["name"]], parse_mode(
                change["mode"], change.get("ms"), change.get("only_pids"))))
        inodes_by_pid: dict[int, set[int]] = {}  # the pids' sockets, read once
        for route, mode in parsed:
            if self.table.set(route.name, mode) != mode:
                log.info("route %s: %s (%d open)", route.name, mode.describe(), len(route.links))
            route.set_mode(mode, inodes_by_pid)

    def close(self) -> None:
        for route in self.routes.values():
            route.server.close()
            for link in list(route.links):
                link.reset()


async def serve_control(proxy: Proxy) -> None:
    """Answer the controller's requests from stdin until it says quit or goes away."""
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader(limit=16 * 1024 * 1024)
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)

    def reply(message: dict) -> None:
        os.write(sys.stdout.fileno(), json.dumps(message).encode() + b"\n")

    reply({"ok": True, "ready": True, "pid": os.getpid()})
    while line := await reader.readline():
        try:
            request = json.loads(line)
            reply(await proxy.handle(request))
        except (ValueError, KeyError, TypeError, OSError) as error:  # a bad request
            reply({"ok": False, "error": f"{type(error).__name__}: {error}"})
            continue
        except Exception as error:  # a bug here: say so, and keep the routes running
            log.exception("request %s failed", line[:200])
            reply({"ok": False, "error": f"proxy bug: {type(error).__name__}: {error}"})
            continue
        if request.get("op") == "quit":
            break
    proxy.close()


def main() -> None:
    logging.basicConfig(stream=sys.stderr, level=logging.INFO,
                        format="%(asctime)s faultproxy[%(process)d] %(message)s")
    try:
        import uvloop
    except ImportError:  # plain asyncio works too, a little slower
        asyncio.run(serve_control(Proxy()))
    else:
        uvloop.run(serve_control(Proxy()))


if __name__ == "__main__":
    main()
