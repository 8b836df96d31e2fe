"""``eventq serve``: the faust processor and the workq gateway in one process.

A run that did not stop cleanly leaves its local RocksDB discarded and rebuilt from
`eventq.jobs` (eventq/run/statedir.py says why).
"""

from __future__ import annotations

import asyncio
import logging
import queue
import signal
import socket
import ssl
import sys
import threading
import time
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, Callable

import mode

from eventq.gateway.cluster import Cluster
from eventq.gateway.cluster_answers import ClusterAnswers
from eventq.gateway.dispatch import Gateway
from eventq.gateway.handlers import LocalAnswers, wall_clock_ms
from eventq.gateway.leasing import Leasing
from eventq.gateway.listeners import EXIT_CANNOT_START, Listeners, PortUnusable, check_ports
from eventq.gateway.peers import Peers
from eventq.gateway.server import GatewayServer, GatewayStats
from eventq.gateway.tls import TlsUnusable, peer_context, server_context
from eventq.gateway.tokens_file import TokensUnusable, load_tokens, reload_tokens
from eventq.kafka.security import KafkaAccess, KafkaRefused
from eventq.protocol.access import TokenStore
from eventq.run import statedir
from eventq.run.logformat import demote_routine_retries, logging_config
from eventq.settings import Settings
from streams.command_writer import CommandWriter
from streams.faust.aiokafka_uvloop import patch_closed_connection_writes

if TYPE_CHECKING:  # faust is imported when the server starts, not with this module
    import faust

    from eventq.observe.web import WebServer
    from streams.faust.app import Streams

log = logging.getLogger("eventq")


@dataclass(frozen=True)
class Tls:
    """The gateway's TLS and its links' (eventq/gateway/tls.py), built at start (None: plain)."""

    server: ssl.SSLContext | None = None
    peer: ssl.SSLContext | None = None

    @classmethod
    def of(cls, settings: Settings) -> "Tls":
        return cls(server_context(settings), peer_context(settings))


