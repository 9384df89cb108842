"""The dashboard's pages of rows and the actions on them, through its ASGI app on a
real server: paging by key on every listing (and hostile cursors refused with 400),
the finished-jobs tab, a job's page (payload, lease, error), actions on one row, on
the rows chosen and on every row matching a filter (chunked, capped, going on from
where a request stopped), each audited, refused read-only or cross-site, and working
under a sub-path."""

from __future__ import annotations

import logging
import re
from typing import Any, Dict, List, Optional

import pytest

from fdbrecipes import FairQueue, JobError, PriorityQueue, Queue, drive

pytest.importorskip("starlette", reason="the dashboard's extra: pip install 'fdbrecipes[web]'")

from starlette.applications import Starlette
from starlette.routing import Mount
from starlette.testclient import TestClient

from fdbrecipes.web import FULL, Access, actions, create_app
from fdbrecipes.web.show import group_hex
from tests.integration.test_web import HOSTILE, SAME_ORIGIN, bury_one, client

pytestmark = pytest.mark.integration


@pytest.fixture
def places(fdb_subspace: Any) -> Dict[str, Any]:
    return {"jobs": Queue(fdb_subspace["jobs"], history=3600, max_deliveries=3),
            "urgent": PriorityQueue(fdb_subspace["urgent"], history=3600),
            "tenants": FairQueue(fdb_subspace["tenants"], history=3600)}


def act(c: TestClient, path: str = "/act", **fields: Any) -> Any:
    """Post a form (a list value: one field per element), as the page would."""
    return c.post(path, data=fields, headers=SAME_ORIGIN, follow_redirects=False)


def next_link(page: str) -> Optional[str]:
    found = re.search(r'<a href="([^"]*)">next page', page)
    return None if found is None else found.group(1).replace("&amp;", "&")


def cells(page: str) -> List[str]:
    """The values shown in a tab's first column (its <code> cells)."""
    return re.findall(r'<td class="v">(?:<a [^>]*>)?<code>([^<]*)</code>', page)


def pages(c: TestClient, url: str) -> List[List[str]]:
    """The values of every page of a tab, following its "next page" links."""
    out = []
    link: Optional[str] = url
    while link is not None:
        page = c.get(link)
        assert page.status_code == 200, page.text
        out.append(cells(page.text))
        link = next_link(page.text)
    return out


def test_every_listing_pages_by_key(db: Any, places: Dict[str, Any]) -> None:
    jobs, urgent, tenants = places["jobs"], places["urgent"], places["tenants"]
    for i in range(3):
        bury_one(db, jobs, f"x{i}")
    jobs.push_many(db, [f"p{i}" for i in range(5)])
    for i in range(3):
        jobs.push(db, f"d{i}", delay=100 + i)
    assert len(jobs.claim_many(db, 3, 60)) == 3  # p0..p2 in flight
    urgent.push_many(db, [(f"u{p}", p) for p in (1, 3, 2)])
    for g in ("a", "b", "c", "d", "e"):
        tenants.push(db, f"t-{g}", group=g)
    c = client(db, places)
    assert pages(c, "/structure?s=jobs&limit=1") == [["&#39;p3&#39;"], ["&#39;p4&#39;"]]
    assert pages(c, "/structure?s=jobs&tab=delayed&limit=2") == [
        ["&#39;d0&#39;", "&#39;d1&#39;"], ["&#39;d2&#39;"]]
    assert [len(p) for p in pages(c, "/structure?s=jobs&tab=in-flight&limit=2")] == [2, 1]
    assert pages(c, "/structure?s=jobs&tab=dead&limit=2") == [
        ["&#39;x0&#39;", "&#39;x1&#39;"], ["&#39;x2&#39;"]]
    finished = pages(c, "/structure?s=jobs&tab=finished&limit=2")
    assert [len(p) for p in finished] == [2, 1]  # the three dead jobs' records
    assert pages(c, "/structure?s=urgent&limit=2") == [
        ["&#39;u1&#39;", "&#39;u2&#39;"], ["&#39;u3&#39;"]]
    assert pages(c, "/structure?s=urgent&limit=2&end=max") == [
        ["&#39;u3&#39;", "&#39;u2&#39;"], ["&#39;u1&#39;"]]
    groups = pages(c, "/structure?s=tenants&limit=2")
    assert groups == [["&#39;a&#39;", "&#39;b&#39;"], ["&#39;c&#39;", "&#39;d&#39;"],
                      ["&#39;e&#39;"]]
    first = c.get("/structure?s=jobs&tab=dead&limit=2").text
    second = c.get(str(next_link(first))).text
    assert "first page" in second and "first page" not in first


