"""The dashboard's limits and workflows pages through its ASGI app, on a real server:
a limit store's limits and a key's state, set and delete (checked whole, audited,
refused without the right or from another site, nothing written for bad input); a
workflow store's list, a workflow's counts and graph (SVG: names, edges, colours by
state), its cancel."""

from __future__ import annotations

import logging
import re
from typing import Any, Dict, List, Tuple

import pytest

from fdbrecipes import Limits, Queue, Worker, concurrency, rate
from fdbrecipes.jobs import Discard, Job
from fdbrecipes.workflow import Workflows

pytest.importorskip("starlette", reason="the dashboard's extra: pip install 'fdbrecipes[web]'")

from starlette.testclient import TestClient

from fdbrecipes.web import FULL, create_app
from fdbrecipes.web.dag import COLOURS

pytestmark = pytest.mark.integration

SAME_ORIGIN = {"sec-fetch-site": "same-origin"}
CROSS_SITE = {"sec-fetch-site": "cross-site", "origin": "https://evil.example"}


def post(c: TestClient, headers: Dict[str, str] = SAME_ORIGIN, **fields: str) -> Any:
    return c.post("/act", data=fields, headers=headers, follow_redirects=False)


def audited(caplog: pytest.LogCaptureFixture) -> List[str]:
    return [r.getMessage() for r in caplog.records if r.name == "fdbrecipes.web.audit"]


def customer(value: Any) -> Any:
    return value[0]


def test_limits_page_lists_shows_a_key_sets_and_deletes(
        db: Any, fdb_subspace: Any, caplog: pytest.LogCaptureFixture) -> None:
    limits = Limits(fdb_subspace["limits"])
    limits.set(db, "per-customer", concurrency(2))
    limits.set(db, "billing-api", rate(100, 60))
    q = Queue(fdb_subspace["q"], limits=[limits.use("per-customer", key=customer)])
    q.push_many(db, [("acme", 1), ("acme", 2), ("acme", 3), ("globex", 1)])
    assert len(q.claim_many(db, 4, lease_seconds=60)) == 3  # acme's third is parked
    c = TestClient(create_app(db, {"q": q}, limits=[limits], access=FULL))
    page = c.get("/limits").text
    row = re.search(r"per-customer</strong></a></td>(.*?)</tr>", page, re.S)
    assert row is not None
    assert re.findall(r'class="n[^"]*">([^<]*)<', row.group(1)) == ["2", "-", "3", "1"]
    assert "billing-api" in page and "60 s" in page and 'href="/limits?store=0"' in page
    assert 'value="set-limit"' in page and page.count('value="delete-limit"') == 2
    state = c.get("/limits", params={"name": "per-customer", "key": "'acme'"}).text
    assert re.search(r"<dt>running</dt><dd>2</dd>.*<dt>parked</dt><dd>1</dd>", state, re.S)
    hostile = c.get("/limits", params={"name": "per-customer", "key": "'<script>x'"}).text
    assert "&#39;&lt;script&gt;x&#39;" in hostile and "<script>" not in hostile
    assert "No limit is named" in c.get("/limits", params={"name": "nope"}).text
    assert c.get("/limits", params={"name": "per-customer", "key": "(("}).status_code == 400
    assert c.get("/limits", params={"name": "bad name!"}).status_code == 400
    assert c.get("/limits", params={"store": "1"}).status_code == 404

    version = limits.version(db)
    with caplog.at_level(logging.INFO, logger="fdbrecipes.web.audit"):
        for bad, why in [({"kind": "concurrency", "n": "0"}, "n must be"),
                         ({"kind": "concurrency", "n": "-3"}, "n must be"),
                         ({"kind": "concurrency", "n": "two"}, "n: a number"),
                         ({"kind": "rate", "n": "5"}, "per: a rate needs"),
                         ({"kind": "rate", "n": "5", "per": "0"}, "per_seconds must be"),
                         ({"kind": "concurrency", "n": "5", "per": "9"}, "no window"),
                         ({"kind": "bogus", "n": "5"}, "kind: concurrency or rate")]:
            answer = post(c, action="set-limit", store="0", name="per-customer", **bad)
            assert answer.status_code == 400 and why in answer.text, (bad, answer.text)
        assert post(c, action="set-limit", store="0", name="bad name!", kind="concurrency",
                    n="1").status_code == 400
        assert post(c, action="delete-limit", store="0", name="billing-api").status_code == 400
        assert post(c, action="set-limit", store="3", name="x", kind="concurrency",
                    n="1").status_code == 404
        assert limits.version(db) == version  # nothing written
        assert not [line for line in audited(caplog) if not line.startswith("refused")]

        done = post(c, action="set-limit", store="0", name="per-customer", kind="concurrency",
                    n="3")
        assert done.status_code == 303 and done.headers["location"].startswith("/limits?")
        assert "per-customer: concurrency(3) (was concurrency(2))" in c.get(
            done.headers["location"]).text
        assert limits.get(db, "per-customer") == concurrency(3)
        made = post(c, action="set-limit", store="0", name="exports", kind="rate", n="10",
                    per="2.5")
        assert made.status_code == 303 and limits.get(db, "exports") == rate(10, 2.5)
        gone = post(c, action="delete-limit", store="0", name="billing-api", yes="1")
        assert gone.status_code == 303 and limits.get(db, "billing-api") is None
        again = post(c, action="delete-limit", store="0", name="billing-api", yes="1")
        assert again.status_code == 404 and "no limit is named" in again.text
    lines = audited(caplog)
    acted = [line for line in lines if "outcome='done'" in line]
    assert [re.findall(r"action='([a-z-]+)'", line)[0] for line in acted] == [
        "set-limit", "set-limit", "delete-limit"], lines
    assert all("structure='limits 0'" in line for line in acted)
    assert "target='per-customer'" in acted[0] and "target='billing-api'" in acted[2]
    [failed] = [line for line in lines if "outcome=\"failed" in line]  # tried: audited
    assert "target='billing-api'" in failed

    assert post(c, CROSS_SITE, action="delete-limit", store="0", name="exports",
                yes="1").status_code == 403
    assert post(c, {**SAME_ORIGIN, "host": "evil.example"}, action="delete-limit", store="0",
                name="exports", yes="1").status_code == 421  # a rebound page
    read_only = TestClient(create_app(db, {"q": q}, limits=[limits]))
    page = read_only.get("/limits").text
    assert "exports" in page and 'value="set-limit"' not in page
    assert 'value="delete-limit"' not in page
    assert post(read_only, action="delete-limit", store="0", name="exports",
                yes="1").status_code == 403
    assert limits.get(db, "exports") == rate(10, 2.5)
    with pytest.raises(TypeError):
        create_app(db, {"q": q}, limits=[q])


