"""Changelog transactions' test kit: the two things a PartitionChangelog asks of the
store (a partition's RocksDB and an atomic write), topics to commit into, and the
``Changelogs`` under test (streams/faust/transactions.py)."""

from __future__ import annotations

from rocksdict import Options, Rdict

from eventq.kafka.topics import TopicSpec, ensure_topics
from streams.faust.transactions import Changelogs
from streams.store import write_records


class Tables:
    """The two things a PartitionChangelog asks of the store: a partition's DB, and an
    atomic write of records to it (streams/store.py JobStore.write_batch)."""

    def __init__(self, path) -> None:
        self._path = path
        self._dbs: dict[int, Rdict] = {}

    def db(self, partition: int) -> Rdict:
        if partition not in self._dbs:
            # raw keys and values, as faust opens its tables (streams/store.py)
            self._dbs[partition] = Rdict(str(self._path / f"p{partition}"),
                                         options=Options(raw_mode=True))
        return self._dbs[partition]

    def write_batch(self, partition: int, records) -> None:
        write_records(self.db(partition), records)

    def close(self) -> None:
        for db in self._dbs.values():
            db.close()


def make_topics(bootstrap: str, prefix: str) -> tuple[str, str]:
    jobs, commands = f"{prefix}.jobs", f"{prefix}.commands"
    ensure_topics(bootstrap, [
        TopicSpec(jobs, 2, 1, {"cleanup.policy": "compact"}),
        TopicSpec(commands, 2, 1, {}),
    ])
    return jobs, commands


def changelogs(bootstrap, tables, jobs, commands, app_id, lost) -> Changelogs:
    return Changelogs(bootstrap=bootstrap, app_id=app_id, topic=jobs, commands_topic=commands,
                      store=tables, on_lost=lambda p, error: lost.append((p, error)))
