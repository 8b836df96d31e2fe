"""The parser's and the replies' part of docs/workflows.md, "Failure groups and retry", failure groups and
retry: ``fail -group=``, ``retry``, ``retry-group``, ``inspect failed`` and ``inspect
failed-jobs`` (checks, their order, the exact error texts, each input whole, byte by
byte and with trailing data), and their reply bytes."""

from __future__ import annotations

import uuid

import pytest

from eventq.errors import (
    INVALID_COMMAND_ARGS,
    INVALID_COMMAND_FLAGS,
    INVALID_COUNT,
    INVALID_CURSOR_OFFSET,
    INVALID_DELAY,
    INVALID_GROUP,
    INVALID_ID,
    INVALID_LIMIT,
    INVALID_RESULT_SIZE,
    UNKNOWN_COMMAND,
    ClientError,
    FramingError,
)
from eventq.limits import MAX_GROUP_BYTES, MAX_RETRY_COUNT, MAX_RETRY_DELAY_MS
from eventq.protocol import (
    Fail,
    InspectFailed,
    InspectFailedJobs,
    JobView,
    Retry,
    RetryGroup,
    failed_reply,
    job_blocks,
    parse_time_ms,
    retried_reply,
)
from eventq.protocol.encode import encode_request
from eventq.protocol.grammar import VERB_OF
from eventq.protocol.reply_reader import Shape, reply_end
from support.protocol_helpers import V1_TEXT, V4_ID, V4_TEXT, assert_error, assert_parses_three_ways

ID = V4_TEXT
C = ClientError
F = FramingError
BLOCK = b"inspect server\r\n"  # a block that is itself a request: it must be consumed
SIZE = str(len(BLOCK))
LONGEST = "g" * MAX_GROUP_BYTES


def fail_line(flags: str = "", job: str = ID, size: str = SIZE) -> bytes:
    return f"fail {job} {size} {flags}".rstrip().encode("latin-1") + b"\r\n" + BLOCK + b"\r\n"


def test_the_new_errors_are_byte_exact() -> None:
    assert C(INVALID_GROUP).reply == b"-CLIENT-ERROR Invalid Group\r\n"
    assert C(INVALID_DELAY).reply == b"-CLIENT-ERROR Invalid Delay\r\n"
    assert C(INVALID_COUNT).reply == b"-CLIENT-ERROR Invalid Count\r\n"


# --- valid requests -------------------------------------------------------------------

# fmt: off
CASES = [
    (fail_line(), Fail(V4_ID, BLOCK)),
    (fail_line("-group=deploy-7"), Fail(V4_ID, BLOCK, "deploy-7")),
    (fail_line(f"-group={LONGEST}"), Fail(V4_ID, BLOCK, LONGEST)),
    # the built-in groups may be named (spec: Choices made)
    (fail_line("-group=failed"), Fail(V4_ID, BLOCK, "failed")),
    (fail_line("-group=attempts-exhausted"), Fail(V4_ID, BLOCK, "attempts-exhausted")),
    (f"fail -group=a.B_c-9 {ID} 0\r\n\r\n".encode(), Fail(V4_ID, b"", "a.B_c-9")),
    (f"retry {ID}\r\n".encode(), Retry(V4_ID)),
    (f"retry urn:uuid:{ID.upper()} \r\n".encode(), Retry(V4_ID)),
    (f"retry {ID} -delay=0\r\n".encode(), Retry(V4_ID, 0)),
    (f"retry -delay=0086400000 {ID}\r\n".encode(), Retry(V4_ID, MAX_RETRY_DELAY_MS)),
    (f"retry {ID} -delay=1\r\n".encode(), Retry(V4_ID, 1)),
    (b"retry-group failed 1\r\n", RetryGroup("failed", 1)),
    (b"retry-group  upstream-failed 10000\r\n", RetryGroup("upstream-failed", MAX_RETRY_COUNT)),
    (f"retry-group {LONGEST} 00010\r\n".encode(), RetryGroup(LONGEST, 10)),
    (b"inspect failed 0 10\r\n", InspectFailed(0, 10)),
    (b"inspect failed 4294967295 100\r\n", InspectFailed(2**32 - 1, 100)),
    (b"inspect failed-jobs attempts-exhausted 0 1\r\n",
     InspectFailedJobs("attempts-exhausted", 0, 1)),
    (f"inspect failed-jobs {LONGEST} 007 100\r\n".encode(), InspectFailedJobs(LONGEST, 7, 100)),
]
# fmt: on


