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

from support import ServerProcess

pytestmark = [pytest.mark.kafka, pytest.mark.slow, pytest.mark.timeout(600)]

FUZZ = Path(__file__).resolve().parents[2] / "bench" / "fuzz_server.py"


def load_fuzzer():
    spec = importlib.util.spec_from_file_location("fuzz_server", FUZZ)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


def test_bounded_fuzz_run_no_crash_no_hang_others_unaffected_digest_equals_replay(
    kafka_bootstrap, tmp_path
):
    fuzzer = load_fuzzer()
    server = ServerProcess(kafka_bootstrap, f"fuzz{uuid.uuid4().hex[:6]}", tmp_path, partitions=4)
    server.create_topics()
    server.start()
    try:
        tally = asyncio.run(fuzzer.fuzz(
            server.port, kafka_bootstrap, server.settings["commands-topic"],
            lambda: server.process.poll() is None,
            inputs=4000, seed=20261124, connections=32, round_inputs=2000,
        ))
        fuzzer.report(tally, 1.0)
        assert tally.inputs >= 4000
        assert tally.failures == 0, (tally.hangs, tally.violations, tally.probe_failures,
                                     tally.digest_mismatches, tally.crashes)
        assert "SERVER-ERROR" not in tally.replies, tally.replies
        assert tally.replies.get("ok", 0) > 500 and tally.replies.get("CLIENT-ERROR", 0) > 500
        assert len(tally.probe_ms) >= 2  # the other client kept being answered
    finally:
        code = server.stop()
    assert code == 0, server.log_tail()
    assert "Traceback" not in server.log_path.read_text()