class EventqService(mode.Service):
    """Starts with the faust app: the command producer, the timers and the gateway."""

    def __init__(self, settings: Settings, streams: Streams,
                 listeners: Listeners | None = None, tokens: TokenStore | None = None,
                 tls: Tls | None = None, **kwargs: Any) -> None:  # Any: mode.Service's
        super().__init__(**kwargs)
        self._settings = settings
        self._streams = streams
        self._tokens = tokens
        http = settings.http_address
        self._stats = stats = GatewayStats(
            lambda: streams.processor.counters.evicted, timed=http is not None)
        tls = tls or Tls()
        self.peers = Peers(None if tokens is None else tokens.tokens.peer_token, tls.peer)
        cluster = Cluster(
            self_address=settings.advertised_address,
            partitions=settings.partitions,
            owner_of=streams.owner_of,
            members=streams.members,
            peers=self.peers,
            request_timeout_s=2 * settings.write_timeout_ms / 1000 + 5,
        )
        # The gateway in its parts (docs/architecture.md, "The gateway"): the lease protocol,
        # this process's answers, the cluster's (built on both), and the dispatch.
        engine = streams.engine
        leasing = Leasing(engine, stats, wall_clock_ms)
        local = LocalAnswers(engine, stats, leasing, wall_clock_ms,
                             bulk_status=streams.admitter.status)
        cluster_answers = ClusterAnswers(cluster=cluster, engine=engine, stats=stats,
                                         leasing=leasing, local=local, clock_ms=wall_clock_ms)
        self.gateway = Gateway(local, leasing, cluster_answers)
        listeners = listeners or Listeners()
        self.server = GatewayServer(
            self.gateway, stats, settings.listen_host, settings.listen_port, wall_clock_ms,
            sock=listeners.gateway, tokens=tokens, tls=tls.server,
        )
        self.web = None if http is None else web_server(
            settings, http, streams, self.gateway, stats, listeners.web, tls=tls.server,
            tokens=tokens)

    async def on_start(self) -> None:
        quiet_library_loggers(self._settings.log_level)
        # docs/security.md, "A tokens file": the file is read again on SIGHUP
        if self._tokens is not None:
            asyncio.get_running_loop().add_signal_handler(
                signal.SIGHUP, reload_tokens, self._tokens, self._settings.tokens_file)
        self._streams.engine.writer = CommandWriter(
            self._streams.command_producer,  # faust's: started with the app
            self._settings.commands_topic,
            self._settings.partitions,
            applied=self._streams.processor.applied,
        )
        await self.server.start()
        if self.web is not None:  # before "serving" is said: it may still fail
            try:
                await self.web.start()
            except OSError as error:  # only where run_server could not hold its socket
                raise OSError(
                    f"cannot serve the dashboard and metrics on {self.web.host}:"
                    f"{self.web.asked_port} ({error}): give another --http-port, or "
                    "--http-port off") from error
        if self._settings.listen_host in ("0.0.0.0", "::") and not self._settings.advertise:
            log.warning(
                "listening on %s without --advertise: other eventq processes would try to "
                "reach this one at %s; give it the address they can reach",
                self._settings.listen_host, self._settings.advertised_address)
        print(
            f"eventq serving the workq protocol"
            f"{' over TLS' if self._settings.tls_cert else ''} on "
            f"{self._settings.listen_host}:{self.server.port} "
            f"(Kafka {self._settings.kafka_bootstrap})",
            flush=True,
        )
        if self.web is not None:
            host = self.web.host
            scheme = "https" if self._settings.tls_cert else "http"
            print(f"eventq dashboard on {scheme}://{host}:{self.web.port}/ and Prometheus "
                  f"metrics on {scheme}://{host}:{self.web.port}/metrics"
                  f"{' (tokens required)' if self._tokens is not None else ''}", flush=True)

    @mode.Service.task
    async def _deadlines(self) -> None:
        await self._streams.timer.run()

    async def before_app_stops(self) -> None:
        """The first step of a stop: no new requests, and from now on a changelog flush
        may give up on an absent Kafka (streams/faust/durable_flush.py)."""
        self._streams.changelog_buffer.stopping = True
        await self.server.stop()  # the requests in progress are answered first
        # The give-backs of leases no client received are in Kafka before the producer
        # closes (docs/operations.md, "Planned restarts").
        await self.gateway.settle(GIVE_BACKS_SETTLE_S)
        if self.web is not None:
            await self.web.stop()
        self.peers.close()
        await self._streams.admitter.stop()

    async def on_stop(self) -> None:
        # Runs after the app stopped (faust stops the app first): the app's last
        # flush and commit are done, so the command producer is no longer needed.
        await self._streams.follow_ups.writer.stop()  # the app's last commit is done
        writer = self._streams.engine.writer
        if writer is not None:
            await writer.stop()
            counters = self._streams.processor.counters
            changelogs = self._streams.changelogs
            log.info(
                "wrote %d commands in %d records; applied %d records (%d batches), "
                "%d changelog records in %d transactions; %d leases given back; admitted "
                "%d bulk records (%d commands) in %d slices, %d second copies skipped; "
                "%d requests forwarded to other eventq processes; partitions given up "
                "%d times",
                writer.commands, writer.records, counters.records, counters.batches,
                changelogs.records, changelogs.commits, self._stats.released,
                self._streams.admitter.records, self._streams.admitter.commands,
                self._streams.admitter.slices, counters.readmitted, self.peers.forwarded,
                self._streams.steward.losses,
            )


