"""The fault proxy: its pure parts, then a live proxy process on loopback."""

from __future__ import annotations

import os
import queue
import socket
import subprocess
import sys
import threading
import time

import pytest

from tools.faults.proxy import (
    BLACKHOLE,
    DELAY,
    PASS,
    PASS_MODE,
    RESET,
    FaultProxy,
    ModeChange,
    ModeTable,
    ProxyError,
    RouteMode,
    TcpSocket,
    decode_proc_address,
    effective_mode,
    find_socket_inode,
    owners_of_connections,
    parse_mode,
    parse_proc_net_tcp_line,
    release_time,
    socket_inode_of_link,
)

# --- modes ---------------------------------------------------------------------------


def test_parse_mode_accepts_each_kind():
    assert parse_mode("pass") == PASS_MODE
    assert parse_mode("blackhole") == RouteMode(BLACKHOLE)
    assert parse_mode("reset", only_pids=[7, 8]) == RouteMode(RESET, 0, frozenset({7, 8}))
    assert parse_mode("delay", 250) == RouteMode(DELAY, 250)


@pytest.mark.parametrize("kind, ms, pids, complaint", [
    ("drop", None, None, "mode must be one of"),
    ("delay", None, None, "whole number of milliseconds"),
    ("delay", 1.5, None, "whole number of milliseconds"),
    ("delay", -1, None, "must be 0.."),
    ("blackhole", 10, None, "only delay takes ms"),
    ("pass", None, [], "non-empty list of pids"),
    ("reset", None, [0], "non-empty list of pids"),
])
def test_parse_mode_says_what_is_wrong(kind, ms, pids, complaint):
    with pytest.raises(ValueError, match=complaint):
        parse_mode(kind, ms, pids)


def test_a_mode_for_some_pids_leaves_other_connections_in_pass():
    mode = parse_mode("blackhole", only_pids=[42])
    assert effective_mode(mode, 42) == mode
    assert effective_mode(mode, 43) == PASS_MODE
    assert effective_mode(mode, None) == PASS_MODE  # owner unknown: not one of them
    assert effective_mode(parse_mode("blackhole"), None).kind == BLACKHOLE


def test_release_time_by_mode():
    assert release_time(10.0, PASS_MODE) == 10.0
    assert release_time(10.0, RouteMode(BLACKHOLE)) is None
    assert release_time(10.0, RouteMode(DELAY, 250)) == pytest.approx(10.25)


def test_a_one_way_mode_holds_its_direction_and_passes_the_other():
    up_only = parse_mode("blackhole", direction="up")
    assert release_time(10.0, up_only, "up") is None
    assert release_time(10.0, up_only, "down") == 10.0
    down_delay = parse_mode("delay", 250, direction="down")
    assert release_time(10.0, down_delay, "up") == 10.0
    assert release_time(10.0, down_delay, "down") == pytest.approx(10.25)
    assert up_only.describe() == "blackhole up only"


@pytest.mark.parametrize("kind, direction, complaint", [
    ("reset", "up", "only blackhole and delay"),
    ("pass", "down", "only blackhole and delay"),
    ("blackhole", "sideways", "direction must be"),
])
def test_a_one_way_mode_is_refused_where_it_means_nothing(kind, direction, complaint):
    with pytest.raises(ValueError, match=complaint):
        parse_mode(kind, direction=direction)


def test_mode_table_lists_only_faulty_routes():
    table = ModeTable()
    assert table.get("a") == PASS_MODE
    assert table.set("a", RouteMode(BLACKHOLE)) == PASS_MODE
    table.set("b", RouteMode(DELAY, 5))
    assert table.set("b", PASS_MODE) == RouteMode(DELAY, 5)
    assert table.faulty() == {"a": RouteMode(BLACKHOLE)}


def test_mode_describes_itself():
    assert parse_mode("delay", 20, [3, 1]).describe() == "delay 20ms only pids 1,3"


# --- /proc parsing -------------------------------------------------------------------

TCP_HEADER = ("  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt"
              "   uid  timeout inode")
TCP_LINE = ("   3: 0100007F:A1B2 0100007F:1F90 01 00000000:00000000 00:00000000 00000000"
            "     0        0 123456 1 0000000000000000 20 4 30 10 -1")
