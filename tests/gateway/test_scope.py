"""A token's prefix and name through the gateway (docs/security.md, "Queue-name
prefixes"): two processes, each owning one partition, each request served for a caller
(eventq/state/callers.py) and forwarded to its owner with it (peers.py's ``as``; here the
memory peers serve it there for the same caller). A job or recurrence outside the prefix
is -NOT-FOUND, ids stay global, listings see only its queues, and every command written
carries the name of the token it was issued for (audit), however far it was forwarded."""

from __future__ import annotations

import uuid

from eventq.core import decode_command
from eventq.core.batch import read_record
from eventq.protocol.access import Caller
from support.memory_processes import Process, finish, job_id, run, two_processes

ACME = Caller("line-2", "acme.")
ZED = Caller("line-3", "zed.")
ADMIN = Caller("line-1", None)


def add(id: uuid.UUID, name: str, flags: str = "", payload: bytes = b"{}") -> bytes:
    return (f"add {id} {name} 60000 86400000 {len(payload)}{flags}\r\n".encode()
            + payload + b"\r\n")


def issuers(process) -> list[tuple[str, str | None]]:
    """(command type, issuer) of every command in ``process``'s log, in order."""
    found = []
    for records in process.engine.log._records:
        for message in records:
            for item in read_record(message.value)[1]:
                decoded = decode_command(item)
                found.append((type(decoded.command).__name__, decoded.issuer))
    return found


def test_a_job_outside_the_prefix_is_absent_wherever_it_lives():
    async def scenario():
        a, b = two_processes()
        for partition in (0, 1):  # one job on each process, asked through a
            theirs = job_id(partition, 1)
            assert await b.handle(add(theirs, "zed.q"), caller=ZED) == b"+OK\r\n"
            for request in (f"inspect job {theirs}\r\n", f"result {theirs} 0\r\n",
                            f"inputs {theirs}\r\n", f"delete {theirs}\r\n",
                            f"touch {theirs}\r\n", f"retry {theirs}\r\n",
                            f"complete {theirs} 2\r\nok\r\n", f"fail {theirs} 2\r\nno\r\n"):
                assert await a.handle(request.encode(), caller=ACME) == b"-NOT-FOUND\r\n", (
                    partition, request)
            # Ids are global: its id is still taken.
            assert await a.handle(add(theirs, "acme.q"), caller=ACME) == (
                b"-CLIENT-ERROR Duplicate job\r\n")
            # Untouched, and its owner's token sees it.
            reply = await a.handle(f"inspect job {theirs}\r\n".encode(), caller=ZED)
            assert reply.startswith(b"+OK 1\r\n") and b"state 0" in reply
            ours = job_id(partition, 2)
            assert await b.handle(add(ours, "acme.q"), caller=ACME) == b"+OK\r\n"
            assert (await a.handle(f"inspect job {ours}\r\n".encode(), caller=ACME)
                    ).startswith(b"+OK 1\r\n")
            assert await a.handle(f"delete {ours}\r\n".encode(), caller=ACME) == b"+OK\r\n"

    run(scenario())


def test_listings_see_only_the_prefixs_queues_across_processes():
    async def scenario():
        a, b = two_processes()
        for partition in (0, 1):
            for n, (name, caller) in enumerate(((b"acme.q", ACME), (b"zed.q", ZED))):
                jid = job_id(partition, n + 1)
                assert await a.handle(add(jid, name.decode(), " -tags=t"), caller=caller) == (
                    b"+OK\r\n")
        for name, caller in (("acme.q", ACME), ("zed.q", ZED)):
            for _ in range(2):
                await finish(a, name, "fail", b"no")
        queues = await b.handle(b"inspect queues 0 10\r\n", caller=ACME)
        assert queues.startswith(b"+OK 1\r\nacme.q ") and b"zed" not in queues
        every = await b.handle(b"inspect queues 0 10\r\n", caller=ADMIN)
        assert every.startswith(b"+OK 2\r\n")
        assert await b.handle(b"inspect failed 0 10\r\n", caller=ACME) == (
            b"+OK 1\r\nfailed 1\r\nfailed-len 2\r\n")
        assert await b.handle(b"inspect failed 0 10\r\n", caller=ADMIN) == (
            b"+OK 1\r\nfailed 1\r\nfailed-len 4\r\n")
        failed = await b.handle(b"inspect failed-jobs failed 0 10\r\n", caller=ACME)
        assert failed.startswith(b"+OK 2\r\n") and failed.count(b"name acme.q") == 2
        tagged = await a.handle(b"inspect tagged t 0 10\r\n", caller=ZED)
        assert tagged.startswith(b"+OK 2\r\n") and tagged.count(b"name zed.q") == 2
        # retry-group retries only the prefix's jobs of the group.
        assert await a.handle(b"retry-group failed 10\r\n", caller=ACME) == (
            b"+OK 1\r\nretried 2\r\n")
        assert await a.handle(b"inspect failed 0 10\r\n", caller=ADMIN) == (
            b"+OK 1\r\nfailed 1\r\nfailed-len 2\r\n")

    run(scenario())