def web_server(settings: Settings, address: tuple[str, int], streams: Streams,
               gateway: Gateway, stats: GatewayStats, listener: socket.socket | None = None,
               tls: ssl.SSLContext | None = None, tokens: TokenStore | None = None,
               ) -> WebServer:
    """The metrics and dashboard server (eventq/observe/web.py) of this process, on
    ``address`` (the settings' http_address), or ``listener`` if run_server bound it
    (docs/architecture.md, "Feedback to users"); over TLS with the gateway's context, and
    with the gateway's tokens (the same store, so SIGHUP's reload applies to both;
    docs/security.md, "The dashboard and metrics")."""
    from eventq.observe.metrics import Sources
    from eventq.observe.web import Dashboard, WebServer

    sources = Sources(
        index=streams.index, processor=streams.processor, gateway_stats=stats,
        lag=streams.lag, serving=streams.engine.ready.is_set, now_ms=wall_clock_ms,
    )
    dashboard = Dashboard(
        gateway=gateway, sources=sources, process=settings.advertised_address,
        actions=settings.http_actions, bootstrap=settings.kafka,
        commands_topic=settings.commands_topic, partitions=settings.partitions,
        owner_of=streams.owner_of, members=streams.members, clock_ms=wall_clock_ms,
        tokens=tokens,
    )
    host, port = address
    return WebServer(dashboard, host, port, sock=listener, tls=tls)


STOP_TIMEOUT_S = 20.0
GIVE_BACKS_SETTLE_S = 5.0


def eventq_worker_class() -> type[faust.Worker]:
    """The faust worker whose stop is bounded and begins by closing the gateway.

    faust stops the app before the services handed to the worker (faust/worker.py
    `on_init_dependencies` puts the app last), so what must come first happens in the
    worker's own on_stop. The watchdog starts there too: after a broker crash the app's
    stop has hung in a consumer commit that never returned (CI, 2026-11-22: 60 s after
    SIGTERM the process still ran, and the watchdog, then started by our service, had
    never been reached; the commit's cause is mended in streams/faust/aiokafka_uvloop.py,
    the bound stays for causes not yet seen)."""

    import faust

    class EventqWorker(faust.Worker):
        async def on_stop(self) -> None:
            start_stop_watchdog(STOP_TIMEOUT_S)
            for service in self.services:
                if isinstance(service, EventqService):
                    await service.before_app_stops()
            await super().on_stop()

        async def _cry(self) -> None:
            # SIGUSR1 prints the main loop's tasks (mode); add the loops of faust's
            # service threads (the Kafka consumer runs in one), where a hang may sit.
            await super()._cry()
            from eventq.run.diagnostics import print_thread_loop_tasks

            print_thread_loop_tasks(self.stderr)

    return EventqWorker


def start_stop_watchdog(timeout_s: float) -> None:
    """A stop must end. If a flush or commit still waits on Kafka after ``timeout_s``
    (the broker is gone, or a client library is stuck), the process exits without releasing
    its RUNNING marker, so the next start rebuilds its state from the log (nothing is
    lost: no offset was committed past what the log holds)."""
    import os
    import threading
    import time

    from eventq.run.diagnostics import print_where_it_hangs

    try:
        loop: asyncio.AbstractEventLoop | None = asyncio.get_running_loop()
    except RuntimeError:
        loop = None

    def expire() -> None:
        time.sleep(timeout_s)
        print(f"eventq: stop did not finish within {timeout_s:g}s; exiting now, the next "
              "start rebuilds state from the log; where it waited:", file=sys.stderr,
              flush=True)
        print_where_it_hangs(sys.stderr, loop)
        os._exit(1)

    threading.Thread(target=expire, name="stop-watchdog", daemon=True).start()


LIBRARY_LOGGERS = ("aiokafka", "faust", "mode", "kafka", "rocksdict")


def level_of(level_name: str) -> int:
    level = logging.getLevelName(level_name.upper())
    return level if isinstance(level, int) else logging.INFO


def library_level(level_name: str) -> int:
    """The libraries' level: eventq's own, but never below WARNING unless DEBUG is
    asked for (faust's and mode's INFO lines are their internals, not news to an
    operator: docs/architecture.md, "Logging")."""
    level = level_of(level_name)
    return level if level <= logging.DEBUG else max(level, logging.WARNING)


def quiet_library_loggers(level_name: str) -> None:
    """eventq's and the streams' loggers at the level asked for (INFO by default:
    normal events are INFO: docs/architecture.md, "Logging"); the libraries' at
    `library_level`. faust's worker leaves library loggers enabled for DEBUG: every
    aiokafka send then builds a log record (5-9% of the request path), so they are
    pinned explicitly."""
    level = level_of(level_name)
    logging.getLogger().setLevel(level)
    for name in LIBRARY_LOGGERS:
        logging.getLogger(name).setLevel(library_level(level_name))


