"""A local eventq cluster whose every network path can be faulted: 3 KRaft nodes (all
voters) and N `eventq serve` processes, with the fault proxy (proxy.py) on every path
the campaign wants to cut.

How traffic is routed (b: broker index 0..2, node id b+1; i: eventq process index):

* Each broker has one client listener per eventq process (``P{i}``), advertised as the
  address of the proxy route ``proc{i}->broker{b}``. Kafka answers metadata with the
  advertised addresses of the listener a client came in on, so process i, bootstrapped
  through its own routes, keeps all of its Kafka traffic (consumer, producers, admin,
  the restore child) on them: ``isolate_process(i)`` faults exactly those.
* Each broker has a ``DIRECT`` listener, advertised as itself: ``direct_bootstrap`` for
  tools, bulk producers and checkers, which no fault touches.
* Replication: the inter-broker listener ``INTERNAL`` of broker b is advertised once,
  as route ``inter->broker{b}``, shared by every broker fetching from b. Cutting b off
  blackholes that route (only other brokers use it) and, on ``inter->broker{c}`` of
  each other broker c, the connections opened by b's pid.
* The KRaft quorum: node a reaches node c's ``CONTROLLER`` listener through the route
  ``broker{a}->controller{c}`` (each node has its own controller.quorum.voters; a
  node reaches itself directly). Raft, broker registration and heartbeats use these.
* Clients to gateways: the load reaches process i's gateway through ``client->proc{i}``
  (``client_ports``); probes and the read-back go to the gateway itself (``ports``).
* Between eventq processes: process i advertises ``peer->proc{i}`` (``--advertise``),
  so every request another process forwards to it (eventq/gateway/peers.py) crosses the
  proxy; a cut between i and j faults, on each one's peer route, only the connections
  the other opened (``only_pids``).

Process slots: beside the ``processes`` members, ``spare`` slots have their broker
listeners, routes and ports from the start, for a process that joins later (scale out)
or a duplicate of a member (a copy of its data dir, so of its static-membership
instance id, started beside it). ``members`` are the slots that belong to the group
now: started, and neither retired (scale in) nor a duplicate.
"""

from __future__ import annotations

import concurrent.futures
import os
import re
import shutil
import signal
import subprocess
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path

from eventq.kafka.topics import TopicNames, bulk_name_for, ensure_topics, eventq_topics
from eventq.run.localkafka import broker
from tools.faults import kafka_view
from tools.faults.kafka_view import GroupView, PartitionView
from tools.faults.proxy import (
    BLACKHOLE,
    DELAY,
    PASS,
    RESET,
    FaultProxy,
    ModeChange,
    read_tcp_sockets,
    socket_inodes_of_pid,
)
from tools.ports import quiet_free_port
from tools.servers import TEST_BROKER_TUNING, ServerProcess, raw_exchange

BROKERS = 3  # a quorum that survives one node, and replication 3 / min.insync 2
BROKER_HEAP_MB = 512
REPLICATION_FACTOR = 3
DEFAULT_PROCESSES = 3
DEFAULT_PARTITIONS = 6
DEFAULT_SPARE = 2  # slots for a process that joins later, or a duplicate
START_TIMEOUT_S = 180.0
READY_TIMEOUT_S = 120.0
SERVING_PROBE_TIMEOUT_S = 2.0
SETTLE_PROBE_TIMEOUT_S = 5.0
SETTLE_POLL_S = 0.2
PROCESS_STOP_TIMEOUT_S = 60.0
# The whole quorum stops at once, and the last node's shutdown may wait for voters that
# are gone (seen: 30 s); it gets SIGKILL after this (its log is flushed, its data is
# only evidence).
BROKER_STOP_TIMEOUT_S = 10.0
DASHBOARD_TIMEOUT_S = 5.0
LOG_TAIL_LINES = 60

ISOLATION_MODES = (BLACKHOLE, RESET, DELAY)