def test_the_limits_page_reads_its_counts_capped(db: Any, fdb_subspace: Any,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """Each limit's counts read at most TOTALS_CAP keys: a count that stopped there is
    shown with a "+", and the page says what that means; one under the cap is exact."""
    from fdbrecipes.web import flows

    monkeypatch.setattr(flows, "TOTALS_CAP", 2)
    limits = Limits(fdb_subspace["limits"])
    limits.set(db, "all", concurrency(10))
    limits.set(db, "per-customer", concurrency(1))
    limits.set(db, "idle", concurrency(5))
    q = Queue(fdb_subspace["q"], limits=[limits.use("all"),
                                         limits.use("per-customer", key=customer)])
    q.push_many(db, [("acme", 1), ("acme", 2), ("acme", 3), ("acme", 4), ("globex", 1),
                     ("initech", 1)])
    # a claim each: a claim keeps its slots as runs, a key a run (3 keys here)
    assert all(q.claim(db, 60) is not None for _ in range(3))  # acme's other three parked
    assert q.claim(db, 60) is None
    c = TestClient(create_app(db, {"q": q}, limits=[limits]))
    page = c.get("/limits").text

    def counts(name: str) -> List[str]:
        row = re.search(name + r"</strong></a></td>(.*?)</tr>", page, re.S)
        assert row is not None, name
        return re.findall(r'class="n[^"]*">([^<]*)<', row.group(1))[2:]

    assert counts("all") == ["2+", "0"]            # 3 running: 2 slots read
    assert counts("per-customer") == ["2+", "2+"]  # 3 running, 3 parked
    assert counts("idle") == ["0", "0"]
    assert "Each count reads at most 2 keys" in page and "stopped there" in page
    monkeypatch.setattr(flows, "TOTALS_CAP", 1_000)
    page = c.get("/limits").text
    assert counts("all") == ["3", "0"] and counts("per-customer") == ["3", "3"]
    assert "stopped there" not in page


def nodes_drawn(page: str) -> Dict[str, Tuple[str, str]]:
    """Each node box of a page's SVG: its name (escaped, as the page has it) to its
    state and fill colour."""
    found = re.findall(r'<g class="node ([a-z]+)"><title>(.*?): [a-z]+(?: \(.*?\))?</title>'
                       r'<rect [^>]*fill="(#[0-9a-f]+)"', page)
    return {name: (state, fill) for state, name, fill in found}


def fail_b(job: Job) -> str:
    if job.value == "b":
        raise Discard("b fails on purpose")
    return f"did {job.value}"


def test_workflows_pages_draw_the_graph_and_cancel(
        db: Any, fdb_subspace: Any, caplog: pytest.LogCaptureFixture) -> None:
    waits = Queue(fdb_subspace["waits"], history=3600)  # never drained
    runs = Queue(fdb_subspace["runs"], history=3600)
    flows = Workflows(fdb_subspace["flows"], structures=[waits, runs])
    ids = []
    for q in (waits, runs):
        flow = flows.new()
        a = flow.add(q, "a", name="<script>a</script>")
        b = flow.add(q, "b", name="b")
        c = flow.add(q, "c", deps=[a, b], name="c")
        flow.add(q, "d", deps=[c], name="d")
        ids.append(flows.create(db, flow))
    waiting, failed = ids
    Worker(db, runs, fail_b, lease_seconds=10).run(burst=True)
    assert flows.status(db, failed).state == "failed"
    c = TestClient(create_app(db, {"waits": waits}, workflows=[flows], access=FULL))

    listed = c.get("/workflows").text
    for w, state in ((waiting, "running"), (failed, "failed")):
        assert f'href="/workflow?store=0&amp;id={w.hex()}"' in listed
        row = re.search(w.hex() + r'</code></a></td>\s*<td><span class="pill ([a-z]+)">',
                        listed)
        assert row is not None and row.group(1) == state
    assert 'href="/workflows?store=0"' in listed

    page = c.get("/workflow", params={"id": waiting.hex()}).text
    assert '<svg class="dag"' in page and "<script>" not in page
    assert nodes_drawn(page) == {
        "&lt;script&gt;a&lt;/script&gt;": ("queued", COLOURS["queued"][0]),
        "b": ("queued", COLOURS["queued"][0]), "c": ("waiting", COLOURS["waiting"][0]),
        "d": ("waiting", COLOURS["waiting"][0])}
    assert page.count('class="edge"') == 3  # a -> c, b -> c, c -> d
    links = dict(re.findall(r'<a class="job" href="([^"]*)"><g class="node [a-z]+"><title>'
                            r'(.*?): ', page))
    assert sorted(links.values()) == ["&lt;script&gt;a&lt;/script&gt;", "b"]  # queued ones
    for href in links:  # each leads to its job's page
        job = c.get(href.replace("&amp;", "&"))
        assert job.status_code == 200 and "pending" in job.text
    assert 'value="cancel-workflow"' in page
    over = c.get("/workflow", params={"id": failed.hex()}).text
    assert nodes_drawn(over) == {
        "&lt;script&gt;a&lt;/script&gt;": ("succeeded", COLOURS["succeeded"][0]),
        "b": ("failed", COLOURS["failed"][0]), "c": ("cancelled", COLOURS["cancelled"][0]),
        "d": ("cancelled", COLOURS["cancelled"][0])}
    assert "<title>b: failed (Discard: b fails on purpose)</title>" in over
    assert "<code>b</code>: Discard: b fails on purpose" in over
    assert 'value="cancel-workflow"' not in over  # over: nothing to cancel
    assert c.get("/workflow", params={"id": "00" * 16}).status_code == 404
    assert c.get("/workflow", params={"id": "zz"}).status_code == 400

    with caplog.at_level(logging.INFO, logger="fdbrecipes.web.audit"):
        assert post(c, CROSS_SITE, action="cancel-workflow", store="0", id=waiting.hex(),
                    yes="1").status_code == 403
        assert post(c, {**SAME_ORIGIN, "host": "evil.example"}, action="cancel-workflow",
                    store="0", id=waiting.hex(), yes="1").status_code == 421
        assert post(c, action="cancel-workflow", store="0",
                    id=waiting.hex()).status_code == 400  # not confirmed
        assert post(c, action="cancel-workflow", store="0", id="nothex",
                    yes="1").status_code == 400
        assert flows.status(db, waiting).state == "running"
        done = post(c, action="cancel-workflow", store="0", id=waiting.hex(), yes="1")
        assert done.status_code == 303
        assert done.headers["location"].startswith(f"/workflow?store=0&id={waiting.hex()}")
        assert "cancelled: nothing not started will run" in c.get(
            done.headers["location"]).text
        assert post(c, action="cancel-workflow", store="0", id="00" * 16,
                    yes="1").status_code == 404
    status = flows.status(db, waiting)
    assert status.state == "cancelled" and status.counts["cancelled"] == 4
    assert waits.size(db) == 0
    [line] = [line for line in audited(caplog) if "outcome='done'" in line]
    assert "action='cancel-workflow'" in line and f"target='{waiting.hex()}'" in line
    assert "structure='workflows 0'" in line and "count=1" in line
    read_only = TestClient(create_app(db, {"waits": waits}, workflows=[flows]))
    assert post(read_only, action="cancel-workflow", store="0", id=failed.hex(),
                yes="1").status_code == 403


def test_a_big_graph_is_drawn_capped(db: Any, fdb_subspace: Any) -> None:
    q = Queue(fdb_subspace["q"])
    flows = Workflows(fdb_subspace["flows"], structures=[q])
    flow = flows.new()
    root = flow.add(q, "root", name="root")
    kids = flow.add_many(q, list(range(300)), deps=[root])
    flow.add(q, "sink", deps=kids, name="sink")
    w = flows.create(db, flow)
    page = TestClient(create_app(db, {"q": q}, workflows=[flows])).get(
        "/workflow", params={"id": w.hex()}).text
    assert len(nodes_drawn(page)) == 22 and "+280 more" in page
    assert "Drawn: 22 of 302 nodes read" in page
    assert page.count('class="edge"') == 40  # root to 20 children, 20 children to sink
