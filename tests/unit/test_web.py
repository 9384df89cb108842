"""The dashboard's pure parts, without a server: access rights, the cross-site check,
the security headers, the Host check and the token (through the ASGI guard), wrong
tokens slowed down, how values are shown, requests refused before anything is read
(through the app, on no database at all), ``fdbrecipes web`` refusing to serve
beyond this machine without a token."""

from __future__ import annotations

import asyncio
import base64
import logging
from typing import Any, Dict, List, Optional, Tuple

import pytest

from fdbrecipes.web import ACTIONS, FULL, READ_ONLY, Access
from fdbrecipes.web.access import access_of
from fdbrecipes.web.guard import Guard, cross_site, foreign_host, security_headers, split_host
from fdbrecipes.web.logins import Logins
from fdbrecipes.web.show import (
    TOO_DEEP,
    group_from_hex,
    group_hex,
    id_from_hex,
    shown,
    shown_pretty,
)

#: A token long enough.
TOKEN = "s3cret-s3cret-s3cret"


def test_access_rights() -> None:
    assert READ_ONLY.read_only and not READ_ONLY.allows("purge")
    assert all(FULL.allows(a) for a in ACTIONS) and not FULL.read_only
    some = Access.allowing(["requeue", "quiet"], who="ann")
    assert some.allows("quiet") and not some.allows("stop") and some.who == "ann"
    with pytest.raises(ValueError, match="unknown"):
        Access.allowing(["drop-table"])
    with pytest.raises(TypeError, match="frozenset"):
        Access(["purge"])  # type: ignore[arg-type]
    assert access_of(FULL, None) is FULL
    assert access_of(lambda request: some, None) is some
    assert access_of(lambda request: None, None) is None  # denied
    with pytest.raises(TypeError, match="not an Access"):
        access_of(lambda request: "full", None)


def h(**headers: str) -> List[Any]:
    return [(k.replace("_", "-").encode(), v.encode()) for k, v in headers.items()]


def test_cross_site_check() -> None:
    assert cross_site("GET", h(sec_fetch_site="cross-site"), "http") is None
    assert cross_site("POST", h(sec_fetch_site="same-origin"), "http") is None
    assert "Sec-Fetch-Site: cross-site" in str(cross_site("POST", h(sec_fetch_site="cross-site"),
                                                          "http"))
    assert cross_site("POST", h(sec_fetch_site="same-site"), "http") is not None
    assert cross_site("POST", h(sec_fetch_site="none"), "http") is not None
    assert cross_site("POST", h(origin="http://a:8000", host="a:8000"), "http") is None
    assert cross_site("POST", h(origin="https://a:8000", host="a:8000"), "http") is not None
    assert cross_site("DELETE", h(origin="null", host="a"), "http") is not None
    assert cross_site("POST", h(origin="https://admin.example", host="10.0.0.2"), "http",
                      ["https://admin.example"]) is None
    assert cross_site("POST", h(host="a"), "http") is None  # no browser sent it


def test_security_headers() -> None:
    headers = dict(security_headers("abc"))
    csp = headers[b"content-security-policy"].decode()
    assert "default-src 'none'" in csp and "'nonce-abc'" in csp and "unsafe" not in csp
    assert headers[b"x-content-type-options"] == b"nosniff"
    assert headers[b"cache-control"] == b"no-store"


def run_guard(guard: Guard, method: str = "GET", client: str = "10.0.0.9",
              server: Optional[Tuple[str, int]] = ("127.0.0.1", 10096),
              **headers: str) -> Dict[str, Any]:
    """Call ``guard`` once (a request to ``server`` from ``client``, its Host the
    server's unless given); the status, headers and body it sent."""
    sent: List[Dict[str, Any]] = []

    async def receive() -> Dict[str, Any]:
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message: Any) -> None:
        sent.append(dict(message))

    if server is not None:
        headers.setdefault("host", f"{server[0]}:{server[1]}")
    scope = {"type": "http", "method": method, "scheme": "http", "headers": h(**headers),
             "path": "/", "server": server, "client": (client, 50000)}
    asyncio.run(guard(scope, receive, send))
    return {"status": sent[0]["status"], "headers": dict(sent[0]["headers"]),
            "body": b"".join(m.get("body", b"") for m in sent[1:])}