class FaultClusterError(RuntimeError):
    """The cluster could not do what was asked; the message says why."""


def client_route(process: int, broker_index: int) -> str:
    return f"proc{process}->broker{broker_index}"


def inter_broker_route(broker_index: int) -> str:
    return f"inter->broker{broker_index}"


def controller_route(source: int, target: int) -> str:
    return f"broker{source}->controller{target}"


def gateway_route(process: int) -> str:
    """The load's clients to process ``process``'s gateway."""
    return f"client->proc{process}"


def peer_route(process: int) -> str:
    """Other eventq processes to process ``process``'s gateway (what it advertises)."""
    return f"peer->proc{process}"


def node_id(broker_index: int) -> int:
    return broker_index + 1


@dataclass(frozen=True)
class BrokerPorts:
    """The ports one broker binds (the proxy routes to them are named above)."""

    clients: tuple[int, ...]  # listener P{i} per eventq process
    direct: int
    internal: int
    controller: int


def client_listener(process: int) -> str:
    return f"P{process}"


def broker_overrides(index: int, ports: list[BrokerPorts], routes: dict[str, int]
                     ) -> dict[str, str]:
    """server.properties entries of broker ``index``: its listeners, what it advertises
    (proxy routes but for DIRECT), and its own view of the quorum (through routes)."""
    own = ports[index]
    listeners = [f"{client_listener(i)}://127.0.0.1:{p}" for i, p in enumerate(own.clients)]
    listeners += [f"DIRECT://127.0.0.1:{own.direct}", f"INTERNAL://127.0.0.1:{own.internal}",
                  f"CONTROLLER://127.0.0.1:{own.controller}"]
    advertised = [f"{client_listener(i)}://127.0.0.1:{routes[client_route(i, index)]}"
                  for i in range(len(own.clients))]
    advertised += [f"DIRECT://127.0.0.1:{own.direct}",
                   f"INTERNAL://127.0.0.1:{routes[inter_broker_route(index)]}"]
    names = [client_listener(i) for i in range(len(own.clients))]
    names += ["DIRECT", "INTERNAL", "CONTROLLER"]
    voters = []
    for other, other_ports in enumerate(ports):
        port = (other_ports.controller if other == index
                else routes[controller_route(index, other)])
        voters.append(f"{other + 1}@127.0.0.1:{port}")
    return {
        "listeners": ",".join(listeners),
        "advertised.listeners": ",".join(advertised),
        "listener.security.protocol.map": ",".join(f"{n}:PLAINTEXT" for n in names),
        "inter.broker.listener.name": "INTERNAL",
        "controller.listener.names": "CONTROLLER",
        "controller.quorum.voters": ",".join(voters),
    }


def isolation_modes(isolated: set[int], pids: dict[int, int | None]) -> list[ModeChange]:
    """Every broker-to-broker route's mode when the brokers ``isolated`` are cut off
    from the others (both ways), given each broker's pid (None: not running).

    A controller route belongs to one pair of nodes: blackholed if either is cut off.
    An inter-broker route is shared by every broker fetching from its target: all of
    it is blackholed if its target is cut off (no broker fetches from itself), else
    only for the connections of the cut-off brokers."""
    changes = []
    for source in pids:
        for target in pids:
            if source != target:
                cut = source in isolated or target in isolated
                changes.append(ModeChange(controller_route(source, target),
                                          BLACKHOLE if cut else PASS))
    for target in pids:
        route = inter_broker_route(target)
        cut_sources = {pids[s] for s in isolated if s != target and pids.get(s) is not None}
        if target in isolated:
            changes.append(ModeChange(route, BLACKHOLE))
        elif cut_sources:
            changes.append(ModeChange(route, BLACKHOLE, only_pids=cut_sources))
        else:
            changes.append(ModeChange(route, PASS))
    return changes


