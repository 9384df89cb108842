"""``fdbrecipes web`` for real: the structures found under a directory, and the server
it starts (uvicorn) answering on 127.0.0.1 (the browser's journeys are
test_web_browser.py)."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
import urllib.request
import uuid
from typing import Any, Iterator

import fdb
import pytest

from fdbrecipes import FairQueue, PriorityQueue, Queue, Schedules
from fdbrecipes.admin.places import Place
from fdbrecipes.web.command import discover
from tests.integration.test_operator_cli import ROOT

pytest.importorskip("uvicorn", reason="the dashboard's extra: pip install 'fdbrecipes[web]'")

pytestmark = pytest.mark.integration

@pytest.fixture
def tree(db: Any) -> Iterator[Any]:
    """A directory with a queue, a priority queue in a subdirectory, a fair queue, a
    schedule store and an empty directory; removed afterwards."""
    name = f"fdbrecipes-web-{uuid.uuid4().hex[:8]}"
    top = fdb.directory.create_or_open(db, (name,))
    jobs = Queue(top.create_or_open(db, "jobs"))
    jobs.push(db, "<script>x</script>")
    Schedules(top.create_or_open(db, "schedules")).add(db, "hourly", target=jobs, every=3600)
    PriorityQueue(top.create_or_open(db, ("mail", "outbox"))).push(db, "m", priority=3)
    FairQueue(top.create_or_open(db, "tenants")).push(db, "r", group="acme")
    top.create_or_open(db, "empty")
    yield name
    fdb.directory.remove(db, (name,))


def test_discover_finds_every_structure(db: Any, tree: str) -> None:
    found = discover(db, Place(directory=(tree,)))
    assert {n: type(s).__name__ for n, s in found.items()} == {
        "jobs": "Queue", "mail/outbox": "PriorityQueue", "tenants": "FairQueue",
        "schedules": "Schedules"}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def fetch(url: str, deadline: float) -> str:
    """GET ``url`` until it answers (the server is starting) or ``deadline`` passes."""
    while True:
        try:
            with urllib.request.urlopen(url, timeout=5) as answer:
                text: str = answer.read().decode()
                return text
        except OSError:
            assert time.monotonic() < deadline, f"{url} did not answer"
            time.sleep(0.1)  # the server is starting; polled with a deadline


@pytest.fixture
def served(fdb_cluster_file: str, tree: str) -> Iterator[str]:
    port = free_port()
    env = {**os.environ, "FDB_CLUSTER_FILE": fdb_cluster_file}
    env.pop("FDBRECIPES_WEB_TOKEN", None)
    process = subprocess.Popen([sys.executable, "-m", "fdbrecipes", "web", "--directory", tree,
                                "--port", str(port)], cwd=ROOT, env=env,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        url = f"http://127.0.0.1:{port}/"
        fetch(url, time.monotonic() + 30)
        yield url
    finally:
        process.terminate()
        process.wait(30)


def test_the_command_serves_on_loopback(served: str) -> None:
    page = fetch(served, time.monotonic() + 10)
    assert "mail/outbox" in page and "priority-queue" in page and "fair-queue" in page
    jobs = fetch(served + "structure?s=jobs", time.monotonic() + 10)
    assert "&lt;script&gt;x&lt;/script&gt;" in jobs and "<script>" not in jobs

    stored = fetch(served + "schedules", time.monotonic() + 10)
    assert "hourly" in stored and 'href="/structure?s=jobs"' in stored