# --- waiting for Kafka (docs/architecture.md, "Feedback to users") ----------------
#
# With Kafka down, serve said so only after the topic check's 30 s timeout. Now a
# metadata request that gets no answer in KAFKA_PROBE_S is said at once, with what to
# do, and serve keeps trying, saying so again at growing intervals: Kafka that does not
# answer when a server starts is most often starting or restarting (a machine booting,
# a supervisor bringing a broker back), and a server that starts by itself once Kafka
# answers needs nobody to restart it. Ctrl-C stops it while it waits.

KAFKA_PROBE_S = 2.5  # a metadata request unanswered this long: say so (within 5 s)


def kafka_hint(settings: Settings) -> str:
    if settings.uses_local_broker:
        return "is it running? Start it with `eventq kafka start` (or run `make run`)."
    # A secured listener drops a client of another protocol without a word.
    return ("is --bootstrap right, is Kafka running there, and does it take "
            f"--kafka-security-protocol {settings.kafka_security_protocol}?")


def kafka_silent(settings: Settings, probe_s: float = KAFKA_PROBE_S) -> str:
    """Kafka did not answer a metadata request in ``probe_s``: what that means, and
    what to do (serve's wait and `topics create` say the same)."""
    return (f"Kafka at {settings.kafka_bootstrap} does not answer (waited {probe_s:g}s): "
            f"{kafka_hint(settings)}")


def wait_for_kafka(settings: Settings, say: Callable[[str], None],
                   probe_s: float = KAFKA_PROBE_S) -> None:
    """Return once Kafka answers a metadata request; ``say`` why it waits meanwhile."""
    from eventq.client.connecting import Reminder

    bootstrap = settings.kafka
    reminder = Reminder(report_after_s=0.0)
    while not kafka_answers(bootstrap, probe_s):
        now = time.monotonic()
        if not reminder.failed(now):
            continue
        if reminder.reports == 1:
            say(f"{kafka_silent(settings, probe_s)} Still trying; Ctrl-C to stop")
        else:
            say(f"still waiting for Kafka at {bootstrap} "
                f"({reminder.failing_for(now) + probe_s:.0f}s); Ctrl-C to stop")
    if reminder.recovered(time.monotonic()) is not None:
        say(f"Kafka at {bootstrap} answers; starting")


def kafka_answers(bootstrap: KafkaAccess, probe_s: float) -> bool:
    """Whether Kafka answers a metadata request within ``probe_s`` (``broker_answers``),
    asked in a thread of its own: the caller waits in Python, where a Ctrl-C is raised
    at once, never inside librdkafka's calls and callbacks, which can keep it for
    longer (docs/architecture.md, "Feedback to users": Ctrl-C stops the wait)."""
    from eventq.run.localkafka.broker import broker_answers

    answer: queue.SimpleQueue[tuple[bool, BaseException | None]] = queue.SimpleQueue()

    def probe() -> None:
        # Signals go to the thread that waits, not to this one inside librdkafka.
        signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT, signal.SIGTERM})
        try:
            answer.put((broker_answers(bootstrap, timeout_s=probe_s), None))
        except BaseException as error:  # KafkaRefused: said by the caller
            answer.put((False, error))

    threading.Thread(target=probe, name="kafka-probe", daemon=True).start()
    answers, error = answer.get()  # a lock's wait: Ctrl-C interrupts it
    if error is not None:
        raise error
    return answers


def say_on_stderr(message: str) -> None:
    print(f"eventq: {message}", file=sys.stderr, flush=True)


def topics_problem(settings: Settings) -> str | None:
    """Why the topics cannot serve (missing, or too small for eventq's largest record:
    docs/architecture.md, "Limits"), or None. Checked before anything starts, so a
    server never accepts a job it could not store."""
    from eventq.kafka.topics import TopicsUnfit, check_topics

    try:
        check_topics(settings.kafka, settings.topics)
    except TopicsUnfit as error:
        return str(error)
    except Exception as error:  # KafkaException: no broker answers
        return (
            f"cannot check the topics on {settings.kafka_bootstrap}: {error}. "
            "Is Kafka running? (eventq kafka start)"
        )
    return None