def test_a_search_pages_on_from_where_it_stopped(db: Any, places: Dict[str, Any]) -> None:
    jobs = places["jobs"]
    jobs.push_many(db, [f"{'hit' if i % 3 == 0 else 'miss'} {i}" for i in range(12)])
    c = client(db, places)
    found = pages(c, "/structure?s=jobs&q=hit&limit=2")
    assert found == [["&#39;hit 0&#39;", "&#39;hit 3&#39;"], ["&#39;hit 6&#39;", "&#39;hit 9&#39;"]]


#: Cursors no listing takes (the groups' take any group's name: only the first five).
BAD_CURSORS = ["zz", "00", "0" * 6000, "<script>", "%00", "ff" * 40, "01" * 10,
               b"\x02p\x00\x27".hex()]


def test_hostile_cursors_are_refused_with_400(db: Any, places: Dict[str, Any]) -> None:
    jobs, tenants = places["jobs"], places["tenants"]
    bury_one(db, jobs, "dead one")
    jobs.push(db, "pending one")
    tenants.push(db, "t", group="g")
    c = client(db, places, access=FULL)
    dead_token = jobs.dead(db)[0].token.hex()
    for tab in ("pending", "delayed", "in-flight", "dead", "finished"):
        for bad in [*BAD_CURSORS, *([dead_token] if tab != "dead" else [])]:
            page = c.get("/structure", params={"s": "jobs", "tab": tab, "after": bad})
            assert page.status_code == 400, (tab, bad, page.text)
            assert "<script>" not in page.text
    for bad in BAD_CURSORS[:5]:
        page = c.get("/structure", params={"s": "tenants", "after": bad})
        assert page.status_code == 400, (bad, page.text)
    for bad in BAD_CURSORS:
        page = c.get("/structure", params={"s": "tenants", "g": group_hex("g"), "after": bad})
        assert page.status_code == 400, (bad, page.text)
        answer = act(c, s="jobs", action="purge", yes="1", scope="matching", after=bad)
        assert answer.status_code == 400, bad
        answer = act(c, s="jobs", action="requeue", yes="1", scope="chosen", token=bad)
        assert answer.status_code == 400, bad
    assert jobs.stats(db).dead == 1 and jobs.stats(db).visible == 1
    for text in HOSTILE:  # a filter is shown escaped
        page = c.get("/structure", params={"s": "jobs", "q": text}).text
        assert "<script" not in page and "<img" not in page and "' onmouseover" not in page
    assert c.get("/structure", params={"s": "jobs", "q": "x" * 1001}).status_code == 400


def test_the_finished_jobs_tab(db: Any, places: Dict[str, Any]) -> None:
    jobs, tenants = places["jobs"], places["tenants"]
    jobs.push(db, "done", id=b"ok-1")
    lease = jobs.claim(db, 30)
    assert lease is not None
    jobs.ack(db, lease)
    bury_one(db, jobs, "<b>failed</b>", reason="<script>why</script>")
    tenants.push(db, "t", group="<g>", id=b"t-1")
    fair_lease = tenants.claim(db, 30)
    assert fair_lease is not None
    tenants.ack(db, fair_lease)
    c = client(db, places)
    page = c.get("/structure", params={"s": "jobs", "tab": "finished"}).text
    assert "<code>ok-1</code>" in page and "succeeded" in page and "dead" in page
    assert f'/job?s=jobs&amp;id={b"ok-1".hex()}' in page
    fair = c.get("/structure", params={"s": "tenants", "tab": "finished"}).text
    assert f'g={group_hex("<g>")}&amp;id={b"t-1".hex()}' in fair
    assert c.get("/structure", params={"s": "tenants", "g": group_hex("<g>"),
                                       "tab": "finished"}).status_code == 400


def test_a_jobs_page_shows_its_payload_lease_and_error(db: Any,
                                                       places: Dict[str, Any]) -> None:
    jobs = places["jobs"]
    payload = ("<script>alert(1)</script>", b"\xff\x00", "x" * 30_000)
    jobs.push(db, payload, id=b"big")
    lease = jobs.claim(db, 60)
    assert lease is not None
    jobs.release(db, lease, error=JobError("ValueError", "<img src=x>", "Traceback: line 1\n"))
    [lease] = drive(jobs.ops.claim_many(db, 1, 60, holder="host-1-worker"))
    c = client(db, places, access=FULL)
    page = c.get("/job", params={"s": "jobs", "text": "big"}).text
    assert "running" in page and "lease ends in" in page and "until" in page
    assert "host-1-worker" in page
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page and r"b&#39;\xff\x00&#39;" in page
    assert "more characters" in page and len(page) < 60_000
    assert "&lt;img src=x&gt;" in page and "Traceback: line 1" in page
    assert "<script>" not in page and "<img" not in page
    answer = act(c, s="jobs", action="release", yes="1", token=lease.token.hex(),
                 id=b"big".hex(), back="job")
    assert answer.status_code == 303 and answer.headers["location"].startswith("/job?")
    assert "gave 1 of 1 back" in c.get(answer.headers["location"]).text
    assert jobs.stats(db).visible == 1


