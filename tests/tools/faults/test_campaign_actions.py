"""The evidence that a fault took effect (tools/faults/actions.py), and the run's rule
that a fault without it fails the run (tools/faults/campaign.py ``without_effect``)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from tools.faults.actions import Doing, cut_routes, process_state, start_log
from tools.faults.campaign import without_effect
from tools.faults.plan import Fault

STOP_SEEN_TIMEOUT_S = 10.0


class LogOnly:
    """What start_log reads of a cluster: a process slot's log path."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def log_path(self, i: int) -> Path:
        return self.path


def test_a_fault_without_evidence_fails_the_run_and_one_with_it_does_not():
    felt = Doing(Fault("kill-process", 0, 4.0, 2.0), evidence=["pid 7 gone after kill -9"])
    unfelt = Doing(Fault("cut-clients", 1, 9.0, 3.0, "blackhole"), confirmed=True)
    violations = without_effect([felt, unfelt])
    assert [v.kind for v in violations] == ["fault-without-effect"]
    assert "cut-clients of process 1" in violations[0].message
    assert "NO EVIDENCE" in violations[0].message


def test_a_failed_step_is_named_with_the_fault():
    doing = Doing(Fault("kill-leader", 2, 4.0, 3.0), problems=["begin: no broker names it"])
    assert without_effect([doing])[0].message.endswith("(failed steps: begin: no broker names it)")


def test_start_log_is_the_log_of_that_start_only(tmp_path):
    log = tmp_path / "server.log"
    log.write_text("\n===== start 1 =====\nfirst\neventq dashboard on http://x/ \n"
                   "\n===== start 2 =====\nsecond\n")
    cluster = LogOnly(log)
    assert "first" in start_log(cluster, 0, 1) and "second" not in start_log(cluster, 0, 1)
    assert "second" in start_log(cluster, 0, 2) and "first" not in start_log(cluster, 0, 2)
    assert start_log(cluster, 0, 3) == ""
    assert start_log(LogOnly(tmp_path / "none.log"), 0, 1) == ""


def test_a_stopped_process_is_seen_stopped():
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        assert process_state(child.pid) in ("R", "S")
        os.kill(child.pid, signal.SIGSTOP)
        deadline = time.monotonic() + STOP_SEEN_TIMEOUT_S
        while process_state(child.pid) != "T" and time.monotonic() < deadline:
            time.sleep(0.05)
        assert process_state(child.pid) == "T"
    finally:
        child.kill()
        child.wait()
    assert process_state(child.pid) is None  # gone
    assert process_state(None) is None


def test_each_cut_watches_the_routes_it_cuts():
    assert cut_routes(None, Fault("cut-clients", 1, 4.0, 3.0, "reset")) == ["client->proc1"]
    assert cut_routes(None, Fault("cut-peers", 0, 4.0, 3.0, "reset", other=2)) == [
        "peer->proc0", "peer->proc2"]
    assert cut_routes(None, Fault("one-way-cut", 2, 4.0, 3.0, "up")) == [
        "proc2->broker0", "proc2->broker1", "proc2->broker2"]
    assert cut_routes(None, Fault("cut-leaders", 2, 4.0, 3.0), brokers=[1]) == [
        "proc2->broker1"]
    broker_cut = cut_routes(None, Fault("isolate-broker", 1, 4.0, 3.0))
    assert "broker0->controller1" in broker_cut and "broker1->controller2" in broker_cut
    assert "broker0->controller2" not in broker_cut


def test_a_fault_waits_for_a_conflicting_heal_only():
    from tools.faults.campaign import conflicts

    broker_kill = Fault("kill-broker", 0, 4.0, 3.0)
    assert conflicts(Fault("wipe-broker", 1, 9.0, 3.0), broker_kill)  # one broker at a time
    assert conflicts(Fault("kill-leader", 2, 9.0, 3.0), broker_kill)
    assert not conflicts(Fault("pause-short", 1, 9.0, 3.0), broker_kill)
    restart = Fault("graceful-restart", 1, 4.0, 3.0)
    assert conflicts(Fault("kill-process", 1, 9.0, 3.0), restart)  # the same process
    assert not conflicts(Fault("kill-process", 2, 9.0, 3.0), restart)
    assert conflicts(Fault("everything-down", 0, 9.0, 3.0), restart)  # runs alone
    assert conflicts(Fault("cut-peers", 2, 9.0, 3.0, "reset", other=1), restart)
