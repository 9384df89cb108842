"""The dashboard (fdbrecipes.web) through its ASGI app, on a real server: every page,
every action and its audit line, sub-path mounting, read-only and denied access,
cross-site refusal, the security headers, hostile values escaped."""

from __future__ import annotations

import logging
import re
import threading
from typing import Any, Dict, Iterator

import pytest

from fdbrecipes import FairQueue, JobError, Queue, WeightTree, Worker

pytest.importorskip("starlette", reason="the dashboard's extra: pip install 'fdbrecipes[web]'")

from starlette.applications import Starlette
from starlette.routing import Mount
from starlette.testclient import TestClient

from fdbrecipes.web import FULL, READ_ONLY, Access, create_app
from fdbrecipes.web.show import group_hex
from tests.helpers import eventually

pytestmark = pytest.mark.integration

#: What a browser sends with a form posted from the dashboard's own page.
SAME_ORIGIN = {"sec-fetch-site": "same-origin"}
HOSTILE = ("<script>alert(1)</script>", '"><img src=x onerror=alert(1)>', "' onmouseover='x")


@pytest.fixture
def places(fdb_subspace: Any) -> Dict[str, Any]:
    return {"jobs": Queue(fdb_subspace["jobs"], history=3600, max_deliveries=2),
            "tenants": FairQueue(fdb_subspace["tenants"], history=3600),
            "pool": WeightTree(fdb_subspace["pool"])}


def client(db: Any, structures: Dict[str, Any], **options: Any) -> TestClient:
    return TestClient(create_app(db, structures, **options), base_url="http://testserver")


def post(c: TestClient, path: str = "/act", **fields: str) -> Any:
    return c.post(path, data=fields, headers=SAME_ORIGIN, follow_redirects=False)


def bury_one(db: Any, q: Any, value: Any, reason: str = "broken") -> None:
    q.push(db, value)
    lease = q.claim(db, 30)
    assert lease is not None and lease.value == value
    assert q.bury(db, lease, reason)


def test_overview_and_every_tab(db: Any, places: Dict[str, Any]) -> None:
    jobs, tenants, pool = places["jobs"], places["tenants"], places["pool"]
    bury_one(db, jobs, "poison", "malformed input")
    jobs.push_many(db, ["first", "second"])
    jobs.push(db, "later", delay=600)
    assert jobs.claim(db, 60) is not None  # "first" in flight
    tenants.push(db, "report", group="acme")
    tenants.set_group(db, "acme", share=3, limit=2, rate=(10, 60.0))
    pool.push(db, "w", 5)
    c = client(db, places)
    page = c.get("/")
    assert page.status_code == 200
    row = re.search(r"jobs</strong></a></td><td[^>]*>queue</td>(.*?)</tr>", page.text, re.S)
    assert row is not None
    assert re.findall(r'class="n[^"]*">(?:<a [^>]*>)?([^<]*)<', row.group(1))[:4] == [
        "1", "1", "1", "1"]
    assert "fair-queue" in page.text and "weight-tree" in page.text
    tabs = {t: c.get("/structure", params={"s": "jobs", "tab": t}).text
            for t in ("pending", "delayed", "in-flight", "dead")}
    assert "&#39;second&#39;" in tabs["pending"] and "later" not in tabs["pending"]
    assert "&#39;later&#39;" in tabs["delayed"] and "in 10.0 min" in tabs["delayed"]
    assert "&#39;first&#39;" in tabs["in-flight"]
    assert "&#39;poison&#39;" in tabs["dead"] and "malformed input" in tabs["dead"]
    groups = c.get("/structure", params={"s": "tenants"}).text
    assert "&#39;acme&#39;" in groups and "10 per 60 s" in groups
    one = c.get("/structure", params={"s": "tenants", "g": group_hex("acme")})
    assert "&#39;report&#39;" in one.text
    assert c.get("/structure", params={"s": "pool"}).status_code == 200
    assert c.get("/structure", params={"s": "nothing"}).status_code == 404
    assert c.get("/structure", params={"s": "jobs", "tab": "nope"}).status_code == 400
    assert c.get("/structure", params={"s": "jobs", "limit": "100000"}).status_code == 400


