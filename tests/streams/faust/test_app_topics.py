"""How streams/faust/app.py declares its topics to faust (built without a broker)."""

from __future__ import annotations

import asyncio

from eventq.kafka.command_producer import CommandProducer
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


def test_commands_are_written_with_the_producer_the_settings_name(tmp_path):
    """--command-producer (docs/architecture.md, "Batches"): faust's (the writers ask the
    app for it at each send), or a librdkafka one the server starts and stops, which
    the writers see only while it runs; the follow-ups use the same one."""
    faust_ = build_streams(Settings(bootstrap="127.0.0.1:1", data_dir=tmp_path / "f"))
    assert faust_.own_command_producer is None
    assert faust_.command_producer() is faust_.app.producer._producer
    assert faust_.follow_ups.writer._producer is faust_.command_producer

    own = build_streams(Settings(bootstrap="127.0.0.1:1", data_dir=tmp_path / "l",
                                 command_producer="librdkafka"))
    producer = own.own_command_producer
    assert isinstance(producer, CommandProducer)
    assert own.command_producer() is None  # not started: a write fails, saying so

    async def started_and_stopped() -> tuple[object, object]:
        await producer.start()
        running = own.command_producer()
        await producer.stop()
        return running, own.command_producer()

    assert asyncio.run(started_and_stopped()) == (producer, None)
    assert own.follow_ups.writer._producer is own.command_producer
