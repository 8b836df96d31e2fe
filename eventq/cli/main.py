"""The ``eventq`` command line. Builds the one Settings object and hands it down."""

from __future__ import annotations

import argparse
import difflib
import os
import sys
from dataclasses import replace
from typing import Callable, Sequence

from eventq.kafka.topics import ensure_topics
from eventq.run.localkafka import broker
from eventq.settings import Settings, add_arguments, build_settings, was_given

EXIT_OK = 0
EXIT_FAILED = 1


def say(message: str) -> None:
    print(message, flush=True)


def fail(message: str, code: int = EXIT_FAILED) -> int:
    print(f"eventq: {message}", file=sys.stderr, flush=True)
    return code


# --- kafka -------------------------------------------------------------------------


def cmd_kafka_start(settings: Settings, args: argparse.Namespace) -> int:
    from eventq.run.localkafka.supervise import stop_supervisor

    nodes = kafka_start_nodes(settings, args)
    if isinstance(nodes, str):
        return fail(nodes)
    if any(broker.running_pid(config) is None for config in nodes):
        # A running supervisor may be restarting a node that is down right now: two
        # starts of one node would fight over its ports and pid file.
        paused = stop_supervisor(settings)
        if paused is not None:
            say(f"Kafka supervisor (pid {paused}) stopped while the nodes that are down "
                "start; it is started again once they run")
    try:
        results = broker.start_cluster(nodes)
    except broker.BrokerError as error:
        return fail(str(error))
    for config, result in zip(nodes, results):
        if result.already_running:
            say(f"Kafka already running on {config.bootstrap} (pid {result.pid}); "
                "nothing to do")
        else:
            formatted = " (storage formatted)" if result.formatted else ""
            say(
                f"Kafka started on {config.bootstrap} (pid {result.pid}) in "
                f"{result.seconds:.1f}s{formatted}; data in {config.data_dir}, "
                f"log in {config.log_file}"
            )
    if len(nodes) > 1:
        say(f"bootstrap servers: {settings.kafka_bootstrap} (pass them to other eventq "
            f"commands with --brokers {len(nodes)} or --bootstrap)")
    if broker.secured(nodes[0]):
        say_client_settings(nodes[0])
    return start_kafka_supervisor(settings)


def kafka_start_nodes(settings: Settings,
                      args: argparse.Namespace) -> list[broker.BrokerConfig] | str:
    """The nodes `kafka start` starts, secured as its flags say; or why it cannot: a
    running node is not secured in place (its flags would be silently ignored)."""
    nodes = broker.local_nodes(settings)
    if args.mtls and not args.sasl_ssl:
        return ("--mtls needs --sasl-ssl: the client certificate is required on the "
                "SASL_SSL listener (eventq kafka start --sasl-ssl --mtls)")
    if not args.sasl_ssl:
        return nodes
    nodes = [replace(config, sasl_ssl=True, client_certs=args.mtls) for config in nodes]
    running = [config for config in nodes if broker.running_pid(config) is not None]
    plain = [config for config in running if not config.security_file("password").exists()]
    if plain:
        return (f"Kafka already runs on {plain[0].bootstrap} without SASL_SSL: stop it "
                "first (eventq kafka stop), and give another --data-dir (its storage was "
                "formatted without the SCRAM user)")
    lax = [config for config in running
           if args.mtls and not config.security_file(broker.CLIENT_CERT).exists()]
    if lax:
        return (f"Kafka already runs on {lax[0].bootstrap} without requiring client "
                "certificates: stop it first (eventq kafka stop), then start it again with "
                "--mtls (its storage stays)")
    return nodes


def say_client_settings(config: broker.BrokerConfig) -> None:
    """What eventq's clients of a secured local Kafka must be given, as shell lines
    (docs/security.md, "A secured Kafka"); the password as the file that holds it, never
    itself."""
    from eventq.kafka.security import settings_env

    client_env = config.security_file("client.env")
    variables = settings_env(broker.local_security(config))
    password_file = config.security_file("password")
    lines = [f"export {name}={value}" if name != "EVENTQ_KAFKA_SASL_PASSWORD"
             else f'export {name}="$(cat {password_file})"'
             for name, value in variables.items()]
    client_env.write_text("".join(f"{name}={value}\n" for name, value in variables.items()))
    client_env.chmod(0o600)
    say(f"Kafka speaks {broker.local_security(config).describe()}; eventq's clients "
        f"need these settings (or: set -a; . {client_env}; set +a):")
    for line in lines:
        say(f"  {line}")