def test_search_reads_a_bounded_prefix(db: Any, places: Dict[str, Any]) -> None:
    places["jobs"].push_many(db, [f"order {i}" for i in range(30)])
    c = client(db, places)
    page = c.get("/structure", params={"s": "jobs", "q": "order 2"}).text
    assert page.count("&#39;order 2") == 11  # 2 and 20..29
    assert "Searched the first 30 rows" in page


def test_a_job_page_and_its_cancel(db: Any, places: Dict[str, Any],
                                   caplog: pytest.LogCaptureFixture) -> None:
    jobs = places["jobs"]
    id_ = jobs.push(db, "resize", id=b"job-1")
    lease = jobs.claim(db, 30)
    assert lease is not None
    jobs.release(db, lease, error=JobError("ValueError", "<script>bad</script>",
                                           "Traceback: <img src=x>\n" * 3))
    c = client(db, places, access=FULL)
    page = c.get("/job", params={"s": "jobs", "text": "job-1"})
    assert page.status_code == 200, page.text
    assert "retrying" in page.text or "pending" in page.text
    assert "&lt;script&gt;bad&lt;/script&gt;" in page.text and "<script>" not in page.text
    assert "&lt;img src=x&gt;" in page.text
    assert c.get("/job", params={"s": "jobs", "text": "nope"}).status_code == 404
    with caplog.at_level(logging.INFO, logger="fdbrecipes.web.audit"):
        answer = post(c, s="jobs", action="cancel", id=b"job-1".hex(), yes="1")
    assert answer.status_code == 303 and answer.headers["location"].startswith("/job?")
    record = jobs.job(db, id_)
    assert record is not None and record.state == "cancelled"
    [line] = [r.getMessage() for r in caplog.records if r.name == "fdbrecipes.web.audit"]
    assert "action='cancel'" in line and "structure='jobs'" in line and "count=1" in line
    assert "cancelled" in c.get(answer.headers["location"]).text


def test_requeue_is_capped_purge_and_remove(db: Any, places: Dict[str, Any]) -> None:
    jobs = places["jobs"]
    for i in range(3):
        bury_one(db, jobs, f"dead {i}")
    c = client(db, places, access=FULL)
    answer = post(c, s="jobs", action="requeue", yes="1", limit="2")
    assert answer.status_code == 303
    assert "requeued 2 dead letter(s); 1 remain" in c.get(answer.headers["location"]).text
    assert jobs.stats(db).dead == 1 and jobs.stats(db).visible == 2
    assert post(c, s="jobs", action="purge", yes="1").status_code == 303
    assert jobs.stats(db).dead == 0
    jobs.push(db, "unwanted", id=b"u-1")
    assert post(c, s="jobs", action="remove", text="u-1").status_code == 400  # no "yes"
    assert post(c, s="jobs", action="remove", text="u-1", yes="1").status_code == 303
    assert [v for v in jobs.items(db)] == ["dead 0", "dead 1"]
    tenants = places["tenants"]
    tenants.push(db, "fair dead", group="acme")
    lease = tenants.claim(db, 30)
    assert lease is not None and tenants.bury(db, lease)
    assert post(c, s="tenants", action="purge", yes="1").status_code == 400  # which group?
    assert post(c, s="tenants", action="purge", yes="1",
                g=group_hex("acme")).status_code == 303
    assert tenants.stats(db, "acme").dead == 0


@pytest.fixture
def running_worker(db: Any, places: Dict[str, Any]) -> Iterator[Worker]:
    started = threading.Event()
    release = threading.Event()

    def handle(job: Any) -> None:
        started.set()
        release.wait(20)

    jobs = places["jobs"]
    jobs.push(db, "slow")
    worker = Worker(db, jobs, handle, concurrency=1, lease_seconds=3)
    thread = threading.Thread(target=worker.run, daemon=True)
    thread.start()
    assert started.wait(20), "the worker took no job"
    yield worker
    release.set()
    worker.stop()
    thread.join(30)
    assert not thread.is_alive()


