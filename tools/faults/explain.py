"""What the logs say about one job: every command that names it (and every slice that
admitted it from the bulk lane), what the core decided for each (logview.py: the fold
the log-time rules judge), and every state record of it, in log order. A violation the
checker reports is explained by reading these beside the history."""

from __future__ import annotations

import uuid

from eventq.core import CodecError, decode_command, decode_state
from eventq.core.batch import read_record
from eventq.kafka.logreader import read_topic

from .logview import JobLog, read_log


def command_lines(bootstrap: str, commands_topic: str, job_id: str) -> list[str]:
    wanted = uuid.UUID(job_id)
    lines = []
    for record in read_topic(bootstrap, commands_topic):
        try:
            source, items = read_record(record.value)
        except CodecError as error:
            lines.append(f"p{record.partition}@{record.offset}: undecodable ({error})")
            continue
        for index, data in enumerate(items):
            try:
                decoded = decode_command(data)
            except CodecError:
                continue
            if getattr(decoded.command, "job_id", None) != wanted:
                continue
            admitted = f" (slice {source.describe()})" if source is not None else ""
            lines.append(
                f"p{record.partition}@{record.offset}.{index} t={record.timestamp_ms} "
                f"{decoded.command!r:.160} node={decoded.node} "
                f"request={decoded.request_id}{admitted}")
    return lines


def state_lines(bootstrap: str, jobs_topic: str, job_id: str) -> list[str]:
    key = job_id.encode()
    lines = []
    for record in read_topic(bootstrap, jobs_topic):
        if record.key != key:
            continue
        if record.value is None:
            lines.append(f"p{record.partition}@{record.offset} tombstone")
            continue
        event, job = decode_state(record.value)
        state = "gone" if job is None else (
            f"{job.state.name} attempts={job.attempts} fails={job.fails} v={job.version}")
        lines.append(f"p{record.partition}@{record.offset} t={record.timestamp_ms} "
                     f"{type(event).__name__} at {event.offset}: {state}")
    return lines


def decided_lines(log: JobLog) -> list[str]:
    """Each command of the job's fold: its position, broker time, what the core decided
    and the job's state after it (pure)."""
    lines = []
    for entry in log.entries:
        after = entry.job_after
        state = "gone" if after is None else (
            f"{after.state.name} attempts={after.attempts} fails={after.fails}")
        attempt = "" if entry.attempt is None else f" attempt={entry.attempt}"
        decided = entry.event if entry.accepted else entry.outcome
        lines.append(f"@{entry.position} t={entry.at_ms} {entry.kind}{attempt}: {decided} "
                     f"-> {state}")
    return lines


def explain(bootstrap: str, commands_topic: str, jobs_topic: str, job_id: str) -> str:
    parts = [f"job {job_id}", "  commands:"]
    parts += [f"    {line}" for line in command_lines(bootstrap, commands_topic, job_id)]
    parts.append("  decided (the commands folded with the core):")
    folded = read_log(bootstrap, commands_topic, [job_id]).job(str(uuid.UUID(job_id)))
    parts += [f"    {line}" for line in decided_lines(folded)]
    parts.append("  state records (committed):")
    parts += [f"    {line}" for line in state_lines(bootstrap, jobs_topic, job_id)]
    return "\n".join(parts)
