"""Fuzz a live eventq server with random valid and invalid requests (docs/architecture.md,
"Hostile inputs").

Every verb with random fields, boundary sizes (0 B, 1 MiB, 1 MiB + 1), mutated
requests, random bytes, truncated and pipelined requests, clients that never read,
over many connections at once. Each reply is read in step with what the server was
sent (the bytes are parsed here too, so the reply each request must get is known): a
reply of the wrong shape, or a parse error whose bytes differ from the parser's, is a
failure; a reply that does not come within the request's own wait plus a margin is a
hang. A probe client on its own connection does add, inspect and delete all along.
After each round the server must be alive, answer the probe correctly, and its
digest must equal a replay of the command log (folded incrementally here).

    .venv/bin/python bench/fuzz_server.py --inputs 1000000 [--seed 1] [--connections 16]

``--tokens``: the server has a tokens file and the fuzzer's connections never
authenticate, or do with wrong tokens (docs/security.md, "Fail closed"), sending every
verb, the internal ones too. Then no request may have any effect or reveal anything:
each reply must be `-CLIENT-ERROR Unauthorized` (or auth's own argument errors, or a
framing error that closes), and after each round the state digest (asked as admin)
and the command log's end offsets must be what they were before the fuzz.

Starts a throwaway broker and `eventq serve` unless --bootstrap names a broker (the
server is always its own, on topics of its own). Prints inputs/s, crashes, hangs and
every failure; exits 1 if there was any.
"""

from __future__ import annotations

import argparse
import asyncio
import copy
import random
import secrets
import sys
import tempfile
import time
import uuid
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
for path in (ROOT,):
    if str(path) not in sys.path:
        sys.path.insert(0, str(path))

from eventq.core import state_digest  # noqa: E402
from eventq.errors import ERROR_CLASSES, EventqError  # noqa: E402
from eventq.limits import MAX_LINE_BYTES, MAX_PAYLOAD_BYTES  # noqa: E402
from eventq.protocol import Close, Parser, requests  # noqa: E402
from eventq.protocol.access import Access, TokenStore, parse_tokens  # noqa: E402
from eventq.run.replay import Derived, derive_more  # noqa: E402
from tools.servers import rss_mib  # noqa: E402

NAMES = [f"fz{i}" for i in range(8)]
MARGIN_S = 10.0  # a reply may take its request's own wait plus this, else it hangs
MAX_BLOCK_S = 3.0  # inputs that could block longer than this are not sent
DIGEST_SETTLE_S = 60.0  # after a round, digest = replay must hold within this
DAY_MS = 86_400_000
TOKEN_CHARACTERS = "".join(chr(c) for c in range(0x21, 0x7F))  # a token's: printable, no space
SEEDED_JOBS = 24  # --tokens: jobs an admin adds (and leases some of) before the fuzz


# --------------------------------------------------------------------------- inputs


def utc(ms_from_now: int) -> str:
    moment = datetime.now(timezone.utc) + timedelta(milliseconds=ms_from_now)
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


@dataclass
class Pools:
    """Ids and names the fuzzer has used, so later inputs hit existing jobs."""

    ids: list[str] = field(default_factory=list)

    def some_id(self, rng: random.Random) -> str:
        if self.ids and rng.random() < 0.8:
            return rng.choice(self.ids)
        return str(uuid.uuid4())

    def new_id(self) -> str:
        job = str(uuid.uuid4())
        self.ids.append(job)
        if len(self.ids) > 2000:
            del self.ids[:1000]
        return job


@dataclass(frozen=True)
class TokensMode:
    """--tokens (docs/security.md, "A tokens file"): the server's tokens file, whose admin token
    only the probe and the checks use; the fuzzer's connections never hold a real token."""

    admin: str
    others: tuple[str, ...]

    @classmethod
    def new(cls) -> "TokensMode":
        return cls(secrets.token_urlsafe(24), (secrets.token_urlsafe(24),
                                               secrets.token_urlsafe(24)))

    @property
    def real(self) -> tuple[str, ...]:
        return (self.admin, *self.others)

    @property
    def file_text(self) -> str:
        producer, reader = self.others
        return (f"# eventq fuzz --tokens\n{self.admin} admin\n{producer} producer,worker\n"
                f"{reader} reader fz\n")

    def access(self) -> Access:
        """A new connection's standing (unauthenticated), for the mirrored parser."""
        return Access(TokenStore(parse_tokens(self.file_text)))