GC_GENERATION0_OBJECTS = 50_000  # CPython's default is 700


def tune_garbage_collector() -> None:
    """The job index keeps a few long-lived objects per job (millions, with a large
    queue), and every full collection walks them all. CPython collects its youngest
    generation every 700 new container objects, and applying a batch of 500 commands
    allocates thousands: collections ran constantly. Measured on 200,000 adds in batch
    records: 35 us of server CPU per command with the default, 28 us with this
    (27,770 -> 34,838 jobs/s). Nothing in eventq relies on prompt collection of cycles."""
    import gc

    _, older, oldest = gc.get_threshold()
    gc.set_threshold(GC_GENERATION0_OBJECTS, older, oldest)


def _install_uvloop() -> None:
    try:
        import uvloop
    except ImportError:
        return
    asyncio.set_event_loop_policy(uvloop.EventLoopPolicy())


RESTORE_RETRY_S = 120.0  # a failing restore is tried again for this long, then serve exits
RESTORE_RETRY_FIRST_S = 1.0
RESTORE_RETRY_MAX_S = 10.0


def restore_missing_tables(settings: Settings) -> bool:
    """Before faust starts: copy the state log into every partition's table that is
    absent (a new machine, or discarded after an unclean stop) at disk speed, so faust
    finds its persisted offsets and restores only what came after them
    (docs/architecture.md, "Memory and restores").
    In a child process (eventq/run/restore.py says why); its lines go to our log. A restore
    that fails is tried again for RESTORE_RETRY_S. Returns False if it kept failing (it
    said why)."""
    import os
    import subprocess
    import time

    from eventq.run.restore import partitions_to_restore
    from eventq.settings import kafka_security_env

    give_up_at = time.monotonic() + RESTORE_RETRY_S
    delay_s = RESTORE_RETRY_FIRST_S
    while True:
        # A restore that failed half-way left tables without a persisted offset: they
        # are discarded and restored whole again.
        missing = partitions_to_restore(settings.state_dir, range(settings.partitions))
        if not missing:
            return True
        command = [
            sys.executable, "-m", "eventq.run.restore", "--bootstrap", settings.kafka_bootstrap,
            "--jobs-topic", settings.jobs_topic, "--state-dir", str(settings.state_dir),
            "--parent-pid", str(os.getpid()), *map(str, missing),
        ]
        env = kafka_security_env(settings.kafka_security, os.environ)
        if subprocess.run(command, stdin=subprocess.DEVNULL, env=env).returncode == 0:
            return True
        if time.monotonic() + delay_s > give_up_at:
            return False
        # Kafka moving leaders (a broker just died or came back) fails a restore that
        # a moment later succeeds.
        print(f"eventq: trying the restore again in {delay_s:g}s", flush=True)
        time.sleep(delay_s)
        delay_s = min(delay_s * 2, RESTORE_RETRY_MAX_S)


def with_existing_partitions(settings: Settings, say: Callable[[str], None]) -> Settings:
    """The settings with the partition count of eventq's command log if it exists: for
    when --partitions was not given, so that topics made under an older default (8 before
    the partition sweep of docs/operations.md, "On many machines") serve as they are
    instead of being refused
    (a count cannot shrink). Kafka must answer; a failure to ask leaves them as they are
    (the topic check that follows says what is wrong)."""
    from eventq.kafka.topics import existing_partitions

    try:
        found = existing_partitions(settings.kafka, settings.commands_topic)
    except Exception:  # KafkaException: the topic check reports it
        return settings
    if found is None or found == settings.partitions:
        return settings
    say(f"{settings.commands_topic} has {found} partitions: serving those "
        f"(--partitions {settings.partitions} is for new topics)")
    return replace(settings, partitions=found)