def _dead_pid() -> int:
    """A pid that ran and is gone (a child reaped)."""
    child = subprocess.Popen(["true"])
    child.wait()
    return child.pid


OWNER_ROW = re.compile(r'<tr><td class="l">(\d+)</td><td class="l">[^<]*?:(\d+)')


def owners_from_cluster_page(html: str) -> dict[int, int]:
    """partition -> gateway port of its owner, from a dashboard's /cluster page."""
    return {int(partition): int(port) for partition, port in OWNER_ROW.findall(html)}


class FaultCluster:
    """3 KRaft nodes, ``processes`` eventq processes of one app (one consumer group,
    each its own data dir) and the fault proxy, every file under ``run_dir``.
    ``eventq_settings`` go to every `eventq serve` (e.g. session_timeout_ms=6000);
    ``broker_tuning`` adds server.properties entries to every broker; ``source`` runs
    the eventq processes from another checkout of eventq (e.g. a ``git archive`` of a
    commit) instead of this one."""

    def __init__(self, run_dir: Path, processes: int = DEFAULT_PROCESSES,
                 partitions: int = DEFAULT_PARTITIONS, prefix: str = "faults",
                 spare: int = DEFAULT_SPARE,
                 broker_heap_mb: int = BROKER_HEAP_MB,
                 broker_tuning: dict[str, str] | None = None, source: Path | None = None,
                 **eventq_settings) -> None:
        self.run_dir = Path(run_dir).resolve()
        self.processes = processes  # the members at the start
        self.slots = processes + spare
        self.partitions = partitions
        self.prefix = prefix
        self.broker_heap_mb = broker_heap_mb
        self.broker_tuning = dict(broker_tuning or {})
        self.source = Path(source).resolve() if source is not None else None
        self.eventq_settings = eventq_settings
        self.proxy = FaultProxy(self.run_dir / "proxy.log")
        self.broker_ports: list[BrokerPorts] = []
        self.brokers: list[broker.BrokerConfig] = []
        self.servers: list[ServerProcess] = []
        self.isolated_brokers: set[int] = set()
        self.paused: set[int] = set()
        self.members: set[int] = set(range(processes))
        self.retired: set[int] = set()  # left the group for good (scale in)
        self.duplicates: dict[int, int] = {}  # duplicate slot -> the member it copies
        self.exit_codes: list[int | None] = []

    # --- start and stop --------------------------------------------------------------

    def start(self, timeout_s: float = START_TIMEOUT_S) -> "FaultCluster":
        """Proxy, brokers, topics, eventq processes; returns once every partition is
        served. A failed start stops what it started and raises."""
        deadline = time.monotonic() + timeout_s
        try:
            self.proxy.start()
            self._start_brokers(deadline)
            self._create_topics()
            self._start_processes(deadline)
            self.wait_settled(deadline - time.monotonic())
        except BaseException as error:
            try:
                self.stop()
            except FaultClusterError as stop_error:  # keep the reason the start failed
                error.add_note(str(stop_error))
            raise
        return self

    def _start_brokers(self, deadline: float) -> None:
        self.broker_ports = [
            BrokerPorts(tuple(quiet_free_port() for _ in range(self.slots)),
                        quiet_free_port(), quiet_free_port(), quiet_free_port())
            for _ in range(BROKERS)
        ]
        for b, ports in enumerate(self.broker_ports):
            for i, port in enumerate(ports.clients):
                self.proxy.add_route(client_route(i, b), port)
            self.proxy.add_route(inter_broker_route(b), ports.internal)
            for other in range(BROKERS):
                if other != b:
                    self.proxy.add_route(controller_route(other, b), ports.controller)
        routes = self.proxy.routes
        self.brokers = [self._broker_config(b, routes) for b in range(BROKERS)]
        broker.start_cluster(self.brokers, max(1.0, deadline - time.monotonic()))

    def _create_topics(self) -> None:
        settings = self.settings
        names = TopicNames(settings["commands-topic"], settings["jobs-topic"],
                           settings["bulk-topic"])
        specs = eventq_topics(names, self.partitions, REPLICATION_FACTOR)
        reports = ensure_topics(self.direct_bootstrap, specs)
        failed = [r.describe() for r in reports if not r.ok]
        if failed:
            raise FaultClusterError("creating eventq's topics failed: " + "; ".join(failed))

    def _start_processes(self, deadline: float) -> None:
        # ServerProcess gives its own code any free dashboard port, not another source's
        # (it may predate the flag): ours have it, and must not collide on 9980.
        dashboards = {} if self.source is None else {"http_port": "127.0.0.1:0"}
        self.servers = [
            ServerProcess(self.process_bootstrap(i), self.prefix,
                          self.run_dir / "eventq" / f"process-{i}", partitions=self.partitions,
                          source=self.source, **dashboards, **self.eventq_settings)
            for i in range(self.slots)
        ]
        for i, server in enumerate(self.servers):
            self.proxy.add_route(gateway_route(i), server.port)
            server.settings["advertise"] = f"127.0.0.1:{self.proxy.add_route(peer_route(i), server.port)}"
        for i in sorted(self.members):
            self.servers[i].launch()
        for i in sorted(self.members):
            self.servers[i].wait_ready(deadline)

    def _broker_config(self, b: int, routes: dict[str, int]) -> broker.BrokerConfig:
        ports = self.broker_ports[b]
        overrides = broker_overrides(b, self.broker_ports, routes)
        return broker.BrokerConfig(
            home=self.run_dir / "brokers" / f"node-{b + 1}", port=ports.direct,
            controller_port=ports.controller, heap_mb=self.broker_heap_mb, node_id=b + 1,
            # Its own view of the quorum; broker.py also sizes Kafka's own topics by it.
            quorum_voters=overrides["controller.quorum.voters"],
            overrides={**TEST_BROKER_TUNING, **self.broker_tuning, **overrides},
        )

    def stop(self) -> list[int | None]:
        """Stop everything (idempotent; also after a failed start): heal every fault
        first so the eventq processes can flush and stop cleanly. Returns the eventq
        processes' exit codes (also kept in ``exit_codes``)."""
        errors = []
        for step in (self._heal_everything, self._stop_processes, self._stop_brokers,
                     self.proxy.stop):
            try:
                step()
            except Exception as error:  # stop the rest whatever failed
                errors.append(f"{step.__name__}: {type(error).__name__}: {error}")
        if errors:
            raise FaultClusterError("stopping the cluster: " + "; ".join(errors))
        return self.exit_codes

    def _heal_everything(self) -> None:
        for i in list(self.paused):
            self.resume_process(i)
        if self.proxy.process is not None and self.proxy.process.poll() is None:
            self.isolated_brokers.clear()
            self.proxy.heal_all()

    def _stop_processes(self) -> None:
        # All at once: one by one, each departure would move partitions to the rest.
        live = [s for s in self.servers if s.process is not None]
        with concurrent.futures.ThreadPoolExecutor(max(1, len(live))) as pool:
            codes = dict(zip(map(id, live), pool.map(lambda s: s.stop(PROCESS_STOP_TIMEOUT_S),
                                                     live)))
        if live:  # the members' (a retired one's and a duplicate's exits were faults)
            self.exit_codes = [codes.get(id(self.servers[i])) for i in sorted(self.members)]

    def _stop_brokers(self) -> None:
        with concurrent.futures.ThreadPoolExecutor(BROKERS) as pool:
            list(pool.map(lambda config: broker.stop(config, BROKER_STOP_TIMEOUT_S),
                          self.brokers))

    def __enter__(self) -> "FaultCluster":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    # --- addresses and state -----------------------------------------------------------

    @property
    def ports(self) -> list[int]:
        """The gateway (workq) port of each eventq process slot (index = slot)."""
        return [server.port for server in self.servers]

    @property
    def client_ports(self) -> list[int]:
        """The proxied gateway port of each slot: what the load's clients use."""
        return [self.proxy.port(gateway_route(i)) for i in range(len(self.servers))]

    def live_members(self) -> list[int]:
        """The members that run now (a killed one is a member still: it comes back)."""
        return [i for i in sorted(self.members) if self.process_pid(i) is not None]

    @property
    def direct_bootstrap(self) -> str:
        """The brokers' unproxied listeners: for tools, loaders and checkers."""
        return ",".join(f"127.0.0.1:{p.direct}" for p in self.broker_ports)

    def process_bootstrap(self, i: int) -> str:
        """Process i's bootstrap: its own proxy routes to the brokers."""
        return ",".join(f"127.0.0.1:{self.proxy.port(client_route(i, b))}"
                        for b in range(BROKERS))

    @property
    def settings(self) -> dict[str, str]:
        """What every eventq process runs with: topic names (bulk too), app id,
        partitions, ... (once started, process 0's flags: its bootstrap and ports are
        its own)."""
        settings = {  # as ServerProcess names them, also before the start
            "commands-topic": f"{self.prefix}.commands", "jobs-topic": f"{self.prefix}.jobs",
            "app-id": f"{self.prefix}-app", "partitions": str(self.partitions)}
        settings |= self.servers[0].settings if self.servers else {}
        settings.setdefault("bulk-topic", bulk_name_for(settings["commands-topic"]))
        return settings

    def process_pid(self, i: int) -> int | None:
        server = self.servers[i]
        running = server.process is not None and server.process.poll() is None
        return server.process.pid if running else None

    def broker_pid(self, b: int) -> int | None:
        return broker.running_pid(self.brokers[b])

    def serving(self, i: int) -> bool:
        """Process i answers ``inspect queues 0 1`` with +OK within ~2 s."""
        try:
            reply = raw_exchange(self.ports[i], b"inspect queues 0 1\r\n",
                                 timeout_s=SERVING_PROBE_TIMEOUT_S)
        except OSError:
            return False
        return reply.startswith(b"+OK")

    def every_partition_served(self, via: int = 0) -> bool:
        """``inspect digest`` through process ``via`` answers +OK: each partition is
        served by exactly one recovered process."""
        try:
            reply = raw_exchange(self.ports[via], b"inspect digest\r\n",
                                 timeout_s=SETTLE_PROBE_TIMEOUT_S)
        except OSError:
            return False
        return reply.startswith(b"+OK")

    def wait_settled(self, timeout_s: float = READY_TIMEOUT_S, via: int = 0) -> float:
        """Seconds until every partition is served (through process ``via``)."""
        began = time.monotonic()
        while not self.every_partition_served(via):
            if time.monotonic() - began > timeout_s:
                raise FaultClusterError(
                    f"partitions not all served through process {via} in {timeout_s:.0f}s; "
                    f"its log:\n{self.log_tail(via, 20)}")
            time.sleep(SETTLE_POLL_S)
        return time.monotonic() - began

    def partition_owners(self, i: int) -> dict[int, int]:
        """partition -> gateway port of its owner, as process i sees the assignment
        (from its dashboard's /cluster page)."""
        url = self.servers[i].http_url() + "cluster"
        with urllib.request.urlopen(url, timeout=DASHBOARD_TIMEOUT_S) as response:
            owners = owners_from_cluster_page(response.read().decode())
        gateways = {self.proxy.port(peer_route(j)): s.port for j, s in enumerate(self.servers)}
        return {partition: gateways.get(port, port) for partition, port in owners.items()}

    def topics(self) -> list[str]:
        """eventq's three topics."""
        return [self.settings["commands-topic"], self.settings["jobs-topic"],
                self.settings["bulk-topic"]]

    def metadata_seen_by(self, b: int, topics: list[str] | None = None
                         ) -> dict[tuple[str, int], PartitionView]:
        """(topic, partition) -> leader and ISR as broker b itself sees them, asked over
        its direct listener (a broker cut off from the quorum answers from its stale
        view, and any client may be told it). Blocking: from async code, use a thread."""
        return kafka_view.partitions_seen(self.broker_ports[b].direct, node_id(b),
                                          topics or self.topics())

    def coordinator_seen_by(self, b: int, key: str | None = None,
                            transactional: bool = False) -> int:
        """The node id broker b names as the coordinator of consumer group ``key``
        (default: eventq's app id), or of transactional id ``key``."""
        try:
            return kafka_view.coordinator_seen(self.broker_ports[b].direct, node_id(b),
                                               key or self.settings["app-id"], transactional)
        except kafka_view.KafkaViewError as error:
            raise FaultClusterError(str(error)) from error

    def group(self, b: int) -> GroupView:
        """eventq's consumer group as its coordinator describes it, found through broker
        b."""
        coordinator = self.coordinator_seen_by(b) - 1
        return kafka_view.group_seen(self.broker_ports[coordinator].direct,
                                     node_id(coordinator), self.settings["app-id"])

    def log_tail(self, i: int, lines: int = LOG_TAIL_LINES) -> str:
        """The last lines of eventq process i's log (every start of it, appended)."""
        return self.servers[i].log_tail(lines)

    def log_path(self, i: int) -> Path:
        return self.servers[i].log_path

    def broker_log_tail(self, b: int, lines: int = LOG_TAIL_LINES) -> str:
        return broker.log_tail(self.brokers[b], lines)

    def route_stats(self) -> dict[str, dict]:
        """The proxy's figures per route (open connections, bytes, held bytes, mode)."""
        return self.proxy.stats()

    def kafka_connections_of(self, pid: int) -> dict[str, int]:
        """How many TCP connections process ``pid`` has open to each broker listener,
        by proxy route name or ``broker{b}:{listener}`` for a listener reached directly
        (the check that a process's Kafka traffic stays on its own routes)."""
        names = {port: name for name, port in self.proxy.routes.items()
                 if "broker" in name or "controller" in name}  # not gateways: not Kafka
        for b, ports in enumerate(self.broker_ports):
            names.update({p: f"broker{b}:{client_listener(i)}"
                          for i, p in enumerate(ports.clients)})
            names.update({ports.direct: f"broker{b}:DIRECT",
                          ports.internal: f"broker{b}:INTERNAL",
                          ports.controller: f"broker{b}:CONTROLLER"})
        inodes = socket_inodes_of_pid(pid)
        counts: dict[str, int] = {}
        for entry in read_tcp_sockets():
            if entry.inode in inodes and entry.remote_port in names:
                name = names[entry.remote_port]
                counts[name] = counts.get(name, 0) + 1
        return counts

    # --- faults on eventq processes ----------------------------------------------------

    def kill_process(self, i: int) -> None:
        """SIGKILL eventq process i (its data dir stays: a restart finds it unclean)."""
        self.paused.discard(i)
        self.servers[i].kill()

    def restart_process(self, i: int, wait: bool = True,
                        timeout_s: float = READY_TIMEOUT_S) -> None:
        """Start process i again (SIGKILL first if it still runs); with ``wait``, until
        it serves (so its routes must pass)."""
        self.kill_process(i)
        self.servers[i].launch()
        if wait:
            self.servers[i].wait_ready(time.monotonic() + timeout_s)

    def stop_process(self, i: int, timeout_s: float = PROCESS_STOP_TIMEOUT_S) -> int | None:
        """SIGTERM process i and wait for it to exit (SIGKILL past ``timeout_s``): the
        clean stop of a deployment; its data dir stays. Its exit code."""
        if i in self.paused:
            self.resume_process(i)  # a stopped process cannot act on its SIGTERM
        return self.servers[i].stop(timeout_s)

    def start_process(self, i: int) -> None:
        """Start process i on its data dir as it is (nothing if it runs)."""
        if self.process_pid(i) is None:
            self.servers[i].launch()

    def add_process(self) -> int:
        """Scale out: start a new member on a spare slot (a new data dir, so a new
        instance id); its slot."""
        used = self.members | self.retired | set(self.duplicates)
        free = [i for i in range(self.slots) if i not in used and self.servers[i].starts == 0]
        if not free:
            raise FaultClusterError("no spare slot left for another process")
        self.members.add(free[0])
        self.servers[free[0]].launch()
        return free[0]

    def retire_process(self, i: int) -> int | None:
        """Scale in: member i leaves for good (SIGTERM, not started again); its exit code."""
        self.members.discard(i)
        self.retired.add(i)
        return self.stop_process(i)

    def duplicate_process(self, i: int) -> int:
        """Start a copy of member i beside it: a spare slot whose data dir is a copy of
        i's (so the same instance id: static membership lets it take i's partitions at
        once), with i's settings but its own ports. Its slot."""
        used = self.members | self.retired | set(self.duplicates)
        free = [j for j in range(self.slots) if j not in used]
        if not free:
            raise FaultClusterError("no spare slot left for a duplicate")
        j = free[0]
        home = self.servers[j].home
        for old in home.glob("*") if home.exists() else ():  # an earlier duplicate's
            if not old.name.startswith("server-"):  # its log stays: the evidence
                shutil.rmtree(old) if old.is_dir() else old.unlink()
        try:  # copied while it runs, as an operator's copy would be: files may vanish
            shutil.copytree(self.servers[i].home, home, dirs_exist_ok=True,
                            ignore=shutil.ignore_patterns("server-*.log"))
        except shutil.Error:
            pass  # what could be copied is copied; the rest went away meanwhile
        # As on another host: the copy's RUNNING marker (eventq/run/statedir.py) names a
        # pid that does not run there (here, i's pid runs, and eventq refuses to start).
        for marker in home.glob("state/RUNNING"):
            marker.write_text(f"{_dead_pid()}\ncopied from process {i}\n")
        self.duplicates[j] = i
        self.servers[j].launch()
        return j

    def end_duplicate(self, j: int) -> None:
        """Kill -9 the duplicate on slot j; its slot is free again."""
        self.servers[j].kill()
        self.duplicates.pop(j, None)

    def pause_process(self, i: int) -> None:
        """SIGSTOP process i (its child processes, e.g. a restore, run on)."""
        self._signal_process(i, signal.SIGSTOP)
        self.paused.add(i)

    def resume_process(self, i: int) -> None:
        self._signal_process(i, signal.SIGCONT)
        self.paused.discard(i)

    def _signal_process(self, i: int, signum: int) -> None:
        pid = self.process_pid(i)
        if pid is None:
            raise FaultClusterError(f"eventq process {i} is not running")
        os.kill(pid, signum)

    def isolate_process(self, i: int, mode: str = BLACKHOLE, ms: int | None = None,
                        direction: str | None = None, brokers=None) -> None:
        """Fault process i's routes to ``brokers`` (default: all): blackhole, reset or
        delay ms, both ways or one (``direction``)."""
        if mode not in ISOLATION_MODES:
            raise ValueError(f"mode must be one of {', '.join(ISOLATION_MODES)}, not {mode!r}")
        targets = range(BROKERS) if brokers is None else brokers
        self.proxy.set_modes([ModeChange(client_route(i, b), mode, ms, direction=direction)
                              for b in targets])

    def heal_process(self, i: int) -> None:
        self.proxy.set_modes([ModeChange(client_route(i, b), PASS) for b in range(BROKERS)])

    def cut_peers(self, i: int, j: int, mode: str = BLACKHOLE) -> None:
        """Cut the forwarding between processes i and j both ways: on each one's peer
        route, the connections the other opened."""
        pids = {i: self.process_pid(i), j: self.process_pid(j)}
        if None in pids.values():
            raise FaultClusterError(f"processes {i} and {j} must both run to cut them apart")
        self.proxy.set_modes([ModeChange(peer_route(j), mode, only_pids=[pids[i]]),
                              ModeChange(peer_route(i), mode, only_pids=[pids[j]])])

    def heal_peers(self, i: int, j: int) -> None:
        self.proxy.set_modes([ModeChange(peer_route(i), PASS), ModeChange(peer_route(j), PASS)])

    def cut_clients(self, i: int, mode: str = BLACKHOLE, ms: int | None = None,
                    direction: str | None = None) -> None:
        """Fault the load's clients' route to process i's gateway."""
        self.proxy.set_mode(gateway_route(i), mode, ms, direction=direction)

    def heal_clients(self, i: int) -> None:
        self.proxy.set_mode(gateway_route(i), PASS)

    # --- faults on brokers -------------------------------------------------------------

    def kill_broker(self, b: int) -> None:
        """SIGKILL broker b (its data stays: a restart recovers it)."""
        broker.kill(self.brokers[b])
        self._apply_broker_isolation()  # its pid is gone from the cut

    def wipe_broker(self, b: int) -> None:
        """Delete the data dir of broker b, which must be down: its restart formats it
        anew with the cluster's id, and it fetches every replica again."""
        if self.broker_pid(b) is not None:
            raise FaultClusterError(f"broker {b} runs: kill it before wiping its data")
        shutil.rmtree(self.brokers[b].data_dir, ignore_errors=True)

    def restart_brokers(self, indexes, timeout_s: float = START_TIMEOUT_S) -> None:
        """Start the brokers ``indexes`` that are not running, all at once (a quorum
        answers only once a majority runs; a wiped one is formatted with the cluster's
        id); returns once each answers (directly)."""
        cut = [b for b in indexes if b in self.isolated_brokers]
        if cut:
            raise FaultClusterError(f"brokers {cut} are cut off from the quorum: heal first")
        down = [b for b in indexes if self.broker_pid(b) is None]
        for b in down:
            broker.launch(self.brokers[b], self.brokers)
        deadline = time.monotonic() + timeout_s
        for b in down:
            while not self._broker_answers(b):
                if time.monotonic() > deadline:
                    raise FaultClusterError(f"broker {b} did not answer in {timeout_s:.0f}s:\n"
                                            f"{self.broker_log_tail(b, 20)}")
                time.sleep(SETTLE_POLL_S)
        self._apply_broker_isolation()

    def _broker_answers(self, b: int) -> bool:
        try:
            return broker.broker_answers(f"127.0.0.1:{self.broker_ports[b].direct}")
        except Exception:  # refused while it starts: not yet
            return False

    def restart_broker(self, b: int) -> None:
        """Start broker b again on the same config (if it is not running); returns once
        it answers (directly). Not while it is cut off: a starting broker must register
        with the quorum, and Kafka gives up and exits after
        initial.broker.registration.timeout.ms (60 s), so heal it first."""
        if b in self.isolated_brokers:
            raise FaultClusterError(
                f"broker {b} is cut off from the quorum: started now it could not register "
                f"and would exit; heal_broker({b}) first")
        self.restart_brokers([b])  # the other cuts name its new pid

    def isolate_broker(self, b: int) -> None:
        """Cut broker b off from the other brokers both ways (replication and the KRaft
        quorum); clients still reach it."""
        self.isolated_brokers.add(b)
        self._apply_broker_isolation()

    def heal_broker(self, b: int) -> None:
        self.isolated_brokers.discard(b)
        self._apply_broker_isolation()

    def _apply_broker_isolation(self) -> None:
        pids = {b: self.broker_pid(b) for b in range(BROKERS)}
        self.proxy.set_modes(isolation_modes(self.isolated_brokers, pids))
