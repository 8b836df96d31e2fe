"""The ``import-cmdlog`` and ``export-cmdlog`` subcommands.

``register(subparsers, add_settings_arguments, settings_from_args)`` adds them to the
``eventq`` parser; each handler follows eventq.cli.main's convention ``handler(settings,
args) -> exit code``. ``main(argv)`` runs them on their own (``python -m
eventq.migrate ...``), building the settings with ``settings_from_args``.

Exit codes: 0 done; 1 failed or incomplete (a corrupt record in stop mode, jobs eventq
cannot hold, failed writes, jobs not applied within the wait, unreadable state
records); 2 usage errors (argparse).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from typing import TYPE_CHECKING, Callable, Sequence, TypeVar

from eventq.cmdlog import DEFAULT_MAX_SEGMENT_BYTES
from eventq.cmdlog.segments import SKIP, STOP
from eventq.console.progress import Progress
from eventq.errors import ClientError
from eventq.migrate.exporter import ExportOptions, ExportResult, run_export
from eventq.migrate.importer import ImportOptions, ImportReport, MigrateError, run_import

if TYPE_CHECKING:  # only named: the settings are built by whoever calls the handlers
    from eventq.settings import Settings

EXIT_OK = 0
EXIT_FAILED = 1

IMPORT_HELP = "import a workq command-log directory into eventq"
IMPORT_DESCRIPTION = """\
Read a workq command-log directory (segment files 000000001.log, ...), replay it in
order with workq's meaning, and publish the live jobs into eventq's command log as
Import commands that keep each job's created time, TTL deadline, scheduled time,
attempts, fails, state and result. LEASED jobs come back PENDING (their workers are
gone; attempts are kept). Times are truncated from workq's nanoseconds to eventq's
milliseconds. Re-running an import is harmless: ids already live in eventq are refused
as duplicates and keep their state.