def start_kafka_supervisor(settings: Settings) -> int:
    from eventq.run.localkafka.supervise import (
        SupervisorError,
        start_supervisor,
        supervisor_log_file,
    )

    try:
        pid, already_running = start_supervisor(settings)
    except SupervisorError as error:
        return fail(str(error))
    if already_running:
        say(f"Kafka supervisor already running (pid {pid}); nothing to do")
    else:
        say(f"Kafka supervisor started (pid {pid}): it restarts a node that dies; "
            f"log in {supervisor_log_file(settings)}")
    return EXIT_OK


def cmd_kafka_stop(settings: Settings, args: argparse.Namespace) -> int:
    from eventq.run.localkafka.supervise import stop_supervisor

    # The supervisor first, or it would restart the nodes being stopped.
    pid = stop_supervisor(settings)
    if pid is not None:
        say(f"Kafka supervisor (pid {pid}) stopped")
    else:
        say("Kafka supervisor was not running; nothing to do")
    for config in broker.local_nodes(settings):
        if broker.stop(config):
            say(f"Kafka on {config.bootstrap} stopped")
        else:
            say(f"Kafka on {config.bootstrap} was not running; nothing to do")
    return EXIT_OK


def cmd_kafka_status(settings: Settings, args: argparse.Namespace) -> int:
    from eventq.run.localkafka.supervise import supervisor_log_file, supervisor_pid

    code = EXIT_OK
    for config in broker.local_nodes(settings):
        state = broker.status(config)
        if not state.running:
            say(f"Kafka is not running on {config.bootstrap} (looked for {config.pid_file})")
            code = 3  # like LSB `status`: 3 = not running
            continue
        answering = "answering" if state.answering else "NOT answering yet"
        say(f"Kafka is running on {state.bootstrap} (pid {state.pid}), {answering}")
    pid = supervisor_pid(settings)
    if pid is not None:
        say(f"Kafka supervisor is running (pid {pid}): it restarts a node that dies; "
            f"log in {supervisor_log_file(settings)}")
    else:
        say("Kafka supervisor is not running: a node that dies stays down "
            "(eventq kafka start starts it)")
    return code


def cmd_kafka_supervise(settings: Settings, args: argparse.Namespace) -> int:
    from eventq.run.localkafka.supervise import run_supervisor

    return run_supervisor(settings)


# --- topics ------------------------------------------------------------------------


def create_topics(settings: Settings) -> bool:
    reports = ensure_topics(settings.kafka, settings.topics)
    for report in reports:
        say(report.describe())
    return all(report.ok for report in reports)


def kafka_silence(settings: Settings) -> str | None:
    """Why Kafka cannot be used now (it does not answer within KAFKA_PROBE_S), or None:
    said at once instead of after a 30 s timeout (docs/architecture.md, "Feedback to
    users")."""
    from eventq.kafka.security import KafkaRefused
    from eventq.run.localkafka.broker import broker_answers
    from eventq.run.serve import KAFKA_PROBE_S, kafka_silent

    try:
        if broker_answers(settings.kafka, timeout_s=KAFKA_PROBE_S):
            return None
    except KafkaRefused as error:
        return str(error)
    return kafka_silent(settings)


def cmd_topics_create(settings: Settings, args: argparse.Namespace) -> int:
    silence = kafka_silence(settings)
    if silence:
        return fail(f"cannot create topics: {silence}")
    if not was_given("partitions", args, os.environ):
        from eventq.run.serve import with_existing_partitions

        settings = with_existing_partitions(settings, say)  # re-running stays harmless
    try:
        ok = create_topics(settings)
    except Exception as error:  # KafkaException: broker unreachable
        return fail(
            f"cannot create topics on {settings.kafka_bootstrap}: {error}. "
            "Is Kafka running? (eventq kafka start)"
        )
    if not ok:
        return fail(
            "existing topics differ from what eventq needs; "
            "use other topic names or recreate them"
        )
    return EXIT_OK


# --- up: what `make run` runs ------------------------------------------------------


