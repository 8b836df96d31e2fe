"""``eventq worker``: run a worker from the command line.

    eventq worker --queue resize -- ./resize.sh --width 200   # any program, any language
    eventq worker --queue report --inputs -- sh -c 'cat "$EVENTQ_INPUTS"/*'
    eventq worker --app myapp.jobs:worker                     # a Python Worker object

``--inputs`` hands a program its job's inputs (the results of its -after upstreams) as
files in ``$EVENTQ_INPUTS`` (eventq/worker/program.py).
"""

from __future__ import annotations

import argparse
import importlib
import os
import ssl
import sys
from collections.abc import Mapping
from typing import TypeVar

from eventq.address import host_and_port
from eventq.client.tls import tls_context
from eventq.worker.output import configure_command_line, terminal_or_none
from eventq.worker.program import program_problem
from eventq.worker.runtime import Worker

EXIT_USAGE = 2  # as argparse: the command line cannot work as given
TOKEN_ENV = "EVENTQ_TOKEN"  # the token, when --token is not given (not in `ps` output)


Parser = TypeVar("Parser", bound=argparse.ArgumentParser)  # the command line's parser class


class UsageError(Exception):
    """The arguments describe no worker that can run; the message says why."""


def register(commands: argparse._SubParsersAction[Parser]) -> None:
    parser = commands.add_parser(
        "worker", help="run jobs: a program (-- argv...) or a Python Worker (--app)",
        description=(
            "Lease jobs of the given queues and run them: with `-- PROGRAM ARGS...` each "
            "job's payload goes to the program's stdin, exit 0 completes the job with its "
            "stdout, any other status fails it with the tail of its stderr, and a program "
            "still running at the job's TTR (or --timeout-ms) is killed. The program's "
            "environment has EVENTQ_JOB_ID, EVENTQ_QUEUE and EVENTQ_TTR_MS. With --inputs, "
            "each job's inputs (the results of the jobs it was added -after) are fetched "
            "first, and EVENTQ_INPUTS names a fresh directory holding one file per "
            "upstream, NNN-<upstream-id> (NNN its position in -after order, 001 first, so "
            "`cat \"$EVENTQ_INPUTS\"/*` reads them in that order), containing its result; "
            "a failed upstream's name ends in .failed. The directory is empty for a job "
            "without upstreams and removed when the program ends. With --app, "
            "module:attribute names a Worker whose handlers run (a handler asks for "
            "inputs with inputs=True). Leases are touched every third of their TTR while "
            "a job runs. SIGTERM or Ctrl-C: no new jobs, running ones finish until their "
            "TTR; a second one ends them."
        ),
    )
    parser.add_argument("--server", default="127.0.0.1:9922", metavar="HOST:PORT",
                        help="the eventq (or workq) server (default %(default)s)")
    parser.add_argument("--token", default=None, metavar="TOKEN",
                        help="the token to `auth` with, for a server with tokens "
                             f"(docs/security.md; default: ${TOKEN_ENV})")
    add_tls_arguments(parser)
    parser.add_argument("--queue", action="append", default=[], metavar="NAME",
                        help="a queue to run the program for (repeatable)")
    parser.add_argument("--app", metavar="MODULE:ATTR", help="a Python eventq.worker.Worker")
    parser.add_argument("--concurrency", type=int, default=None, metavar="N",
                        help="jobs at once (default 8, or the --app worker's)")
    parser.add_argument("--timeout-ms", type=int, default=None, metavar="MS",
                        help="kill a program after this long (default: the job's TTR)")
    parser.add_argument("--inputs", action="store_true",
                        help="hand the program each job's inputs (its -after upstreams' "
                             "results) as files in the directory $EVENTQ_INPUTS (one more "
                             "request per job)")
    parser.add_argument("--quiet", action="store_true", help="no line per job")
    parser.add_argument("argv", nargs=argparse.REMAINDER, help="-- PROGRAM ARGS...")
    parser.set_defaults(handler=None, worker_main=main)


def build_worker(args: argparse.Namespace, environ: Mapping[str, str] | None = None) -> Worker:
    """The worker the arguments describe (``UsageError`` saying why if they do not
    describe one that can run)."""
    worker = _build_worker(args)
    token = args.token or (os.environ if environ is None else environ).get(TOKEN_ENV)
    if token:
        worker.token = token
    tls = tls_from_arguments(args)
    if tls is not None:
        worker.tls = tls
    return worker


def add_tls_arguments(parser: argparse.ArgumentParser) -> None:
    """--tls-ca/--tls-cert/--tls-key: a server that speaks TLS (docs/security.md, "TLS
    and client certificates")."""
    parser.add_argument("--tls-ca", default=None, metavar="PEM",
                        help="speak TLS, checking the server's certificate against this CA")
    parser.add_argument("--tls-cert", default=None, metavar="PEM",
                        help="this client's certificate, for a server that requires one")
    parser.add_argument("--tls-key", default=None, metavar="PEM",
                        help="the private key of --tls-cert")


def tls_from_arguments(args: argparse.Namespace) -> ssl.SSLContext | None:
    """The TLS context the arguments ask for (None: plain TCP); ``UsageError`` if the
    files cannot be used."""
    if args.tls_ca is None and args.tls_cert is None:
        return None
    try:
        return tls_context(args.tls_ca, args.tls_cert, args.tls_key)
    except (OSError, ValueError) as error:  # ssl.SSLError is an OSError
        raise UsageError(f"cannot use the TLS files: {error}") from None


def _build_worker(args: argparse.Namespace) -> Worker:
    argv = args.argv[1:] if args.argv[:1] == ["--"] else args.argv
    try:
        host, port = host_and_port(args.server)
    except ValueError:
        raise UsageError(f"--server must be HOST:PORT, not {args.server!r}") from None
    if args.app:
        if argv or args.queue:
            raise UsageError("give either --app or --queue ... -- PROGRAM")
        if args.inputs:
            raise UsageError("--inputs is for a program: an --app worker's handlers ask "
                             "for inputs themselves (@worker.handler(queue, inputs=True))")
        worker = _load_app(args.app)
        worker.host, worker.port = host, port
        if args.concurrency is not None:
            worker.concurrency = args.concurrency
        return worker
    if not argv or not args.queue:
        raise UsageError("give --queue NAME and the program after `--` "
                         "(e.g. eventq worker --queue resize -- ./resize.sh), or --app")
    problem = program_problem(argv[0])  # at start, not as every job's result
    if problem:
        raise UsageError(problem)
    worker = Worker(host, port, concurrency=args.concurrency or 8)
    for queue in args.queue:
        worker.add_program(queue, argv, timeout_ms=args.timeout_ms, inputs=args.inputs)
    return worker


def _load_app(spec: str) -> Worker:
    module_name, _, attribute = spec.partition(":")
    if not attribute:
        raise UsageError(f"--app must be MODULE:ATTRIBUTE, not {spec!r}")
    sys.path.insert(0, "")
    try:
        worker = getattr(importlib.import_module(module_name), attribute)
    except (ImportError, AttributeError) as error:
        raise UsageError(f"cannot load {spec}: {error}") from None
    if not isinstance(worker, Worker):
        raise UsageError(f"{spec} is not a Worker but {type(worker).__name__!r}")
    return worker


def main(args: argparse.Namespace) -> int:
    try:
        worker = build_worker(args)
    except UsageError as error:
        print(f"eventq worker: {error}", file=sys.stderr, flush=True)
        return EXIT_USAGE
    configure_command_line(sys.stderr, args.quiet)
    worker.status_stream = terminal_or_none(sys.stderr)
    return worker.run()
