"""The dashboard hardened (issue 43) against a real server: a rebound page refused by
its Host, a malformed action doing nothing and every action audited whatever its
answer, the audit naming the Basic user, every row opening its item's page (without a
record too), a value nested 330 deep shown, pages bounded in bytes, a page past its
deadline answering 503, and a flood of searches over big values answered in bounded
time while a cheap page stays quick (served by uvicorn)."""

from __future__ import annotations

import html
import logging
import re
import threading
import time
import urllib.error
import urllib.request
from typing import Any, Dict, List, Tuple

import pytest

from fdbrecipes import Queue

pytest.importorskip("starlette", reason="the dashboard's extra: pip install 'fdbrecipes[web]'")

from fdbrecipes.web import FULL, create_app
from tests.integration.test_web import SAME_ORIGIN, bury_one, client
from tests.integration.test_web_rows import act, cells, pages

pytestmark = pytest.mark.integration

TOKEN = "s3cret-s3cret-s3cret"
#: Characters of each big value (the library takes values up to 100 KB).
BIG = 90_000


@pytest.fixture
def places(fdb_subspace: Any) -> Dict[str, Any]:
    return {"jobs": Queue(fdb_subspace["jobs"], history=3600, max_deliveries=2),
            "plain": Queue(fdb_subspace["plain"], max_deliveries=2)}


def audit_lines(caplog: pytest.LogCaptureFixture, level: int = logging.INFO) -> List[str]:
    return [r.getMessage() for r in caplog.records
            if r.name == "fdbrecipes.web.audit" and r.levelno == level]


def test_a_rebound_page_reaches_nothing(db: Any, places: Dict[str, Any]) -> None:
    jobs = places["jobs"]
    jobs.push(db, "the secret payload", id=b"j-1")
    c = client(db, places, access=FULL)
    rebound = {"host": "evil.example:18096", "origin": "http://evil.example:18096",
               **SAME_ORIGIN}
    answer = c.post("/act", data={"action": "pause", "s": "jobs", "yes": "1"},
                    headers=rebound, follow_redirects=False)
    assert answer.status_code == 421 and jobs.paused(db) is None  # 303, paused, before
    page = c.get("/job", params={"s": "jobs", "text": "j-1"},
                 headers={"host": "evil.example:18096"})
    assert page.status_code == 421 and "secret" not in page.text
    assert "the secret payload" in c.get("/job", params={"s": "jobs", "text": "j-1"}).text


def test_a_malformed_action_does_nothing(db: Any, places: Dict[str, Any],
                                         caplog: pytest.LogCaptureFixture) -> None:
    jobs = places["jobs"]
    bury_one(db, jobs, "dead one")
    [letter] = jobs.dead(db)
    c = client(db, places, access=FULL)
    with caplog.at_level(logging.INFO, logger="fdbrecipes.web.audit"):
        assert act(c, action="pause", s="jobs", yes="1", back="job").status_code == 400
        assert jobs.paused(db) is None  # paused, and not audited, before
        jobs.pause(db)
        assert act(c, action="resume", s="jobs", id="zz").status_code == 400
        assert jobs.paused(db) is not None
        assert act(c, action="requeue", s="jobs", yes="1", scope="chosen",
                   token=letter.token.hex(), back="job").status_code == 400
        assert jobs.stats(db).dead == 1
    assert audit_lines(caplog) == []  # nothing was done
    assert len(audit_lines(caplog, logging.WARNING)) == 3  # each refusal


def test_an_action_failing_midway_is_audited(db: Any, places: Dict[str, Any],
                                             caplog: pytest.LogCaptureFixture) -> None:
    jobs = places["jobs"]
    bury_one(db, jobs, "dead one")
    jobs.push(db, "running")
    lease = jobs.claim(db, 60)
    assert lease is not None
    [letter] = jobs.dead(db)
    c = client(db, places, access=FULL)
    with caplog.at_level(logging.INFO, logger="fdbrecipes.web.audit"):
        answer = act(c, action="release", s="jobs", yes="1",  # a lease's, then a dead letter's
                     token=f"{lease.token.hex()},{letter.token.hex()}")
    assert answer.status_code == 400
    assert jobs.stats(db).in_flight == 0 and jobs.stats(db).visible == 1  # the first: done
    [line] = audit_lines(caplog)
    assert "action='release'" in line and "count=None" in line and "outcome='failed: " in line