def test_workers_page_and_quiet(db: Any, places: Dict[str, Any],
                                running_worker: Worker) -> None:
    jobs = places["jobs"]
    overview = client(db, places).get("/").text  # the last hour drawn
    assert re.search(r'<svg [^>]*role="img"[^>]*><polyline [^>]*points="[0-9., ]+"/></svg>',
                     overview)
    eventually(lambda: any(w.running for w in jobs.workers(db)), 10, "a worker running")
    [info] = jobs.workers(db)
    c = client(db, places, access=FULL)
    page = c.get("/workers", params={"s": "jobs"}).text
    assert info.id in page and 'value="quiet"' in page
    running_id = info.running[0].id
    assert running_id is not None and f"id={running_id.hex()}" in page
    answer = post(c, s="jobs", action="quiet", worker=info.id)
    assert answer.status_code == 303
    assert "asked the worker to quiet" in c.get(answer.headers["location"]).text
    eventually(lambda: [w.state for w in jobs.workers(db)] == ["quiet"], 10, "quiet")
    assert "no live worker" in c.get(post(c, s="jobs", action="quiet", worker="nobody")
                                     .headers["location"]).text


def test_read_only_hides_and_refuses_actions(db: Any, places: Dict[str, Any]) -> None:
    jobs = places["jobs"]
    bury_one(db, jobs, "stays dead")
    c = client(db, places)  # READ_ONLY by default
    page = c.get("/structure", params={"s": "jobs", "tab": "dead"}).text
    assert 'method="post"' not in page and "read only" in page
    assert post(c, s="jobs", action="purge", yes="1").status_code == 403
    partial = client(db, places, access=Access.allowing(["requeue"], who="ann"))
    page = partial.get("/structure", params={"s": "jobs", "tab": "dead"}).text
    assert 'value="requeue"' in page and 'value="purge"' not in page
    assert post(partial, s="jobs", action="purge", yes="1").status_code == 403
    assert jobs.stats(db).dead == 1


def test_access_is_decided_per_request(db: Any, places: Dict[str, Any],
                                       caplog: pytest.LogCaptureFixture) -> None:
    def rule(request: Any) -> Access:
        user = request.headers.get("x-user", "")
        return Access(FULL.actions, who=user) if user == "admin" else READ_ONLY

    bury_one(db, places["jobs"], "x")
    c = client(db, places, access=rule)
    assert post(c, s="jobs", action="purge", yes="1").status_code == 403
    with caplog.at_level(logging.INFO, logger="fdbrecipes.web.audit"):
        answer = c.post("/act", data={"s": "jobs", "action": "purge", "yes": "1"},
                        headers={**SAME_ORIGIN, "x-user": "admin"}, follow_redirects=False)
    assert answer.status_code == 303 and places["jobs"].stats(db).dead == 0
    assert "who='admin' action='purge'" in caplog.text


def test_cross_site_posts_are_refused(db: Any, places: Dict[str, Any]) -> None:
    jobs = places["jobs"]
    bury_one(db, jobs, "kept")
    c = client(db, places, access=FULL)
    form = {"s": "jobs", "action": "purge", "yes": "1"}
    for headers in ({"sec-fetch-site": "cross-site"}, {"sec-fetch-site": "same-site"},
                    {"origin": "https://evil.example"}, {"origin": "null"}):
        answer = c.post("/act", data=form, headers=headers, follow_redirects=False)
        assert answer.status_code == 403, headers
    assert c.get("/act").status_code == 405
    assert jobs.stats(db).dead == 1
    same = c.post("/act", data=form, headers={"origin": "http://testserver"},
                  follow_redirects=False)
    assert same.status_code == 303 and jobs.stats(db).dead == 0


def test_security_headers_on_every_answer(db: Any, places: Dict[str, Any]) -> None:
    c = client(db, places)
    for answer in (c.get("/"), c.get("/structure", params={"s": "nothing"}),
                   c.get("/missing"), c.post("/act", headers={"sec-fetch-site": "cross-site"})):
        assert answer.headers["x-content-type-options"] == "nosniff"
        assert answer.headers["cache-control"] == "no-store"
        assert "frame-ancestors 'none'" in answer.headers["content-security-policy"]
    page = c.get("/")
    nonce = re.search(r"'nonce-([^']+)'", page.headers["content-security-policy"])
    assert nonce is not None and f'<style nonce="{nonce.group(1)}">' in page.text
    assert nonce.group(1) not in c.get("/").headers["content-security-policy"]


