"""The bounded fuzz run of CI (docs/architecture.md, "Hostile inputs"): a few thousand
random valid and invalid requests against a live server (bench/fuzz_server.py runs a
million on demand)."""

from __future__ import annotations

import asyncio
import importlib.util
import sys
import uuid
from pathlib import Path

import pytest

from tools.servers import ServerProcess

pytestmark = [pytest.mark.kafka, pytest.mark.slow, pytest.mark.timeout(600)]

FUZZ = Path(__file__).resolve().parents[2] / "bench" / "fuzz_server.py"


def load_fuzzer():
    spec = importlib.util.spec_from_file_location("fuzz_server", FUZZ)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


def fuzzed(fuzzer, server: ServerProcess, *, inputs: int, **options):
    """The tally of ``inputs`` fuzzed requests against ``server``, reported, checked to
    be all sent with no hang, violation, failed probe, digest mismatch or crash."""
    tally = asyncio.run(fuzzer.fuzz(
        server.port, server.bootstrap, server.settings["commands-topic"],
        lambda: server.process.poll() is None, inputs=inputs, **options))
    fuzzer.report(tally, 1.0)
    assert tally.inputs >= inputs
    assert tally.failures == 0, (tally.hangs, tally.violations, tally.probe_failures,
                                 tally.digest_mismatches, tally.crashes)
    return tally


def test_bounded_fuzz_run_no_crash_no_hang_others_unaffected_digest_equals_replay(
    kafka_bootstrap, tmp_path
):
    fuzzer = load_fuzzer()
    server = ServerProcess(kafka_bootstrap, f"fuzz{uuid.uuid4().hex[:6]}", tmp_path, partitions=4)
    server.create_topics()
    server.start()
    try:
        tally = fuzzed(fuzzer, server, inputs=4000, seed=20261124, connections=32,
                       round_inputs=2000)
        assert "SERVER-ERROR" not in tally.replies, tally.replies
        assert tally.replies.get("ok", 0) > 500 and tally.replies.get("CLIENT-ERROR", 0) > 500
        assert len(tally.probe_ms) >= 2  # the other client kept being answered
    finally:
        code = server.stop()
    assert code == 0, server.log_tail()
    assert "Traceback" not in server.log_path.read_text()


def test_fuzz_with_tokens_no_unauthenticated_request_has_any_effect(kafka_bootstrap, tmp_path):
    """docs/security.md, "Fail closed": connections that never authenticate (or with
    wrong tokens) send every verb, valid and not; each is answered Unauthorized (or, for
    a framing error, closed), and the state digest and the command log are exactly as
    the admin left them before the fuzz (the fuzzer checks after each round)."""
    fuzzer = load_fuzzer()
    tokens = fuzzer.TokensMode.new()
    (tmp_path / "tokens").write_text(tokens.file_text)
    server = ServerProcess(kafka_bootstrap, f"fuzzt{uuid.uuid4().hex[:6]}", tmp_path,
                           partitions=4, tokens_file=str(tmp_path / "tokens"))
    server.ready_auth = b"auth %s\r\n" % tokens.admin.encode()
    server.create_topics()
    server.start()
    try:
        tally = fuzzed(fuzzer, server, inputs=3000, seed=20261127, connections=16,
                       round_inputs=1500, tokens=tokens)
        assert set(tally.replies) == {"CLIENT-ERROR"}, tally.replies  # never +OK
        # Nothing about a request's fields: a framing error that closes says Unauthorized
        # too, but for a line too long (known before the verb is read).
        said = set(tally.error_replies) - {"-CLIENT-ERROR Unauthorized"}
        assert said <= {"-CLIENT-ERROR Line too long"}, said
        assert tally.error_replies["-CLIENT-ERROR Unauthorized"] > 1500, tally.error_replies
        assert len(tally.probe_ms) >= 2  # the admin kept being answered meanwhile
        # Still serving: an authenticated client goes through a whole cycle.
        asyncio.run(admin_cycle(server.port, tokens.admin))
    finally:
        code = server.stop()
    assert code == 0, server.log_tail()
    assert "Traceback" not in server.log_path.read_text()
    for token in tokens.real:
        assert token not in server.log_path.read_text()


async def admin_cycle(port: int, token: str) -> None:
    from eventq.client.raw import RawClient

    job = uuid.uuid4()
    async with await RawClient.connect(port=port, token=token) as client:
        await client.add(job, "after-fuzz", 60000, 600000, b"x")
        leased = await client.lease("after-fuzz", 5000)
        assert leased.id == job
        await client.complete(job, b"ok")
        assert (await client.result(job, 0)).result == b"ok"