Kafka and eventq's topics must exist (eventq topics create); a running `eventq serve`
applies the commands, and by default this command waits until it has. Progress goes
to stderr, the report to stdout."""

EXPORT_HELP = "export eventq's live jobs as a workq command-log directory"
EXPORT_DESCRIPTION = """\
Read eventq's live jobs from the state log (the jobs topic) and write them as a valid
workq command log into DIR, which must be new or empty, so a team can move back to
workq (or keep a portable backup). Jobs that cannot round-trip exactly are reported:
run jobs (no TTL) are not written, LEASED jobs lose their lease deadline, and fails
that workq's records cannot carry are listed. Progress goes to stderr, the report to
stdout."""

# The command line's parser class (eventq's own subclass of ArgumentParser): what
# add_subparsers() makes, and so what each subcommand's parser is.
Parser = TypeVar("Parser", bound=argparse.ArgumentParser)


def parse_now(text: str) -> int:
    """``--now``: a UTC time ``YYYY-MM-DDTHH:MM:SSZ`` -> Unix ns."""
    from eventq.protocol.values import parse_time_ms

    try:
        return parse_time_ms(text) * 1_000_000
    except ClientError:
        raise argparse.ArgumentTypeError(
            f"{text!r} is not a UTC time like 2016-12-01T10:00:00Z"
        ) from None


def positive_seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not value > 0:
        raise argparse.ArgumentTypeError(f"{text!r} is not a positive number of seconds")
    return value


def segment_bytes(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value <= 8:
        raise argparse.ArgumentTypeError(f"{text!r} is not a segment size in bytes (> 8)")
    return value


def _progress(args: argparse.Namespace) -> Progress:
    return Progress(enabled=not args.no_progress)


def _print_report(report: ImportReport | ExportResult, args: argparse.Namespace) -> None:
    if args.json:
        print(json.dumps(report.to_dict(), indent=2, sort_keys=True), flush=True)
    else:
        print("\n".join(report.lines()), flush=True)


def _fail(message: str) -> int:
    print(f"eventq: {message}", file=sys.stderr, flush=True)
    return EXIT_FAILED


def cmd_import_cmdlog(settings: Settings, args: argparse.Namespace) -> int:
    options = ImportOptions(
        directory=args.directory,
        now_ns=args.now,
        on_corrupt=args.on_corrupt,
        dry_run=args.dry_run,
        wait=args.wait,
        wait_timeout_s=args.wait_timeout,
    )
    try:
        report = run_import(settings, options, _progress(args))
    except MigrateError as error:
        return _fail(str(error))
    except KeyboardInterrupt:
        return _fail(
            "interrupted. Records already published stay in the log and will be applied; "
            "re-running the import is harmless (duplicates are refused)."
        )
    _print_report(report, args)
    if report.stopped_at is not None:
        return _fail(
            f"stopped at a corrupt record in {report.stopped_at.path} at offset "
            f"{report.stopped_at.offset} ({report.stopped_at.kind}); nothing was published. "
            "Use --on-corrupt skip to skip corrupt records and import the rest."
        )
    if not report.ok:
        return _fail("the import is incomplete: see the report above")
    return EXIT_OK


def cmd_export_cmdlog(settings: Settings, args: argparse.Namespace) -> int:
    options = ExportOptions(directory=args.directory, max_segment_bytes=args.max_segment_bytes)
    try:
        result = run_export(settings, options, _progress(args))
    except MigrateError as error:
        return _fail(str(error))
    _print_report(result, args)
    if not result.ok:
        return _fail(
            f"{result.undecodable} state records could not be read; those jobs are "
            "missing from the export (see the report above)"
        )
    return EXIT_OK


Handler = Callable[["Settings", argparse.Namespace], int]


def _common_output_flags(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--no-progress", action="store_true", help="do not draw the progress bar on stderr"
    )
    parser.add_argument(
        "--json", action="store_true", help="print the report as one JSON object on stdout"
    )


def register(
    subparsers: argparse._SubParsersAction[Parser],
    add_settings_arguments: Callable[[argparse.ArgumentParser], None],
    settings_from_args: Callable[[argparse.Namespace], object] | None = None,
) -> None:
    """Add ``import-cmdlog`` and ``export-cmdlog`` to ``subparsers``.

    ``add_settings_arguments`` adds the settings flags (eventq.settings.add_arguments).
    The handlers are set as ``handler`` and take ``(settings, args)``, like every eventq
    subcommand; ``settings_from_args`` is what ``main`` here uses to build the settings
    (eventq.cli.main builds them itself).
    """
    imp = subparsers.add_parser(
        "import-cmdlog",
        help=IMPORT_HELP,
        description=IMPORT_DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    imp.add_argument("directory", metavar="DIR", help="workq's command-log directory")
    imp.add_argument(
        "--dry-run",
        action="store_true",
        help="only read and report: records per type, skipped as expired, live jobs by "
        "state, what would be published (needs no Kafka)",
    )
    imp.add_argument(
        "--on-corrupt",
        choices=(STOP, SKIP),
        default=STOP,
        help="at a corrupt record (reported with file, offset and reason): stop there "
        "and import nothing (default), or skip it and go on (a torn tail or bad header "
        "loses the rest of that file)",
    )
    imp.add_argument(
        "--now",
        type=parse_now,
        metavar="TIME",
        help="replay as of this UTC time (2016-12-01T10:00:00Z) instead of the wall clock: "
        "decides which jobs count as expired. For tests and for inspecting old logs; "
        "eventq itself still applies each TTL by the broker's clock, so a job whose TTL "
        "has passed by then is ignored (reported as expired before import)",
    )
    imp.add_argument(
        "--wait",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="wait until the running eventq server has applied the imported jobs and "
        "report what it did (default: wait)",
    )
    imp.add_argument(
        "--wait-timeout",
        type=positive_seconds,
        default=60.0,
        metavar="SECONDS",
        help="stop waiting when no job has been applied for this long (default 60)",
    )
    _common_output_flags(imp)
    add_settings_arguments(imp)
    imp.set_defaults(handler=cmd_import_cmdlog)

    exp = subparsers.add_parser(
        "export-cmdlog",
        help=EXPORT_HELP,
        description=EXPORT_DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    exp.add_argument("directory", metavar="DIR", help="a new or empty directory to write")
    exp.add_argument(
        "--max-segment-bytes",
        type=segment_bytes,
        default=DEFAULT_MAX_SEGMENT_BYTES,
        metavar="BYTES",
        help=f"roll to a new segment file past this size (default {DEFAULT_MAX_SEGMENT_BYTES}, "
        "workq's)",
    )
    _common_output_flags(exp)
    add_settings_arguments(exp)
    exp.set_defaults(handler=cmd_export_cmdlog)


def build_parser(
    settings_from_args: Callable[[argparse.Namespace], object] | None = None,
) -> argparse.ArgumentParser:
    from eventq.settings import add_arguments

    parser = argparse.ArgumentParser(
        prog="eventq", description="Move jobs between a workq command log and eventq."
    )
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    register(commands, add_arguments, settings_from_args)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    from eventq.settings import build_settings

    def settings_from_args(args: argparse.Namespace) -> Settings:
        return build_settings(args, os.environ)

    parser = build_parser(settings_from_args)
    args = parser.parse_args(argv)
    try:
        settings = settings_from_args(args)
    except ValueError as error:
        parser.error(str(error))
    handler: Handler = args.handler
    return handler(settings, args)


if __name__ == "__main__":
    sys.exit(main())