async def hello(scope: Any, receive: Any, send: Any) -> None:
    nonce = scope["state"]["csp_nonce"].encode()
    user = scope["state"].get("user", "-").encode()
    await send({"type": "http.response.start", "status": 200,
                "headers": [(b"cache-control", b"max-age=600")]})
    await send({"type": "http.response.body", "body": b"hello " + nonce + b" " + user})


def test_guard_headers_and_refusals() -> None:
    answer = run_guard(Guard(hello))
    assert answer["status"] == 200 and answer["headers"][b"cache-control"] == b"no-store"
    nonce = answer["body"].split()[1].decode()
    assert f"'nonce-{nonce}'" in answer["headers"][b"content-security-policy"].decode()
    refused = run_guard(Guard(hello), "POST", origin="https://evil.example")
    assert refused["status"] == 403 and b"hello" not in refused["body"]
    assert refused["headers"][b"x-content-type-options"] == b"nosniff"


def basic(password: str, user: str = "ops") -> str:
    return "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()


def test_guard_token(caplog: pytest.LogCaptureFixture) -> None:
    guard = Guard(hello, token=TOKEN)
    assert run_guard(guard)["status"] == 401
    assert b"Basic" in run_guard(guard)["headers"][b"www-authenticate"]
    with caplog.at_level(logging.WARNING, logger="fdbrecipes.web.audit"):
        assert run_guard(guard, authorization=basic("wrong", "mallory"))["status"] == 401
    assert "status=401 why='wrong token' who='mallory' client='10.0.0.9'" in caplog.text
    assert run_guard(guard, authorization="Basic %%%")["status"] == 401
    assert run_guard(guard, authorization=basic(TOKEN))["status"] == 200
    assert run_guard(guard, authorization=basic(TOKEN, "alice"))["body"].endswith(b" alice")


def test_a_non_ascii_authorization_is_a_wrong_token() -> None:
    guard = Guard(hello, token=TOKEN)
    sent: List[Dict[str, Any]] = []

    async def receive() -> Dict[str, Any]:
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message: Any) -> None:
        sent.append(dict(message))

    for raw in (b"Basic \xff\xfe", b"Basic \xc3\xa9t\xc3\xa9", b"basic " + "é".encode()):
        sent.clear()
        scope = {"type": "http", "method": "GET", "scheme": "http", "path": "/",
                 "headers": [(b"host", b"127.0.0.1:10096"), (b"authorization", raw)],
                 "server": ("127.0.0.1", 10096), "client": ("10.0.0.9", 1)}
        asyncio.run(guard(scope, receive, send))  # raised ValueError (500) before
        assert sent[0]["status"] == 401


def test_tokens_are_at_least_16_characters() -> None:
    from fdbrecipes.web import create_app

    for short in ("", "x", "s3cret", "f" * 15):
        with pytest.raises(ValueError, match="token: at least 16 characters"):
            Guard(hello, token=short)
        with pytest.raises(ValueError, match="token: at least 16"):
            create_app(None, {}, token=short)
    with pytest.raises(TypeError, match="token must be a str"):
        Guard(hello, token=b"0123456789abcdef0")  # type: ignore[arg-type]
    Guard(hello, token="f" * 16)


def test_wrong_tokens_are_slowed_down(caplog: pytest.LogCaptureFixture) -> None:
    now = [0.0]

    def clock() -> float:
        return now[0]

    guard = Guard(hello, token=TOKEN, logins=Logins(burst=3, refill=2.0, clock=clock))
    with caplog.at_level(logging.WARNING, logger="fdbrecipes.web.audit"):
        for _ in range(3):
            assert run_guard(guard, authorization=basic("guess"))["status"] == 401
        for _ in range(5):  # the right token gets no answer either meanwhile
            limited = run_guard(guard, authorization=basic(TOKEN))
            assert limited["status"] == 429 and limited["headers"][b"retry-after"] == b"2"
        assert run_guard(guard, "GET", client="10.0.0.8",
                         authorization=basic(TOKEN))["status"] == 200  # another address
        now[0] += 2.0
        assert run_guard(guard, authorization=basic(TOKEN))["status"] == 200
        assert run_guard(guard, authorization=basic("guess"))["status"] == 401
        assert run_guard(guard, authorization=basic(TOKEN))["status"] == 429
    assert caplog.text.count("status=401") == 4
    assert caplog.text.count("status=429") == 2  # once each time it became limited
    assert run_guard(guard)["status"] == 429  # no credentials: limited all the same