def test_a_dead_job_retried_from_its_page(db: Any, places: Dict[str, Any],
                                          caplog: pytest.LogCaptureFixture) -> None:
    jobs = places["jobs"]
    jobs.push(db, "poison", id=b"j-9")
    lease = jobs.claim(db, 30)
    assert lease is not None and jobs.bury(db, lease, "bad input")
    c = client(db, places, access=FULL)
    page = c.get("/job", params={"s": "jobs", "text": "j-9"}).text
    assert "bad input" in page and 'value="requeue"' in page and "&#39;poison&#39;" in page
    token = re.search(r'name="token" value="([0-9a-f]+)"', page)
    assert token is not None
    with caplog.at_level(logging.INFO, logger="fdbrecipes.web.audit"):
        answer = act(c, s="jobs", action="requeue", scope="chosen", token=token.group(1),
                     id=b"j-9".hex(), back="job", yes="1")
    assert answer.status_code == 303
    assert "requeued 1 of 1 chosen" in c.get(answer.headers["location"]).text
    record = jobs.job(db, b"j-9")
    assert record is not None and record.state == "pending" and jobs.items(db) == ["poison"]
    [line] = [r.getMessage() for r in caplog.records if r.name == "fdbrecipes.web.audit"]
    assert "action='requeue'" in line and "scope='chosen'" in line and "count=1" in line


def test_chosen_rows_requeued_or_deleted(db: Any, places: Dict[str, Any]) -> None:
    jobs, tenants = places["jobs"], places["tenants"]
    for i in range(4):
        bury_one(db, jobs, f"dead {i}")
    jobs.push_many(db, ["keep", "drop 1", "drop 2"])
    jobs.push(db, "later", delay=600)
    c = client(db, places, access=FULL)
    dead = c.get("/structure", params={"s": "jobs", "tab": "dead"}).text
    tokens = re.findall(r'form="chosen" name="token" value="([0-9a-f]+)"', dead)
    assert len(tokens) == 4
    assert act(c, s="jobs", action="requeue", scope="chosen", token=tokens[:2]).status_code == 400
    answer = act(c, s="jobs", action="requeue", scope="chosen", token=tokens[:2], yes="1")
    assert "requeued 2 of 2 chosen" in c.get(answer.headers["location"]).text
    answer = act(c, s="jobs", action="purge", scope="chosen", token=tokens[1:3], yes="1")
    assert "deleted 1 of 2 chosen" in c.get(answer.headers["location"]).text
    assert [d.value for d in jobs.dead(db)] == ["dead 3"]
    pending = c.get("/structure", params={"s": "jobs"}).text
    chosen = [t for t, v in zip(re.findall(r'form="chosen" name="token" value="([0-9a-f]+)"',
                                           pending), cells(pending)) if "drop" in v]
    answer = act(c, s="jobs", action="remove", scope="chosen", token=chosen, yes="1")
    assert "deleted 2 of 2 chosen" in c.get(answer.headers["location"]).text
    later = c.get("/structure", params={"s": "jobs", "tab": "delayed"}).text
    [token] = re.findall(r'form="chosen" name="token" value="([0-9a-f]+)"', later)
    assert act(c, s="jobs", action="remove", scope="chosen", token=token, tab="delayed",
               yes="1").status_code == 303
    assert jobs.items(db) == ["keep", "dead 0", "dead 1"] and jobs.delayed(db) == []
    assert act(c, s="jobs", action="remove", scope="chosen", token=[token] * 501,
               yes="1").status_code == 400  # at most a page's rows
    tenants.push_many(db, ["a", "b"], group="g")
    rows = tenants.pending(db, "g")
    assert act(c, s="tenants", g=group_hex("g"), action="remove", scope="chosen",
               token=rows[0].token.hex(), yes="1").status_code == 303
    assert tenants.items(db, "g") == ["b"]


