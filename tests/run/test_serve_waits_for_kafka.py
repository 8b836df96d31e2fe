"""``eventq serve`` waiting for a Kafka that does not answer (eventq/run/serve.py,
``wait_for_kafka``; docs/architecture.md, "Feedback to users"): Ctrl-C stops the wait
while a probe is still inside librdkafka, and a refusal the probe finds is the caller's
to say."""

from __future__ import annotations

import os
import signal
import threading
import time

import pytest

from eventq.kafka.security import KafkaRefused
from eventq.run import serve
from eventq.run.localkafka import broker
from eventq.settings import Settings

NOBODY = "127.0.0.1:1"


PROBE_HELD_S = 2.0  # how long the probe below stays in its call


@pytest.fixture
def blocked_probe(monkeypatch):
    """A probe that stays in its call for PROBE_HELD_S and runs no Python meanwhile, as
    librdkafka's metadata request does until its timeout: a signal is held (blocked)
    while it is in the call."""
    entered, released = threading.Event(), threading.Event()

    def answers(bootstrap, timeout_s):
        signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
        try:
            entered.set()
            time.sleep(PROBE_HELD_S)
        finally:
            released.set()
            signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})
        return False

    monkeypatch.setattr(broker, "broker_answers", answers)
    before = signal.signal(signal.SIGINT, signal.default_int_handler)  # `eventq serve`'s
    try:
        yield entered, released
    finally:
        signal.signal(signal.SIGINT, before)
    released.wait(PROBE_HELD_S + 5)  # the probe's thread ends before the next test


def test_ctrl_c_ends_the_wait_while_the_probe_is_still_in_its_call(blocked_probe, tmp_path):
    entered, released = blocked_probe

    def ctrl_c() -> None:
        entered.wait(10)
        os.kill(os.getpid(), signal.SIGINT)

    threading.Thread(target=ctrl_c, daemon=True).start()
    with pytest.raises(KeyboardInterrupt):
        serve.wait_for_kafka(Settings(bootstrap=NOBODY, data_dir=tmp_path), print)
    assert entered.is_set() and not released.is_set()  # the probe had not returned


def test_a_refusal_found_by_the_probe_reaches_the_caller(monkeypatch, tmp_path):
    refused = KafkaRefused("Kafka refused eventq's credentials")

    def answers(bootstrap, timeout_s):
        raise refused

    monkeypatch.setattr(broker, "broker_answers", answers)
    with pytest.raises(KafkaRefused) as raised:
        serve.wait_for_kafka(Settings(bootstrap=NOBODY, data_dir=tmp_path), print)
    assert raised.value is refused


def test_the_wait_ends_once_kafka_answers_and_says_so(monkeypatch, tmp_path):
    answers_from = iter([False, False, True])
    monkeypatch.setattr(broker, "broker_answers", lambda bootstrap, timeout_s: next(answers_from))
    said: list[str] = []
    serve.wait_for_kafka(Settings(bootstrap=NOBODY, data_dir=tmp_path), said.append)
    assert "does not answer" in said[0] and "Ctrl-C to stop" in said[0]
    assert said[-1].endswith("answers; starting")
