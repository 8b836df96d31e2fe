"""Tokens on the dashboard and /metrics (docs/security.md, "Where tokens and certificates come
from"; eventq/observe/webauth.py), over HTTP against the dashboard of a memory
process (tests/support/memory_processes.py) read through its gateway as the server's
is: every page, /metrics and each action per role (401 without or with an unknown
token, 403 for a prefixed token and for a non-admin action, 200/303 otherwise), the
sign-in cookie and its CSRF guards, SIGHUP's reload, and a dashboard without tokens as
before. tests/e2e/test_dashboard_tokens.py does it on a real server over TLS."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

import pytest
from aiohttp.test_utils import TestClient, TestServer

from eventq.gateway.server import GatewayStats
from eventq.observe import webauth
from eventq.observe.joblog import JobHistory
from eventq.observe.metrics import Sources
from eventq.observe.web import Dashboard
from eventq.protocol.access import TokenStore, parse_tokens
from support.memory_processes import Process, add, job_id, run

ADMIN, READER, WORKER, PRODUCER = "adm-W3b", "rd-W3b;=\"x", "wk-W3b", "pr-W3b"
SCOPED = "adm-scoped-W3b"
TOKENS = f"""\
{ADMIN} admin
{READER} reader
{WORKER} worker
{PRODUCER} producer
{SCOPED} admin,reader tenant-a.
"""
JOB, FAILED, GROUPED = job_id(0, 1), job_id(0, 2), job_id(1, 1)
PAGES = ("/", "/queues/mail", "/queues/mail?kind=failed", f"/jobs/{JOB}", "/tags",
         "/tags/blue", "/recurring", "/failed", "/failed/g1", "/cluster", "/no-such-page")
MACHINE = ("/metrics", "/api/stats")
ACTIONS = ("/queues/mail/pause", "/queues/mail/resume", f"/jobs/{FAILED}/retry",
           "/failed/g1/retry", f"/jobs/{JOB}/delete")  # delete last: it is gone then
ALL_TOKENS = (ADMIN, READER, WORKER, PRODUCER, SCOPED)


def dashboard_of(process: Process, tokens: TokenStore | None, actions: bool = True) -> Dashboard:
    engine = process.engine
    sources = Sources(index=engine.index, processor=engine.driver.processor,
                      gateway_stats=GatewayStats(lambda: 0), lag=dict, serving=lambda: True,
                      now_ms=lambda: engine.log.now_ms)
    return Dashboard(
        gateway=process.gateway, sources=sources, process="a:1", actions=actions,
        bootstrap="", commands_topic="eventq.commands", partitions=2,
        owner_of=lambda partition: None, members=lambda: ["a:1"],
        clock_ms=lambda: engine.log.now_ms, read_history=lambda job: JobHistory([], "-"),
        tokens=tokens)


async def workload() -> Process:
    p = Process()
    for failed, group in ((FAILED, ""), (GROUPED, " -group=g1")):
        await p.handle(add(failed, "mail", " -max-fails=1"))
        reply = await p.handle(b"lease mail 0\r\n")
        assert reply.split(b"\r\n")[1].split()[0] == str(failed).encode(), reply
        assert await p.handle(f"fail {failed} 4{group}\r\nboom\r\n".encode()) == b"+OK\r\n"
    await p.handle(add(JOB, "mail", " -tags=blue"))
    return p


Scenario = Callable[[TestClient], Awaitable[None]]


def browse(tokens: str | None, scenario: Scenario, actions: bool = True,
           store: TokenStore | None = None) -> None:
    async def main() -> None:
        p = await workload()
        chosen = store if store is not None else (
            None if tokens is None else TokenStore(parse_tokens(tokens)))
        async with TestClient(TestServer(dashboard_of(p, chosen, actions).application())) as client:
            await scenario(client)

    run(main())


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


async def status_of(client: TestClient, method: str, path: str, headers: dict) -> tuple[int, str]:
    response = await client.request(method, path, headers=headers, allow_redirects=False)
    return response.status, await response.text()


@pytest.mark.parametrize("path", PAGES + MACHINE)
def test_without_a_good_token_every_page_and_metrics_is_401_and_says_what_to_do(path) -> None:
    async def scenario(client: TestClient) -> None:
        for headers, challenge in (
                ({}, 'Bearer realm="eventq"'),
                (bearer("nope"), 'Bearer realm="eventq", error="invalid_token"'),
                ({"Authorization": f"Basic {ADMIN}"}, 'Bearer realm="eventq"'),
                ({"Cookie": f"{webauth.COOKIE}={webauth.cookie_value('nope')}"},
                 'Bearer realm="eventq", error="invalid_token"')):
            response = await client.get(path, headers=headers, allow_redirects=False)
            text = await response.text()
            assert response.status == 401, (headers, text)
            assert response.headers["WWW-Authenticate"] == challenge
            assert "Authorization: Bearer" in text and "nope" not in text
            assert ADMIN not in text and "<table" not in text and "a:1" not in text
            if path in MACHINE:
                assert response.content_type == "text/plain"
                assert "authorization: {credentials:" in text  # Prometheus' way
            else:
                assert 'action="/signin"' in text  # a browser is offered the form
        response = await client.head(path)
        assert response.status == 401

    browse(TOKENS, scenario)


@pytest.mark.parametrize("token", [READER, WORKER, PRODUCER, ADMIN])
def test_any_role_sees_every_page_and_metrics(token) -> None:
    async def scenario(client: TestClient) -> None:
        for path in PAGES + MACHINE:
            status, text = await status_of(client, "GET", path, bearer(token))
            assert status == (404 if path == "/no-such-page" else 200), (path, text)
            assert token not in text
        _, page = await status_of(client, "GET", "/queues/mail", bearer(token))
        role = {READER: "reader", WORKER: "worker", PRODUCER: "producer", ADMIN: "admin"}
        assert f"token: {role[token]}" in page and 'action="/signout"' in page
        # the buttons are shown to whom they work for
        assert ('name="pause"' in page) == (token == ADMIN)
        if token != ADMIN:
            assert "read-only for this token (acting needs admin)" in page
        _, metrics = await status_of(client, "GET", "/metrics", bearer(token))
        assert 'eventq_queue_jobs{queue="mail",state="failed"} 2.0' in metrics

    browse(TOKENS, scenario)


def test_a_token_with_a_prefix_is_refused_everywhere() -> None:
    async def scenario(client: TestClient) -> None:
        for method, path in [("GET", p) for p in PAGES + MACHINE] + [
                ("POST", p) for p in ACTIONS]:
            status, text = await status_of(client, method, path, bearer(SCOPED))
            assert status == 403, (method, path, text)
            assert "prefix cannot use the dashboard or /metrics" in text
            assert SCOPED not in text and "tenant-a." not in text

    browse(TOKENS, scenario)


def test_each_action_needs_an_admin_token() -> None:
    async def scenario(client: TestClient) -> None:
        for path in ACTIONS:
            for headers, expected in (({}, 401), (bearer("nope"), 401), (bearer(READER), 403),
                                      (bearer(WORKER), 403), (bearer(PRODUCER), 403)):
                status, text = await status_of(client, "POST", path, headers)
                assert status == expected, (path, headers, text)
                if expected == 403:
                    assert "needs an admin token" in text
            status, text = await status_of(client, "POST", path, bearer(ADMIN))
            assert status == 303, (path, text)
        # the actions took effect (and only the admin's)
        gone = await client.get(f"/jobs/{JOB}", headers=bearer(ADMIN))
        assert gone.status == 404
        retried = await client.get(f"/jobs/{FAILED}", headers=bearer(ADMIN))
        assert ">new<" in await retried.text()

    browse(TOKENS, scenario)


def test_a_read_only_dashboard_with_tokens_still_refuses_actions() -> None:
    async def scenario(client: TestClient) -> None:
        status, text = await status_of(client, "POST", "/queues/mail/pause", bearer(ADMIN))
        assert status == 403 and "--http-actions" in text
        status, _ = await status_of(client, "POST", "/queues/mail/pause", bearer(READER))
        assert status == 403

    browse(TOKENS, scenario, actions=False)


def cookie_header(response, name: str = webauth.COOKIE) -> str:
    """The Set-Cookie of ``name`` (``response``: a response or its headers)."""
    headers = getattr(response, "headers", response)
    (found,) = [v for v in headers.getall("Set-Cookie") if v.startswith(name + "=")]
    return found


def test_signing_in_sets_a_cookie_that_is_the_token_then_signing_out_forgets_it() -> None:
    async def scenario(client: TestClient) -> None:
        status, page = await status_of(client, "GET", "/queues/mail?kind=failed", {})
        assert status == 401 and 'name="next" value="/queues/mail?kind=failed"' in page
        same = {"Origin": str(client.make_url("")).rstrip("/")}
        response = await client.post("/signin", data={"token": ADMIN, "next":
                                                      "/queues/mail?kind=failed"},
                                     headers=same, allow_redirects=False)
        assert response.status == 303
        assert response.headers["Location"] == "/queues/mail?kind=failed"
        cookie = cookie_header(response)
        attributes = {part.strip().split("=")[0].lower() for part in cookie.split(";")[1:]}
        assert {"httponly", "samesite", "path"} <= attributes and "secure" not in attributes
        assert "SameSite=Strict" in cookie and ADMIN not in cookie  # encoded, not echoed
        # the client keeps the cookie: the pages open, and an action from this site works
        page = await client.get("/queues/mail")
        assert page.status == 200 and "token: admin" in await page.text()
        acted = await client.post("/queues/mail/pause", headers=same, allow_redirects=False)
        assert acted.status == 303
        # with the cookie, a POST from another site or from no origin at all is refused
        for origin in ("http://evil.example", "null"):
            refused = await client.post("/queues/mail/resume", headers={"Origin": origin},
                                        allow_redirects=False)
            assert refused.status == 403, origin
        out = await client.post("/signout", allow_redirects=False)
        assert out.status == 303 and out.headers["Location"] == "/signin"
        assert "Max-Age=0" in cookie_header(out) or "expires" in cookie_header(out).lower()
        assert (await client.get("/queues/mail")).status == 401

    browse(TOKENS, scenario)


def test_signing_in_with_a_bad_token_or_from_another_site_is_refused() -> None:
    async def scenario(client: TestClient) -> None:
        for token, expected, said in (("nope", 401, "not one of the server"),
                                      ("", 401, "need a token"),
                                      (SCOPED, 403, "prefix cannot use the dashboard")):
            response = await client.post("/signin", data={"token": token, "next": "/"},
                                         allow_redirects=False)
            text = await response.text()
            assert response.status == expected and said in text, text
            assert not response.headers.getall("Set-Cookie", [])
            assert not token or token not in text
        response = await client.post("/signin", data={"token": READER, "next": "/"},
                                     headers={"Origin": "http://evil.example"},
                                     allow_redirects=False)
        assert response.status == 403 and not response.headers.getall("Set-Cookie", [])
        # the form's own page, and no open redirect after signing in
        status, page = await status_of(client, "GET", "/signin?next=/failed", {})
        assert status == 200 and 'value="/failed"' in page
        for elsewhere in ("//evil.example/x", "/\\evil.example", "https://evil.example",
                          "/signout"):
            response = await client.post("/signin", data={"token": READER, "next": elsewhere},
                                         allow_redirects=False)
            assert response.status == 303 and response.headers["Location"] == "/", elsewhere

    browse(TOKENS, scenario)


def test_a_token_removed_by_a_reload_stops_working_and_its_cookie_is_cleared() -> None:
    store = TokenStore(parse_tokens(TOKENS))

    async def scenario(client: TestClient) -> None:
        response = await client.post("/signin", data={"token": READER, "next": "/"},
                                     allow_redirects=False)
        assert response.status == 303
        assert (await client.get("/")).status == 200
        assert (await client.get("/metrics", headers=bearer(WORKER))).status == 200
        store.replace(parse_tokens(f"{ADMIN} admin\n"))  # what SIGHUP does
        response = await client.get("/", allow_redirects=False)
        assert response.status == 401
        assert "Max-Age=0" in cookie_header(response)
        assert (await client.get("/metrics", headers=bearer(WORKER))).status == 401
        assert (await client.get("/metrics", headers=bearer(ADMIN))).status == 200

    browse(TOKENS, scenario, store=store)


def test_the_header_wins_over_the_cookie() -> None:
    async def scenario(client: TestClient) -> None:
        await client.post("/signin", data={"token": ADMIN, "next": "/"}, allow_redirects=False)
        status, _ = await status_of(client, "POST", "/queues/mail/pause", bearer(READER))
        assert status == 403

    browse(TOKENS, scenario)


def test_without_tokens_the_dashboard_is_as_before() -> None:
    async def scenario(client: TestClient) -> None:
        for path in PAGES + MACHINE:
            status, _ = await status_of(client, "GET", path, {})
            assert status == (404 if path == "/no-such-page" else 200), path
        _, page = await status_of(client, "GET", "/queues/mail", {})
        assert "Sign out" not in page and 'name="pause"' in page
        status, _ = await status_of(client, "POST", "/queues/mail/pause", {})
        assert status == 303
        assert (await client.get("/signin")).status == 404  # nothing to sign in to

    browse(None, scenario)


@pytest.mark.parametrize(("header", "token"), [
    ("Bearer abc", "abc"), ("bearer abc", "abc"), ("BEARER  abc ", "abc"),
    ("Bearer", None), ("Bearer a b", None), ("Basic abc", None), ("", None), (None, None),
])
def test_bearer_header(header, token) -> None:
    assert webauth.bearer_token(header) == token


@pytest.mark.parametrize("token", ["a", 'x;y,"z\\', "~!@#$%^&*()", "=" * 7])
def test_a_cookie_holds_any_token(token) -> None:
    value = webauth.cookie_value(token)
    assert all(c.isalnum() or c in "-_" for c in value)
    assert webauth.token_of_cookie(value) == token


def test_a_cookie_that_is_no_base64_is_no_token() -> None:
    assert webauth.token_of_cookie("!!!") is None
    assert webauth.presented(None, "") == (None, False)



# --- over TLS: the gateway's context (eventq/gateway/tls.py) on the dashboard's port -------------


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    from tools.tls_files import make_tls_files

    return make_tls_files(tmp_path_factory.mktemp("web-tls"))


def serve_tls(files, scenario: Callable[[int], Awaitable[None]], client_ca: str = "") -> None:
    """The dashboard (with tokens) on a real port over TLS, as the server runs it."""
    from eventq.gateway.tls import server_context
    from eventq.observe.web import WebServer
    from eventq.settings import Settings

    settings = Settings(tls_cert=files.pem("server"), tls_key=files.key("server"),
                        tls_client_ca=client_ca)

    async def main() -> None:
        p = await workload()
        server = WebServer(dashboard_of(p, TokenStore(parse_tokens(TOKENS))), "127.0.0.1", 0,
                           tls=server_context(settings))
        await server.start()
        try:
            assert server.port is not None
            await scenario(server.port)
        finally:
            await server.stop()

    run(main())


async def fetch(port: int, path: str, tls, headers: dict | None = None, data: dict | None = None,
                scheme: str = "https"):
    """(status, headers, text) of a request in a session of its own."""
    import aiohttp

    async with aiohttp.ClientSession() as session:
        async with session.request("POST" if data is not None else "GET",
                                   f"{scheme}://127.0.0.1:{port}{path}", ssl=tls,
                                   headers=headers or {}, data=data, allow_redirects=False,
                                   timeout=aiohttp.ClientTimeout(total=10)) as response:
            return response.status, response.headers, await response.text()


def test_https_serves_a_client_that_trusts_the_ca_and_takes_tokens(files) -> None:
    import ssl

    import aiohttp

    from eventq.client import tls_context

    trusted = tls_context(files.pem("ca"))

    async def scenario(port: int) -> None:
        status, _, text = await fetch(port, "/metrics", trusted, bearer(READER))
        assert status == 200 and "eventq_queue_jobs" in text
        status, headers, _ = await fetch(port, "/metrics", trusted)
        assert status == 401 and headers["WWW-Authenticate"] == 'Bearer realm="eventq"'
        status, _, _ = await fetch(port, "/queues/mail/pause", trusted, bearer(READER), data={})
        assert status == 403
        status, _, _ = await fetch(port, "/queues/mail/pause", trusted, bearer(ADMIN), data={})
        assert status == 303
        # signing in over TLS: the cookie is Secure and __Host- (the browser checks both)
        status, headers, _ = await fetch(port, "/signin", trusted, data={"token": ADMIN})
        assert status == 303
        cookie = cookie_header(headers, webauth.SECURE_COOKIE)
        assert "Secure" in cookie and "HttpOnly" in cookie and "SameSite=Strict" in cookie
        assert "Path=/" in cookie and "Domain" not in cookie
        value = cookie.split(";")[0].split("=", 1)[1]
        status, _, _ = await fetch(port, "/", trusted,
                                   {"Cookie": f"{webauth.SECURE_COOKIE}={value}"})
        assert status == 200
        # the plain-HTTP cookie's name means nothing over TLS
        status, _, _ = await fetch(port, "/", trusted, {"Cookie": f"{webauth.COOKIE}={value}"})
        assert status == 401
        # a client that trusts another CA refuses the server; a plain client gets nothing
        with pytest.raises(aiohttp.ClientConnectorCertificateError):
            await fetch(port, "/metrics", tls_context(files.pem("other-ca")), bearer(READER))
        with pytest.raises((aiohttp.ClientError, ssl.SSLError)):
            await fetch(port, "/metrics", None, bearer(READER), scheme="http")

    serve_tls(files, scenario)


def test_with_a_client_ca_the_dashboard_requires_client_certificates(files, caplog) -> None:
    import aiohttp

    from eventq.client import tls_context

    async def scenario(port: int) -> None:
        with_cert = tls_context(files.pem("ca"), files.pem("client"), files.key("client"))
        status, _, _ = await fetch(port, "/metrics", with_cert, bearer(READER))
        assert status == 200
        for certificate in (None, "stranger"):
            tls = tls_context(files.pem("ca"), *(() if certificate is None else
                                                 (files.pem(certificate),
                                                  files.key(certificate))))
            with pytest.raises(aiohttp.ClientError):
                await fetch(port, "/metrics", tls, bearer(READER))

    serve_tls(files, scenario, client_ca=files.pem("ca"))
    refusals = [r.getMessage() for r in caplog.records if "refused a TLS connection" in
                r.getMessage()]
    assert refusals, "the refused handshakes are said in the log"
