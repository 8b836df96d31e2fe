"""The dashboard's HTML (pure: data in, a page out). No JavaScript, no CDN: pages
refresh themselves with a meta tag, charts are inline SVG, actions are plain forms
(POST, then a redirect back: the same commands as the protocol, eventq/observe/web.py).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from html import escape
from urllib.parse import quote

from eventq.client.models import JobInfo
from eventq.limits import MAX_ATTEMPTS_LIMIT
from eventq.state.livestats import Durations

REFRESH_S = 5
PAYLOAD_PREVIEW_BYTES = 2048
JOB_LIST_KINDS = ("ready", "scheduled", "waiting", "leased", "failed")
GONE = "gone"  # the state shown for an upstream or dependent that is no job now
# docs/workflows.md, "Dependencies": "An upstream that does not exist is waited for,
# whether it was never added or is already gone (the two cannot be told apart)".
GONE_NOTE = ("gone: no such job now: deleted or expired, or, for an upstream, not added "
             "yet (it is waited for until it is added or this job's TTL ends)")

STYLE = """
body{font:14px/1.4 system-ui,sans-serif;margin:0;color:#1a202c;background:#f7fafc}
header{background:#1a365d;color:#fff;padding:8px 16px;display:flex;gap:20px;align-items:center}
header a{color:#e2e8f0;text-decoration:none}header b{font-size:16px}
main{padding:12px 16px}table{border-collapse:collapse;background:#fff;margin:8px 0}
th,td{border:1px solid #e2e8f0;padding:3px 8px;text-align:right}
th{background:#edf2f7}td.l,th.l{text-align:left}code{font-size:12px}
.chart{background:#fff;border:1px solid #e2e8f0;margin:4px 8px 4px 0}
.chart-title{font-weight:600;font-size:12px}.tick,.legend{font-size:11px}
.chart-empty{fill:#718096;font-size:12px}.axis{stroke:#a0aec0}
.flash{padding:6px 10px;margin:8px 0;border-radius:4px;background:#c6f6d5}
.flash.error{background:#fed7d7}.paused{color:#c05621;font-weight:600}
form.inline{display:inline}button{cursor:pointer}
pre{background:#fff;border:1px solid #e2e8f0;padding:8px;max-width:100%;overflow:auto}
nav.tabs a{margin-right:12px}nav.tabs a.on{font-weight:700}
"""


def e(value: object) -> str:
    return escape(str(value), quote=True)


def q(value: str) -> str:
    return quote(value, safe="")


@dataclass
class Frame:
    """What every page shows around its body."""

    process: str  # this process's gateway address
    actions: bool  # --http-actions
    flash: str | None = None
    cluster_note: str | None = None  # set when counts are this process's partitions only
    # With tokens (docs/security.md, "The dashboard and metrics"): the roles of the
    # token shown, and whether it may act (admin); None: a server without tokens.
    who: str | None = None
    may_act: bool = True


def layout(title: str, body: str, frame: Frame, refresh: bool = True) -> str:
    meta = f'<meta http-equiv="refresh" content="{REFRESH_S}">' if refresh else ""
    flash = ""
    if frame.flash:
        flash += f'<div class="flash" id="flash">{e(frame.flash)}</div>'
    if not frame.actions:
        mode = "read-only (start with --http-actions to act)"
    else:
        mode = "actions enabled" if frame.may_act else "read-only for this token (acting needs admin)"
    signed_in = "" if frame.who is None else (
        f' · token: {e(frame.who)} <form class="inline" method="post" action="/signout">'
        '<button type="submit" name="signout">Sign out</button></form>')
    return (
        f'<!doctype html><html lang="en"><head><meta charset="utf-8">{meta}'
        f"<title>{e(title)} · eventq</title><style>{STYLE}</style></head><body>"
        f'<header><b>eventq</b><a href="/">Queues</a><a href="/failed">Failed</a>'
        f'<a href="/recurring">Recurring</a><a href="/tags">Tags</a>'
        f'<a href="/cluster">Cluster</a>'
        f'<a href="/metrics">Metrics</a><span style="margin-left:auto">process '
        f"{e(frame.process)} · {mode}{signed_in}</span></header><main><h1>{e(title)}</h1>{flash}"
        f"{f'<p><i>{e(frame.cluster_note)}</i></p>' if frame.cluster_note else ''}"
        f"{body}</main></body></html>"
    )


def table(headers: list[str], rows: list[list[str]], left: int = 1, id_: str = "") -> str:
    """Cells are already HTML; the first ``left`` columns are left-aligned."""
    def cls(i: int) -> str:
        return ' class="l"' if i < left else ""

    head = "".join(f"<th{cls(i)}>{e(h)}</th>" for i, h in enumerate(headers))
    body = "".join(
        "<tr>" + "".join(f"<td{cls(i)}>{cell}</td>" for i, cell in enumerate(row)) + "</tr>"
        for row in rows
    )
    ident = f' id="{e(id_)}"' if id_ else ""
    return f"<table{ident}><tr>{head}</tr>{body}</table>"


def button(action: str, label: str, frame: Frame, name: str = "") -> str:
    if not (frame.actions and frame.may_act):
        return ""
    ident = f' name="{e(name)}"' if name else ""
    return (f'<form class="inline" method="post" action="{e(action)}">'
            f'<button type="submit"{ident}>{e(label)}</button></form>')


@dataclass
class QueueRow:
    name: str
    ready: int
    scheduled: int
    paused: bool
    leased: int = 0
    completed: int = 0
    failed: int = 0
    rates: dict[str, float] = field(default_factory=dict)  # per second, last sample
    waiting: int = 0  # [eventq] WAITING for their upstreams (inspect queue's waiting-len)


def _rate(value: float) -> str:
    return f"{value:,.1f}" if value else "0"


def queues_page(rows: list[QueueRow], charts: list[str], frame: Frame,
                offset: int, limit: int, more: bool) -> str:
    cells = [
        [f'<a href="/queues/{q(r.name)}">{e(r.name)}</a>', f"{r.ready:,}", f"{r.scheduled:,}",
         f"{r.waiting:,}", f"{r.leased:,}", f"{r.completed:,}", f"{r.failed:,}",
         '<span class="paused">paused</span>' if r.paused else "",
         _rate(r.rates.get("added", 0)), _rate(r.rates.get("completed", 0)),
         _rate(r.rates.get("failed", 0))]
        for r in rows
    ]
    body = "".join(charts) + table(
        ["queue", "ready", "scheduled", "waiting", "leased", "completed", "failed", "paused",
         "added/s", "completed/s", "failed/s"], cells, id_="queues")
    if not rows:
        body += "<p>No queues yet: add a job (eventq cli, a client, or Spark).</p>"
    body += _pager("/", offset, limit, more, "")
    return layout("Queues", body, frame)


def recurring_page(recurrences: list, frame: Frame, offset: int, limit: int, more: bool) -> str:
    """[eventq] The recurrences (docs/workflows.md, "Recurring jobs"), by name: the
    queue each adds to, how often, and when its next slot is due (``RecurrenceInfo``s)."""
    cells = [
        [e(r.name), f'<a href="/queues/{q(r.queue)}">{e(r.queue)}</a>', _every(r.every_ms),
         e(r.next), e(r.created), e(",".join(r.tags)), f"{len(r.payload):,} B"]
        for r in recurrences
    ]
    body = table(["recurrence", "queue", "every", "next due", "defined", "tags", "payload"],
                 cells, left=6, id_="recurring")
    if not recurrences:
        body += "<p>No recurring jobs: define one with <code>recur</code>.</p>"
    body += _pager("/recurring", offset, limit, more, "")
    return layout("Recurring jobs", body, frame)


def _every(ms: int) -> str:
    """A period as people say it: 1 s, 90 s, 15 min, 24 h (ms when it is not whole)."""
    for unit, size in (("d", 86_400_000), ("h", 3_600_000), ("min", 60_000), ("s", 1000)):
        if ms % size == 0 and ms >= size:
            return f"{ms // size:,} {unit}"
    return f"{ms:,} ms"


def _pager(path: str, offset: int, limit: int, more: bool, extra: str) -> str:
    links = []
    if offset > 0:
        links.append(f'<a id="prev" href="{path}?{extra}offset={max(0, offset - limit)}">'
                     "&larr; previous</a>")
    if more:
        links.append(f'<a id="next" href="{path}?{extra}offset={offset + limit}">next &rarr;</a>')
    return f'<p class="pager">{" · ".join(links)}</p>' if links else ""


def queue_page(row: QueueRow, kind: str, jobs: list[JobInfo], offset: int, limit: int,
               more: bool, charts: list[str], durations: dict[str, Durations],
               frame: Frame) -> str:
    name = q(row.name)
    toggle = (button(f"/queues/{name}/resume", "Resume", frame, "resume") if row.paused
              else button(f"/queues/{name}/pause", "Pause", frame, "pause"))
    state = '<span class="paused" id="state">paused</span>' if row.paused else (
        '<span id="state">active</span>')
    counts = table(["ready", "scheduled", "waiting", "leased", "completed", "failed"],
                   [[f"{row.ready:,}", f"{row.scheduled:,}", f"{row.waiting:,}",
                     f"{row.leased:,}", f"{row.completed:,}", f"{row.failed:,}"]],
                   left=0, id_="counts")
    times = table(
        ["", "samples", "mean"],
        [[metric, f"{d.count:,}", "-" if d.mean_ms is None else f"{d.mean_ms / 1000:.3f} s"]
         for metric, d in durations.items()], id_="durations")
    tabs = "".join(
        f'<a class="{"on" if k == kind else ""}" href="/queues/{name}?kind={k}">{k}</a>'
        for k in JOB_LIST_KINDS)
    jobs_table = table(
        ["id", "state", "priority", "attempts", "fails", "created", "time"],
        [[f'<a href="/jobs/{e(j.id)}"><code>{e(j.id)}</code></a>', e(j.state),
          str(j.priority), f"{j.attempts}/{attempts_allowed(j.max_attempts)}",
          f"{j.fails}/{fails_allowed(j.max_fails)}",
          e(j.created), e(j.time or "")] for j in jobs], left=2, id_="jobs")
    body = (f"<p>Queue is {state} {toggle}</p>{counts}{''.join(charts)}"
            f"<h2>Wait and run times</h2>{times}"
            f'<h2>Jobs</h2><nav class="tabs">{tabs}</nav>{jobs_table}'
            + ("" if jobs else f"<p>No {e(kind)} jobs.</p>")
            + _pager(f"/queues/{name}", offset, limit, more, f"kind={kind}&"))
    return layout(f"Queue {row.name}", body, frame)


def attempts_allowed(max_attempts: int) -> int:
    """spec, Values: -max-attempts 0 "means unlimited, which is a hard cap of 255"."""
    return max_attempts or MAX_ATTEMPTS_LIMIT


def fails_allowed(max_fails: int) -> int:
    """spec, fail: "while fails < N the job returns to PENDING", else it is FAILED, so
    max-fails 0 (the default) and 1 both allow one fail: the first is the last. (Issue
    27: 0 was shown as "unlimited".)"""
    return max(max_fails, 1)


def job_fields(info: JobInfo) -> list[tuple[str, str]]:
    """The job page's field table, from ``inspect job``."""
    allowed = fails_allowed(info.max_fails)
    cap = "" if info.max_attempts else " (max-attempts 0: the hard cap)"
    fields = [
        ("id", str(info.id)), ("queue", info.name), ("state", info.state),
        ("priority", str(info.priority)),
        ("attempts", f"{info.attempts} of {attempts_allowed(info.max_attempts)}{cap}"),
        ("fails", f"{info.fails} of {allowed}" + (" (no retry)" if allowed == 1 else "")),
        ("ttr", f"{info.ttr_ms:,} ms"), ("ttl", f"{info.ttl_ms:,} ms"),
        ("created", info.created),
    ]
    # spec, inspect: the block has ``time`` for a scheduled job (or one waiting out its
    # backoff) only; any other job has none, so no row rather than an empty one.
    if info.time is not None:
        fields.append(("time", info.time))
    # docs/workflows.md, "Job and queue blocks": after and waiting, for a job with upstreams
    if info.after:
        fields.append(("upstreams", f"{info.after}, {info.waiting} not completed"))
    if info.tags:  # docs/workflows.md, "Tags": in -tags order (links: tags_links)
        fields.append(("tags", ", ".join(info.tags)))
    # A failure group, which workq has none of (docs/workflows.md, "Failure groups and retry")
    if info.group is not None:
        fields.append(("failure group", info.group))
    return fields


def tag_link(tag: str) -> str:
    return f'<a href="/tags/{q(tag)}">{e(tag)}</a>'


def tags_links(tags: tuple[str, ...] | list[str]) -> str:
    """A job's tags, each a link to the page of its tag's jobs."""
    return " ".join(tag_link(tag) for tag in tags)


def tagged_page(tag: str, jobs: list[JobInfo], offset: int, limit: int, more: bool,
                frame: Frame) -> str:
    """``inspect tagged``: the live jobs with ``tag``, in any state, by created time then
    id (docs/workflows.md, "Tags"), every process's."""
    rows = [[f'<a href="/jobs/{e(j.id)}"><code>{e(j.id)}</code></a>',
             f'<a href="/queues/{q(j.name)}">{e(j.name)}</a>', e(j.state), str(j.priority),
             f"{j.attempts}/{attempts_allowed(j.max_attempts)}", e(j.created),
             e(j.time or ""), tags_links(j.tags)] for j in jobs]
    body = (_tag_form(tag) + "<p>Live jobs with this tag, in any state, oldest first "
            "(created time, then id).</p>"
            + table(["id", "queue", "state", "priority", "attempts", "created", "time", "tags"],
                    rows, left=3, id_="jobs")
            + ("" if jobs else f"<p>No live job has the tag {e(tag)}.</p>")
            + _pager(f"/tags/{q(tag)}", offset, limit, more, ""))
    return layout(f"Tag {tag}", body, frame)


def _tag_form(tag: str = "") -> str:
    return ('<form method="get" action="/tags" id="tag-form">'
            f'<input name="tag" value="{e(tag)}" placeholder="a tag" maxlength="64"> '
            '<button type="submit">Show its jobs</button></form>')


def tags_page(counts: list[tuple[str, int]], frame: Frame, note: str | None = None) -> str:
    """The tags some live job of this process's partitions has, with their counts, and
    a form to list any tag's jobs (the whole cluster's, through ``inspect tagged``)."""
    body = (_tag_form() + (f'<p class="flash error" id="tag-error">{e(note)}</p>' if note else "")
            + "<p>Tags of the live jobs of this process's partitions (any tag's page lists "
            "the whole cluster's jobs).</p>"
            + table(["tag", "live jobs here"], [[tag_link(tag), f"{n:,}"] for tag, n in counts],
                    id_="tags")
            + ("" if counts else "<p>No live job here has tags.</p>"))
    return layout("Tags", body, frame)


@dataclass(frozen=True)
class EdgeRow:
    """An upstream or a dependent of the job shown: its state now (``GONE``: no such
    job) and, for an upstream, the outcome the job holds of it (the protocol's word)."""

    id: str
    queue: str | None  # None: no such job now (or its state could not be read)
    state: str
    outcome: str | None = None


@dataclass(frozen=True)
class Edges:
    """A job's upstreams (-after order) and dependents (id order, the first ones only
    when ``more``), or ``note`` when they could not be read."""

    upstreams: tuple[EdgeRow, ...] = ()
    dependents: tuple[EdgeRow, ...] = ()
    more: bool = False
    note: str | None = None


def _job_link(job_id: str) -> str:
    return f'<a href="/jobs/{e(job_id)}"><code>{e(job_id)}</code></a>'


def edges_section(edges: Edges) -> str:
    """The job page's upstreams and dependents (docs/architecture.md, "Workflows"):
    nothing for a job that has neither."""
    if edges.note is not None:
        return f"<h2>Upstreams and dependents</h2><p>{e(edges.note)}</p>"
    body = ""
    if edges.upstreams:
        body += ("<h2>Upstreams</h2><p>The jobs this one waits for, in -after order, with "
                 "their state now and the outcome this job holds of each.</p>" + table(
                     ["id", "queue", "state", "outcome here"],
                     [[_job_link(r.id), e(r.queue or ""), e(r.state), e(r.outcome or "")]
                      for r in edges.upstreams], left=4, id_="upstreams"))
    if edges.dependents:
        more = (f" The first {len(edges.dependents):,} are listed." if edges.more else "")
        body += ("<h2>Dependents</h2><p>The jobs registered to wait for this one, by id."
                 f"{e(more)}</p>" + table(
                     ["id", "queue", "state"],
                     [[_job_link(r.id), e(r.queue or ""), e(r.state)]
                      for r in edges.dependents], left=3, id_="dependents"))
    if any(r.state == GONE for r in edges.upstreams + edges.dependents):
        body += f'<p id="gone-note"><i>{e(GONE_NOTE)}</i></p>'
    return body


@dataclass
class HistoryRow:
    offset: str
    at: str
    command: str
    outcome: str
    detail: str
    # [eventq] audit (docs/security.md, "Queue-name prefixes"): the name of the token
    # that issued the command (None: no tokens, or eventq's own command).
    issuer: str | None = None

    @property
    def shown_detail(self) -> str:
        """The detail, and who issued it ("by line-3")."""
        if self.issuer is None:
            return self.detail
        return f"{self.detail}, by {self.issuer}" if self.detail else f"by {self.issuer}"


def payload_preview(payload: bytes) -> str:
    shown = payload[:PAYLOAD_PREVIEW_BYTES]
    try:
        text = shown.decode("utf-8")
        binary = any(ord(c) < 32 and c not in "\n\r\t" for c in text)
    except UnicodeDecodeError:  # (or cut inside a character: shown as bytes too)
        binary = True
    if binary:
        text = " ".join(f"{b:02x}" for b in shown)
    more = (f" (first {PAYLOAD_PREVIEW_BYTES:,} shown)" if len(payload) > len(shown) else "")
    return f"<p>{len(payload):,} bytes{more}</p><pre id=\"payload\">{e(text)}</pre>"


def job_page(fields: list[tuple[str, str]], payload: bytes, result: str | None,
             history: list[HistoryRow], history_note: str, job_id: str, state: str,
             frame: Frame, edges: Edges = Edges(), tags: tuple[str, ...] = ()) -> str:
    actions = button(f"/jobs/{job_id}/delete", "Delete", frame, "delete")
    if state == "failed":
        actions += " " + button(f"/jobs/{job_id}/retry", "Retry", frame, "retry")
    body = (
        f"<p>{actions}</p>"
        + table(["field", "value"], [[e(k), e(v)] for k, v in fields], left=2, id_="fields")
        + (f'<p id="tags">Tags: {tags_links(tags)}</p>' if tags else "")
        + (f"<h2>Result</h2><pre id=\"result\">{e(result)}</pre>" if result is not None else "")
        + edges_section(edges)
        + "<h2>Payload</h2>" + payload_preview(payload)
        + f"<h2>History</h2><p>{e(history_note)}</p>"
        + table(["offset", "time", "command", "outcome", "detail"],
                [[e(h.offset), e(h.at), e(h.command), e(h.outcome), e(h.shown_detail)]
                 for h in history], left=5, id_="history")
    )
    return layout(f"Job {job_id}", body, frame, refresh=False)


def gone_page(job_id: str, frame: Frame) -> str:
    body = (f"<p>No job {e(job_id)} here: it was deleted, it expired, or it never "
            'existed. <a href="/">Back to the queues</a></p>')
    return layout("Job not found", body, frame, refresh=False)


@dataclass
class PartitionRow:
    partition: int
    owner: str
    here: bool
    applied: int | None
    end: int | None
    lag: int | None
    catching_up: int | None  # records left to re-apply before serving


def cluster_page(members: list[str], partitions: list[PartitionRow], serving: bool,
                 frame: Frame) -> str:
    member_rows = [[e(m), "this process" if m == frame.process else ""] for m in members]
    part_rows = []
    for p in partitions:
        lag = "" if p.lag is None else f"{p.lag:,}"
        part_rows.append([
            str(p.partition), e(p.owner) + (" (this process)" if p.here else ""),
            "" if p.applied is None else f"{p.applied:,}",
            "" if p.end is None else f"{p.end:,}", lag,
            "" if p.catching_up is None else f"{p.catching_up:,}",
        ])
    body = (f"<p id=\"serving\">{'serving' if serving else 'recovering: not serving yet'}</p>"
            "<h2>Processes</h2>" + table(["gateway address", ""], member_rows, left=2,
                                         id_="members")
            + "<h2>Partitions</h2><p>Offsets and lag are known for this process's "
            "partitions; other processes show theirs on their own dashboards.</p>"
            + table(["partition", "owner", "applied offset", "log end", "lag",
                     "left to re-apply"], part_rows, left=2, id_="partitions"))
    return layout("Cluster", body, frame)


def failed_page(groups: list[tuple[str, int]], frame: Frame) -> str:
    """[eventq] The failure groups with FAILED jobs (docs/workflows.md, "inspect failed
    and inspect failed-jobs"), each a link to its jobs."""
    cells = [[f'<a href="/failed/{q(name)}">{e(name)}</a>', f"{count:,}"]
             for name, count in groups]
    body = table(["failure group", "failed jobs"], cells, id_="groups")
    if not groups:
        body += "<p>No failed jobs.</p>"
    return layout("Failed jobs", body, frame)


def failed_group_page(group: str, count: int, jobs: list[JobInfo], offset: int, limit: int,
                      more: bool, frame: Frame, retry_count: int) -> str:
    """[eventq] One failure group's jobs, oldest failure first, and "retry this group"
    (``retry-group``: up to ``retry_count`` at a time, under their own ids)."""
    retry = button(f"/failed/{q(group)}/retry", "Retry this group", frame, "retry-group")
    jobs_table = table(
        ["id", "queue", "attempts", "fails", "created"],
        [[f'<a href="/jobs/{e(j.id)}"><code>{e(j.id)}</code></a>', e(j.name),
          f"{j.attempts}/{attempts_allowed(j.max_attempts)}",
          f"{j.fails}/{fails_allowed(j.max_fails)}", e(j.created)] for j in jobs],
        left=2, id_="jobs")
    note = (f"<p>{count:,} failed jobs, oldest failure first. {retry}</p>"
            + (f"<p>Retry runs the oldest {retry_count:,} again, under their ids.</p>"
               if count > retry_count else ""))
    body = (note + jobs_table + ("" if jobs else "<p>No failed jobs in this group.</p>")
            + _pager(f"/failed/{q(group)}", offset, limit, more, ""))
    return layout(f"Failure group {group}", body, frame)


def message_page(title: str, text: str, frame: Frame) -> str:
    return layout(title, f"<p>{e(text)}</p><p><a href=\"/\">Back to the queues</a></p>",
                  frame, refresh=False)


def signin_page(next_path: str, note: str) -> str:
    """The sign-in form of a dashboard with tokens (docs/security.md, "The dashboard and
    metrics"): a browser cannot send ``Authorization: Bearer``, so the token typed here is
    kept in a cookie (HttpOnly, SameSite=Strict; Secure under TLS). It shows nothing of
    the server: it is what a request without a good token gets (401)."""
    body = (
        f'<p id="signin-note">{e(note)}</p>'
        '<form method="post" action="/signin" id="signin-form">'
        f'<input type="hidden" name="next" value="{e(next_path)}">'
        '<label>Token <input type="password" name="token" autocomplete="current-password" '
        'required autofocus></label> <button type="submit" name="signin">Sign in</button>'
        "</form><p>Any role sees the dashboard; acting (with --http-actions) needs an "
        "admin token. Programs send <code>Authorization: Bearer &lt;token&gt;</code>.</p>"
    )
    return (f'<!doctype html><html lang="en"><head><meta charset="utf-8">'
            f"<title>Sign in · eventq</title><style>{STYLE}</style></head><body>"
            f"<header><b>eventq</b></header><main><h1>Sign in</h1>{body}</main></body></html>")
