"""The ``eventq`` command: one parser, a subcommand per operation (``main``), and the
line client of ``eventq client`` (``line_client``)."""

from eventq.cli.main import main

__all__ = ["main"]
