"""The load's clients against a scripted server: the request forms they send, repeating
a request after an indeterminate reply, workflows added in a safe order, and the final
drain's end; then that the drain's quiet period covers what the load can leave behind."""

from __future__ import annotations

import asyncio
import uuid

from tests.support.scripted_server import ScriptedServer, leased
from tools.faults.history import FAIL, INFO, OK, Args, Recorder
from tools.faults.load import (
    BACKOFF_BOUND_MS,
    DRAIN_QUIET_S,
    FAR_SCHEDULE_S,
    NEAR_SCHEDULE_S,
    TTRS_MS,
    LoadConfig,
    Producer,
    Worker,
)
from tools.faults.load_base import DEPENDENT_MARK, Session, SharedIds, call_ok
from tools.faults.load_user import RETRY_DELAY_MAX_MS, Operator, final_drain
from tools.faults.workload_rules import liveness, parse_time

OK_LINE = b"+OK\r\n"


def run(coroutine):
    return asyncio.run(coroutine)


def actor(role, ports, recorder, index=0, end_s=30.0, **config):
    settings = LoadConfig(ports=tuple(ports), duration_s=end_s, seed=7, op_margin_s=2.0,
                          **config)
    return role(index, 0, Session("127.0.0.1", ports[0], lambda: False), recorder, settings,
                SharedIds(), end_s)


def test_the_client_sends_the_documented_forms_and_reads_inputs_and_retried():
    up = str(uuid.uuid4())

    def answer(words, data):
        if words[0] == "inputs":
            return f"+OK 1\r\n{up} 1 2\r\nhi\r\n".encode()
        if words[0] == "retry-group":
            return b"+OK 1\r\nretried 3\r\n"
        return OK_LINE

    async def scenario():
        async with ScriptedServer(answer) as server:
            recorder = Recorder()
            a = actor(Operator, [server.port], recorder)
            client = await a.session_of(0).connected()
            await client.add_job("j", "q", 100, 200, b"p", 3, 50, 5, (up, "u2"))
            await client.fail_job("j", b"r", "g1")
            assert await client.retry_group("g1", 4) == 3
            assert await client.inputs("j") == ((up, b"1hi"),)
            await client.recur("n", "q", 100, 200, 2000, b"x")
            a.drop_all()
            return server.seen

    seen = run(scenario())
    assert seen[0] == (["add", "j", "q", "100", "200", "1", "-priority=5", "-max-fails=3",
                        "-backoff=50", f"-after={up},u2"], b"p")
    assert seen[1] == (["fail", "j", "1", "-group=g1"], b"r")
    assert seen[2] == (["retry-group", "g1", "4"], None)
    assert seen[3] == (["inputs", "j"], None)
    assert seen[4] == (["recur", "n", "q", "100", "200", "2000", "1"], b"x")


def test_an_add_whose_connection_dropped_is_repeated_with_the_same_id_and_bytes():
    adds = []

    def answer(words, data):
        if words[0] != "add":
            return OK_LINE
        adds.append((words[1], data))
        return None if len(adds) == 1 else b"-CLIENT-ERROR Duplicate job\r\n"

    async def scenario():
        async with ScriptedServer(answer) as server:
            recorder = Recorder()
            producer = actor(Producer, [server.port], recorder)
            while not recorder.ops:
                await producer.add()
            producer.drop_all()
            return recorder.ops

    ops = run(scenario())
    first, again = [op for op in ops if op.kind == "add"][:2]
    assert (first.outcome, again.outcome) == (INFO, FAIL)
    assert again.args.retry_of == first.index
    assert (again.job_id, again.args.payload) == (first.job_id, first.args.payload)
    assert adds[0] == adds[1]


def test_a_complete_is_repeated_on_another_process_after_an_indeterminate_reply():
    def dropping(words, data):
        return None

    def duplicate(words, data):
        return b"-CLIENT-ERROR Duplicate result\r\n"

    async def scenario():
        async with ScriptedServer(dropping) as one, ScriptedServer(duplicate) as other:
            recorder = Recorder()
            worker = actor(Worker, [one.port, other.port], recorder)
            job = "0f8fad5b-d9cb-469f-a165-70867728950e"
            for _ in range(20):  # the retry picks its process at random
                await worker.perform_retrying("complete", job, Args(result=b"r"),
                                              lambda c: call_ok(c.complete(job, b"r")), 0)
            worker.drop_all()
            return recorder.ops

    ops = run(scenario())
    retried = [op for op in ops if op.args.retry_of is not None]
    assert retried and all(ops[op.args.retry_of].outcome == INFO for op in retried)
    assert {op.process for op in retried} == {0, 1}
    assert all(op.outcome == FAIL for op in retried if op.process == 1)