TCP6_LINE = ("   0: 0000000000000000FFFF00000100007F:C350 0000000000000000FFFF00000100007F:"
             "2382 01 00000000:00000000 00:00000000 00000000     0        0 654321 1 "
             "0000000000000000 20 4 0 10 -1")


def test_decode_proc_address_ipv4_and_mapped_ipv6():
    assert decode_proc_address("0100007F:1F90", "little") == ("127.0.0.1", 8080)
    assert decode_proc_address("7F000001:1F90", "big") == ("127.0.0.1", 8080)
    assert decode_proc_address("0000000000000000FFFF00000100007F:0050", "little") == (
        "::ffff:127.0.0.1", 80)
    assert decode_proc_address("00000000000000000000000001000000:0001", "little") == ("::1", 1)


def test_parse_proc_net_tcp_lines():
    assert parse_proc_net_tcp_line(TCP_HEADER, "little") is None
    assert parse_proc_net_tcp_line("", "little") is None
    assert parse_proc_net_tcp_line(TCP_LINE, "little") == TcpSocket(
        "127.0.0.1", 0xA1B2, "127.0.0.1", 8080, 1, 123456)
    assert parse_proc_net_tcp_line(TCP6_LINE, "little") == TcpSocket(
        "::ffff:127.0.0.1", 50000, "::ffff:127.0.0.1", 9090, 1, 654321)


def test_find_socket_inode_matches_both_ports():
    sockets = [TcpSocket("127.0.0.1", 5000, "127.0.0.1", 9000, 1, 11),
               TcpSocket("127.0.0.1", 9000, "127.0.0.1", 5000, 1, 22),  # the proxy's end
               TcpSocket("127.0.0.1", 5000, "127.0.0.1", 9001, 1, 33)]
    assert find_socket_inode(sockets, 5000, 9000) == 11
    assert find_socket_inode(sockets, 5000, 9001) == 33
    assert find_socket_inode(sockets, 5000, 9002) is None


def test_socket_inode_of_link():
    assert socket_inode_of_link("socket:[98765]") == 98765
    assert socket_inode_of_link("pipe:[98765]") is None
    assert socket_inode_of_link("/var/log/x") is None


def test_owners_of_connections_from_a_fake_proc(tmp_path):
    (tmp_path / "net").mkdir()
    (tmp_path / "net" / "tcp").write_text(TCP_HEADER + "\n" + TCP_LINE + "\n")
    (tmp_path / "net" / "tcp6").write_text(TCP_HEADER + "\n" + TCP6_LINE + "\n")
    for pid, inode in ((100, 123456), (200, 654321)):
        (tmp_path / str(pid) / "fd").mkdir(parents=True)
        os.symlink(f"socket:[{inode}]", tmp_path / str(pid) / "fd" / "7")
        os.symlink("/dev/null", tmp_path / str(pid) / "fd" / "0")
    owners = owners_of_connections([(0xA1B2, 8080), (50000, 9090), (1, 2)], [100, 200, 300],
                                   proc=tmp_path)
    assert owners == [100, 200, None]


def test_owners_of_connections_finds_this_process_in_the_real_proc():
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()
        with socket.create_connection(server.getsockname()) as client:
            peer_port = client.getsockname()[1]
            listen_port = server.getsockname()[1]
            assert owners_of_connections([(peer_port, listen_port)], [os.getpid()]) == [
                os.getpid()]
            assert owners_of_connections([(peer_port, listen_port)], [1]) == [None]


# --- a live proxy --------------------------------------------------------------------

QUIET_S = 0.5  # how long "nothing arrives" is watched
RECV_TIMEOUT_S = 5.0
DELAY_MS = 600
DELAY_S = DELAY_MS / 1000
TIMER_SLACK_S = 0.005  # the event loop's clock and timers are per millisecond


class Target:
    """A TCP server whose accepted sockets the test holds, to watch both directions."""

    def __init__(self) -> None:
        self.listener = socket.socket()
        self.listener.bind(("127.0.0.1", 0))
        self.listener.listen(64)
        self.port = self.listener.getsockname()[1]
        self.accepted: queue.Queue[socket.socket] = queue.Queue()
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                connection, _ = self.listener.accept()
            except OSError:
                return
            connection.settimeout(RECV_TIMEOUT_S)
            self.accepted.put(connection)

    def next_connection(self) -> socket.socket:
        return self.accepted.get(timeout=RECV_TIMEOUT_S)

    def close(self) -> None:
        self.listener.close()