def ttr(rng: random.Random) -> int:
    # short (times out within the round) or long (never during the run): the digest
    # check needs a quiet moment after each round.
    return rng.choice([1, rng.randint(1, 2000), 60_000, DAY_MS])


def ttl(rng: random.Random, big: bool) -> int:
    if big:
        return rng.randint(1, 3000)  # 1 MiB jobs leave again soon
    return rng.choice([1, rng.randint(1, 3000), 10 * DAY_MS, 2**64 - 1])


def size(rng: random.Random) -> int:
    return rng.choice([0, 1, rng.randint(0, 64), rng.randint(0, 4096)])


def flags(rng: random.Random, names: list[str]) -> str:
    choices = {
        "priority": lambda: rng.choice([0, -(2**31), 2**31 - 1, rng.randint(-9, 9)]),
        "max-attempts": lambda: rng.randint(0, 255),
        "max-fails": lambda: rng.randint(0, 255),
    }
    picked = rng.sample([n for n in names if n in choices], rng.randint(0, len(names)))
    return "".join(f" -{name}={choices[name]()}" for name in picked)


def with_block(line: str, data: bytes) -> bytes:
    return line.encode() + b"\r\n" + data + b"\r\n"


def valid_request(rng: random.Random, pools: Pools, payload_size: int | None = None) -> bytes:
    verb = rng.choices(
        ["add", "schedule", "run", "result", "lease", "complete", "fail", "delete",
         "inspect"],
        weights=[22, 6, 3, 5, 14, 8, 6, 6, 30],
    )[0]
    name = rng.choice(NAMES)
    n = payload_size if payload_size is not None else size(rng)
    data = rng.randbytes(n) if n <= 4096 else rng.randbytes(16) * (n // 16) + b"x" * (n % 16)
    big = n > 4096
    if verb == "add":
        f = flags(rng, ["priority", "max-attempts", "max-fails"])
        return with_block(f"add {pools.new_id()} {name} {ttr(rng)} {ttl(rng, big)} {n}{f}", data)
    if verb == "schedule":
        # never near "time + ttl = now", where this parser and the server's may differ
        when = utc(rng.choice([-120_000, rng.randint(5000, 10_000), 2 * DAY_MS]))
        f = flags(rng, ["priority", "max-attempts", "max-fails"])
        line = f"schedule {pools.new_id()} {name} {ttr(rng)} {ttl(rng, big)} {when} {n}{f}"
        return with_block(line, data)
    if verb == "run":
        return with_block(
            f"run {pools.new_id()} {name} {rng.randint(1, 1000)} {rng.randint(0, 200)} {n}", data
        )
    if verb == "result":
        return f"result {pools.some_id(rng)} {rng.randint(0, 100)}\r\n".encode()
    if verb == "lease":
        names = " ".join(rng.sample(NAMES, rng.randint(1, 3)))
        return f"lease {names} {rng.randint(0, 100)}\r\n".encode()
    if verb in ("complete", "fail"):
        return with_block(f"{verb} {pools.some_id(rng)} {n}", data)
    if verb == "delete":
        return f"delete {pools.some_id(rng)}\r\n".encode()
    what = rng.choice(["server", "queues", "queue", "jobs", "scheduled-jobs", "job", "digest"])
    if what in ("server", "digest"):
        return f"inspect {what}\r\n".encode()
    if what == "queues":
        return f"inspect queues {rng.choice([0, 1, 4294967295])} {rng.randint(1, 100)}\r\n".encode()
    if what == "queue":
        return f"inspect queue {name}\r\n".encode()
    if what == "job":
        return f"inspect job {pools.some_id(rng)}\r\n".encode()
    return f"inspect {what} {name} {rng.randint(0, 3)} {rng.randint(1, 100)}\r\n".encode()


def mutated(rng: random.Random, data: bytes) -> bytes:
    """A valid request with a few random edits (bytes, tokens, sizes, flags)."""
    data = bytearray(data)
    for _ in range(rng.randint(1, 3)):
        kind = rng.randrange(7)
        at = rng.randrange(len(data) + 1)
        if kind == 0 and data:
            data[min(at, len(data) - 1)] = rng.randrange(256)
        elif kind == 1:
            data[at:at] = rng.choice([b" ", b"\r\n", b"\n", b"-", b"=", b"-x=1", b"\x00", b"-5"])
        elif kind == 2 and data:
            del data[at : at + rng.randint(1, 8)]
        elif kind == 3:
            data[at:at] = str(rng.choice([-1, 0, 2**32, 2**64, 10**30, MAX_PAYLOAD_BYTES + 1])).encode()
        elif kind == 4:
            data[at:at] = rng.choice([b"-priority=", b"-max-attempts=999 ", b"-ttr=5 ", b"-a=1 -a=2 "])
        elif kind == 5:
            data = data.replace(b"\r\n", b"\n", 1)
        else:
            data[at:at] = data[: rng.randint(0, 40)]
    return bytes(data)


def random_bytes(rng: random.Random) -> bytes:
    n = rng.choice([1, 2, rng.randint(0, 100), rng.randint(0, 2000)])
    raw = rng.randbytes(n)
    return raw + (b"\r\n" if rng.random() < 0.7 else b"")


def boundary_batches(pools: Pools) -> list[list[bytes]]:
    """The sizes at the protocol's edges: 0, exactly 1 MiB (payload, then result, then
    shown by inspect), 1 MiB + 1 and a line one byte too long (both refused)."""
    job = pools.new_id()
    return [
        [with_block(f"add {pools.new_id()} fz0 1000 2000 0", b"")],
        [
            with_block(f"add {job} fz1 60000 3000 {MAX_PAYLOAD_BYTES}", b"\xab" * MAX_PAYLOAD_BYTES),
            f"inspect job {job}\r\n".encode(),
            with_block(f"complete {job} {MAX_PAYLOAD_BYTES}", b"\r\n" * (MAX_PAYLOAD_BYTES // 2)),
            f"result {job} 0\r\n".encode(),
        ],
        [with_block(f"add {pools.new_id()} fz2 1000 2000 {MAX_PAYLOAD_BYTES + 1}",
                    b"\xcd" * (MAX_PAYLOAD_BYTES + 1))],
        [b"lease " + b"x" * (MAX_LINE_BYTES + 1) + b" 0\r\n"],
    ]


def any_verb_request(rng: random.Random, pools: Pools) -> bytes:
    """--tokens: the verbs ``valid_request`` leaves out (their effects would upset the
    replay check of a run without tokens), internal ones included; each well formed
    most of the time. Unauthenticated, each must be Unauthorized before any check."""
    job, name = pools.some_id(rng), rng.choice(NAMES)
    n = size(rng)
    return rng.choice([
        lambda: f"touch {job} -ttr={rng.randint(1, 10_000)}\r\n".encode(),
        lambda: f"pause {name}\r\n".encode(),
        lambda: f"resume {name}\r\n".encode(),
        lambda: f"inputs {job}\r\n".encode(),
        lambda: with_block(f"recur r-{name} {name} 1000 60000 1000 {n}", rng.randbytes(n)),
        lambda: f"unrecur r-{name}\r\n".encode(),
        lambda: f"retry {job} -delay={rng.randint(0, 1000)}\r\n".encode(),
        lambda: f"retry-group g-{name} {rng.randint(1, 100)}\r\n".encode(),
        lambda: b"peer\r\n",
        lambda: f"peek {name}\r\n".encode(),
        lambda: f"confirm {job} {rng.randint(1, 9)}\r\n".encode(),
        lambda: f"edges {job} 10\r\n".encode(),
        lambda: f"as line-2 -prefix={name}\r\n".encode(),
        lambda: with_block(f"fail {job} {n} -group=g-{name}", rng.randbytes(n)),
        lambda: f"inspect waiting-jobs {name} 0 10\r\n".encode(),
        lambda: b"inspect failed 0 10\r\n",
        lambda: f"inspect failed-jobs g-{name} 0 10\r\n".encode(),
        lambda: f"inspect tagged t-{name} 0 10\r\n".encode(),
        lambda: b"inspect recurring 0 10\r\n",
        lambda: b"inspect bulk\r\n",
    ])()


def wrong_auth(rng: random.Random, tokens: "TokensMode") -> bytes:
    """``auth`` with a token the server does not hold: a near miss of a real one, or any word
    (docs/security.md, "Tokens and roles": Unauthorized, and the connection stays
    unauthenticated)."""
    real = rng.choice(tokens.real)
    word = "".join(rng.choice(TOKEN_CHARACTERS) for _ in range(rng.randint(1, 40)))
    token = rng.choice([real[:-1], real + "x", real.upper(), real[1:], "x" + real[1:], word])
    if token in tokens.real:  # (an upper-cased token without letters)
        token += "x"
    return f"auth {token}\r\n".encode()


def next_input(rng: random.Random, pools: Pools, tokens: "TokensMode | None" = None) -> bytes:
    if tokens is not None:  # every verb, and wrong tokens, besides the usual mix
        roll = rng.random()
        if roll < 0.10:
            return wrong_auth(rng, tokens)
        if roll < 0.30:
            request = any_verb_request(rng, pools)
            return request if rng.random() < 0.7 else mutated(rng, request)
    roll = rng.random()
    if roll < 0.40:
        return valid_request(rng, pools)
    if roll < 0.80:
        return mutated(rng, valid_request(rng, pools))
    if roll < 0.95:
        return random_bytes(rng)
    return rng.choice([b"\r\n", b"\n", b" add\r\n", b"lease\r\n", b"inspect\r\n"])


# ----------------------------------------------------------------------------- replies


class Violation(Exception):
    """A reply that is not what the request must get."""


class Hang(Exception):
    """No reply within the request's wait plus the margin."""


def block_bound_s(event) -> float:
    """How long the server may take to answer ``event`` beyond its processing."""
    if isinstance(event, (requests.Lease, requests.Result)):
        return event.wait_timeout_ms / 1000
    if isinstance(event, requests.Run):
        return (event.wait_timeout_ms + event.ttr_ms) / 1000
    return 0.0


def new_parser(access: Access | None = None) -> Parser:
    """The server's parser, to know what it reads from the bytes sent (``access``: the
    standing of a connection to a server with tokens)."""
    return Parser(now_ms=lambda: time.time_ns() // 1_000_000, access=access)


def events_of(parser: Parser, data: bytes) -> tuple[list, bool]:
    """The events ``parser`` yields after ``data`` (up to and including one that ends
    the connection) and whether the server closes the connection after them."""
    parser.feed(data)
    events = []
    while True:
        event = parser.next_event()
        if event is None:
            return events, parser.closed
        events.append(event)
        if isinstance(event, Close) or (isinstance(event, EventqError) and event.closes_connection):
            return events, True


def clock_dependent(reply: bytes, expected: EventqError) -> bool:
    """schedule's `time + ttl in the future` is checked by the parser against the clock,
    here a moment before the server: a request may pass here and fail there."""
    return b"Invalid Time" in reply or expected.text == "Invalid Time"


UNAUTHORIZED_REPLY = b"-CLIENT-ERROR Unauthorized"
# auth's own checks come before its token's (docs/security.md, "Tokens and roles": order)
AUTH_OWN_ERRORS = (b"-CLIENT-ERROR Invalid command args", b"-CLIENT-ERROR Invalid command flags")


class ReplyReader:
    def __init__(self, reader: asyncio.StreamReader, unauthenticated: bool = False) -> None:
        self.reader = reader
        # --tokens: the connection never authenticated, so only its (wrong) auth gets
        # through the parser, and it must be refused.
        self.unauthenticated = unauthenticated
        self.last = b""  # the last reply's first line

    async def line(self, deadline: float) -> bytes:
        remaining = deadline - time.monotonic()
        try:
            line = await asyncio.wait_for(self.reader.readuntil(b"\r\n"), max(remaining, 0.01))
        except asyncio.TimeoutError:
            raise Hang("no reply line") from None
        except asyncio.IncompleteReadError as error:
            raise Violation(f"connection closed mid-reply after {error.partial[:80]!r}") from None
        return line[:-2]

    async def block(self, size: int, deadline: float) -> bytes:
        try:
            data = await asyncio.wait_for(
                self.reader.readexactly(size + 2), max(deadline - time.monotonic(), 0.01)
            )
        except asyncio.TimeoutError:
            raise Hang(f"no data block of {size} bytes") from None
        except asyncio.IncompleteReadError:
            raise Violation("connection closed mid-block") from None
        if not data.endswith(b"\r\n"):
            raise Violation("data block not followed by CRLF")
        return data[:-2]

    async def job_block(self, deadline: float) -> None:
        head = (await self.line(deadline)).split(b" ")
        if len(head) != 2 or not head[1].isdigit() or int(head[1]) not in (12, 13):
            raise Violation(f"bad job block head {head!r}")
        payload_size = None
        for _ in range(int(head[1])):
            if payload_size is not None:  # `payload <raw bytes>`: may hold CRLF itself
                data = await self.block(len(b"payload ") + payload_size, deadline)
                if not data.startswith(b"payload "):
                    raise Violation(f"expected the payload key, got {data[:20]!r}")
                payload_size = None
                continue
            key, _, value = (await self.line(deadline)).partition(b" ")
            if key == b"payload-size":
                payload_size = int(value)

    async def reply(self, event) -> str:
        """Read the reply to one event; returns its kind ('ok' or the error code)."""
        deadline = time.monotonic() + block_bound_s(event) + MARGIN_S
        first = self.last = await self.line(deadline)
        if self.unauthenticated and not isinstance(event, EventqError):
            if not isinstance(event, requests.Auth):
                raise Violation(f"{type(event).__name__} passed an unauthenticated parser")
            if first != UNAUTHORIZED_REPLY:
                raise Violation(f"auth with a wrong token got {first!r}")
            return "CLIENT-ERROR"
        if (self.unauthenticated and isinstance(event, EventqError)
                and not event.closes_connection
                and first not in (UNAUTHORIZED_REPLY, *AUTH_OWN_ERRORS)):
            raise Violation(f"an unauthenticated request got {first!r}")
        if isinstance(event, EventqError):
            if first + b"\r\n" != event.reply and not clock_dependent(first, event):
                raise Violation(f"parse error reply {first!r}, expected {event.reply!r}")
            return event.code
        if first.startswith(b"-"):
            code = first[1:].split(b" ", 1)[0].decode(errors="replace")
            if code not in ERROR_CLASSES:
                raise Violation(f"unknown error reply {first!r}")
            return code
        if isinstance(event, (requests.Add, requests.Schedule, requests.Complete,
                              requests.Fail, requests.Delete)):
            if first != b"+OK":
                raise Violation(f"{type(event).__name__} got {first!r}")
            return "ok"
        if not first.startswith(b"+OK "):
            raise Violation(f"{type(event).__name__} got {first!r}")
        count = int(first[4:])
        if isinstance(event, (requests.Run, requests.Result, requests.Lease)):
            parts = (await self.line(deadline)).split(b" ")
            await self.block(int(parts[-1]), deadline)
        elif isinstance(event, requests.InspectServer):
            for _ in range(4):
                await self.line(deadline)
        elif isinstance(event, requests.InspectDigest):
            await self.line(deadline)
        elif isinstance(event, (requests.InspectQueues, requests.InspectQueue,
                                requests.InspectBulk)):
            for _ in range(count):
                head = (await self.line(deadline)).rsplit(b" ", 1)
                for _ in range(int(head[1])):
                    await self.line(deadline)
        else:  # inspect job(s)
            for _ in range(count):
                await self.job_block(deadline)
        return "ok"


# ------------------------------------------------------------------------------ driver


@dataclass
class Tally:
    inputs: int = 0
    bytes_sent: int = 0
    replies: dict[str, int] = field(default_factory=dict)
    hangs: list[str] = field(default_factory=list)
    violations: list[str] = field(default_factory=list)
    probe_failures: list[str] = field(default_factory=list)
    probe_ms: list[float] = field(default_factory=list)
    digest_mismatches: list[str] = field(default_factory=list)
    crashes: int = 0
    error_replies: dict[str, int] = field(default_factory=dict)  # first line -> count

    @property
    def failures(self) -> int:
        return (len(self.hangs) + len(self.violations) + len(self.probe_failures)
                + len(self.digest_mismatches) + self.crashes)


def safe_to_send(events: list) -> bool:
    return all(block_bound_s(e) <= MAX_BLOCK_S for e in events if not isinstance(e, EventqError))


class Connection:
    """One client connection, with the server's parser state mirrored here so that the
    replies it owes are known, even across requests split between batches."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
                 tokens: "TokensMode | None" = None) -> None:
        self.reader = reader
        self.writer = writer
        self.parser = new_parser(None if tokens is None else tokens.access())
        self.unauthenticated = tokens is not None

    @classmethod
    async def open(cls, port: int, tokens: "TokensMode | None" = None) -> "Connection":
        reader, writer = await asyncio.open_connection("127.0.0.1", port, limit=4 * 2**20)
        return cls(reader, writer, tokens)

    def close(self) -> None:
        self.writer.close()

    async def exchange(self, batch: list[bytes], tally: Tally, rng: random.Random):
        """Send ``batch`` pipelined and read every reply it is owed, in step. Returns
        the connection if it stays open, None once it is closed."""
        data = b"".join(batch)
        trial = copy.deepcopy(self.parser)
        events, closes = events_of(trial, data)
        if not safe_to_send(events):
            return self
        self.parser = trial
        tally.inputs += len(batch)
        tally.bytes_sent += len(data)
        try:
            style = rng.random()
            if style < 0.02:  # a truncated request, then gone
                self.writer.write(data[: rng.randrange(len(data) + 1)])
                await self.writer.drain()
                self.close()
                return None
            if style < 0.04:  # a client that never reads its replies
                self.writer.write(data)
                await self.writer.drain()
                await asyncio.sleep(0.05)
                self.close()
                return None
            if style < 0.7:
                self.writer.write(data)
            else:  # trickled in random pieces
                at = 0
                while at < len(data):
                    step = rng.randint(1, max(1, len(data) // 3))
                    self.writer.write(data[at : at + step])
                    await self.writer.drain()
                    at += step
            if not await self._replies(events, tally):
                self.close()
                return None
            if closes:
                await self._expect_close(tally)
                self.close()
                return None
            return self
        except ConnectionError:
            if not closes:
                tally.violations.append("the server closed a connection in step")
            self.close()
            return None

    async def _replies(self, events: list, tally: Tally) -> bool:
        replies = ReplyReader(self.reader, self.unauthenticated)
        for event in events:
            if isinstance(event, Close):
                return True
            try:
                kind = await replies.reply(event)
            except Hang as error:
                tally.hangs.append(f"{type(event).__name__}: {error}")
                return False
            except Violation as error:
                tally.violations.append(f"{type(event).__name__}: {error}")
                return False
            tally.replies[kind] = tally.replies.get(kind, 0) + 1
            if kind != "ok":
                text = replies.last.decode(errors="replace")
                tally.error_replies[text] = tally.error_replies.get(text, 0) + 1
        return True

    async def _expect_close(self, tally: Tally) -> None:
        try:
            extra = await asyncio.wait_for(self.reader.read(1), MARGIN_S)
        except asyncio.TimeoutError:
            tally.hangs.append("connection not closed after a framing error")
            return
        except ConnectionError:
            return
        if extra:
            tally.violations.append(f"bytes after a closing error: {extra!r}")


async def probe(port: int, tally: Tally, stop: asyncio.Event,
                tokens: TokensMode | None = None, seeded: list[str] | None = None) -> None:
    """Another client, unaffected: add, inspect, delete, all along (--tokens: an admin
    that reads the seeded jobs, so that the state must stay exactly as seeded)."""
    from eventq.client.raw import RawClient as Client

    if tokens is not None:
        await probe_reads(port, tally, stop, tokens, seeded or [])
        return
    while not stop.is_set():
        job = uuid.uuid4()
        began = time.perf_counter()
        try:
            async with await Client.connect(port=port) as c:
                await asyncio.wait_for(c.add(job, "probe", 60000, 600000, b"probe"), MARGIN_S)
                seen = await asyncio.wait_for(c.inspect_job(job), MARGIN_S)
                if seen["payload"] != b"probe" or seen["name"] != b"probe":
                    tally.probe_failures.append(f"probe saw {seen!r:.200}")
                await asyncio.wait_for(c.delete(job), MARGIN_S)
        except Exception as error:
            tally.probe_failures.append(f"{type(error).__name__}: {error}")
        tally.probe_ms.append((time.perf_counter() - began) * 1000)
        await asyncio.sleep(0.2)


async def probe_reads(port: int, tally: Tally, stop: asyncio.Event, tokens: TokensMode,
                      seeded: list[str]) -> None:
    from eventq.client.raw import RawClient as Client

    while not stop.is_set():
        job = random.choice(seeded)
        began = time.perf_counter()
        try:
            async with await Client.connect(port=port, token=tokens.admin) as c:
                seen = await asyncio.wait_for(c.inspect_job(job), MARGIN_S)
                if seen["payload"] != b"seed " + job.encode():
                    tally.probe_failures.append(f"probe saw {seen!r:.200}")
        except Exception as error:
            tally.probe_failures.append(f"{type(error).__name__}: {error}")
        tally.probe_ms.append((time.perf_counter() - began) * 1000)
        await asyncio.sleep(0.2)


async def seed_jobs(port: int, tokens: TokensMode, pools: Pools) -> list[str]:
    """--tokens: jobs for the fuzz to aim at, added by the admin (ids in ``pools``), a
    few leased, so complete, fail and touch would have something to act on. TTR and
    TTL are days: nothing times out during the run, so the state holds still."""
    from eventq.client.raw import RawClient as Client

    seeded = []
    async with await Client.connect(port=port, token=tokens.admin) as c:
        for n in range(SEEDED_JOBS):
            job = pools.new_id()
            await c.add(job, NAMES[n % len(NAMES)], DAY_MS, 10 * DAY_MS, b"seed " + job.encode())
            seeded.append(job)
        for name in NAMES[:4]:
            await c.lease(name, 5000)
    return seeded


async def server_digest(port: int, token: str | None = None) -> str:
    from eventq.client.raw import RawClient as Client

    async with await Client.connect(port=port, token=token) as c:
        return await asyncio.wait_for(c.digest(), MARGIN_S)


def log_ends(bootstrap: str, topic: str) -> dict[int, int]:
    """The command log's end offset of each partition."""
    from eventq.kafka.logreader import end_offsets

    return {p: high for p, (_, high) in end_offsets(bootstrap, topic).items()}


async def unchanged(port: int, bootstrap: str, topic: str, tokens: TokensMode,
                    before: tuple[str, dict[int, int]]) -> str | None:
    """--tokens: None if the digest and the command log are as before the fuzz."""
    digest = await server_digest(port, tokens.admin)
    ends = await asyncio.to_thread(log_ends, bootstrap, topic)
    if (digest, ends) == before:
        return None
    return (f"digest {before[0][:16]}... -> {digest[:16]}..., command log ends "
            f"{before[1]} -> {ends}")


async def digest_equals_replay(port: int, bootstrap: str, topic: str, derived: Derived) -> str | None:
    """None once the live digest equals the replay's, else the last difference."""
    deadline = time.monotonic() + DIGEST_SETTLE_S
    last = ""
    while time.monotonic() < deadline:
        live = await server_digest(port)
        await asyncio.to_thread(derive_more, bootstrap, topic, derived)
        replayed = state_digest(derived.jobs.values())
        if live == replayed and live == await server_digest(port):
            return None
        last = f"live {live[:16]}... != replay {replayed[:16]}... ({len(derived.jobs)} jobs)"
        await asyncio.sleep(0.5)
    return last


async def fuzz(port: int, bootstrap: str, commands_topic: str, alive, *, inputs: int,
               seed: int, connections: int, round_inputs: int, say=print,
               tokens: TokensMode | None = None) -> Tally:
    rng = random.Random(seed)
    pools = Pools()
    tally = Tally()
    derived = Derived()
    seeded: list[str] = []
    before = None
    if tokens is not None:  # what must still hold after every round
        seeded = await seed_jobs(port, tokens, pools)
        before = (await server_digest(port, tokens.admin),
                  await asyncio.to_thread(log_ends, bootstrap, commands_topic))
    began = time.monotonic()
    round_no = 0
    while tally.inputs < inputs and tally.failures == 0:
        round_no += 1
        target = min(inputs, tally.inputs + round_inputs)
        stop = asyncio.Event()
        probing = asyncio.create_task(probe(port, tally, stop, tokens, seeded))
        queue = boundary_batches(pools)

        async def worker(worker_rng: random.Random) -> None:
            connection = None
            while tally.inputs < target and tally.failures == 0:
                batch = queue.pop() if queue else [
                    next_input(worker_rng, pools, tokens)
                    for _ in range(worker_rng.randint(1, 8))
                ]
                if connection is None:
                    connection = await Connection.open(port, tokens)
                connection = await connection.exchange(batch, tally, worker_rng)
            if connection is not None:
                connection.close()

        await asyncio.gather(*(worker(random.Random(rng.random())) for _ in range(connections)))
        stop.set()
        await probing
        if not alive():
            tally.crashes += 1
            break
        if before is not None:
            mismatch = await unchanged(port, bootstrap, commands_topic, tokens, before)
        else:
            mismatch = await digest_equals_replay(port, bootstrap, commands_topic, derived)
        if mismatch:
            tally.digest_mismatches.append(f"round {round_no}: {mismatch}")
        elapsed = time.monotonic() - began
        jobs = len(seeded) if tokens is not None else len(derived.jobs)
        say(f"round {round_no}: {tally.inputs:,} inputs in {elapsed:.0f}s "
            f"({tally.inputs / elapsed:,.0f}/s), {jobs:,} live jobs, "
            f"failures {tally.failures}")
    return tally


def report(tally: Tally, elapsed_s: float, say=print) -> None:
    probe = sorted(tally.probe_ms) or [float("nan")]
    say(f"inputs {tally.inputs:,} ({tally.bytes_sent / 2**20:,.0f} MiB) in {elapsed_s:.0f}s: "
        f"{tally.inputs / max(elapsed_s, 1e-9):,.0f} inputs/s")
    say(f"replies by kind: {dict(sorted(tally.replies.items()))}")
    common = sorted(tally.error_replies.items(), key=lambda kv: -kv[1])[:12]
    say(f"error replies, most common: {dict(common)}")
    say(f"crashes {tally.crashes}, hangs {len(tally.hangs)}, protocol violations "
        f"{len(tally.violations)}, probe failures {len(tally.probe_failures)}, digest "
        f"mismatches {len(tally.digest_mismatches)}")
    say(f"probe (add+inspect+delete on its own connection): {len(probe)} rounds, "
        f"p50 {probe[len(probe) // 2]:.1f} ms, p99 {probe[int(len(probe) * 0.99)]:.1f} ms")
    for failure in (tally.hangs + tally.violations + tally.probe_failures
                    + tally.digest_mismatches)[:30]:
        say(f"  FAILURE {failure}")



def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--inputs", type=int, default=10_000)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--connections", type=int, default=16)
    parser.add_argument("--round-inputs", type=int, default=5_000)
    parser.add_argument("--bootstrap", help="an existing broker (default: start one)")
    parser.add_argument("--tokens", action="store_true",
                        help="the server has tokens and no fuzzing connection holds one")
    args = parser.parse_args()
    from eventq.run.localkafka import broker
    from tools.servers import ServerProcess, test_broker_config

    home = Path(tempfile.mkdtemp(prefix="eventq-fuzz-"))
    config = None
    bootstrap = args.bootstrap
    if bootstrap is None:
        config = test_broker_config(home / "kafka")
        broker.start(config)
        bootstrap = config.bootstrap
    tokens = TokensMode.new() if args.tokens else None
    settings = {}
    if tokens is not None:
        (home / "tokens").write_text(tokens.file_text)
        settings["tokens_file"] = str(home / "tokens")
    server = ServerProcess(bootstrap, f"fuzz{uuid.uuid4().hex[:6]}", home / "server", partitions=8,
                           **settings)
    if tokens is not None:
        server.ready_auth = b"auth %s\r\n" % tokens.admin.encode()
    try:
        server.create_topics()
        server.start()
        print(f"fuzzing eventq on port {server.port} (seed {args.seed}, {args.inputs:,} inputs, "
              f"{args.connections} connections)", flush=True)
        began = time.monotonic()
        tally = asyncio.run(fuzz(
            server.port, bootstrap, server.settings["commands-topic"],
            lambda: server.process.poll() is None, inputs=args.inputs, seed=args.seed,
            connections=args.connections, round_inputs=args.round_inputs,
            say=lambda line: print(line, flush=True), tokens=tokens,
        ))
        report(tally, time.monotonic() - began)
        if server.process.poll() is None:
            print(f"server RSS at the end: {rss_mib(server.process.pid):.0f} MiB")
        return 1 if tally.failures else 0
    finally:
        code = server.stop()
        print(f"server stopped with exit code {code}")
        if config is not None:
            broker.stop(config)


if __name__ == "__main__":
    sys.exit(main())
