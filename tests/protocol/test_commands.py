"""Every command, valid, fed whole, byte by byte, and followed by another request."""

from __future__ import annotations

import uuid

import pytest

from eventq.protocol import (
    Add,
    Complete,
    Confirm,
    Delete,
    Edges,
    Fail,
    InspectBulk,
    InspectDigest,
    InspectJob,
    InspectJobs,
    InspectQueue,
    InspectQueues,
    InspectScheduledJobs,
    InspectServer,
    Lease,
    Outcome,
    Peek,
    Peer,
    Result,
    Run,
    Schedule,
)
from support.protocol_helpers import NOW_MS, V1_TEXT, V4_ID, V4_TEXT, assert_parses_three_ways

ID = V4_TEXT
T_2016 = NOW_MS  # 2016-06-14T06:46:46Z

# fmt: off
CASES = [
    # add
    (f"add {ID} ping 1000 60000 4\r\npong\r\n",
     Add(V4_ID, "ping", 1000, 60000, b"pong")),
    (f"add {ID} ping 1000 60000 4 -priority=10 -max-attempts=3 -max-fails=1\r\npong\r\n",
     Add(V4_ID, "ping", 1000, 60000, b"pong", priority=10, max_attempts=3, max_fails=1)),
    (f"add -max-fails=2 {ID} ping -priority=-7 1000 60000 -max-attempts=0 4\r\npong\r\n",
     Add(V4_ID, "ping", 1000, 60000, b"pong", priority=-7, max_attempts=0, max_fails=2)),
    (f"add {ID} a.b-c_D 86400000 18446744073709551615 +0006 -priority=+2147483647\r\nx\r\ny\r\n\r\n",
     Add(V4_ID, "a.b-c_D", 86_400_000, 2**64 - 1, b"x\r\ny\r\n", priority=2**31 - 1)),
    (f"add  {ID}   ping 1 1 0  \r\n\r\n",  # repeated and trailing spaces
     Add(V4_ID, "ping", 1, 1, b"")),
    (f"add {ID.upper().replace('-', '')} p 1 1 0 -priority=-2147483648\r\n\r\n",
     Add(V4_ID, "p", 1, 1, b"", priority=-(2**31))),
    (f"add {{{ID}}} p 1 1 3 -priority=1=2\r\n\x00\xff\n\r\n",  # value ends at a second '='
     Add(V4_ID, "p", 1, 1, b"\x00\xff\n", priority=1)),
    # schedule
    (f"schedule {ID} ping 1000 2000 2016-06-14T06:46:46Z 4\r\npong\r\n",
     Schedule(V4_ID, "ping", 1000, 2000, T_2016, b"pong")),
    (f"schedule {ID} ping 1000 1 2016-06-14T06:46:46.001Z 4 -priority=3 -max-fails=255\r\npong\r\n",
     Schedule(V4_ID, "ping", 1000, 1, T_2016 + 1, b"pong", priority=3, max_fails=255)),
    (f"schedule {ID} ping 1000 60000 2016-06-14T06:46:00Z 0 -max-attempts=255\r\n\r\n",  # past
     Schedule(V4_ID, "ping", 1000, 60000, T_2016 - 46_000, b"", max_attempts=255)),
    (f"schedule urn:uuid:{ID} p 1 1 2030-01-01T00:00:00Z 1\r\n-\r\n",
     Schedule(V4_ID, "p", 1, 1, 1_893_456_000_000, b"-")),
    # run
    (f"run {ID} ping 1000 60000 4\r\nping\r\n",
     Run(V4_ID, "ping", 1000, 60000, b"ping")),
    (f"run {ID} ping 1000 0 4 -priority=-1\r\nping\r\n",
     Run(V4_ID, "ping", 1000, 0, b"ping", priority=-1)),
    # result
    (f"result {ID} 60000\r\n", Result(V4_ID, 60000)),
    (f"result {ID} 0\r\n", Result(V4_ID, 0)),
    # lease
    ("lease ping 60000\r\n", Lease(("ping",), 60000)),
    ("lease ping1 ping2 ping3 0\r\n", Lease(("ping1", "ping2", "ping3"), 0)),
    ("lease  a  a  86400000 \r\n", Lease(("a", "a"), 86_400_000)),
    # complete / fail
    (f"complete {ID} 4\r\npong\r\n", Complete(V4_ID, b"pong")),
    (f"complete {ID} 0\r\n\r\n", Complete(V4_ID, b"")),
    (f"fail {ID} 6\r\nerr\r\n!\r\n", Fail(V4_ID, b"err\r\n!")),
    (f"fail {ID} +00\r\n\r\n", Fail(V4_ID, b"")),
    # delete: any valid UUID ([eventq] a non-v4 one is -NOT-FOUND later, not invalid)
    (f"delete {ID}\r\n", Delete(V4_ID)),
    (f"delete {V1_TEXT}\r\n", Delete(uuid.UUID(V1_TEXT))),
    # inspect
    ("inspect server\r\n", InspectServer()),
    ("inspect queues 0 10\r\n", InspectQueues(0, 10)),
    ("inspect queues 4294967295 100\r\n", InspectQueues(2**32 - 1, 100)),
    ("inspect queue ping\r\n", InspectQueue("ping")),
    ("inspect jobs ping 0 10\r\n", InspectJobs("ping", 0, 10)),
    ("inspect scheduled-jobs ping 5 1\r\n", InspectScheduledJobs("ping", 5, 1)),
    (f"inspect job {ID}\r\n", InspectJob(V4_ID)),
    (f"inspect job {V1_TEXT}\r\n", InspectJob(uuid.UUID(V1_TEXT))),
    ("inspect digest\r\n", InspectDigest()),
    ("inspect  digest \r\n", InspectDigest()),
    ("inspect bulk\r\n", InspectBulk()),
    ("peer\r\n", Peer()),
    ("peek a b.c\r\n", Peek(("a", "b.c"))),
    (f"confirm {ID} 458752\r\n", Confirm(V4_ID, 458752)),
    (f"confirm {ID} 9223372036854775807\r\n", Confirm(V4_ID, 2**63 - 1)),
    ("outcome host-1-a1b2c3d4 17 2000\r\n", Outcome("host-1-a1b2c3d4", 17, 2000)),
    (f"edges {ID} 100\r\n", Edges(V4_ID, 100)),
    (f"edges {V1_TEXT} 1\r\n", Edges(uuid.UUID(V1_TEXT), 1)),  # any id, as inspect job
]
# fmt: on


@pytest.mark.parametrize(("wire", "expected"), CASES, ids=[c[0][:40] for c in CASES])
def test_valid_request(wire: str, expected: object) -> None:
    assert_parses_three_ways(wire.encode("latin-1"), expected)


def test_every_verb_and_inspect_object_is_covered() -> None:
    kinds = {type(expected) for _, expected in CASES}
    assert len(kinds) == 21