def test_the_audit_names_the_basic_user(db: Any, places: Dict[str, Any],
                                        caplog: pytest.LogCaptureFixture) -> None:
    c = client(db, places, access=FULL, token=TOKEN)
    form = {"action": "pause", "s": "jobs", "yes": "1"}
    assert c.post("/act", data=form, headers=SAME_ORIGIN).status_code == 401
    with caplog.at_level(logging.INFO, logger="fdbrecipes.web.audit"):
        answer = c.post("/act", data=form, headers=SAME_ORIGIN, auth=("alice", TOKEN),
                        follow_redirects=False)
    assert answer.status_code == 303 and places["jobs"].paused(db) is not None
    [line] = audit_lines(caplog)
    assert line.startswith("who='alice' action='pause'") and "outcome='done'" in line


def item_links(page: str) -> List[str]:
    """The links of a tab's rows to their items' pages."""
    return [link.replace("&amp;", "&") for link in
            re.findall(r'<td class="v"><a href="([^"]+)"><code>', page)]


def test_every_row_opens_its_items_page(db: Any, places: Dict[str, Any]) -> None:
    plain = places["plain"]  # no history, no ids: no record for any item
    plain.push(db, "in flight")
    lease = plain.claim(db, 600)
    assert lease is not None
    bury_one(db, plain, "buried", reason="<b>bad input</b>")
    plain.push(db, "waiting")
    plain.push(db, "later", delay=600)
    c = client(db, places, access=FULL)
    seen = {}
    for tab, value in (("pending", "waiting"), ("delayed", "later"),
                       ("in-flight", "in flight"), ("dead", "buried")):
        [link] = item_links(c.get("/structure", params={"s": "plain", "tab": tab}).text)
        page = c.get(link)  # 404 (no record) before, or no link at all
        assert page.status_code == 200, (tab, page.text)
        assert f"&#39;{value}&#39;" in page.text and f">{tab}</a>" in page.text, tab
        assert "<dt>deliveries</dt>" in page.text and "record</dt><dd class" in page.text
        seen[tab] = page.text
    assert "lease ends in" in seen["in-flight"] and "until" in seen["in-flight"]
    assert 'value="release"' in seen["in-flight"]
    assert "visible in" in seen["delayed"]
    assert "&lt;b&gt;bad input&lt;/b&gt;" in seen["dead"] and 'value="requeue"' in seen["dead"]
    jobs = places["jobs"]
    jobs.push(db, "with a record", id=b"j-2")
    [link] = item_links(c.get("/structure", params={"s": "jobs"}).text)
    assert "token=" in link and f"id={b'j-2'.hex()}" in link
    page = c.get(link).text
    assert '"pill pending">pending' in page and "<dt>attempts</dt><dd>0</dd>" in page
    assert "Job <code>j-2</code>" in page


def test_an_item_gone_from_its_place_is_404(db: Any, places: Dict[str, Any]) -> None:
    plain = places["plain"]
    plain.push(db, "taken soon")
    c = client(db, places)
    [link] = item_links(c.get("/structure", params={"s": "plain"}).text)
    assert plain.pop(db) == "taken soon"
    page = c.get(link)
    assert page.status_code == 404 and "No item is there any more" in page.text


def nested(depth: int) -> Any:
    """A str in ``depth`` tuples."""
    value: Any = "x"
    for _ in range(depth):
        value = (value,)
    return value


def push_deepest(db: Any, jobs: Queue[Any], id_: bytes) -> int:
    """Push the most deeply nested value ``push`` takes (from a thread of its own, whose
    stack starts empty, as an application's would: about 330 levels); its depth."""
    refused: List[BaseException] = []

    def push(value: Any) -> None:
        try:
            jobs.push(db, value, id=id_)
        except ValueError as e:  # too deep to encode
            refused.append(e)

    for depth in range(360, 200, -5):
        refused.clear()
        pushing = threading.Thread(target=push, args=(nested(depth),))
        pushing.start()
        pushing.join(30)
        if not refused:
            return depth
    raise AssertionError(f"no nested value pushed: {refused}")


