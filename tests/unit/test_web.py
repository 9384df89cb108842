"""The dashboard's pure parts, without a server: access rights, the cross-site check,
the security headers and the token (through the ASGI guard), how values are shown."""

from __future__ import annotations

import asyncio
import base64
from typing import Any, Dict, List

import pytest

from fdbrecipes.web import ACTIONS, FULL, READ_ONLY, Access
from fdbrecipes.web.access import access_of
from fdbrecipes.web.guard import Guard, cross_site, security_headers
from fdbrecipes.web.show import (
    group_from_hex,
    group_hex,
    id_from_hex,
    shown,
    shown_pretty,
)


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


def run_guard(guard: Guard, method: str = "GET", **headers: str) -> Dict[str, Any]:
    """Call ``guard`` once; the status, headers and body it sent."""
    sent: List[Dict[str, Any]] = []

    async def receive() -> Dict[str, Any]:
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message: Any) -> None:
        sent.append(dict(message))

    scope = {"type": "http", "method": method, "scheme": "http", "headers": h(**headers),
             "path": "/"}
    asyncio.run(guard(scope, receive, send))
    return {"status": sent[0]["status"], "headers": dict(sent[0]["headers"]),
            "body": b"".join(m.get("body", b"") for m in sent[1:])}


async def hello(scope: Any, receive: Any, send: Any) -> None:
    nonce = scope["state"]["csp_nonce"].encode()
    await send({"type": "http.response.start", "status": 200,
                "headers": [(b"cache-control", b"max-age=600")]})
    await send({"type": "http.response.body", "body": b"hello " + nonce})


def test_guard_headers_and_refusals() -> None:
    answer = run_guard(Guard(hello))
    assert answer["status"] == 200 and answer["headers"][b"cache-control"] == b"no-store"
    nonce = answer["body"].split()[1].decode()
    assert f"'nonce-{nonce}'" in answer["headers"][b"content-security-policy"].decode()
    refused = run_guard(Guard(hello), "POST", origin="https://evil.example", host="a")
    assert refused["status"] == 403 and b"hello" not in refused["body"]
    assert refused["headers"][b"x-content-type-options"] == b"nosniff"


def test_guard_token() -> None:
    guard = Guard(hello, token="s3cret")
    assert run_guard(guard)["status"] == 401
    assert b"Basic" in run_guard(guard)["headers"][b"www-authenticate"]

    def basic(password: str) -> str:
        return "Basic " + base64.b64encode(f"ops:{password}".encode()).decode()

    assert run_guard(guard, authorization=basic("wrong"))["status"] == 401
    assert run_guard(guard, authorization="Basic %%%")["status"] == 401
    assert run_guard(guard, authorization=basic("s3cret"))["status"] == 200


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


def test_the_command_refuses_an_open_bind(capsys: pytest.CaptureFixture[str],
                                          monkeypatch: pytest.MonkeyPatch) -> None:
    from fdbrecipes.cli import main
    from fdbrecipes.web.command import check_bind

    monkeypatch.delenv("FDBRECIPES_WEB_TOKEN", raising=False)
    assert main(["web", "--directory", "app", "--host", "0.0.0.0"]) == 2
    assert "refusing" in capsys.readouterr().err
    for host in ("127.0.0.1", "::1", "localhost"):
        check_bind(host, False, None)
    check_bind("0.0.0.0", True, None)
    check_bind("10.1.2.3", False, "s3cret")


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