def test_mounted_under_a_sub_path(db: Any, places: Dict[str, Any]) -> None:
    outer = Starlette(routes=[Mount("/ops/queues", app=create_app(db, places, access=FULL))])
    c = TestClient(outer, base_url="http://testserver")
    bury_one(db, places["jobs"], "x")
    page = c.get("/ops/queues/")
    assert page.status_code == 200
    links = re.findall(r'(?:href|action)="([^"]+)"', page.text)
    assert links and all(link.startswith("/ops/queues/") for link in links), links
    dead = c.get("/ops/queues/structure", params={"s": "jobs", "tab": "dead"}).text
    assert 'action="/ops/queues/act"' in dead
    answer = post(c, "/ops/queues/act", s="jobs", action="purge", yes="1")
    assert answer.status_code == 303
    assert answer.headers["location"].startswith("/ops/queues/structure?")


def test_hostile_values_are_escaped(db: Any, places: Dict[str, Any]) -> None:
    jobs, tenants = places["jobs"], places["tenants"]
    bury_one(db, jobs, "<script>dead</script>", reason="<script>why</script>")
    for text in HOSTILE:
        jobs.push(db, text)
        tenants.push(db, "x", group=text)
    jobs.push(db, b"\xff\xfe<script>not utf-8</script>\x00")
    jobs.push(db, "<i>" * 30_000)  # 90,000 characters
    c = client(db, places, access=FULL)
    names = {"<svg onload=alert(1)>": jobs}
    evil = client(db, names, access=FULL)
    pages = [c.get("/structure", params={"s": "jobs", "limit": "500"}),
             c.get("/structure", params={"s": "jobs", "tab": "dead"}),
             c.get("/structure", params={"s": "tenants"}),
             c.get("/structure", params={"s": "tenants", "g": group_hex(HOSTILE[1])}),
             c.get("/structure", params={"s": "jobs", "q": "<script>"}),
             evil.get("/"), evil.get("/structure", params={"s": "<svg onload=alert(1)>"}),
             c.get("/job", params={"s": "jobs", "text": "<script>x</script>"})]
    for page in pages:
        body = page.text
        assert "<script" not in body and "<img" not in body and "<svg on" not in body, body
        assert "<i>" not in body and "onerror=alert" not in body.replace("onerror=alert(1)&gt;",
                                                                          "")
    assert "&lt;script&gt;" in pages[0].text and r"\xff\xfe" in pages[0].text
    assert "more characters" in pages[0].text and len(pages[0].content) < 200_000
    assert "&lt;script&gt;why&lt;/script&gt;" in pages[1].text


def test_pause_and_resume_from_the_page(db: Any, places: Dict[str, Any],
                                        caplog: pytest.LogCaptureFixture) -> None:
    jobs = places["jobs"]
    jobs.push(db, "waiting")
    c = client(db, places, access=FULL)
    page = c.get("/structure", params={"s": "jobs"}).text
    assert '"pill run">running' in page and 'value="pause"' in page
    assert post(c, s="jobs", action="pause").status_code == 400  # not confirmed
    with caplog.at_level(logging.INFO, logger="fdbrecipes.web.audit"):
        answer = post(c, s="jobs", action="pause", yes="1")
    assert answer.status_code == 303 and jobs.paused(db) is not None
    assert "action='pause'" in caplog.text
    assert jobs.claim(db, 30) is None
    page = c.get(answer.headers["location"]).text
    assert '"pill paused">paused</span> since' in page and 'value="resume"' in page
    assert 'class="pill paused"' in c.get("/").text
    assert post(client(db, places), s="jobs", action="resume").status_code == 403
    assert post(c, s="jobs", action="resume").status_code == 303
    assert jobs.paused(db) is None and jobs.pop(db) == "waiting"


