"""``fdbrecipes web`` for real: the structures found under a directory or a subspace,
and the server it starts (uvicorn) answering on 127.0.0.1: read-only without a token,
every action with one (audited under the Basic user's name), a foreign Host refused
(the browser's journeys are test_web_browser.py)."""

from __future__ import annotations

import base64
import os
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
import uuid
from typing import Any, Dict, Iterator, Optional

import fdb
import fdb.tuple
import pytest

from fdbrecipes import FairQueue, Limits, PriorityQueue, Queue, Schedules, rate
from fdbrecipes.admin.places import Place
from fdbrecipes.web.command import discover
from tests.integration.test_operator_cli import ROOT

pytest.importorskip("uvicorn", reason="the dashboard's extra: pip install 'fdbrecipes[web]'")

pytestmark = pytest.mark.integration

@pytest.fixture
def tree(db: Any) -> Iterator[Any]:
    """A directory with a queue, a priority queue in a subdirectory, a fair queue, a
    schedule store, a limit store and an empty directory; removed afterwards."""
    name = f"fdbrecipes-web-{uuid.uuid4().hex[:8]}"
    top = fdb.directory.create_or_open(db, (name,))
    jobs = Queue(top.create_or_open(db, "jobs"))
    jobs.push(db, "<script>x</script>")
    Schedules(top.create_or_open(db, "schedules")).add(db, "hourly", target=jobs, every=3600)
    Limits(top.create_or_open(db, "limits")).set(db, "billing-api", rate(100, 60))
    PriorityQueue(top.create_or_open(db, ("mail", "outbox"))).push(db, "m", priority=3)
    FairQueue(top.create_or_open(db, "tenants")).push(db, "r", group="acme")
    top.create_or_open(db, "empty")
    yield name
    fdb.directory.remove(db, (name,))


def test_discover_finds_every_structure(db: Any, tree: str) -> None:
    found = discover(db, Place(directory=(tree,)))
    assert {n: type(s).__name__ for n, s in found.items()} == {
        "jobs": "Queue", "mail/outbox": "PriorityQueue", "tenants": "FairQueue",
        "schedules": "Schedules", "limits": "Limits"}


def test_discover_finds_every_structure_under_a_subspace(db: Any, fdb_subspace: Any) -> None:
    top = fdb_subspace["app"]
    Queue(top["jobs"]).push(db, "j")
    PriorityQueue(top["mail"]["outbox"]).push(db, "m", priority=3)
    FairQueue(top["tenants"]).push(db, "r", group="acme")
    Queue(top[7]).push(db, "by number")
    Queue(top["deep"]["er"]["still"]["too deep"]).push(db, "not found")  # 4 levels down
    db[top["loose"].pack(("x",))] = b"not a structure"
    place = Place(prefix=fdb.tuple.unpack(top.key()))
    found = discover(db, place)  # the structure at the place only, before
    assert {n: type(s).__name__ for n, s in found.items()} == {
        "jobs": "Queue", "mail/outbox": "PriorityQueue", "tenants": "FairQueue",
        "7": "Queue"}
    assert found["jobs"].stats(db).visible == 1
    one = discover(db, Place(prefix=fdb.tuple.unpack(top["jobs"].key())))
    assert list(one) == ["jobs"]  # the place itself: its keys below are its own


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def fetch(url: Any, deadline: float) -> str:
    """GET ``url`` (or a Request) until it answers (the server is starting) or
    ``deadline`` passes."""
    while True:
        try:
            with urllib.request.urlopen(url, timeout=5) as answer:
                text: str = answer.read().decode()
                return text
        except OSError:
            assert time.monotonic() < deadline, f"{url} did not answer"
            time.sleep(0.1)  # the server is starting; polled with a deadline


TOKEN = "s3cret-s3cret-s3cret"