def cmd_up(settings: Settings, args: argparse.Namespace) -> int:
    """Start Kafka (if local), create the topics, and serve until Ctrl-C or SIGTERM: one
    eventq process, or ``--processes N`` of them on consecutive ports
    (docs/architecture.md, "Scaling out"), each a supervised child restarted if it dies,
    as is a Kafka node this command started."""
    from eventq.kafka.security import KafkaRefused
    from eventq.run.serve import say_on_stderr, wait_for_kafka, with_existing_partitions
    from eventq.run.supervisor import stop_on_signals
    from eventq.run.up import (
        EXIT_CANNOT_START,
        files_problem,
        interrupt_on_sigterm,
        ports_problem,
        serve_processes,
    )

    # Before anything starts, Kafka included.
    problem = files_problem(settings) or ports_problem(settings)
    if problem:
        return fail(problem, EXIT_CANNOT_START)
    interrupt_on_sigterm()
    nodes = broker.local_nodes(settings) if settings.uses_local_broker else []
    # Known before starting them, so that a start cut short by Ctrl-C is stopped too.
    started = [config for config in nodes if broker.running_pid(config) is None]
    try:
        if nodes:
            try:
                broker.start_cluster(nodes)
            except broker.BrokerError as error:
                started = []  # start_cluster stopped the ones it launched
                return fail(str(error))
            say(f"Kafka {'started' if started else 'already running'} on "
                f"{settings.kafka_bootstrap}")
        else:
            try:
                wait_for_kafka(settings, say_on_stderr)  # --bootstrap: said within seconds
            except KafkaRefused as error:
                return fail(str(error), EXIT_CANNOT_START)
        if not was_given("partitions", args, os.environ):
            settings = with_existing_partitions(settings, say)  # a var/ from before
        try:
            topics_fit = create_topics(settings)
        except Exception as error:  # KafkaException: no broker answers
            return fail(f"cannot create topics on {settings.kafka_bootstrap}: {error}. "
                        "Is --bootstrap right, and does Kafka run there?")
        if not topics_fit:
            return fail("existing topics differ from what eventq needs")
        return serve_processes(settings, brokers_started=started, cluster=nodes)
    except KeyboardInterrupt:
        return EXIT_OK
    finally:
        if started:
            with stop_on_signals():  # a second Ctrl-C must not leave a broker half stopped
                say("stopping the Kafka broker this command started ...")
                for config in started:
                    broker.stop(config)
                say("Kafka stopped")


def serve(settings: Settings, adopt_partitions: bool) -> int:
    try:
        from eventq.run.serve import run_server
    except ImportError:
        say(
            "Kafka and the topics are ready; the eventq server is not built yet. "
            "Press Ctrl-C to stop."
        )
        import signal

        signal.pause()
        return EXIT_OK
    return run_server(settings, adopt_partitions)


def cmd_serve(settings: Settings, args: argparse.Namespace) -> int:
    return serve(settings, adopt_partitions=not was_given("partitions", args, os.environ))


# The settings `eventq client` uses: the server's address (its --help used to list all
# 25 server and Kafka flags).
CLIENT_SETTINGS = ("listen_host", "listen_port")
TOKEN_ENV = "EVENTQ_TOKEN"  # a client's token when --token is not given (kept out of `ps`)


def cmd_client(settings: Settings, args: argparse.Namespace) -> int:
    from eventq.cli.line_client import run_line_client
    from eventq.worker.cli import UsageError, tls_from_arguments

    token = args.token or os.environ.get(TOKEN_ENV)
    try:
        tls = tls_from_arguments(args)
    except UsageError as error:
        return fail(str(error), 2)
    return run_line_client(settings.listen_host, settings.listen_port, token or None, tls)


# --- replay and digest ------------------------------------------------------------


def _print_states(counts: dict[str, int]) -> None:
    say("  " + ", ".join(f"{state} {count:,}" for state, count in counts.items()))


def cmd_replay(settings: Settings, args: argparse.Namespace) -> int:
    from eventq.console.progress import Progress, Reporter
    from eventq.kafka.logreader import latest_state
    from eventq.run import replay
    from eventq.run.statedir import StateDirInUse

    progress = Progress()
    try:
        if not args.from_commands:
            bar = Reporter(progress, f"reading {settings.jobs_topic}")
            report = replay.rebuild_from_state_log(
                settings.kafka, settings.jobs_topic, settings.state_dir, bar
            )
            elapsed = bar.finish()
            say(
                f"rebuilt {settings.state_dir} from {settings.jobs_topic}: "
                f"{report.jobs:,} jobs from {report.records_read:,} records in "
                f"{elapsed:.1f}s ({report.records_read / max(elapsed, 1e-6):,.0f} records/s)"
            )
            _print_states({s.name: report.jobs_by_state.get(s, 0) for s in replay.State})
            for example in report.undecodable.examples:
                say(f"  undecodable (skipped): {example}")
            return EXIT_OK
        bar = Reporter(progress, f"re-deriving from {settings.commands_topic}")
        derived = replay.derive_from_commands(
            settings.kafka, settings.commands_topic, bar,
            settings.max_state_record_bytes,
        )
        bar.finish()
        bar = Reporter(progress, f"reading {settings.jobs_topic}")
        state = latest_state(settings.kafka, settings.jobs_topic, bar)
        logged, bad = state.jobs, state.undecodable
        bar.finish()
    except (replay.ReplayError, StateDirInUse, LookupError) as error:
        return fail(str(error))
    say(
        f"{derived.commands:,} commands re-derive {len(derived.jobs):,} jobs; "
        f"the state log holds {len(logged):,}"
    )
    _print_states(replay.count_by_state(derived.jobs.values()))
    for example in derived.undecodable.examples + bad.examples:
        say(f"  undecodable (skipped): {example}")
    differences = replay.compare(derived.jobs, logged)
    for difference in differences:
        say(difference.describe())
    inputs_differing = replay.compare_inputs(derived.inputs, state.inputs)
    for line in inputs_differing:
        say(line)
    if differences or inputs_differing:
        what = f"{len(differences)} jobs" + (
            f" and {len(inputs_differing)} inputs" if inputs_differing else "")
        return fail(f"{what} differ between the command log and the state log")
    say("the command log and the state log agree on every job"
        + (f" and every input ({len(state.inputs):,})" if state.inputs else ""))
    return EXIT_OK


