"""The HTTP side (docs/architecture.md, "Metrics and the dashboard"): ``/metrics`` for
Prometheus and the dashboard, on aiohttp (faust's own web stack, already installed;
faust's web server itself stays off).

The dashboard reads and acts through the gateway, as a client would: each page builds
the protocol's calls (eventq/client/calls.py), hands the request to ``Gateway.handle``
in this process and parses the reply. So in a cluster the queue counts, job lists, job
pages and actions are the whole cluster's, and an action is the same command a client
would send (pause, resume, delete; a retry is an add of a copy and a delete). What only
the processor knows (leased and failed job lists, jobs by state, rates, wait and run
times, offsets and lag) is this process's partitions.

With tokens (``--tokens-file``, docs/security.md, "The dashboard and metrics") every page
and ``/metrics`` needs a token of any role without a prefix, and an action an admin
token (eventq/observe/webauth.py decides; ``_auth`` below asks it first, before any page
is read). With a certificate the whole of it is served over TLS, with the gateway's
context (mTLS too).
"""

from __future__ import annotations

import asyncio
import logging
import socket
import ssl
import time
import uuid
from typing import TYPE_CHECKING, Callable, TypeVar

from aiohttp import web
from aiohttp.typedefs import Handler

from eventq.client import calls
from eventq.client.errors import ClientError, NotFound
from eventq.client.models import JobEdges, QueueInfo
from eventq.core.events import EventType
from eventq.core.job import State
from eventq.errors import EventqError
from eventq.gateway.leasing import Handover
from eventq.kafka.security import KafkaTarget
from eventq.limits import MAX_RETRY_COUNT
from eventq.observe import pages, webauth
from eventq.observe.chart import line_chart
from eventq.observe.history import SAMPLE_EVERY_S, History
from eventq.observe.joblog import JobHistory, job_history
from eventq.observe.metrics import CONTENT_TYPE, exposition, records_behind, registry_of
from eventq.protocol import Parser
from eventq.protocol.access import Grant, TokenStore
from eventq.state.livestats import QueueStats

if TYPE_CHECKING:
    from eventq.gateway.dispatch import Gateway
    from eventq.observe.metrics import Sources

log = logging.getLogger(__name__)
T = TypeVar("T")  # what a call's reply is parsed into

GRANT = web.RequestKey("grant", Grant)  # the request's token's grant, for the frame
PAGE_JOBS = 25
PAGE_QUEUES = 50  # (+1 to know of a next page: the protocol's limit is 100)
TAGS_SHOWN = 500  # on the tags page: this process's, most jobs first
DEPENDENTS_SHOWN = 50  # on a job page (+1 asked, to know of more: edges' limit is 100)
STATE_OF_KIND = {"leased": State.LEASED, "failed": State.FAILED}
DONE = {  # ?done= after an action: the message shown (never text from the URL)
    "paused": "Queue paused: it hands out no jobs until resumed.",
    "resumed": "Queue resumed.",
    "deleted": "Job deleted.",
    "retried": "Job retried under its id: it runs again from its first attempt.",
    "group-retried": "Failure group retried: its oldest jobs run again under their ids.",
}
RATE_EVENTS = {  # history.RATES -> the events they count
    "added": (EventType.ADDED, EventType.IMPORTED),
    "leased": (EventType.ATTEMPT_STARTED,),
    "completed": (EventType.COMPLETED,),
    "failed": (EventType.FAILED, EventType.FAIL_RETRIED),
}