def test_logins_forget_full_buckets_and_stay_bounded() -> None:
    now = [0.0]

    def clock() -> float:
        return now[0]

    logins = Logins(burst=2, refill=1.0, most=4, clock=clock)
    for address in ("a", "b", "c", "d"):
        logins.failed(address)
    assert logins.wait("a") is None and len(logins.buckets) == 4
    logins.failed("a")
    assert logins.wait("a") == pytest.approx(1.0)
    now[0] = 5.0
    logins.failed("e")  # room made: the full buckets forgotten
    assert set(logins.buckets) == {"e"} and logins.wait("a") is None


def test_a_foreign_host_is_refused(caplog: pytest.LogCaptureFixture) -> None:
    server = ("127.0.0.1", 18096)
    with caplog.at_level(logging.WARNING, logger="fdbrecipes.web.audit"):
        rebound = run_guard(Guard(hello), "POST", server=server, host="evil.example:18096",
                            origin="http://evil.example:18096", sec_fetch_site="same-origin")
    assert rebound["status"] == 421 and b"hello" not in rebound["body"]
    assert rebound["headers"][b"x-frame-options"] == b"DENY"
    assert "status=421" in caplog.text and "evil.example:18096" in caplog.text
    assert run_guard(Guard(hello), server=server, host="evil.example")["status"] == 421
    for host in ("127.0.0.1:18096", "localhost:18096", "LOCALHOST:18096", "[::1]:18096"):
        assert run_guard(Guard(hello), server=server, host=host)["status"] == 200, host
    for host in ("localhost:8080", "localhost.:18096", "127.0.0.2:18096", "localhost",
                 "[::2]:18096", "127.0.0.1:18096.evil", ""):
        assert run_guard(Guard(hello), server=server, host=host)["status"] == 421, host
    lan = ("192.168.1.5", 10096)  # bound to 0.0.0.0, reached on this address
    assert run_guard(Guard(hello), server=lan)["status"] == 200
    assert run_guard(Guard(hello), server=("::1", 80), host="[::1]")["status"] == 200
    proxied = Guard(hello, allowed_hosts=["ops.example.com", "other.example:8443"])
    assert run_guard(proxied, host="ops.example.com")["status"] == 200
    assert run_guard(proxied, host="ops.example.com:443")["status"] == 200
    assert run_guard(proxied, host="other.example:8443")["status"] == 200
    assert run_guard(proxied, host="other.example")["status"] == 421
    assert run_guard(Guard(hello, allowed_hosts=["*"]), host="anything")["status"] == 200
    assert run_guard(Guard(hello), server=None, host="localhost:1234")["status"] == 200
    assert foreign_host([], "http", server) == "no Host header"
    assert split_host("[::1]:80") == ("[::1]", 80) and split_host("A.example") == (
        "a.example", None)


def test_a_cross_site_subresource_get_is_refused() -> None:
    assert cross_site("GET", h(sec_fetch_site="cross-site", sec_fetch_mode="no-cors"),
                      "http") is not None  # <img src>
    assert cross_site("GET", h(sec_fetch_site="cross-site", sec_fetch_mode="cors"),
                      "http") is not None  # fetch()
    assert cross_site("GET", h(sec_fetch_site="cross-site", sec_fetch_mode="navigate"),
                      "http") is None  # a link followed
    assert cross_site("GET", h(sec_fetch_site="same-origin", sec_fetch_mode="no-cors"),
                      "http") is None


