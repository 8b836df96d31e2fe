"""The dashboard and /metrics of a real server with tokens and TLS (docs/security.md, "Where tokens
and certificates come from"): HTTPS with the gateway's certificate (a
client with another CA refuses it, a plain client gets nothing), 401/403/200 per role
for the pages, /metrics and each action, a sign-in in a real Chromium whose cookie
works, SIGHUP's reload applied to the web, and no token in any line of the log.
tests/observe/test_dashboard_tokens.py goes through every case in-process."""

from __future__ import annotations

import os
import signal
import ssl
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from eventq.client import Client, NotFound, tls_context
from support.browser import Browser, chromium_path
from tools.tls_files import make_tls_files

pytestmark = [pytest.mark.kafka]

ADMIN, READER, WORKER, PRODUCER = "adm-Dt4", "rd-Dt4", "wk-Dt4", "pr-Dt4"
SCOPED = "scoped-Dt4"
TOKENS = f"{ADMIN} admin\n{READER} reader\n{WORKER} worker\n{PRODUCER} producer\n" \
         f"{SCOPED} admin tenant.\n"
ALL = (ADMIN, READER, WORKER, PRODUCER, SCOPED)


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    return make_tls_files(tmp_path_factory.mktemp("tls"))


@pytest.fixture(scope="module")
def tokens_file(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("tokens") / "tokens"
    path.write_text(TOKENS)
    return path


@pytest.fixture(scope="module")
def server(kafka_bootstrap, tmp_path_factory, files, tokens_file):
    from tools.servers import ServerProcess

    process = ServerProcess(kafka_bootstrap, f"m{os.getpid()}-webtok",
                            tmp_path_factory.mktemp("server"), http_actions="true",
                            tokens_file=str(tokens_file), tls_cert=files.pem("server"),
                            tls_key=files.key("server"))
    process.ready_auth = b"auth %s\r\n" % ADMIN.encode()
    process.ready_tls = tls_context(files.pem("ca"))
    process.create_topics()
    process.start()
    yield process
    code = process.stop()
    log = process.log_path.read_text(errors="replace")
    for token in ALL:
        assert token not in log, f"a token is in the server's log:\n{process.log_tail()}"
    assert code == 0, process.log_tail()


def client(server, files, token: str = ADMIN) -> Client:
    return Client("127.0.0.1", server.port, tls=tls_context(files.pem("ca")), token=token)


class NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args, **kwargs):
        return None  # a 303 is the answer looked at


def request(url: str, tls: ssl.SSLContext | None, token: str | None = None,
            data: bytes | None = None, headers: dict | None = None):
    """(status, headers, body) of one request over ``tls``, redirects not followed."""
    headers = dict(headers or {})
    if token is not None:
        headers["Authorization"] = f"Bearer {token}"
    opener = urllib.request.build_opener(urllib.request.HTTPSHandler(context=tls), NoRedirect)
    try:
        with opener.open(urllib.request.Request(url, data=data, headers=headers),
                         timeout=30) as response:
            return response.status, response.headers, response.read().decode()
    except urllib.error.HTTPError as error:
        return error.code, error.headers, error.read().decode()


def gone(c: Client, job) -> bool:
    try:
        c.inspect_job(job)
    except NotFound:
        return True
    return False


def test_the_dashboard_speaks_https_with_the_gateways_certificate(server, files):
    base = server.http_url()
    assert base.startswith("https://")
    status, _, text = request(base + "metrics", tls_context(files.pem("ca")), READER)
    assert status == 200 and "eventq_serving 1.0" in text
    with pytest.raises(urllib.error.URLError) as refused:  # a client trusting another CA
        request(base + "metrics", tls_context(files.pem("other-ca")), READER)
    assert isinstance(refused.value.reason, ssl.SSLCertVerificationError)
    plain = base.replace("https://", "http://")
    with pytest.raises((urllib.error.URLError, ConnectionError, OSError)):
        request(plain + "metrics", None, READER)


def test_pages_and_metrics_need_a_token_of_any_role_without_a_prefix(server, files):
    tls = tls_context(files.pem("ca"))
    base = server.http_url()
    with client(server, files) as c:
        job = c.add("webtok", b"x")
    for path in ("", "queues/webtok", f"jobs/{job}", "tags", "recurring", "failed",
                 "cluster", "metrics", "api/stats"):
        status, headers, text = request(base + path, tls)
        assert status == 401 and headers["WWW-Authenticate"] == 'Bearer realm="eventq"', path
        assert "Authorization: Bearer" in text and "webtok" not in text.split("next")[0]
        status, headers, _ = request(base + path, tls, "not-a-token")
        assert status == 401 and "invalid_token" in headers["WWW-Authenticate"], path
        status, _, text = request(base + path, tls, SCOPED)
        assert status == 403 and "prefix" in text, path
        for token in (READER, WORKER, PRODUCER, ADMIN):
            status, _, text = request(base + path, tls, token)
            assert status == 200, (path, token, text[:300])
            assert token not in text


