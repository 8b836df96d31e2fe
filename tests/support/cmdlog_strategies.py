"""Hypothesis strategies and small builders shared by the cmdlog tests."""

from __future__ import annotations

import uuid

from hypothesis import strategies as st

from eventq.cmdlog import (
    GO_ZERO_TIME_NS,
    WqAdd,
    WqComplete,
    WqDelete,
    WqExpire,
    WqFail,
    WqSchedule,
    WqStartAttempt,
    WqTimeoutAttempt,
)
from eventq.cmdlog.timefmt import UNIX_EPOCH_GO_SECONDS

UINT64 = st.integers(min_value=0, max_value=2**64 - 1)
INT64 = st.integers(min_value=-(2**63), max_value=2**63 - 1)

# Every instant the 15-byte format can hold (int64 seconds since year 1).
MIN_NS = (-(2**63) - UNIX_EPOCH_GO_SECONDS) * 10**9
MAX_NS = (2**63 - 1 - UNIX_EPOCH_GO_SECONDS) * 10**9 + 999_999_999
instants = st.integers(min_value=MIN_NS, max_value=MAX_NS)
# A job time: None, or any instant but the zero time (which *is* None).
job_times = st.none() | instants.filter(lambda ns: ns != GO_ZERO_TIME_NS)

ids = st.uuids()
blobs = st.binary(max_size=300)


def _job_cmd(cls):
    return st.builds(
        cls,
        id=ids,
        name=st.text(max_size=40),
        ttr_ms=UINT64,
        ttl_ms=UINT64,
        priority=INT64,
        max_attempts=UINT64,
        max_fails=UINT64,
        payload=blobs,
        time_ns=job_times,
        created_ns=instants,
    )


commands = st.one_of(
    _job_cmd(WqAdd),
    _job_cmd(WqSchedule),
    st.builds(WqComplete, id=ids, result=blobs),
    st.builds(WqFail, id=ids, result=blobs),
    st.builds(WqDelete, id=ids),
    st.builds(WqExpire, id=ids),
    st.builds(WqStartAttempt, id=ids),
    st.builds(WqTimeoutAttempt, id=ids),
)

NOW_NS = 1_700_000_000 * 10**9  # a fixed "now" for replay tests
MS = 1_000_000


def add(id_=None, *, name="q", ttl_ms=60_000, created_ns=NOW_NS, max_attempts=0, **kw):
    return WqAdd(
        id=id_ or uuid.uuid4(),
        name=name,
        ttr_ms=kw.pop("ttr_ms", 1000),
        ttl_ms=ttl_ms,
        priority=kw.pop("priority", 0),
        max_attempts=max_attempts,
        max_fails=kw.pop("max_fails", 0),
        payload=kw.pop("payload", b"p"),
        time_ns=None,
        created_ns=created_ns,
    )


def schedule(id_=None, *, time_ns, ttl_ms=60_000, created_ns=NOW_NS, **kw):
    return WqSchedule(
        id=id_ or uuid.uuid4(),
        name=kw.pop("name", "q"),
        ttr_ms=kw.pop("ttr_ms", 1000),
        ttl_ms=ttl_ms,
        priority=kw.pop("priority", 0),
        max_attempts=kw.pop("max_attempts", 0),
        max_fails=kw.pop("max_fails", 0),
        payload=kw.pop("payload", b"p"),
        time_ns=time_ns,
        created_ns=created_ns,
    )