def test_dependents_are_added_after_their_upstreams_and_only_if_they_landed():
    refuse = {"on": False}

    def answer(words, data):
        if words[0] == "add" and refuse["on"]:
            return b"-CLIENT-ERROR Invalid Name\r\n"
        return OK_LINE

    async def scenario():
        async with ScriptedServer(answer) as server:
            recorder = Recorder()
            operator = actor(Operator, [server.port], recorder)
            operator.rng.random = lambda: 0.99  # upstreams first
            await operator.workflow()
            refuse["on"] = True
            await operator.workflow()
            operator.drop_all()
            return server.seen

    seen = run(scenario())
    adds = [(words, data) for words, data in seen if words[0] == "add"]
    firsts = adds[:4]
    ids = [words[1] for words, _ in firsts]
    assert [w[-1] for w, _ in firsts[2:]] == [f"-after={ids[0]},{ids[1]}", f"-after={ids[2]}"]
    assert all(data.startswith(DEPENDENT_MARK) for _, data in firsts[2:])
    assert len(adds) == 6  # the second workflow's upstreams were refused: no dependents


def _drain_server(jobs: int):
    left = {"n": jobs}

    def answer(words, data):
        if words[0] == "lease":
            if left["n"] > 0:
                left["n"] -= 1
                return leased(str(uuid.uuid4()), "fq0", 1500, b"p")
            return b"-TIMEOUT\r\n"
        return OK_LINE

    return answer


def test_the_drain_completes_what_it_leases_and_ends_after_a_quiet_period():
    async def scenario():
        async with ScriptedServer(_drain_server(3)) as server:
            recorder = Recorder()
            config = LoadConfig(ports=(server.port,), duration_s=0, seed=1,
                                drain_workers_per_process=1)
            ops = await final_drain(config, recorder, quiet_s=1.0, max_s=20)
            return ops, server.seen

    ops, seen = run(scenario())
    drain = [op for op in ops if op.kind == "drain"]
    assert len(drain) == 1 and drain[0].outcome == OK and drain[0].args.wait_ms == 1000
    assert sum(op.kind == "complete" for op in ops) == 3
    assert [w[0] for w, _ in seen[:2]] == ["resume", "lease"]  # the pausable queue first
    after_last_grant = max(op.return_s for op in ops if op.kind == "lease" and op.outcome == OK)
    assert drain[0].return_s - after_last_grant >= 1.0


def test_a_drain_that_never_goes_quiet_is_recorded_so_and_reported():
    async def scenario():
        async with ScriptedServer(_drain_server(10**6)) as server:
            recorder = Recorder()
            config = LoadConfig(ports=(server.port,), duration_s=0, seed=1,
                                drain_workers_per_process=1)
            return await final_drain(config, recorder, quiet_s=1.0, max_s=1.5)

    ops = run(scenario())
    drain = [op for op in ops if op.kind == "drain"][0]
    assert drain.outcome == FAIL
    assert [v.kind for v in liveness(ops, {})] == ["drain-not-quiet"]


def test_the_drain_waits_longer_than_anything_the_load_leaves_behind():
    # docs/protocol.md, "-backoff": a job back in its queue waits its backoff; the drain
    # must outlast a TTR, that wait, a retry's delay and a schedule at the load's end.
    assert DRAIN_QUIET_S > (max(TTRS_MS) + BACKOFF_BOUND_MS + RETRY_DELAY_MAX_MS) / 1000 \
        + NEAR_SCHEDULE_S[1]


