"""The campaign's fault schedule (tools/faults/campaign.py ``inject``): a fault whose
time comes only after the load's faulted part, because a slow heal held it back, is
skipped and said so, not begun where no load meets it."""

from __future__ import annotations

import asyncio
import time

from tools.faults import actions, campaign
from tools.faults.actions import Doing
from tools.faults.campaign import inject
from tools.faults.history import Clock
from tools.faults.plan import Fault


def test_a_fault_pushed_past_the_loads_faulted_part_is_skipped(monkeypatch):
    begun, ended = [], []

    def begin(cluster, fault, held):
        begun.append(fault.kind)
        return Doing(fault, evidence=["done"])

    def end(cluster, doing, held):
        if doing.fault.kind == "kill-broker":
            time.sleep(0.6)  # a broker slow to come back
        ended.append(doing.fault.kind)

    monkeypatch.setattr(actions, "begin", begin)
    monkeypatch.setattr(actions, "end", end)
    monkeypatch.setattr(campaign, "all_serving", lambda cluster: True)
    slow = Fault("kill-broker", 0, 0.0, 0.1)
    late = Fault("kill-leader", 0, 0.2, 0.1)  # waits for the broker fault's heal
    skipped, served = [], []

    doings = asyncio.run(inject(object(), [slow, late], Clock(), served, lambda line: None,
                                last_start_s=0.4, skipped=skipped))
    assert begun == ["kill-broker"] and ended == ["kill-broker"]
    assert skipped == [late] and [d.fault for d in doings] == [slow]