def test_recurrences_outside_the_prefix_are_absent_and_kept():
    async def scenario():
        a, b = two_processes()
        recur = b"recur nightly zed.q 1000 60000 60000 2\r\nhi\r\n"
        assert await a.handle(recur, caller=ZED) == b"+OK\r\n"
        assert await b.handle(b"unrecur nightly\r\n", caller=ACME) == b"-NOT-FOUND\r\n"
        taken = b"recur nightly acme.q 1000 60000 60000 2\r\nhi\r\n"
        assert await b.handle(taken, caller=ACME) == b"-CLIENT-ERROR Forbidden\r\n"
        assert await b.handle(b"inspect recurring 0 10\r\n", caller=ACME) == b"+OK 0\r\n"
        mine = await b.handle(b"inspect recurring 0 10\r\n", caller=ZED)
        assert mine.startswith(b"+OK 1\r\nnightly ") and b"name zed.q" in mine
        assert await a.handle(b"unrecur nightly\r\n", caller=ZED) == b"+OK\r\n"

    run(scenario())


def test_every_command_carries_its_issuers_name_however_far_it_was_forwarded():
    async def scenario():
        a, b = two_processes()
        ids = [job_id(0, 1), job_id(1, 1)]
        for jid in ids:  # each added through a: one applied there, one at b
            assert await a.handle(add(jid, "acme.q"), caller=ACME) == b"+OK\r\n"
        leased = await b.handle(b"lease acme.q 0\r\n", caller=ACME)  # through b
        leased_id = leased.split(b"\r\n")[1].split(b" ")[0]
        assert await b.handle(b"complete %s 2\r\nok\r\n" % leased_id, caller=ACME) == (
            b"+OK\r\n")
        written = issuers(a) + issuers(b)
        assert ("Add", "line-2") in written and written.count(("Add", "line-2")) == 2
        assert all(by == "line-2" for kind, by in written
                   if kind in ("Add", "StartAttempt", "Complete")), written
        # A server without tokens: no name.
        c, _ = two_processes()
        assert await c.handle(add(ids[0], "q")) == b"+OK\r\n"
        assert issuers(c) == [("Add", None)]

    run(scenario())


def test_one_process_alone_filters_its_listings_too():
    async def scenario():
        alone = Process()
        for n, (name, caller) in enumerate(((b"acme.q", ACME), (b"zed.q", ZED)) * 2):
            jid = job_id(n % 2, n // 2 + 1)
            assert await alone.handle(add(jid, name.decode(), " -tags=t"), caller=caller) == (
                b"+OK\r\n")
        for name, caller in (("acme.q", ACME), ("zed.q", ZED)):
            for _ in range(2):
                leased = await alone.handle(f"lease {name} 0\r\n".encode(), caller=caller)
                leased_id = leased.split(b"\r\n")[1].split(b" ")[0]
                assert await alone.handle(b"fail %s 2\r\nno\r\n" % leased_id,
                                          caller=caller) == b"+OK\r\n"
        assert (await alone.handle(b"inspect queues 0 10\r\n", caller=ZED)).startswith(
            b"+OK 1\r\nzed.q ")
        assert await alone.handle(b"inspect failed 0 10\r\n", caller=ZED) == (
            b"+OK 1\r\nfailed 1\r\nfailed-len 2\r\n")
        assert (await alone.handle(b"inspect failed-jobs failed 1 10\r\n", caller=ZED)
                ).startswith(b"+OK 1\r\n")
        assert (await alone.handle(b"inspect tagged t 0 10\r\n", caller=ACME)
                ).count(b"name acme.q") == 2
        assert await alone.handle(b"retry-group failed 1\r\n", caller=ZED) == (
            b"+OK 1\r\nretried 1\r\n")
        assert await alone.handle(b"inspect failed 0 10\r\n", caller=None) == (
            b"+OK 1\r\nfailed 1\r\nfailed-len 3\r\n")
        assert await alone.handle(b"recur r acme.q 1000 60000 60000 1\r\nx\r\n",
                                  caller=ACME) == b"+OK\r\n"
        assert await alone.handle(b"inspect recurring 0 10\r\n", caller=ZED) == b"+OK 0\r\n"
        assert (await alone.handle(b"inspect recurring 0 10\r\n", caller=ACME)).startswith(
            b"+OK 1\r\nr ")

    run(scenario())
