"""The fault proxy's own process (tools/faults/proxy.py says what it does and how it is
controlled): the routes, their links and the control channel on stdin and stdout.
``FaultProxy`` starts it as ``python -m tools.faults.proxy_process``."""

from __future__ import annotations

import asyncio
import collections
import json
import logging
import os
import socket
import struct
import sys
import time

from tools.faults.proxy import (
    LOOPBACK,
    PASS_MODE,
    RESET,
    ModeTable,
    RouteMode,
    effective_mode,
    owners_of_connections,
    parse_mode,
    release_time,
)

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
                and release_time(0.0, self.link.mode(), self.name) == 0.0):
            self.dest.transport.write(chunk)  # the common case, without queueing
            return
        self.queue.append((asyncio.get_running_loop().time(), chunk))
        if isinstance(chunk, bytes):
            self.queued_bytes += len(chunk)
            if release_time(0.0, self.link.mode(), self.name) != 0.0:  # held by a fault,
                self.link.route.held_total += len(chunk)  # not by a connection's set-up
        self.flush()

    def flush(self) -> None:
        """Forward what the mode lets go now; wake up again when the next chunk is due."""
        if self.dest is None or self.finished or self.link.closed:
            self.update_reading()
            return
        mode, now = self.link.mode(), asyncio.get_running_loop().time()
        while self.queue and not self.finished:
            due = release_time(self.queue[0][0], mode, self.name)
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
        self.held_total = 0  # bytes ever held back (a fault's evidence: it cut something)
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
                "held_bytes": held, "held_total": self.held_total}


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
                change["mode"], change.get("ms"), change.get("only_pids"),
                change.get("direction"))))
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