def preflight(settings: Settings, adopt_partitions: bool) -> Settings | int:
    """What is checked before anything starts: the ports (before Kafka is even asked),
    Kafka answering, and the topics. An exit status if serving cannot start, else the
    settings to serve with (``adopt_partitions``: with the existing topics' count)."""
    try:
        check_ports(settings)
        wait_for_kafka(settings, say_on_stderr)
    except (PortUnusable, KafkaRefused) as error:
        say_on_stderr(str(error))
        return EXIT_CANNOT_START
    except KeyboardInterrupt:  # Ctrl-C while waiting for Kafka: nothing was started
        return 0
    if adopt_partitions:
        settings = with_existing_partitions(settings, say_on_stderr)
    problem = topics_problem(settings)
    if problem:
        say_on_stderr(problem)
        return EXIT_CANNOT_START
    return settings


def run_server(settings: Settings, adopt_partitions: bool = False) -> int:
    try:  # first: a file with a typo is said at once, before Kafka is asked anything
        tokens = load_tokens(settings.tokens_file)
        tls = Tls.of(settings)
    except (TokensUnusable, TlsUnusable) as error:
        say_on_stderr(str(error))
        return EXIT_CANNOT_START
    checked = preflight(settings, adopt_partitions)
    if isinstance(checked, int):
        return checked
    settings = checked
    _install_uvloop()
    tune_garbage_collector()
    patch_closed_connection_writes()
    loop = asyncio.new_event_loop()
    asyncio.set_event_loop(loop)
    try:
        crashed = statedir.claim(settings.state_dir)
    except statedir.StateDirInUse as error:
        print(f"eventq: {error}", file=sys.stderr)
        return 1
    if crashed:
        print(
            "eventq: the last run did not stop cleanly; rebuilding state from "
            f"{settings.jobs_topic}",
            flush=True,
        )
    if not restore_missing_tables(settings):
        statedir.release(settings.state_dir)  # nothing served: tables without an offset
        return 1                              # are restored again by the next start
    try:
        # Bound last, so that clients are refused (and retry) rather than left waiting
        # in a backlog while the tables are restored.
        listeners = Listeners.bind(settings)
    except PortUnusable as error:  # taken since check_ports
        statedir.release(settings.state_dir)
        say_on_stderr(str(error))
        return EXIT_CANNOT_START
    try:
        code = run_faust(settings, listeners, loop, tokens, tls)
    finally:
        listeners.close()
    if code == 0:
        statedir.release(settings.state_dir)
    return code


def run_faust(settings: Settings, listeners: Listeners, loop: asyncio.AbstractEventLoop,
              tokens: TokenStore | None = None, tls: Tls | None = None) -> int:
    """The faust worker with eventq's service until it stops; its exit status."""

    from streams.faust.app import build_streams

    streams = build_streams(settings)
    demote_routine_retries(settings.jobs_topic)
    service = EventqService(settings, streams, listeners, tokens, tls, loop=loop)
    worker = eventq_worker_class()(
        streams.app,
        service,
        loglevel=logging.getLevelName(library_level(settings.log_level)),
        # Escape codes only on a terminal (eventq/run/logformat.py says why).
        # faust's startup at the libraries' level; eventq's lines from on_start on.
        logging_config=logging_config(level_of(settings.log_level), sys.stderr,
                                      root_level=library_level(settings.log_level)),
        quiet=True,
        redirect_stdouts=False,
        loop=loop,
    )
    # faust's startup spinner writes cursor escapes (\e[?25l) even when its output is
    # a file, and eventq says itself when it serves.
    worker.spinner = None
    code = 0
    try:
        worker.execute_from_commandline()
    except SystemExit as exit_:
        code = exit_.code if isinstance(exit_.code, int) else 0
    if streams.changelog_buffer.gave_up or streams.changelogs.unclean:
        print("eventq: stopped with changelog records unwritten; the next start "
              "rebuilds state from the log", file=sys.stderr)
        code = code or 1
    return code


if __name__ == "__main__":  # pragma: no cover
    sys.exit(run_server(Settings()))