def test_values_shown_safely() -> None:
    assert shown(b"\xff\xfe<") == r"b'\xff\xfe<'"
    huge = shown("x" * 100_000)
    assert len(huge) < 300 and "99,802 more characters" in huge
    assert "more characters" in shown_pretty(tuple(range(100_000)), cap=1000)
    for group in ("acme", b"\x00\xff", "<b>"):
        assert group_from_hex(group_hex(group)) == group
    for bad in ("zz", "", group_hex(5), group_hex(("a", "b"))[:-2]):
        with pytest.raises(ValueError, match="g: not a group"):
            group_from_hex(bad)
    assert id_from_hex("6a6f62") == b"job"
    for bad in ("", "xy", "00" * 1001):
        with pytest.raises(ValueError, match="id:"):
            id_from_hex(bad)


def test_the_command_needs_a_token_beyond_this_machine(
        capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    from fdbrecipes.admin.places import UsageError
    from fdbrecipes.cli import main
    from fdbrecipes.web.command import check_bind

    monkeypatch.delenv("FDBRECIPES_WEB_TOKEN", raising=False)
    for beyond in (["--host", "0.0.0.0"], ["--host", "0.0.0.0", "--read-only"],
                   ["--root-path", "/ops"], ["--trusted-origin", "https://ops.example.com"]):
        assert main(["web", "--directory", "app", *beyond]) == 2, beyond
        assert "refusing" in capsys.readouterr().err
    for host in ("127.0.0.1", "::1", "localhost", "127.0.0.2"):
        check_bind(host, None)
    for host in ("0.0.0.0", "10.1.2.3", "::", "localhost.", ""):
        with pytest.raises(UsageError, match="without a token"):
            check_bind(host, None)
        check_bind(host, None, insecure=True)  # read-only to anyone: said out loud
        check_bind(host, TOKEN)
    with pytest.raises(UsageError, match="--root-path"):
        check_bind("127.0.0.1", None, root_path="/ops")
    check_bind("127.0.0.1", TOKEN, root_path="/ops", trusted_origins=["https://a.example"])
    with pytest.raises(UsageError, match="one or the other"):
        check_bind("127.0.0.1", TOKEN, insecure=True)


def test_the_command_refuses_a_short_token(capsys: pytest.CaptureFixture[str],
                                           monkeypatch: pytest.MonkeyPatch,
                                           tmp_path: Any) -> None:
    from fdbrecipes.cli import main

    monkeypatch.setenv("FDBRECIPES_WEB_TOKEN", "x")
    assert main(["web", "--directory", "app", "--host", "0.0.0.0"]) == 2
    err = capsys.readouterr().err
    assert "at least 16 characters" in err and "$FDBRECIPES_WEB_TOKEN" in err
    short = tmp_path / "token"
    short.write_text("s3cret\n")
    assert main(["web", "--directory", "app", "--token-file", str(short)]) == 2
    assert "at least 16 characters, this one 6" in capsys.readouterr().err


@pytest.mark.parametrize("given", [["--token", "hunter2-hunter2-hunter2"],
                                   ["--token=hunter2-hunter2-hunter2"]])
def test_a_token_given_as_an_argument_is_not_echoed(
        given: List[str], capsys: pytest.CaptureFixture[str]) -> None:
    from fdbrecipes.cli import main

    with pytest.raises(SystemExit) as stopped:  # read as --token-file before
        main(["web", "--directory", "app", *given])
    assert stopped.value.code == 2
    err = capsys.readouterr().err
    assert "hunter2" not in err and "no --token option" in err and "--token-file PATH" in err


def test_the_command_takes_no_abbreviation(tmp_path: Any) -> None:
    from fdbrecipes.cli import build_parser

    parser = build_parser()
    path = str(tmp_path / "token")
    assert parser.parse_args(["web", "--directory", "app", "--token-file", path]).token_file
    with pytest.raises(SystemExit):
        parser.parse_args(["web", "--directory", "app", "--token-fi", path])


def test_metrics_listens_on_this_machine_by_default() -> None:
    from fdbrecipes import cli

    parser = cli.build_parser()
    assert parser.parse_args(["metrics", "--tuple", "('jobs',)"]).addr == "127.0.0.1"
    assert parser.parse_args(["metrics", "--tuple", "('jobs',)", "--host",
                              "0.0.0.0"]).addr == "0.0.0.0"
    assert parser.parse_args(["metrics", "--tuple", "('jobs',)", "--addr",
                              "::1"]).addr == "::1"


def test_the_command_help_needs_neither_the_client_nor_the_extra() -> None:
    import subprocess
    import sys

    done = subprocess.run([sys.executable, "-c", "import sys; from fdbrecipes.cli import main\n"
                           "try:\n    main(['web', '--help'])\n"
                           "except SystemExit as e:\n    assert e.code == 0\n"
                           "print(sorted({'fdb.impl', 'starlette', 'jinja2'} & "
                           "set(sys.modules)))"],
                          capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    assert "--read-only" in done.stdout and done.stdout.strip().endswith("[]")


def test_sparkline_is_numbers_only() -> None:
    from fdbrecipes.web.show import sparkline

    assert sparkline([]) == ""
    svg = sparkline([0, 5, None, 10], width=30, height=10)
    assert svg.startswith("<svg ") and 'points="0.0,9.0 10.0,5.0 20.0,9.0 30.0,1.0"' in svg
    assert "points" in sparkline([0, 0, 0])  # all zeros: a flat line, no division by 0


def test_cursors_from_urls_are_bounded() -> None:
    from fdbrecipes.web.show import cursor_from_hex

    assert cursor_from_hex("0270") == b"\x02p"
    for bad, why in (("zz", "not hex"), ("", "empty"), ("0" * 5001, "too long"),
                     ("0", "not hex")):
        with pytest.raises(ValueError, match=f"after: {why}"):
            cursor_from_hex(bad)
    with pytest.raises(ValueError, match="g: too long"):
        group_from_hex("00" * 2501)


def test_values_nested_too_deep_are_shown() -> None:
    deep: Any = "x"
    for _ in range(330):  # pushable (663 bytes), and past pprint's recursion
        deep = (deep,)
    text = shown_pretty(deep)
    assert text.startswith("((((") and "'x'" in text
    deeper: Any = "x"
    for _ in range(100_000):
        deeper = (deeper,)
    assert shown_pretty(deeper) == TOO_DEEP and shown(deeper) == TOO_DEEP


# -- through the app, on no database: what is refused is refused before any read ------


def app_client(access: Any = FULL, **options: Any) -> Any:
    """A test client of a dashboard on no database at all (``db=None``: any read or
    write would fail), with one queue named ``q``."""
    from fdb.subspace_impl import Subspace
    from starlette.testclient import TestClient

    from fdbrecipes import Queue
    from fdbrecipes.web import create_app

    app = create_app(None, {"q": Queue(Subspace(("q",)))}, access=access, **options)
    return TestClient(app, base_url="http://testserver", raise_server_exceptions=False)


SAME_ORIGIN = {"sec-fetch-site": "same-origin"}


def test_an_access_function_denying_a_request_answers_403(
        caplog: pytest.LogCaptureFixture) -> None:
    pytest.importorskip("starlette")

    def nobody(request: Any) -> Optional[Access]:
        return None

    c = app_client(nobody)
    with caplog.at_level(logging.WARNING, logger="fdbrecipes.web.audit"):
        page = c.get("/")  # a TypeError (500) before
        assert page.status_code == 403 and "may not see" in page.text
        assert page.headers["x-frame-options"] == "DENY"
        assert c.get("/structure", params={"s": "q"}).status_code == 403
        assert c.post("/act", data={"action": "pause", "s": "q", "yes": "1"},
                      headers=SAME_ORIGIN).status_code == 403
    assert caplog.text.count("status=403") == 3


@pytest.mark.parametrize("form", [
    {"action": "pause", "s": "q", "yes": "1", "back": "job"},  # no id to come back to
    {"action": "resume", "s": "q", "id": "zz"},
    {"action": "requeue", "s": "q", "yes": "1", "scope": "chosen", "token": "0270",
     "back": "job"},
    {"action": "requeue", "s": "q", "yes": "1", "scope": "chosen", "token": "zz"},
    {"action": "purge", "s": "q", "yes": "1", "scope": "matching", "after": "zz"},
    {"action": "remove", "s": "q", "yes": "1", "scope": "chosen", "token": "0270",
     "tab": "dead"},
    {"action": "requeue", "s": "q", "yes": "1", "limit": "0"},
    {"action": "policy", "s": "q"},
    {"action": "stop", "s": "q", "yes": "1"},
    {"action": "release", "s": "q", "yes": "1", "token": "02" * 3000},
])
def test_a_malformed_action_is_refused_before_anything_is_done(
        form: Dict[str, str], caplog: pytest.LogCaptureFixture) -> None:
    pytest.importorskip("starlette")
    c = app_client(token=TOKEN)  # on no database: whatever ran would fail with 500
    with caplog.at_level(logging.INFO, logger="fdbrecipes.web.audit"):
        answer = c.post("/act", data=form, headers=SAME_ORIGIN,
                        auth=("alice", TOKEN), follow_redirects=False)
    assert answer.status_code == 400, answer.text
    [line] = [r for r in caplog.records if r.name == "fdbrecipes.web.audit"]
    assert line.levelno == logging.WARNING and "status=400" in line.getMessage()
    assert "who='alice'" in line.getMessage() and "method='POST'" in line.getMessage()


def test_the_app_checks_its_options() -> None:
    pytest.importorskip("starlette")
    with pytest.raises(ValueError, match="token: at least 16"):
        app_client(token="")  # an empty password accepted before
    with pytest.raises(TypeError, match="allowed_hosts"):
        app_client(allowed_hosts="ops.example.com")
    for bad in (0, -1.0, float("inf"), float("nan")):
        with pytest.raises(ValueError, match="timeout"):
            app_client(timeout=bad)
    with pytest.raises(TypeError, match="timeout"):
        app_client(timeout="10")


def test_the_app_refuses_a_foreign_host() -> None:
    pytest.importorskip("starlette")
    c = app_client()
    rebound = c.get("/", headers={"host": "evil.example"})  # 200, the payloads, before
    assert rebound.status_code == 421 and rebound.headers["x-content-type-options"] == \
        "nosniff"
    assert c.post("/act", data={"action": "pause", "s": "q", "yes": "1"},
                  headers={"host": "evil.example", "origin": "http://evil.example",
                           **SAME_ORIGIN}).status_code == 421
    allowed = app_client(allowed_hosts=["evil.example"])
    assert allowed.get("/nothing-here", headers={"host": "evil.example"}).status_code == 404


def test_an_action_on_a_stored_schedule_is_checked_whole() -> None:
    from fdbrecipes.web.checks import check
    from fdbrecipes.web.forms import BadRequest

    store = object()  # check() only picks the store; it reads and writes nothing
    form = {"action": "run-now", "store": "0", "name": "nightly", "yes": "1"}
    got = check(form, FULL, {}, [store])
    assert (got.action, got.name, got.structure, got.group, got.target()) == (
        "run-now", "schedules 0", store, None, "nightly")
    assert not check({**form, "back": "job", "id": "00"}, FULL, {}, [store]).back_to_job
    for bad, status in (({"store": "1"}, 404), ({"store": "x"}, 404), ({"store": "٣"}, 404),
                        ({"store": ""}, 404), ({"name": ""}, 400), ({"yes": ""}, 400)):
        with pytest.raises(BadRequest) as refused:
            check({**form, **bad}, FULL, {}, [store])
        assert refused.value.status == status, bad
    with pytest.raises(ValueError, match="name must be 1 to 200"):
        check({**form, "name": "n" * 201}, FULL, {}, [store])
    with pytest.raises(BadRequest) as denied:
        check(form, READ_ONLY, {}, [store])
    assert denied.value.status == 403
    resume = check({"action": "resume-schedule", "store": "0", "name": "n"}, FULL, {}, [store])
    assert resume.schedule == "n"  # no confirmation needed to resume