def test_a_slow_worker_completes_a_dependent_after_its_ttr_having_asked_its_inputs():
    job = str(uuid.uuid4())

    def answer(words, data):
        if words[0] == "lease":
            return leased(job, "fw0", 200, DEPENDENT_MARK + b"x")
        if words[0] == "inputs":
            return b"+OK 0\r\n"
        return OK_LINE

    async def scenario():
        async with ScriptedServer(answer) as server:
            recorder = Recorder()
            worker = actor(Worker, [server.port], recorder)
            worker.rng.random = lambda: 0.05  # touch, overrun the TTR, complete
            await worker.step()
            worker.drop_all()
            return recorder.ops

    ops = run(scenario())
    assert [op.kind for op in ops] == ["lease", "inputs", "touch", "complete"]
    assert ops[3].invoke_s - ops[0].return_s >= 0.2


def test_an_operator_resumes_and_unrecurs_until_acknowledged_when_the_load_ends():
    refusals = {"resume": 2}

    def answer(words, data):
        if words[0] == "resume" and refusals["resume"]:
            refusals["resume"] -= 1
            return b"-SERVER-ERROR eventq is still recovering its state; nothing happened\r\n"
        if words[0] == "unrecur":
            return b"-NOT-FOUND\r\n"
        return OK_LINE

    async def scenario():
        async with ScriptedServer(answer) as server:
            recorder = Recorder()
            operator = actor(Operator, [server.port], recorder, end_s=0.0)
            await operator.clean_up()
            operator.drop_all()
            return recorder.ops

    ops = run(scenario())
    # A -SERVER-ERROR on a write is indeterminate, whatever its text says (history.py).
    assert [(op.kind, op.outcome) for op in ops] == [
        ("resume", INFO), ("resume", INFO), ("resume", OK), ("unrecur", FAIL)]
    assert ops[2].args.retry_of == ops[1].index


def test_schedules_are_due_inside_the_drain_or_far_past_it_and_carry_the_wall_clock():
    def answer(words, data):
        return OK_LINE

    async def scenario():
        async with ScriptedServer(answer) as server:
            recorder = Recorder()
            producer = actor(Producer, [server.port], recorder)
            for _ in range(60):
                await producer.schedule()
            producer.drop_all()
            return recorder.ops

    ahead = [parse_time(op.args.time) - op.args.wall_s for op in run(scenario())]
    near = [a for a in ahead if a <= NEAR_SCHEDULE_S[1] + 1]
    far = [a for a in ahead if a >= FAR_SCHEDULE_S[0] - 1]
    assert near and far and len(near) + len(far) == len(ahead)


def test_clients_of_a_process_that_left_the_group_go_to_the_next_member():
    members = {0, 1, 2}

    async def scenario():
        async with ScriptedServer(lambda w, d: OK_LINE) as zero, ScriptedServer(
                lambda w, d: OK_LINE) as one, ScriptedServer(lambda w, d: OK_LINE) as two:
            recorder = Recorder()
            worker = actor(Worker, [zero.port, one.port, two.port], recorder,
                           members=lambda: members)
            worker.process = 1
            call = lambda c: call_ok(c.simple("x"))  # noqa: E731
            await worker.perform("touch", None, Args(), call, 0)
            members.discard(1)  # left for good: a scale-in
            await worker.perform("touch", None, Args(), call, 0)
            members.discard(2)
            await worker.perform("touch", None, Args(), call, 0)
            worker.drop_all()
            return recorder.ops

    ops = run(scenario())
    assert [(op.process, op.outcome) for op in ops] == [(1, OK), (2, OK), (0, OK)]


def test_an_operators_clean_up_asks_the_next_process_when_its_own_does_not_answer():
    def dropping(words, data):
        return None

    async def scenario():
        async with ScriptedServer(dropping) as gone, ScriptedServer(
                lambda w, d: b"-NOT-FOUND\r\n" if w[0] == "unrecur" else OK_LINE) as up:
            recorder = Recorder()
            operator = actor(Operator, [gone.port, up.port], recorder, end_s=0.0)
            await operator.clean_up()
            operator.drop_all()
            return recorder.ops

    ops = run(scenario())
    assert [(op.kind, op.process, op.outcome) for op in ops][:2] == [
        ("resume", 0, INFO), ("resume", 1, OK)]


def test_the_drain_leases_and_resumes_every_queue_after_a_process_left():
    config = LoadConfig(ports=(1, 2, 3), duration_s=1, seed=7)
    drained = LoadConfig(ports=(1, 3), duration_s=1, seed=7, processes=3)
    assert drained.pausable_queues() == config.pausable_queues() == ("fp0", "fp1", "fp2")
    assert drained.all_queues() == config.all_queues()