def test_every_row_matching_a_filter_chunked_and_capped(
        db: Any, places: Dict[str, Any], monkeypatch: pytest.MonkeyPatch,
        caplog: pytest.LogCaptureFixture) -> None:
    jobs = places["jobs"]
    monkeypatch.setattr(actions, "CHUNK", 2)  # transactions of 2 rows
    monkeypatch.setattr(actions, "REQUEST_CAP", 3)  # 3 changed per request
    for i in range(8):
        bury_one(db, jobs, f"{'timeout' if i % 2 else 'other'} {i}")
    c = client(db, places, access=FULL)
    with caplog.at_level(logging.INFO, logger="fdbrecipes.web.audit"):
        answer = act(c, s="jobs", action="requeue", scope="matching", q="timeout", yes="1")
    page = c.get(answer.headers["location"]).text
    assert "requeued 3 of 4 matching &#39;timeout&#39; among the 8 rows read" in page
    assert "Go on from there" in page and jobs.items(db) == ["timeout 1", "timeout 3",
                                                              "timeout 5"]
    assert "scope='matching'" in caplog.text and "count=3" in caplog.text
    go_on = dict(re.findall(r'<input type="hidden" name="([a-z]+)" value="([^"]*)">',
                            page.split("Go on from there")[0].split('class="box bar"')[1]))
    assert go_on["after"] and go_on["q"] == "timeout" and go_on["action"] == "requeue"
    answer = act(c, **go_on, yes="1")
    page = c.get(answer.headers["location"]).text
    assert "requeued 1 of 1 matching" in page and "; done" in page
    assert "Go on from there" not in page
    assert jobs.items(db)[-1] == "timeout 7" and jobs.stats(db).dead == 4
    # every row, no filter: delete, capped too
    answer = act(c, s="jobs", action="purge", scope="all", yes="1")
    assert "deleted 3 of 4 in all" in c.get(answer.headers["location"]).text
    assert jobs.stats(db).dead == 1
    # pending rows matching a filter
    monkeypatch.setattr(actions, "REQUEST_CAP", 10_000)
    jobs.push_many(db, ["spam 1", "ham", "spam 2"])
    answer = act(c, s="jobs", action="remove", scope="matching", q="spam", tab="pending",
                 yes="1")
    assert "deleted 2 of 2 matching" in c.get(answer.headers["location"]).text
    assert "spam" not in str(jobs.items(db)) and "ham" in jobs.items(db)
    # a forged "go on" link shows no button
    forged = answer.headers["location"] + "&more_after=00&more_action=purge"
    assert "Go on from there" not in c.get(forged).text


def test_rights_read_only_and_cross_site_for_the_new_actions(db: Any,
                                                              places: Dict[str, Any]) -> None:
    jobs = places["jobs"]
    bury_one(db, jobs, "stays")
    jobs.push(db, "stays too", id=b"s-1")
    token = jobs.dead(db)[0].token.hex()
    read_only = client(db, places)
    dead = read_only.get("/structure", params={"s": "jobs", "tab": "dead"}).text
    job = read_only.get("/job", params={"s": "jobs", "text": "s-1"}).text
    assert 'method="post"' not in dead and 'name="token"' not in dead
    assert 'method="post"' not in job
    forms = [dict(action="requeue", scope="chosen", token=token),
             dict(action="purge", scope="matching", q="stays"),
             dict(action="remove", scope="all", tab="pending")]
    for form in forms:
        assert act(read_only, s="jobs", yes="1", **form).status_code == 403
    some = client(db, places, access=Access.allowing(["requeue"], who="ann"))
    assert act(some, s="jobs", yes="1", **forms[1]).status_code == 403
    page = some.get("/structure", params={"s": "jobs", "tab": "dead"}).text
    assert 'value="requeue"' in page and 'value="purge"' not in page
    full = client(db, places, access=FULL)
    for headers in ({"sec-fetch-site": "cross-site"}, {"origin": "https://evil.example"}):
        for form in forms:
            answer = full.post("/act", data={"s": "jobs", "yes": "1", **form}, headers=headers,
                               follow_redirects=False)
            assert answer.status_code == 403
    assert act(full, s="jobs", action="purge", scope="nope", yes="1").status_code == 400
    assert act(full, s="jobs", action="remove", scope="all", tab="dead",
               yes="1").status_code == 400
    assert jobs.stats(db).dead == 1 and jobs.items(db) == ["stays too"]


def test_paging_and_bulk_actions_under_a_sub_path(db: Any, places: Dict[str, Any]) -> None:
    jobs = places["jobs"]
    for i in range(3):
        bury_one(db, jobs, f"d{i}")
    outer = Starlette(routes=[Mount("/ops/q", app=create_app(db, places, access=FULL))])
    c = TestClient(outer, base_url="http://testserver")
    page = c.get("/ops/q/structure", params={"s": "jobs", "tab": "dead", "limit": "1"}).text
    link = next_link(page)
    assert link is not None and link.startswith("/ops/q/structure?")
    links = re.findall(r'(?:href|action)="([^"]+)"', page)
    assert all(x.startswith("/ops/q/") for x in links), links
    answer = act(c, "/ops/q/act", s="jobs", action="purge", scope="all", yes="1")
    assert answer.status_code == 303 and answer.headers["location"].startswith("/ops/q/")
    assert jobs.stats(db).dead == 0