class Command:
    """``fdbrecipes web`` running in a process of its own (``url``), and what it said
    on stderr once stopped (``said``)."""

    def __init__(self, cluster_file: str, tree: str, token: Optional[str] = None) -> None:
        port = free_port()
        env = {**os.environ, "FDB_CLUSTER_FILE": cluster_file}
        env.pop("FDBRECIPES_WEB_TOKEN", None)
        if token is not None:
            env["FDBRECIPES_WEB_TOKEN"] = token
        self.process = subprocess.Popen(
            [sys.executable, "-m", "fdbrecipes", "web", "--directory", tree, "--port",
             str(port)], cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        self.url = f"http://127.0.0.1:{port}/"
        self.said = ""
        request = urllib.request.Request(self.url, headers=self.auth(token))
        fetch(request, time.monotonic() + 30)

    @staticmethod
    def auth(token: Optional[str], user: str = "alice") -> Dict[str, str]:
        if token is None:
            return {}
        return {"Authorization": "Basic " + base64.b64encode(
            f"{user}:{token}".encode()).decode()}

    def post(self, fields: Dict[str, str], headers: Dict[str, str]) -> int:
        request = urllib.request.Request(self.url + "act", method="POST",
                                         data=urllib.parse.urlencode(fields).encode(),
                                         headers={"Sec-Fetch-Site": "same-origin",
                                                  **headers})
        return status_of(request)

    def stop(self) -> None:
        self.process.terminate()
        self.said = self.process.communicate(timeout=30)[1].decode()


def status_of(request: urllib.request.Request) -> int:
    """The status of ``request`` (a redirect not followed)."""
    class NoRedirect(urllib.request.HTTPRedirectHandler):
        def redirect_request(self, *args: Any) -> None:
            return None

    try:
        with urllib.request.build_opener(NoRedirect).open(request, timeout=30) as answer:
            status: int = answer.status
            return status
    except urllib.error.HTTPError as e:
        return e.code


@pytest.fixture
def served(fdb_cluster_file: str, tree: str) -> Iterator[str]:
    command = Command(fdb_cluster_file, tree)
    try:
        yield command.url
    finally:
        command.stop()


def test_the_command_serves_on_loopback(served: str) -> None:
    page = fetch(served, time.monotonic() + 10)
    assert "mail/outbox" in page and "priority-queue" in page and "fair-queue" in page
    jobs = fetch(served + "structure?s=jobs", time.monotonic() + 10)
    assert "&lt;script&gt;x&lt;/script&gt;" in jobs and "<script>" not in jobs

    stored = fetch(served + "schedules", time.monotonic() + 10)
    assert "hourly" in stored and 'href="/structure?s=jobs"' in stored
    limits = fetch(served + "limits", time.monotonic() + 10)
    assert "billing-api" in limits and "60 s" in limits


def test_without_a_token_the_command_is_read_only(db: Any, fdb_cluster_file: str,
                                                   tree: str) -> None:
    jobs = Queue(fdb.directory.open(db, (tree, "jobs")))
    command = Command(fdb_cluster_file, tree)
    try:
        pause = {"action": "pause", "s": "jobs", "yes": "1"}
        assert command.post(pause, {}) == 403  # 303, paused, before
        assert jobs.paused(db) is None
        rebound = urllib.request.Request(command.url + "structure?s=jobs",
                                         headers={"Host": "evil.example"})
        assert status_of(rebound) == 421
    finally:
        command.stop()
    assert "read only: a token gives the actions" in command.said
    assert "refused status=403" in command.said and "refused status=421" in command.said


def test_with_a_token_the_command_acts(db: Any, fdb_cluster_file: str, tree: str) -> None:
    jobs = Queue(fdb.directory.open(db, (tree, "jobs")))
    command = Command(fdb_cluster_file, tree, TOKEN)
    try:
        pause = {"action": "pause", "s": "jobs", "yes": "1"}
        assert command.post(pause, {}) == 401
        assert command.post(pause, Command.auth("wrong-wrong-wrong-wrong")) == 401
        assert jobs.paused(db) is None
        assert command.post(pause, Command.auth(TOKEN)) == 303
        assert jobs.paused(db) is not None
    finally:
        command.stop()
    assert "who='alice' action='pause'" in command.said, command.said
    assert "why='wrong token'" in command.said
