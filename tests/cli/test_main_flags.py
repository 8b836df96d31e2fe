"""A mistyped flag (eventq/cli/main.py; docs/architecture.md, "Feedback to users"): the flags
it may have meant, first the likeliest, or only `--help` when none is close."""

from __future__ import annotations

import pytest

from eventq.cli.main import did_you_mean, unrecognized

SERVE_FLAGS = ["--help", "--kafka-port", "--controller-port", "--listen-host",
               "--listen-port", "--http-port", "--partitions", "--bootstrap"]


@pytest.mark.parametrize(("typed", "meant"), [
    ("--port", "--listen-port"),
    ("--port=9999", "--listen-port"),
    ("--host", "--listen-host"),
    ("--bootstrap-servers", "--bootstrap"),
    ("--partition", "--partitions"),
    ("--listen-prot", "--listen-port"),
])
def test_a_mistyped_flag_suggests_the_one_meant_first(typed, meant):
    assert did_you_mean(typed, SERVE_FLAGS)[0] == meant


def test_an_unknown_flag_far_from_any_suggests_only_help():
    assert did_you_mean("--zzz", SERVE_FLAGS) == []
    assert unrecognized(["--zzz"], SERVE_FLAGS, "eventq serve") == (
        "unrecognized arguments: --zzz (`eventq serve --help` lists what it takes)")
    assert unrecognized(["--port", "1"], ["--listen-port"], "eventq client") == (
        "unrecognized arguments: --port 1 (did you mean --listen-port? `eventq client "
        "--help` lists what it takes)")