class Dashboard:
    def __init__(self, *, gateway: Gateway, sources: Sources, process: str, actions: bool,
                 bootstrap: KafkaTarget,
                 commands_topic: str, partitions: int,
                 owner_of: Callable[[int], str | None], members: Callable[[], list[str]],
                 clock_ms: Callable[[], int],
                 read_history: Callable[[uuid.UUID], JobHistory] | None = None,
                 tokens: TokenStore | None = None) -> None:
        self.gateway = gateway
        self.sources = sources
        self.process = process
        self.actions = actions
        self.bootstrap = bootstrap
        self.commands_topic = commands_topic
        self.partitions = partitions
        self.owner_of = owner_of
        self.members = members
        self.clock_ms = clock_ms
        self.history = History()
        self.registry = registry_of(sources)
        # A job's commands, read from the command log (blocking: run in a thread).
        self.read_history = read_history or self._history_from_kafka
        # The server's tokens (the same store SIGHUP replaces), or None: no tokens.
        self.tokens = tokens

    def _history_from_kafka(self, job_id: uuid.UUID) -> JobHistory:
        return job_history(self.bootstrap, self.commands_topic, self.partitions, job_id)

    # --- talking to the gateway as a client would -------------------------------------

    async def call(self, call: calls.Call[T]) -> T:
        parser = Parser(now_ms=self.clock_ms)
        parser.feed(call.data)
        request = parser.next_event()
        if isinstance(request, EventqError):
            raise request
        reply = await self.gateway.handle(request)
        assert not isinstance(reply, Handover), "a lease's reply: the dashboard never leases"
        if not isinstance(reply, bytes):
            reply = b"".join(reply)
        return call.parse(reply)

    # --- sampling for the charts -------------------------------------------------------

    def sample(self) -> None:
        index, stats = self.sources.index, self.sources.processor.stats
        now_ms = self.clock_ms()
        counts = index.state_counts()
        queues: dict[str, tuple[tuple[int, ...], tuple[int, ...]]] = {}
        for name in counts.keys() | (stats.queues.keys() if stats else set()):
            ready, scheduled = index.lengths(name, now_ms)
            leased = counts.get(name, {}).get(State.LEASED, 0)
            events = stats.queues[name].events if stats and name in stats.queues else None
            totals = tuple(sum(events[k] for k in kinds) if events else 0
                           for kinds in RATE_EVENTS.values())
            queues[name] = ((ready, scheduled, leased), totals)
        self.history.record(time.monotonic(), queues)

    async def sample_forever(self) -> None:
        while True:
            try:
                self.sample()
            except Exception:  # a chart must never take the server down
                log.exception("sampling the queues for the dashboard failed")
            await asyncio.sleep(SAMPLE_EVERY_S)

    # --- pages -----------------------------------------------------------------------------

    def frame(self, request: web.Request) -> pages.Frame:
        cluster = self.gateway.cluster
        alone = cluster is None or not cluster.others()
        grant: Grant | None = request.get(GRANT)
        return pages.Frame(
            process=self.process, actions=self.actions,
            flash=DONE.get(request.query.get("done", "")),
            cluster_note=None if alone else (
                "Ready, scheduled, waiting and paused are the whole cluster's; leased, "
                "completed, failed, rates and times are this process's partitions."),
            who=None if grant is None else ",".join(sorted(r.value for r in grant.roles)),
            may_act=grant is None or grant.is_admin,
        )

    def _charts(self, name: str | None) -> list[str]:
        what = "all queues" if name is None else name
        return [
            line_chart(self.history.gauge_series(name), f"jobs ({what})"),
            line_chart(self.history.rate_series(name), f"events per second ({what})", unit="/s"),
        ]

    def _row(self, info: QueueInfo, counts: dict[str, dict[State, int]] | None = None,
             ) -> pages.QueueRow:
        counts = self.sources.index.state_counts() if counts is None else counts
        by_state = counts.get(info.name, {})
        return pages.QueueRow(
            info.name, info.ready, info.scheduled, info.paused,
            leased=by_state.get(State.LEASED, 0), completed=by_state.get(State.COMPLETED, 0),
            failed=by_state.get(State.FAILED, 0),
            rates=self.history.latest_rates(info.name), waiting=info.waiting,
        )

    async def queues_page(self, request: web.Request) -> web.Response:
        offset = _int(request.query.get("offset"), 0)
        infos = await self.call(calls.inspect_queues(offset, PAGE_QUEUES + 1))
        counts = self.sources.index.state_counts()  # once per page, not per row
        rows = [self._row(info, counts) for info in infos[:PAGE_QUEUES]]
        return _html(pages.queues_page(rows, self._charts(None), self.frame(request),
                                       offset, PAGE_QUEUES, len(infos) > PAGE_QUEUES))

    async def recurring_page(self, request: web.Request) -> web.Response:
        """[eventq] The recurrences of the whole cluster with their next due time."""
        offset = _int(request.query.get("offset"), 0)
        found = await self.call(calls.recurrences(offset, PAGE_QUEUES + 1))
        return _html(pages.recurring_page(found[:PAGE_QUEUES], self.frame(request), offset,
                                          PAGE_QUEUES, len(found) > PAGE_QUEUES))

    async def queue_page(self, request: web.Request) -> web.Response:
        name = request.match_info["name"]
        kind = request.query.get("kind", "ready")
        if kind not in pages.JOB_LIST_KINDS:
            kind = "ready"
        offset = _int(request.query.get("offset"), 0)
        try:
            info = await self.call(calls.inspect_queue(name))
        except NotFound:
            return _html(pages.message_page("No such queue", f"No queue named {name!r} is "
                         "known: nothing was added to it or leased from it.",
                         self.frame(request)), 404)
        jobs = await self._jobs(name, kind, offset, PAGE_JOBS + 1)
        stats = self.sources.processor.stats
        queue_stats = (stats.queues.get(name) if stats else None) or QueueStats()
        durations = {"wait": queue_stats.wait, "run": queue_stats.run}
        return _html(pages.queue_page(
            self._row(info), kind, jobs[:PAGE_JOBS], offset, PAGE_JOBS,
            len(jobs) > PAGE_JOBS, self._charts(name), durations, self.frame(request)))

    async def _jobs(self, name: str, kind: str, offset: int, limit: int) -> list:
        if kind in ("ready", "scheduled", "waiting"):  # the cluster's, through the gateway
            try:
                return await self.call(calls.inspect_jobs(
                    name, offset, limit, scheduled=kind == "scheduled",
                    waiting=kind == "waiting"))
            except NotFound:
                return []
        ids = self.sources.index.jobs_in_state(name, STATE_OF_KIND[kind], offset, limit)
        found = []
        for job_id in ids:
            try:
                found.append(await self.call(calls.inspect_job(job_id)))
            except NotFound:  # gone since the index was read
                pass
        return found

    async def job_page(self, request: web.Request) -> web.Response:
        job_id = _uuid(request.match_info["id"])
        if job_id is None:
            return _html(pages.gone_page(request.match_info["id"], self.frame(request)), 404)
        try:
            info = await self.call(calls.inspect_job(job_id))
        except NotFound:
            info = None
        edges = await self._edges(job_id)
        try:
            history = await asyncio.to_thread(self.read_history, job_id)
        except Exception as error:  # Kafka unreachable: the job's state still shows
            log.warning("reading the history of job %s failed: %s", job_id, error)
            history = JobHistory([], f"The command log could not be read ({error}).")
        if info is None:
            if not history.rows and not edges.dependents:
                return _html(pages.gone_page(str(job_id), self.frame(request)), 404)
            # Gone, or never added: its commands, and the dependents still waiting for it.
            body = pages.job_page([("id", str(job_id)), ("state", pages.GONE)], b"", None,
                                  history.rows, history.note, str(job_id), pages.GONE,
                                  self.frame(request), edges)
            return _html(body)
        result = None
        if info.state in ("completed", "failed"):
            try:
                outcome = await self.call(calls.result(job_id, 0))
                result = outcome.data.decode("utf-8", "replace")
            except EventqError:  # NotFound too: deleted since it was inspected
                result = None
        return _html(pages.job_page(pages.job_fields(info), info.payload, result,
                                    history.rows, history.note, str(job_id), info.state,
                                    self.frame(request), edges, info.tags))

    async def tags_page(self, request: web.Request) -> web.Response:
        """The tags of this process's live jobs; ``?tag=`` goes to a tag's page."""
        wanted = request.query.get("tag")
        note = None
        if wanted is not None:
            try:
                calls.inspect_tagged(wanted)  # checked as the protocol checks a tag
            except EventqError:
                note = (f"{wanted!r} is no tag: 1-64 characters of A-Z, a-z, 0-9, "
                        "'_', '.' and '-'.")
            else:
                raise web.HTTPSeeOther(f"/tags/{pages.q(wanted)}")
        counts = self.sources.index.tag_counts()
        shown = sorted(counts.items(), key=lambda item: (-item[1], item[0]))[:TAGS_SHOWN]
        return _html(pages.tags_page(shown, self.frame(request), note))

    async def tagged_page(self, request: web.Request) -> web.Response:
        """A tag's live jobs, the whole cluster's (``inspect tagged``)."""
        tag = request.match_info["tag"]
        offset = _int(request.query.get("offset"), 0)
        try:
            call = calls.inspect_tagged(tag, offset, PAGE_JOBS + 1)
        except EventqError:  # not a tag: no job can have it
            return _html(pages.message_page("No such tag", f"{tag!r} is no tag: 1-64 "
                         "characters of A-Z, a-z, 0-9, '_', '.' and '-'.",
                         self.frame(request)), 404)
        jobs = await self.call(call)
        return _html(pages.tagged_page(tag, jobs[:PAGE_JOBS], offset, PAGE_JOBS,
                                       len(jobs) > PAGE_JOBS, self.frame(request)))

    async def _edges(self, job_id: uuid.UUID) -> pages.Edges:
        """The job's upstreams and dependents (docs/architecture.md, "Workflows"), from
        the owner of its partition as ``inspect job`` is (the gateway forwards
        ``edges``), each with its state now, read through the gateway as well."""
        try:
            edges: JobEdges = await self.call(calls.edges(job_id, DEPENDENTS_SHOWN + 1))
        except EventqError as error:  # (a process of an older eventq: Unknown command)
            text = str(error) or type(error).__name__
            return pages.Edges(note=f"Its upstreams and dependents could not be read ({text}).")
        upstreams = asyncio.gather(*(self._edge(up, outcome) for up, outcome in edges.upstreams))
        dependents = asyncio.gather(*(self._edge(down)
                                      for down in edges.dependents[:DEPENDENTS_SHOWN]))
        return pages.Edges(tuple(await upstreams), tuple(await dependents),
                           more=len(edges.dependents) > DEPENDENTS_SHOWN)

    async def _edge(self, job_id: uuid.UUID, outcome: str | None = None) -> pages.EdgeRow:
        """One edge's other end as it is now: a job that no longer exists (or, as an
        upstream, is not added yet) is ``GONE``, not an error."""
        try:
            info = await self.call(calls.inspect_job(job_id))
        except NotFound:
            return pages.EdgeRow(str(job_id), None, pages.GONE, outcome)
        except EventqError as error:  # its partition moving: this row only says so
            text = str(error) or type(error).__name__
            return pages.EdgeRow(str(job_id), None, f"unknown ({text})", outcome)
        return pages.EdgeRow(str(job_id), info.name, info.state, outcome)

    async def cluster_page(self, request: web.Request) -> web.Response:
        offsets = self.sources.lag()  # owned partitions: (applied through, log end)
        remaining = self.sources.processor.catch_up_remaining()
        rows = []
        for partition in range(self.partitions):
            owner = self.owner_of(partition) or ("this process" if partition in offsets else "?")
            through, end = offsets.get(partition, (None, None))
            behind = None if through is None or end is None else records_behind(through, end)
            rows.append(pages.PartitionRow(
                partition, owner, partition in offsets or owner == self.process, through, end,
                behind,
                remaining.get(partition)))
        members = sorted(set(self.members()) | {self.process})
        return _html(pages.cluster_page(members, rows, self.sources.serving(),
                                        self.frame(request)))

    async def metrics(self, request: web.Request) -> web.Response:
        body = exposition(self.registry)
        return web.Response(body=body, headers={"Content-Type": CONTENT_TYPE})

    async def api_stats(self, request: web.Request) -> web.Response:
        """This process's live statistics as JSON (the test compares them with Spark's)."""
        stats = self.sources.processor.stats
        counts = self.sources.index.state_counts()
        queue = request.query.get("queue")
        states = [{"queue": name, "state": state.name.lower(), "count": n}
                  for name, by_state in sorted(counts.items()) for state, n in by_state.items()
                  if n and (queue is None or name == queue)]
        histogram = stats.histogram_rows(queue) if stats else []
        return web.json_response({"process": self.process, "states": states,
                                  "histogram": histogram})

    # --- actions -------------------------------------------------------------------------

    def _refuse(self, request: web.Request) -> web.Response | None:
        if not self.actions:
            return _html(pages.message_page(
                "Read-only", "This dashboard is read-only: start eventq with "
                "--http-actions to pause, resume, delete and retry from it.",
                self.frame(request)), 403)
        origin = _foreign_origin(request)
        if origin is not None:
            return _html(pages.message_page(
                "Refused", f"An action from another site ({origin}) was refused.",
                self.frame(request)), 403)
        return None

    async def _act(self, request: web.Request, call: calls.Call, back: str) -> web.Response:
        refused = self._refuse(request)
        if refused is not None:
            return refused
        try:
            await self.call(call)
        except EventqError as error:
            return _html(pages.message_page("The action failed", str(error) or
                                            type(error).__name__, self.frame(request)), 409)
        raise web.HTTPSeeOther(back)

    async def pause(self, request: web.Request) -> web.Response:
        name = request.match_info["name"]
        return await self._act(request, calls.pause(name),
                               f"/queues/{pages.q(name)}?done=paused")

    async def resume(self, request: web.Request) -> web.Response:
        name = request.match_info["name"]
        return await self._act(request, calls.resume(name),
                               f"/queues/{pages.q(name)}?done=resumed")

    async def delete(self, request: web.Request) -> web.Response:
        job_id = _uuid(request.match_info["id"])
        if job_id is None:
            raise web.HTTPNotFound()
        return await self._act(request, calls.delete(job_id), "/?done=deleted")

    async def retry(self, request: web.Request) -> web.Response:
        """A failed job again, under its own id (``retry``, docs/workflows.md, "retry"):
        whoever waits on its result and its dependents see it run again."""
        refused = self._refuse(request)
        if refused is not None:
            return refused
        job_id = _uuid(request.match_info["id"])
        if job_id is None:
            raise web.HTTPNotFound()
        try:
            await self.call(calls.retry(job_id))
        except NotFound:
            return _html(pages.message_page(
                "Not retried", "Only a failed job is retried; this one is not failed (any "
                "more) or gone.", self.frame(request)), 409)
        except EventqError as error:
            return _html(pages.message_page("The retry failed", str(error) or
                                            type(error).__name__, self.frame(request)), 409)
        raise web.HTTPSeeOther(f"/jobs/{job_id}?done=retried")

    async def failed_page(self, request: web.Request) -> web.Response:
        """[eventq] The failure groups (``inspect failed``, the cluster's)."""
        groups = await self.call(calls.inspect_failed(0, 100))
        return _html(pages.failed_page([(g.name, g.failed) for g in groups],
                                       self.frame(request)))

    async def failed_group_page(self, request: web.Request) -> web.Response:
        """[eventq] One failure group's jobs, oldest failure first, to retry at once."""
        group = request.match_info["group"]
        offset = _int(request.query.get("offset"), 0)
        try:
            jobs = await self.call(calls.inspect_failed_jobs(group, offset, PAGE_JOBS + 1))
            count = {g.name: g.failed for g in await self.call(
                calls.inspect_failed(0, 100))}.get(group, 0)
        except ClientError:  # not a group's name
            raise web.HTTPNotFound() from None
        return _html(pages.failed_group_page(group, count, jobs[:PAGE_JOBS], offset, PAGE_JOBS,
                                             len(jobs) > PAGE_JOBS, self.frame(request),
                                             MAX_RETRY_COUNT))

    async def retry_group(self, request: web.Request) -> web.Response:
        """[eventq] "Retry this group": ``retry-group <group> 10000``."""
        group = request.match_info["group"]
        return await self._act(request, calls.retry_group(group, MAX_RETRY_COUNT),
                               f"/failed/{pages.q(group)}?done=group-retried")

    # --- tokens (docs/security.md, "The dashboard and metrics"; eventq/observe/webauth.py)

    @web.middleware
    async def _auth(self, request: web.Request, handler: Handler) -> web.StreamResponse:
        """Every request but signing in and out presents a token (``Authorization:
        Bearer`` or the sign-in cookie) before anything is read; a POST (an action)
        needs admin. Its grant is kept on the request for the page's frame."""
        if request.path in (webauth.SIGN_IN, webauth.SIGN_OUT):
            return await handler(request)
        assert self.tokens is not None
        token, from_cookie = webauth.presented(
            request.headers.get("Authorization"),
            request.cookies.get(webauth.cookie_name(request.secure)))
        acting = request.method not in webauth.VIEW_METHODS
        decided = webauth.decide(self.tokens, token, acting=acting)
        if (acting and from_cookie and not isinstance(decided, webauth.Refusal)
                and _foreign_origin(request, null_is_foreign=True) is not None):
            # A browser's action: the cookie travels with a form of this site only.
            return _html(pages.message_page(
                "Refused", "An action from another site (or from a page without an "
                "origin) was refused.", self.frame(request)), 403)
        if isinstance(decided, webauth.Refusal):
            grant = None if token is None else self.tokens.tokens.grant_for(token)
            if decided.status == 403 and grant is not None:  # its page offers to sign out
                request[GRANT] = grant
            return self._refusal(request, decided, clear_cookie=from_cookie
                                 and decided is webauth.UNKNOWN_TOKEN)
        request[GRANT] = decided
        return await handler(request)

    def _refusal(self, request: web.Request, refusal: webauth.Refusal,
                 clear_cookie: bool = False) -> web.Response:
        """401 (with ``WWW-Authenticate: Bearer``) or 403, saying what to do: plain
        text to a program (``/metrics``), the sign-in form or a page to a browser."""
        if request.path in webauth.MACHINE_PATHS:
            response = web.Response(text=refusal.text + "\n", status=refusal.status)
        elif refusal.status == 401:
            back = request.raw_path if request.method in webauth.VIEW_METHODS else "/"
            response = _html(pages.signin_page(webauth.safe_next(back), refusal.text), 401)
        else:
            response = _html(pages.message_page(refusal.title, refusal.text,
                                                self.frame(request)), refusal.status)
        if refusal.status == 401:
            response.headers["WWW-Authenticate"] = (
                webauth.REALM_INVALID if refusal.invalid_token else webauth.REALM)
        if clear_cookie:  # removed from the file since: the browser forgets it
            self._forget(request, response)
        return response

    async def sign_in_page(self, request: web.Request) -> web.Response:
        return _html(pages.signin_page(webauth.safe_next(request.query.get("next")),
                                       webauth.NEEDS_TOKEN.text))

    async def sign_in(self, request: web.Request) -> web.Response:
        """The form's token becomes the cookie (HttpOnly, SameSite=Strict, Secure and
        ``__Host-`` under TLS) if it may see the dashboard; then back where the browser
        was. From another site it is refused as an action is (no signing a browser in
        with someone else's token)."""
        assert self.tokens is not None
        origin = _foreign_origin(request)
        if origin is not None:
            return _html(pages.message_page(
                "Refused", f"A sign-in from another site ({origin}) was refused.",
                self.frame(request)), 403)
        form = await request.post()
        raw_token, raw_next = form.get("token"), form.get("next")
        token = raw_token.strip() if isinstance(raw_token, str) else ""
        back = webauth.safe_next(raw_next if isinstance(raw_next, str) else None)
        decided = webauth.decide(self.tokens, token or None, acting=False)
        if isinstance(decided, webauth.Refusal):
            if decided.status == 401:
                response = _html(pages.signin_page(back, decided.text), 401)
                response.headers["WWW-Authenticate"] = (
                    webauth.REALM_INVALID if decided.invalid_token else webauth.REALM)
                return response
            return _html(pages.message_page(decided.title, decided.text,
                                            self.frame(request)), decided.status)
        response = web.Response(status=303, headers={"Location": back})
        response.set_cookie(webauth.cookie_name(request.secure), webauth.cookie_value(token),
                            path="/", httponly=True, samesite="Strict",
                            secure=request.secure or None)
        return response

    async def sign_out(self, request: web.Request) -> web.Response:
        response = web.Response(status=303, headers={"Location": webauth.SIGN_IN})
        self._forget(request, response)
        return response

    @staticmethod
    def _forget(request: web.Request, response: web.Response) -> None:
        response.del_cookie(webauth.cookie_name(request.secure), path="/",
                            httponly=True, samesite="Strict", secure=request.secure or None)

    @web.middleware
    async def _errors(self, request: web.Request, handler: Handler) -> web.StreamResponse:
        """A request the gateway refuses (not serving yet, an owner unreachable) is a
        page saying so, not a 500."""
        try:
            return await handler(request)
        except EventqError as error:
            text = error.reply.decode(errors="replace").strip() or type(error).__name__
            return _html(pages.message_page("Not available right now", text,
                                            self.frame(request)), 503)

    def application(self) -> web.Application:
        # Tokens first: nothing is read for a request that may not see it.
        app = web.Application(middlewares=[self._errors] if self.tokens is None
                              else [self._auth, self._errors])
        app.add_routes([
            web.get("/", self.queues_page),
            web.get("/queues/{name}", self.queue_page),
            web.get("/recurring", self.recurring_page),
            web.get("/jobs/{id}", self.job_page),
            web.get("/tags", self.tags_page),
            web.get("/tags/{tag}", self.tagged_page),
            web.get("/cluster", self.cluster_page),
            web.get("/metrics", self.metrics),
            web.get("/api/stats", self.api_stats),
            web.post("/queues/{name}/pause", self.pause),
            web.post("/queues/{name}/resume", self.resume),
            web.post("/jobs/{id}/delete", self.delete),
            web.post("/jobs/{id}/retry", self.retry),
            web.get("/failed", self.failed_page),
            web.get("/failed/{group}", self.failed_group_page),
            web.post("/failed/{group}/retry", self.retry_group),
        ])
        if self.tokens is not None:
            app.add_routes([
                web.get(webauth.SIGN_IN, self.sign_in_page),
                web.post(webauth.SIGN_IN, self.sign_in),
                web.post(webauth.SIGN_OUT, self.sign_out),
            ])
        return app