def test_a_value_nested_330_deep_has_its_page(db: Any, places: Dict[str, Any]) -> None:
    jobs = places["jobs"]
    assert push_deepest(db, jobs, b"deep") >= 300
    c = client(db, places)
    page = c.get("/job", params={"s": "jobs", "text": "deep"})
    assert page.status_code == 200 and "((((" in page.text  # RecursionError, 500, before
    [link] = item_links(c.get("/structure", params={"s": "jobs"}).text)
    assert c.get(link).status_code == 200


def fill(db: Any, q: Queue[Any], n: int) -> None:
    """Push ``n`` values of :data:`BIG` characters (numbered first), 50 a transaction."""
    for start in range(0, n, 50):
        q.push_many(db, [f"{i:05d}" + "x" * BIG for i in range(start, min(n, start + 50))])


def test_a_page_of_big_values_stops_at_its_byte_budget(db: Any, fdb_subspace: Any) -> None:
    fat = Queue(fdb_subspace["fat"])
    fill(db, fat, 120)  # 10.8 MB
    c = client(db, {"fat": fat})
    first = c.get("/structure", params={"s": "fat", "limit": "500"})
    assert first.status_code == 200
    assert 0 < len(cells(first.text)) < 120  # all 120 (10.8 MB read) before
    assert "This page stopped at 5 MB of values" in first.text
    every = [html.unescape(value)[1:6]
             for page in pages(c, "/structure?s=fat&limit=500") for value in page]
    assert every == [f"{i:05d}" for i in range(120)]  # each row once, in order
    search = c.get("/structure", params={"s": "fat", "q": "zz"}).text
    scanned = re.search(r"Searched the first ([0-9,]+) rows \(their values reached 5 MB\)",
                        search)
    assert scanned is not None and int(scanned.group(1)) < 120
    assert "next page" in search


def test_a_page_past_its_deadline_answers_503(db: Any, fdb_subspace: Any) -> None:
    fat = Queue(fdb_subspace["fat"])
    fill(db, fat, 60)
    c = client(db, {"fat": fat}, timeout=0.001)  # 5 MB cannot be read in 1 ms
    page = c.get("/structure", params={"s": "fat"})
    assert page.status_code == 503 and page.headers["retry-after"] == "1"
    assert "did not answer this page&#39;s reads within 0.001 s" in page.text


def get(url: str, timeout: float) -> int:
    """The status of GET ``url``."""
    try:
        with urllib.request.urlopen(url, timeout=timeout) as answer:
            answer.read()
            status: int = answer.status
            return status
    except urllib.error.HTTPError as e:
        return e.code


#: Seconds each search of the flood may take at most: the deadline (10 s) and some.
#: (Here, before pages were bounded in bytes and reads in time, each search of 600 big
#: values took 50 s, retrying transaction_too_old; since, about 1 s.)
FLOOD_BOUND = 20.0
#: Seconds the cheap page may take at most meanwhile.
CHEAP_BOUND = 10.0


def test_a_flood_of_searches_over_big_values_is_answered(db: Any, fdb_subspace: Any) -> None:
    from tests.integration.web_served import Served

    fat = Queue(fdb_subspace["fat"])
    fill(db, fat, 600)  # 54 MB: 20 searches of it at once all but livelocked before
    served = Served(create_app(db, {"fat": fat}))  # a Database without a timeout
    try:
        url = served.url + "structure?s=fat&q=zz&limit=500"
        answers: List[Tuple[int, float]] = []
        errors: List[BaseException] = []

        def search() -> None:
            started = time.monotonic()
            try:
                answers.append((get(url, FLOOD_BOUND), time.monotonic() - started))
            except OSError as e:  # a timeout among them
                errors.append(e)

        threads = [threading.Thread(target=search, daemon=True) for _ in range(20)]
        for t in threads:
            t.start()
        cheap = []
        while len(cheap) < 10 and any(t.is_alive() for t in threads):
            started = time.monotonic()
            assert get(served.url + "schedules", CHEAP_BOUND) == 200
            cheap.append(time.monotonic() - started)
        deadline = time.monotonic() + FLOOD_BOUND
        for t in threads:
            t.join(max(0.0, deadline - time.monotonic()))
        assert not errors, errors
        assert len(answers) == 20 and {status for status, _ in answers} <= {200, 503}
        assert max(took for _, took in answers) < FLOOD_BOUND
        assert max(cheap, default=0.0) < CHEAP_BOUND
    finally:
        served.stop()