def cmd_digest(settings: Settings, args: argparse.Namespace) -> int:
    from eventq.console.progress import Progress, Reporter
    from eventq.kafka.logreader import LoggedState, latest_state
    from eventq.run.replay import Derived, ReplayError, derive_from_commands

    progress = Progress()
    try:
        # Either way jobs and the workflows' inputs beside them, as `inspect digest`.
        if args.from_commands:
            bar = Reporter(progress, f"re-deriving from {settings.commands_topic}")
            state: Derived | LoggedState = derive_from_commands(
                settings.kafka, settings.commands_topic, bar,
                settings.max_state_record_bytes,
            )
        else:
            bar = Reporter(progress, f"reading {settings.jobs_topic}")
            state = latest_state(settings.kafka, settings.jobs_topic, bar)
        bar.finish()
    except (ReplayError, LookupError) as error:
        return fail(str(error))
    say(f"{state.digest()} {len(state.jobs)} jobs")
    return EXIT_OK


# --- the parser --------------------------------------------------------------------

Handler = Callable[[Settings, argparse.Namespace], int]

# Flags people try that eventq spells otherwise: suggested first (docs/architecture.md,
# "Feedback to users").
FLAG_ALIASES = {"--port": "--listen-port", "--host": "--listen-host",
                "--bind": "--listen-host", "--kafka": "--bootstrap",
                "--bootstrap-servers": "--bootstrap", "--bootstrap-server": "--bootstrap"}
SUGGESTIONS = 3


def did_you_mean(unknown: str, known: Sequence[str]) -> list[str]:
    """The flags of ``known`` that ``unknown`` may have meant, likeliest first (pure)."""
    name = unknown.split("=", 1)[0]
    alias = FLAG_ALIASES.get(name)
    found = [alias] if alias is not None and alias in known else []
    for flag in difflib.get_close_matches(name, known, n=SUGGESTIONS, cutoff=0.6):
        if flag not in found:
            found.append(flag)
    return found[:SUGGESTIONS]


def unrecognized(extras: Sequence[str], known: Sequence[str], prog: str) -> str:
    """The error for arguments a command does not take, naming what it may have meant."""
    flag = next((extra for extra in extras if extra.startswith("-")), None)
    guesses = did_you_mean(flag, known) if flag else []
    hint = f"`{prog} --help` lists what it takes"
    if guesses:
        either = ", ".join(guesses[:-1]) + " or " if len(guesses) > 1 else ""
        hint = f"did you mean {either}{guesses[-1]}? {hint}"
    return f"unrecognized arguments: {' '.join(extras)} ({hint})"


class CommandParser(argparse.ArgumentParser):
    """A (sub)command's parser: an argument it does not take is reported with its own
    usage and the flags it may have meant (`eventq serve --port 9999` used to show the
    top-level usage and no hint of --listen-port)."""

    def parse_known_args(  # type: ignore[override]  # one signature for typeshed's two
        self, args: Sequence[str] | None = None, namespace: argparse.Namespace | None = None,
    ) -> tuple[argparse.Namespace, list[str]]:
        parsed, extras = super().parse_known_args(args, namespace)
        if extras:
            flags = [flag for action in self._actions for flag in action.option_strings]
            self.error(unrecognized(extras, flags, self.prog))
        return parsed, extras