def test_each_action_needs_an_admin_token(server, files):
    tls = tls_context(files.pem("ca"))
    base = server.http_url()
    with client(server, files) as c:
        job = c.add("webtok-act", b"x")
        failed = c.add("webtok-act", b"y", max_fails=1)
        grouped = c.add("webtok-act", b"z", max_fails=1)
        assert c.lease("webtok-act", 1000).id == job
        c.complete(job, b"done")
        assert c.lease("webtok-act", 1000).id == failed
        c.fail(failed, b"boom")
        assert c.lease("webtok-act", 1000).id == grouped
        c.fail(grouped, b"boom", group="webtok-group")
        actions = [("queues/webtok-act/pause", lambda: c.inspect_queue("webtok-act").paused),
                   ("queues/webtok-act/resume",
                    lambda: not c.inspect_queue("webtok-act").paused),
                   (f"jobs/{failed}/retry", lambda: c.inspect_job(failed).state == "new"),
                   ("failed/webtok-group/retry",
                    lambda: c.inspect_job(grouped).state == "new"),
                   (f"jobs/{job}/delete", lambda: gone(c, job))]
        for path, done in actions:
            for token, expected in ((None, 401), ("not-a-token", 401), (READER, 403),
                                    (WORKER, 403), (PRODUCER, 403), (SCOPED, 403)):
                status, _, text = request(base + path, tls, token, data=b"")
                assert status == expected, (path, token, text[:300])
            assert not done(), path  # nothing happened
            status, headers, _ = request(base + path, tls, ADMIN, data=b"")
            assert status == 303, path
            assert done(), path


def test_a_browser_signs_in_acts_and_signs_out(server, files):
    if chromium_path() is None:
        if os.environ.get("CI"):
            pytest.fail("chromium is missing in CI: `make browser` should have installed it")
        pytest.skip("chromium is not installed (make browser)")
    base = server.http_url()
    with client(server, files) as c:
        c.add("webtok-browser", b"x")
        with Browser.open("--ignore-certificate-errors") as browser:  # the tests' own CA
            browser.goto(base + "queues/webtok-browser")
            assert browser.evaluate("document.title").startswith("Sign in")
            browser.evaluate(f"document.querySelector('input[name=token]').value = {READER!r}")
            browser.click("button[name=signin]")
            assert browser.url() == base + "queues/webtok-browser"  # back where it was
            assert "token: reader" in browser.text("header")
            assert browser.evaluate("document.cookie") == ""  # HttpOnly
            assert browser.evaluate("document.querySelector('button[name=pause]')") is None
            browser.click("button[name=signout]")
            assert browser.evaluate("document.title").startswith("Sign in")

            browser.goto(base + "queues/webtok-browser")
            browser.evaluate(f"document.querySelector('input[name=token]').value = {ADMIN!r}")
            browser.click("button[name=signin]")
            browser.click("button[name=pause]")
            assert "Queue paused" in browser.text("#flash")
            assert c.inspect_queue("webtok-browser").paused
            browser.goto(base + "metrics")  # the cookie opens /metrics too
            assert "eventq_serving" in browser.text()


def test_sighup_reloads_the_tokens_of_the_web_too(server, files, tokens_file):
    tls = tls_context(files.pem("ca"))
    base = server.http_url()
    assert request(base + "metrics", tls, WORKER)[0] == 200
    tokens_file.write_text(TOKENS.replace(f"{WORKER} worker\n", ""))
    try:
        server.process.send_signal(signal.SIGHUP)
        deadline = time.monotonic() + 10
        while request(base + "metrics", tls, WORKER)[0] != 401:
            assert time.monotonic() < deadline, server.log_tail()
            time.sleep(0.1)
        assert request(base + "metrics", tls, READER)[0] == 200
    finally:
        tokens_file.write_text(TOKENS)
        server.process.send_signal(signal.SIGHUP)
        deadline = time.monotonic() + 10
        while request(base + "metrics", tls, WORKER)[0] != 200:
            assert time.monotonic() < deadline, server.log_tail()
            time.sleep(0.1)