def test_a_groups_policy_is_edited(db: Any, places: Dict[str, Any]) -> None:
    tenants = places["tenants"]
    tenants.push(db, "r", group="<acme>")
    c = client(db, places, access=FULL)
    page = c.get("/structure", params={"s": "tenants", "group": "<acme>"}).text
    assert "&lt;acme&gt;" in page and 'value="policy"' in page and "rate none" in page
    g = group_hex("<acme>")
    answer = post(c, s="tenants", g=g, action="policy", share="4", limit="2",
                  rate_count="10", rate_seconds="60")
    assert answer.status_code == 303
    policy = tenants.group_policy(db, "<acme>")
    assert (policy.share, policy.limit, policy.rate) == (4, 2, (10, 60.0))
    assert "10 per 60 s" in c.get(answer.headers["location"]).text
    for bad in ({"share": "0"}, {"share": "x"}, {"rate_count": "3"}):
        assert post(c, s="tenants", g=g, action="policy", **bad).status_code == 400, bad
    assert tenants.group_policy(db, "<acme>").share == 4
    assert post(c, s="jobs", action="policy", share="2").status_code == 400
    assert post(client(db, places, access=Access.allowing(["pause"])), s="tenants", g=g,
                action="policy", share="1").status_code == 403


def test_schedules_page(db: Any, places: Dict[str, Any]) -> None:
    from fdbrecipes import Schedule, drive

    jobs = places["jobs"]
    nightly = Schedule(jobs, "<nightly>", every=3600, value="report")
    op, upcoming = nightly.pushing(db)
    drive(op)  # what a worker carrying the schedule does
    jobs.push(db, "report", id=nightly.slot_id(upcoming - 3600))  # the last slot's job
    lease = jobs.claim(db, 30)
    assert lease is not None
    jobs.ack(db, lease)
    c = client(db, places, schedules=[nightly])
    page = c.get("/schedules").text
    row = re.search(r"<tr><td>&lt;nightly&gt;</td>(.*?)</tr>", page, re.S)
    assert row is not None, page
    cells = re.findall(r"<td>(.*?)</td>", row.group(1), re.S)
    assert "jobs" in cells[0] and cells[1] == "60.0 min"
    assert cells[3] == "delayed" and cells[5] == "succeeded"
    assert 'href="/schedules"' in c.get("/").text
    with pytest.raises(TypeError, match="Schedule"):
        create_app(db, places, schedules=["nightly"])


def test_stored_schedules_listed_paused_resumed_and_run_now(
        db: Any, places: Dict[str, Any], fdb_subspace: Any,
        caplog: pytest.LogCaptureFixture) -> None:
    pytest.importorskip("cronsim")
    from fdbrecipes import Schedules

    jobs, tenants = places["jobs"], places["tenants"]
    store = Schedules(fdb_subspace["schedules"])
    store.add(db, "<nightly>", target=jobs, cron="0 3 * * *", tz="Europe/Berlin")
    store.add(db, "fair", target=tenants, every=60.0, group="acme", paused=True)
    c = client(db, places, schedules=[store], access=FULL)
    page = c.get("/schedules").text
    assert "&lt;nightly&gt;" in page and "<code>0 3 * * *</code> Europe/Berlin" in page
    assert 'value="pause-schedule"' in page and 'value="resume-schedule"' in page
    assert page.count('value="run-now"') == 2
    with caplog.at_level(logging.INFO, logger="fdbrecipes.web.audit"):
        refused = post(c, action="pause-schedule", store="0", name="<nightly>")
        assert refused.status_code == 400 and "confirmation" in refused.text
        done = post(c, action="pause-schedule", store="0", name="<nightly>", yes="1")
        assert done.status_code == 303 and done.headers["location"].startswith("/schedules?")
        assert "&lt;nightly&gt;: paused" in c.get(done.headers["location"]).text
        assert store.get(db, "<nightly>").paused_at is not None
        resumed = post(c, action="resume-schedule", store="0", name="<nightly>")
        assert "resumed" in c.get(resumed.headers["location"]).text
        asked = post(c, action="run-now", store="0", name="fair", yes="1")
        assert "asked the workers" in c.get(asked.headers["location"]).text
        assert post(c, action="run-now", store="0", name="nope", yes="1").status_code == 404
        assert post(c, action="run-now", store="7", name="fair", yes="1").status_code == 404
    assert store.get(db, "<nightly>").paused_at is None
    assert store.get(db, "fair").requested == 1
    lines = [r.getMessage() for r in caplog.records if r.name == "fdbrecipes.web.audit"]
    acted = [line for line in lines if "outcome='done'" in line]  # each action audited
    assert [re.findall(r"action='([a-z-]+)'", line) for line in acted] == [
        ["pause-schedule"], ["resume-schedule"], ["run-now"]], lines
    assert all("structure='schedules 0'" in line for line in acted)
    assert "target='<nightly>'" in acted[0] and "target='fair'" in acted[2]
    [failed] = [line for line in lines if "outcome=\"failed" in line]  # tried: audited
    assert "target='nope'" in failed and "no schedule named" in failed
    refusals = [line for line in lines if line.startswith("refused")]
    assert [r.split()[1] for r in refusals] == ["status=400", "status=404", "status=404"]
    assert "no such schedule store" in refusals[2]  # refused before acting: no audit line
    read_only = client(db, places, schedules=[store])
    assert 'value="run-now"' not in read_only.get("/schedules").text
    assert post(read_only, action="run-now", store="0", name="fair", yes="1").status_code == 403
    assert store.get(db, "fair").requested == 1