@pytest.mark.parametrize(("wire", "expected"), CASES, ids=[c[0][:48].decode() for c in CASES])
def test_valid_request(wire: bytes, expected: object) -> None:
    assert_parses_three_ways(wire, expected)


@pytest.mark.parametrize(("wire", "expected"), CASES, ids=[c[0][:48].decode() for c in CASES])
def test_the_encoder_writes_what_parses_back(wire: bytes, expected: object) -> None:
    assert_parses_three_ways(encode_request(expected), expected)


def test_a_fail_without_group_is_encoded_as_workq_writes_it() -> None:
    assert encode_request(Fail(V4_ID, b"no")) == f"fail {ID} 2\r\nno\r\n".encode()
    assert encode_request(Retry(V4_ID)) == f"retry {ID}\r\n".encode()


def test_the_new_requests_are_named_by_their_protocol_words() -> None:
    assert VERB_OF[Retry] == "retry" and VERB_OF[RetryGroup] == "retry-group"
    assert VERB_OF[InspectFailed] == "inspect failed"
    assert VERB_OF[InspectFailedJobs] == "inspect failed-jobs"


# --- errors and the check order -------------------------------------------------------

# fmt: off
ERRORS = [
    # fail: flag syntax (check 1), then no flag or one when it is -group (check 3: any
    # other is Invalid command args, as before), then id, group; the block is consumed
    (fail_line("-group="), C(INVALID_COMMAND_FLAGS)),
    (fail_line("-group=a -group=b"), C(INVALID_COMMAND_FLAGS)),
    (fail_line("-x=1"), C(INVALID_COMMAND_ARGS)),
    (fail_line("-priority=1"), C(INVALID_COMMAND_ARGS)),
    (fail_line("-group=a -x=1"), C(INVALID_COMMAND_ARGS)),
    (fail_line("-x=1 -y=2"), C(INVALID_COMMAND_ARGS)),
    (fail_line("-group=bad!"), C(INVALID_GROUP)),
    (fail_line("-group=" + LONGEST + "g"), C(INVALID_GROUP)),
    (fail_line("-group=a:b"), C(INVALID_GROUP)),
    (fail_line("-group=bad!", job="x"), C(INVALID_ID)),
    (fail_line("-group=bad!", job=V1_TEXT), C(INVALID_ID)),
    (fail_line("-group=ok", job=V1_TEXT), C(INVALID_ID)),
    # framing (check 5) before the fields, and it closes
    (fail_line("-group=bad!", size="x"), F(INVALID_RESULT_SIZE)),
    (fail_line("-x=1", size="x"), F(INVALID_COMMAND_ARGS)),
    # retry: flag syntax; one positional; flags other than -delay; id; delay
    (f"retry {ID} -delay=\r\n".encode(), C(INVALID_COMMAND_FLAGS)),
    (f"retry {ID} -delay=1 -delay=2\r\n".encode(), C(INVALID_COMMAND_FLAGS)),
    (b"retry -x= a b\r\n", C(INVALID_COMMAND_FLAGS)),
    (b"retry\r\n", C(INVALID_COMMAND_ARGS)),
    (b"retry -delay=1\r\n", C(INVALID_COMMAND_ARGS)),
    (f"retry {ID} {ID}\r\n".encode(), C(INVALID_COMMAND_ARGS)),
    (f"retry {ID} x -x=1\r\n".encode(), C(INVALID_COMMAND_ARGS)),  # count before names
    (f"retry {ID} -x=1\r\n".encode(), C(INVALID_COMMAND_FLAGS)),
    (f"retry {ID} -delay=1 -x=1\r\n".encode(), C(INVALID_COMMAND_FLAGS)),
    (f"retry {ID} -group=g\r\n".encode(), C(INVALID_COMMAND_FLAGS)),
    (f"retry {ID} -a=1 -b=2 -c=3 -d=4 -e=5\r\n".encode(), C(INVALID_COMMAND_FLAGS)),  # no count
    (b"retry x -x=1\r\n", C(INVALID_COMMAND_FLAGS)),  # flags before the id
    (b"retry x -delay=x\r\n", C(INVALID_ID)),  # the id before the delay
    (f"retry {V1_TEXT}\r\n".encode(), C(INVALID_ID)),
    (f"retry {ID}x\r\n".encode(), C(INVALID_ID)),
    (f"retry {ID} -delay=x\r\n".encode(), C(INVALID_DELAY)),
    (f"retry {ID} -delay=-1\r\n".encode(), C(INVALID_DELAY)),
    (f"retry {ID} -delay=+1\r\n".encode(), C(INVALID_DELAY)),
    (f"retry {ID} -delay=86400001\r\n".encode(), C(INVALID_DELAY)),
    (f"retry {ID} -delay=1.5\r\n".encode(), C(INVALID_DELAY)),
    # retry-group: flag syntax; two positional; any flag; group; count
    (b"retry-group g 1 -x=\r\n", C(INVALID_COMMAND_FLAGS)),
    (b"retry-group\r\n", C(INVALID_COMMAND_ARGS)),
    (b"retry-group g\r\n", C(INVALID_COMMAND_ARGS)),
    (b"retry-group g 1 2\r\n", C(INVALID_COMMAND_ARGS)),
    (b"retry-group g -x=1\r\n", C(INVALID_COMMAND_ARGS)),
    (b"retry-group g 1 -x=1\r\n", C(INVALID_COMMAND_FLAGS)),
    (b"retry-group g 1 -delay=1\r\n", C(INVALID_COMMAND_FLAGS)),
    (b"retry-group bad! 0 -x=1\r\n", C(INVALID_COMMAND_FLAGS)),
    (b"retry-group bad! 0\r\n", C(INVALID_GROUP)),  # the group before the count
    (f"retry-group {LONGEST}g 1\r\n".encode(), C(INVALID_GROUP)),
    (b"retry-group g 0\r\n", C(INVALID_COUNT)),
    (b"retry-group g 10001\r\n", C(INVALID_COUNT)),
    (b"retry-group g -1\r\n", C(INVALID_COUNT)),  # no "=": a word, not a flag
    (b"retry-group g x\r\n", C(INVALID_COUNT)),
    (b"retry-group g 1e3\r\n", C(INVALID_COUNT)),
    # inspect failed: as inspect queues; flags are Invalid command args (every object)
    (b"inspect failed\r\n", C(INVALID_COMMAND_ARGS)),
    (b"inspect failed 0\r\n", C(INVALID_COMMAND_ARGS)),
    (b"inspect failed 0 1 2\r\n", C(INVALID_COMMAND_ARGS)),
    (b"inspect failed 0 1 -x=1\r\n", C(INVALID_COMMAND_ARGS)),
    (b"inspect failed x 101\r\n", C(INVALID_CURSOR_OFFSET)),
    (b"inspect failed 4294967296 1\r\n", C(INVALID_CURSOR_OFFSET)),
    (b"inspect failed 0 101\r\n", C(INVALID_LIMIT)),
    (b"inspect failed 0 0\r\n", C(INVALID_LIMIT)),
    # inspect failed-jobs: group, offset, limit
    (b"inspect failed-jobs\r\n", C(INVALID_COMMAND_ARGS)),
    (b"inspect failed-jobs g 0\r\n", C(INVALID_COMMAND_ARGS)),
    (b"inspect failed-jobs g 0 1 2\r\n", C(INVALID_COMMAND_ARGS)),
    (b"inspect failed-jobs g 0 1 -x=1\r\n", C(INVALID_COMMAND_ARGS)),
    (b"inspect failed-jobs bad! x 0\r\n", C(INVALID_GROUP)),
    (b"inspect failed-jobs g x 0\r\n", C(INVALID_CURSOR_OFFSET)),
    (b"inspect failed-jobs g 0 0\r\n", C(INVALID_LIMIT)),
    (b"inspect failed-jobs g 0 101\r\n", C(INVALID_LIMIT)),
    # verbs and objects are case-sensitive, and whole words
    (f"Retry {ID}\r\n".encode(), C(UNKNOWN_COMMAND)),
    (b"retry_group g 1\r\n", C(UNKNOWN_COMMAND)),
    (b"retry-groups g 1\r\n", C(UNKNOWN_COMMAND)),
    (b"inspect Failed 0 1\r\n", C(UNKNOWN_COMMAND)),
    (b"inspect failed-job g 0 1\r\n", C(UNKNOWN_COMMAND)),
    (b"inspect failures 0 1\r\n", C(UNKNOWN_COMMAND)),
]
# fmt: on