@pytest.fixture(scope="module")
def proxy(tmp_path_factory):
    with FaultProxy(tmp_path_factory.mktemp("proxy") / "proxy.log") as running:
        yield running


@pytest.fixture
def route(proxy, request):
    """A fresh route to a fresh target: (route name, its port, the target)."""
    target = Target()
    name = request.node.name
    port = proxy.add_route(name, target.port)
    yield name, port, target
    proxy.set_mode(name, PASS)
    target.close()


def connect(port: int) -> socket.socket:
    sock = socket.create_connection(("127.0.0.1", port), timeout=RECV_TIMEOUT_S)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return sock


def receive_exactly(sock: socket.socket, size: int) -> bytes:
    data = b""
    while len(data) < size:
        chunk = sock.recv(size - len(data))
        if not chunk:
            raise ConnectionError(f"closed after {data!r}")
        data += chunk
    return data


def nothing_arrives(sock: socket.socket, seconds: float = QUIET_S) -> bool:
    sock.settimeout(seconds)
    try:
        sock.recv(1)  # bytes, or b"" for a close: either is something arriving
        return False
    except socket.timeout:
        return True
    finally:
        sock.settimeout(RECV_TIMEOUT_S)


def new_connection_is_reset(port: int) -> bool:
    """The kernel completes the handshake before the proxy sees the connection, so its
    RST comes after: at the first read, or already at connect if it came that fast."""
    try:
        with connect(port) as sock:
            sock.recv(1)
    except ConnectionResetError:
        return True
    return False


def test_pass_forwards_both_ways(route):
    _, port, target = route
    with connect(port) as client:
        server = target.next_connection()
        client.sendall(b"ping")
        assert receive_exactly(server, 4) == b"ping"
        server.sendall(b"pong")
        assert receive_exactly(client, 4) == b"pong"
        server.close()


def test_blackhole_holds_both_ways_then_releases_in_order(proxy, route):
    name, port, target = route
    with connect(port) as client:
        server = target.next_connection()
        proxy.set_mode(name, BLACKHOLE)
        for chunk in (b"one ", b"two ", b"three"):
            client.sendall(chunk)
            server.sendall(chunk.upper())
            time.sleep(0.05)  # separate chunks at the proxy
        assert nothing_arrives(server) and nothing_arrives(client, 0.05)
        assert proxy.stats()[name]["held_bytes"] == 2 * len(b"one two three")
        # A new connection is accepted, but nothing flows on it either.
        with connect(port) as late:
            late.sendall(b"late")
            late_server = target.next_connection()
            assert nothing_arrives(late_server)
            proxy.set_mode(name, PASS)
            assert receive_exactly(late_server, 4) == b"late"
            late_server.close()
        assert receive_exactly(server, 13) == b"one two three"
        assert receive_exactly(client, 13) == b"ONE TWO THREE"
        server.close()


def test_a_one_way_blackhole_holds_one_direction_and_counts_what_it_held(proxy, route):
    name, port, target = route
    with connect(port) as client:
        server = target.next_connection()
        held_before = proxy.stats()[name]["held_total"]
        proxy.set_mode(name, BLACKHOLE, direction="up")
        client.sendall(b"up")
        server.sendall(b"down")
        assert receive_exactly(client, 4) == b"down"  # the other way passes
        assert nothing_arrives(server)
        assert proxy.stats()[name]["held_total"] - held_before == 2
        proxy.set_mode(name, PASS)
        assert receive_exactly(server, 2) == b"up"
        server.close()


def test_reset_resets_current_and_new_connections(proxy, route):
    name, port, target = route
    with connect(port) as client:
        server = target.next_connection()
        proxy.set_mode(name, RESET)
        with pytest.raises(ConnectionResetError):
            client.recv(1)
        with pytest.raises(ConnectionResetError):
            server.recv(1)  # the target's side is reset too
        server.close()
    assert new_connection_is_reset(port)
    assert target.accepted.empty()  # a reset connection never reaches the target
    proxy.set_mode(name, PASS)
    with connect(port) as healed:
        healed.sendall(b"ok")
        assert receive_exactly(target.next_connection(), 2) == b"ok"


