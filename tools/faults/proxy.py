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

A blackhole or delay may be one-way (``direction`` ``up``: from the connecting side to
the target only; ``down``: back only): the other direction passes, as when one side's
packets are dropped by a firewall and the other's are not.

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
     "only_pids": [4242], "direction": "up"}            -> {"ok": true}
    {"op": "set_modes", "changes": [<set_mode's fields>, ...]}   (applied in one step)
    {"op": "stats"}                                     -> {"ok": true, "routes": {name: {...}}}
    {"op": "quit"}                                      -> {"ok": true}, then the proxy exits
    (a request that fails)                              -> {"ok": false, "error": "why"}

The proxy exits when its stdin closes (its controller is gone). ``FaultProxy`` below is
the controller; the proxy process is tools/faults/proxy_process.py. The modes and the
/proc readers here are pure and unit tested.
"""

from __future__ import annotations

import json
import os
import select
import socket
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path

PASS, BLACKHOLE, RESET, DELAY = "pass", "blackhole", "reset", "delay"
MODE_KINDS = (PASS, BLACKHOLE, RESET, DELAY)
UP, DOWN = "up", "down"  # client to target, target to client
MAX_DELAY_MS = 600_000
LOOPBACK = "127.0.0.1"
PROC = Path("/proc")
REPOSITORY = Path(__file__).resolve().parents[2]


# --- modes (pure) -----------------------------------------------------------------


@dataclass(frozen=True)
class RouteMode:
    """A route's mode; ``only_pids`` None means every connection of the route."""

    kind: str = PASS
    delay_ms: int = 0
    only_pids: frozenset[int] | None = None
    direction: str | None = None  # None: both ways; UP or DOWN: that one only

    def applies_to(self, owner_pid: int | None) -> bool:
        """Whether the mode governs a connection opened by ``owner_pid`` (None: the
        owner is not one of ``only_pids``, or not known)."""
        return self.only_pids is None or owner_pid in self.only_pids

    def describe(self) -> str:
        text = self.kind + (f" {self.delay_ms}ms" if self.kind == DELAY else "")
        if self.direction is not None:
            text += f" {self.direction} only"
        if self.only_pids is not None:
            text += " only pids " + ",".join(map(str, sorted(self.only_pids)))
        return text


PASS_MODE = RouteMode()


def parse_mode(kind: str, ms: int | None = None, only_pids=None,
               direction: str | None = None) -> RouteMode:
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
    if direction is not None:
        if direction not in (UP, DOWN):
            raise ValueError(f"direction must be {UP} or {DOWN}, not {direction!r}")
        if kind not in (BLACKHOLE, DELAY):  # a reset closes both ways; pass has none
            raise ValueError(f"only blackhole and delay go one way, not {kind}")
    return RouteMode(kind, ms if kind == DELAY else 0, pids, direction)


def effective_mode(mode: RouteMode, owner_pid: int | None) -> RouteMode:
    """The mode one connection sees: the route's, or pass if the route's mode is for
    other processes."""
    return mode if mode.applies_to(owner_pid) else PASS_MODE


def release_time(arrival_s: float, mode: RouteMode, direction: str = UP) -> float | None:
    """When a chunk that arrived at ``arrival_s`` going ``direction`` may be forwarded
    under ``mode`` (None: not while it lasts)."""
    if mode.direction is not None and mode.direction != direction:
        return arrival_s
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
    direction: str | None = None

    def request(self) -> dict:
        parse_mode(self.mode, self.ms, self.only_pids, self.direction)  # fail in the caller
        pids = None if self.only_pids is None else sorted(self.only_pids)
        return {"name": self.name, "mode": self.mode, "ms": self.ms, "only_pids": pids,
                "direction": self.direction}


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
                [sys.executable, "-m", "tools.faults.proxy_process"],
                stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=log,
                cwd=REPOSITORY,  # where `tools` is a package, whatever the caller's directory
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

    def set_mode(self, name: str, mode: str, ms: int | None = None, only_pids=None,
                 direction: str | None = None) -> None:
        """Change one route's mode; returns once the proxy applies it."""
        self.set_modes([ModeChange(name, mode, ms, only_pids, direction)])

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