@pytest.mark.parametrize(("wire", "error"), ERRORS, ids=[w[:48].decode("latin-1") for w, _ in ERRORS])
def test_error(wire: bytes, error: ClientError) -> None:
    assert_error(wire, error)


# --- replies --------------------------------------------------------------------------

JID = uuid.UUID("16fd2706-8baf-433b-82eb-8c7fada847da")
CREATED = parse_time_ms("2024-01-01T00:00:00Z")


def failed_job(**changes: object) -> JobView:
    fields: dict[str, object] = dict(
        id=JID, name="etl", ttr_ms=60000, ttl_ms=86400000, payload=b"{}", max_attempts=0,
        attempts=1, max_fails=0, fails=1, priority=0, state=2, created_ms=CREATED,
    )
    fields.update(changes)
    return JobView(**fields)  # type: ignore[arg-type]


BLOCK_KEYS = (
    b"name etl\r\nttr 60000\r\nttl 86400000\r\npayload-size 2\r\npayload {}\r\n"
    b"max-attempts 0\r\nattempts 1\r\nmax-fails 0\r\nfails 1\r\npriority 0\r\nstate 2\r\n"
    b"created 2024-01-01T00:00:00Z\r\n"
)


def test_a_job_in_a_named_group_shows_it_as_its_last_key() -> None:
    head = b"+OK 1\r\n16fd2706-8baf-433b-82eb-8c7fada847da "
    assert job_blocks([failed_job(group="deploy-7")]) == (
        head + b"13\r\n" + BLOCK_KEYS + b"group deploy-7\r\n")
    assert job_blocks([failed_job()]) == head + b"12\r\n" + BLOCK_KEYS  # workq's block
    # after `after` and `waiting` (docs/workflows.md, "Job and queue blocks")
    dependent = failed_job(group="upstream-failed", after=2, waiting=1)
    assert job_blocks([dependent]) == head + b"15\r\n" + BLOCK_KEYS + (
        b"after 2\r\nwaiting 1\r\ngroup upstream-failed\r\n")
    reply = job_blocks([dependent, failed_job(group="g")])
    assert reply_end(reply + b"+OK\r\n", Shape.BLOCKS) == len(reply)


def test_inspect_failed_reply_bytes() -> None:
    reply = failed_reply([("attempts-exhausted", 3), ("deploy-7", 10000), ("failed", 1)])
    assert reply == (
        b"+OK 3\r\nattempts-exhausted 1\r\nfailed-len 3\r\ndeploy-7 1\r\nfailed-len 10000\r\n"
        b"failed 1\r\nfailed-len 1\r\n"
    )
    assert failed_reply([]) == b"+OK 0\r\n"
    assert reply_end(reply + b"+OK\r\n", Shape.BLOCKS) == len(reply)


def test_retry_group_reply_bytes() -> None:
    assert retried_reply(0) == b"+OK 1\r\nretried 0\r\n"
    assert retried_reply(10000) == b"+OK 1\r\nretried 10000\r\n"
    assert reply_end(retried_reply(7) + b"+OK\r\n", Shape.LINES) == len(retried_reply(7))
