"""How streams/faust/app.py declares its topics to faust (built without a broker)."""

from __future__ import annotations

from eventq.settings import Settings
from streams.faust.app import build_streams


def test_the_changelog_is_declared_without_acks_so_faust_never_waits_for_a_stream(tmp_path):
    """No stream reads `eventq.jobs`. Declared with acks, faust's stall detector took
    each of its partitions for a stream that never started and, after 5 minutes of
    uptime, logged a 15-line ERROR for every partition every 2.5 s
    (docs/architecture.md, "The changelog"). The command log is read by a stream and
    keeps its acks."""
    streams = build_streams(Settings(bootstrap="127.0.0.1:1", data_dir=tmp_path))
    assert streams.table.changelog_topic.acks is False
    assert streams.table.changelog_topic.get_topic_name() == "eventq.jobs"
    commands = [topic for topic in streams.app.agents["streams.faust.app.process"].channel.topics]
    assert commands == ["eventq.commands"]
    assert streams.app.agents["streams.faust.app.process"].channel.acks is True


def test_commands_are_written_with_fausts_producer(tmp_path):
    """docs/architecture.md, "Batches": the gateway's, the timers' and the follow-ups'
    commands leave through faust's producer, which the writers ask the app for at each
    send."""
    streams = build_streams(Settings(bootstrap="127.0.0.1:1", data_dir=tmp_path))
    assert streams.command_producer() is streams.app.producer._producer
    assert streams.follow_ups.writer._producer is streams.command_producer