class WebServer:
    """Runs the dashboard's application on ``host:port`` (port 0: any free port), over
    TLS with ``tls`` (the gateway's context: its certificate, and client certificates
    required when it requires them)."""

    def __init__(self, dashboard: Dashboard, host: str, port: int,
                 sock: socket.socket | None = None, tls: ssl.SSLContext | None = None) -> None:
        self._dashboard = dashboard
        self.host, self.asked_port = host, port
        self._sock = sock  # bound before faust started (eventq/gateway/listeners.py), or None
        self._tls = tls
        self._runner: web.AppRunner | None = None
        self._sampler: asyncio.Task | None = None
        self.port: int | None = None

    async def start(self) -> None:
        self._runner = web.AppRunner(self._dashboard.application(), access_log=None,
                                     handle_signals=False)
        await self._runner.setup()
        site: web.BaseSite
        if self._sock is not None:
            site = web.SockSite(self._runner, self._sock, ssl_context=self._tls)
        else:
            site = web.TCPSite(self._runner, self.host, self.asked_port, reuse_address=True,
                               ssl_context=self._tls)
        await site.start()
        self.port = self._runner.addresses[0][1]
        self._sampler = asyncio.ensure_future(self._dashboard.sample_forever())

    async def stop(self) -> None:
        if self._sampler is not None:
            self._sampler.cancel()
        if self._runner is not None:
            await self._runner.cleanup()


def _foreign_origin(request: web.Request, null_is_foreign: bool = False) -> str | None:
    """The ``Origin`` of a POST from another site, or None (this site's, or none: a
    program or an old browser). Together with the SameSite=Strict cookie this keeps
    actions CSRF-safe: a cross-site form is sent without the cookie, and one from a
    sibling host of the same site (which would carry it) has a foreign Origin; with the
    cookie, ``null`` (a sandboxed or redirected form) is foreign too."""
    origin = request.headers.get("Origin")
    if origin is None or (origin == "null" and not null_is_foreign):
        return None
    return None if origin == f"{request.scheme}://{request.host}" else origin


def _html(text: str, status: int = 200) -> web.Response:
    return web.Response(text=text, status=status, content_type="text/html", charset="utf-8")


def _int(raw: str | None, default: int) -> int:
    try:
        return max(0, int(raw)) if raw is not None else default
    except ValueError:
        return default


def _uuid(raw: str) -> uuid.UUID | None:
    try:
        return uuid.UUID(raw)
    except ValueError:
        return None