def test_items_in_flight_given_back_or_deleted(db: Any, places: Dict[str, Any]) -> None:
    jobs, tenants = places["jobs"], places["tenants"]
    jobs.push_many(db, ["a", "b", "c"])
    leases = jobs.claim_many(db, 3, 60)
    tokens = [lease.token.hex() for lease in leases]
    c = client(db, places, access=FULL)
    page = c.get("/structure", params={"s": "jobs", "tab": "in-flight"}).text
    assert all(f'form="chosen" name="token" value="{t}"' in page for t in tokens)
    answer = c.post("/act", data={"s": "jobs", "action": "release", "yes": "1",
                                  "token": tokens[:2]}, headers=SAME_ORIGIN,
                    follow_redirects=False)
    assert answer.status_code == 303
    assert "gave 2 of 2 back" in c.get(answer.headers["location"]).text
    assert jobs.stats(db).visible == 2 and jobs.stats(db).in_flight == 1
    assert post(c, s="jobs", action="ack", yes="1", token=tokens[2]).status_code == 303
    assert jobs.stats(db).in_flight == 0 and jobs.size(db) == 2
    # again: those leases ended
    answer = post(c, s="jobs", action="ack", yes="1", token=tokens[0])
    assert "deleted 0 of 1" in c.get(answer.headers["location"]).text
    assert post(c, s="jobs", action="ack", yes="1").status_code == 400  # none chosen
    assert post(c, s="jobs", action="ack", yes="1", token="zz").status_code == 400
    tenants.push(db, "t", group="acme")
    lease = tenants.claim(db, 60)
    assert lease is not None
    page = c.get("/structure", params={"s": "tenants", "g": group_hex("acme"),
                                       "tab": "in-flight"}).text
    assert lease.token.hex() in page
    assert post(c, s="tenants", g=group_hex("acme"), action="release", yes="1",
                token=lease.token.hex()).status_code == 303
    assert tenants.stats(db, "acme").visible == 1
    page = client(db, places).get("/structure", params={"s": "jobs", "tab": "in-flight"})
    assert 'name="token"' not in page.text  # read only: nothing to choose


def test_a_link_from_elsewhere_cannot_put_words_on_the_page(db: Any,
                                                           places: Dict[str, Any]) -> None:
    c = client(db, places, access=FULL)
    page = c.get("/", params={"said": "Session expired: log in at evil.example"}).text
    assert "evil.example" not in page
    answer = post(c, s="jobs", action="pause", yes="1")
    assert "paused" in c.get(answer.headers["location"]).text
    forged = answer.headers["location"].replace("said=paused", "said=hacked")
    assert "hacked" not in c.get(forged).text