def _subcommand(
    subparsers: argparse._SubParsersAction[CommandParser], name: str, handler: Handler,
    help_text: str, settings: Sequence[str] | None = None,
) -> CommandParser:
    parser = subparsers.add_parser(name, help=help_text, description=help_text)
    add_arguments(parser, settings)
    parser.set_defaults(handler=handler)
    return parser


def build_parser() -> argparse.ArgumentParser:
    parser = CommandParser(
        prog="eventq",
        description="A workq-compatible job queue whose only source of truth is a Kafka log.",
    )
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)

    kafka = commands.add_parser(
        "kafka", help="run a local Kafka (one node, or --brokers 3)", description=(
            "Run a local Kafka (KRaft) from the jars `make deps` fetched: one node, or "
            "with --brokers N a cluster of N nodes on consecutive loopback port pairs."
        )
    )
    kafka_commands = kafka.add_subparsers(dest="kafka_command", metavar="ACTION", required=True)
    start_parser = _subcommand(
        kafka_commands, "start", cmd_kafka_start,
        "start the broker and a supervisor that restarts it if it dies (idempotent)")
    start_parser.add_argument(
        "--sasl-ssl", action="store_true",
        help="a secured broker: one SASL_SSL listener (TLS, SCRAM-SHA-512 user eventq), "
        "certificates and password made in <data-dir>/kafka/security; it stays secured at "
        "later starts. Prints the settings eventq's clients then need")
    start_parser.add_argument(
        "--mtls", action="store_true",
        help="with --sasl-ssl: the broker also requires each client to present a "
        "certificate signed by its CA (mTLS); a client certificate and key are made beside "
        "the CA and printed with the other settings. It stays so at later starts")
    _subcommand(kafka_commands, "stop", cmd_kafka_stop,
                "stop the supervisor, then the broker (idempotent)")
    _subcommand(kafka_commands, "status", cmd_kafka_status,
                "tell whether the broker and its supervisor run")
    _subcommand(kafka_commands, "supervise", cmd_kafka_supervise,
                "restart the nodes that die until Ctrl-C (what `kafka start` leaves "
                "running in the background)")

    topics = commands.add_parser(
        "topics", help="manage eventq's topics", description="Manage eventq's two topics."
    )
    topic_commands = topics.add_subparsers(dest="topics_command", metavar="ACTION", required=True)
    _subcommand(
        topic_commands,
        "create",
        cmd_topics_create,
        "create the command and state topics with exact configs; report any that differ",
    )

    _subcommand(commands, "serve", cmd_serve, "serve the workq protocol (Kafka must be up)")
    client_parser = _subcommand(
        commands,
        "client",
        cmd_client,
        "type workq commands to a server and see its raw replies (lines end in \\r\\n); "
        "the server is at --listen-host:--listen-port, as `eventq serve` was given them",
        CLIENT_SETTINGS,
    )
    client_parser.add_argument(
        "--token", default=None, metavar="TOKEN",
        help=f"`auth` with this token first, for a server with tokens (default: ${TOKEN_ENV})")
    from eventq.worker.cli import add_tls_arguments

    add_tls_arguments(client_parser)
    replay_parser = _subcommand(
        commands,
        "replay",
        cmd_replay,
        "rebuild the data dir's state from eventq.jobs, or (--from-commands) re-derive "
        "it from eventq.commands and compare it with eventq.jobs job by job",
    )
    replay_parser.add_argument(
        "--from-commands", action="store_true",
        help="re-derive state from the command log with the pure core and compare "
        "(reads only; the data dir is not touched)",
    )
    digest_parser = _subcommand(
        commands,
        "digest",
        cmd_digest,
        "print the order-independent digest of all job state (as `inspect digest` does)",
    )
    digest_parser.add_argument(
        "--from-commands", action="store_true",
        help="digest the state re-derived from the command log instead of eventq.jobs",
    )
    from eventq.migrate.cli import register as register_migrate

    register_migrate(commands, add_arguments, lambda args: build_settings(args, os.environ))
    from eventq.spark.cli import register as register_spark

    register_spark(commands, add_arguments, build_settings)
    from eventq.worker.cli import register as register_worker

    register_worker(commands)
    _subcommand(
        commands,
        "up",
        cmd_up,
        "start a local Kafka, create the topics and serve until Ctrl-C (what `make run` runs)",
    )
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    worker_main: Callable[[argparse.Namespace], int] | None = getattr(args, "worker_main", None)
    if worker_main is not None:  # a client of a server: no settings
        return worker_main(args)
    try:
        settings = build_settings(args, os.environ)
    except ValueError as error:
        parser.error(str(error))
    handler: Handler = args.handler
    return handler(settings, args)


if __name__ == "__main__":
    sys.exit(main())