def test_delay_delays_each_chunk_and_keeps_order(proxy, route):
    name, port, target = route
    with connect(port) as client:
        server = target.next_connection()
        proxy.set_mode(name, DELAY, ms=DELAY_MS)
        sent = time.monotonic()
        client.sendall(b"a")
        time.sleep(0.1)
        client.sendall(b"b")
        assert receive_exactly(server, 1) == b"a"
        first_s = time.monotonic() - sent
        assert receive_exactly(server, 1) == b"b"
        second_s = time.monotonic() - sent
        # Held for its delay, and once: not also behind another chunk's (how soon after
        # its delay it passes is the proxy's speed, not asserted).
        assert DELAY_S - TIMER_SLACK_S <= first_s < 2 * DELAY_S
        assert second_s >= DELAY_S + 0.1 - TIMER_SLACK_S
        began = time.monotonic()
        server.sendall(b"c")  # the way back is delayed too
        assert receive_exactly(client, 1) == b"c"
        assert time.monotonic() - began >= DELAY_S - TIMER_SLACK_S
        server.close()


def test_unreachable_target_resets_the_client(proxy):
    with socket.socket() as closed:
        closed.bind(("127.0.0.1", 0))
        dead_port = closed.getsockname()[1]  # bound, never listening: refused
        port = proxy.add_route("to-nowhere", dead_port)
        assert new_connection_is_reset(port)
    assert proxy.stats()["to-nowhere"]["connect_failures"] == 1


def test_a_blackhole_holds_the_targets_refusal_until_it_heals(proxy):
    with socket.socket() as closed:
        closed.bind(("127.0.0.1", 0))
        port = proxy.add_route("to-nowhere-held", closed.getsockname()[1])
        proxy.set_mode("to-nowhere-held", BLACKHOLE)
        with connect(port) as client:
            assert nothing_arrives(client)
            proxy.set_mode("to-nowhere-held", PASS)
            with pytest.raises(ConnectionResetError):
                client.recv(1)


CHILD_CLIENT = """
import socket, sys
sock = socket.create_connection(("127.0.0.1", int(sys.argv[1])))
print(sock.getsockname()[1], flush=True)
for line in sys.stdin:
    sock.sendall(line.encode())
"""


def test_a_mode_for_one_pid_spares_other_processes(proxy, route):
    name, port, target = route
    child = subprocess.Popen([sys.executable, "-c", CHILD_CLIENT, str(port)],
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        child.stdout.readline()  # connected
        child_server = target.next_connection()
        proxy.set_mode(name, BLACKHOLE, only_pids=[child.pid])  # an open connection
        with connect(port) as mine:  # a connection opened after the change
            my_server = target.next_connection()
            child.stdin.write("from the child\n")
            child.stdin.flush()
            mine.sendall(b"mine")
            assert receive_exactly(my_server, 4) == b"mine"
            assert nothing_arrives(child_server)
            with connect(port) as another:
                another.sendall(b"x")
                assert receive_exactly(target.next_connection(), 1) == b"x"
            proxy.set_mode(name, PASS)
            assert receive_exactly(child_server, 15) == b"from the child\n"
            my_server.close()
        child_server.close()
    finally:
        child.kill()
        child.wait()


def test_control_errors_are_clear(proxy, route):
    with pytest.raises(ProxyError, match="no route 'nope'"):
        proxy.set_mode("nope", BLACKHOLE)
    with pytest.raises(ValueError, match="only delay takes ms"):
        proxy.set_mode(route[0], BLACKHOLE, ms=3)
    with pytest.raises(ProxyError, match="exists already"):
        proxy.add_route(route[0], 1)


def test_set_modes_applies_all_or_nothing(proxy, route):
    name = route[0]
    with pytest.raises(ProxyError, match="no route"):
        proxy.set_modes([ModeChange(name, BLACKHOLE), ModeChange("missing", PASS)])
    assert proxy.stats()[name]["mode"] == PASS
