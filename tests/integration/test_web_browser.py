"""Journeys through the dashboard in a real browser: Debian's headless ``chromium``,
driven over the DevTools protocol (``websocket-client``; the tests never download a
browser), against the app served by uvicorn on 127.0.0.1 and a real server.

Without chromium they skip with one line saying how to install it
(``FDBRECIPES_REQUIRE_BROWSER=1`` makes that a failure)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import threading
import urllib.request
from functools import partial
from pathlib import Path
from typing import Any, Dict, Iterator, Optional

import pytest

from fdbrecipes import Queue
from fdbrecipes.web import FULL, READ_ONLY, create_app
from tests.helpers import eventually
from tests.integration.web_served import Served

uvicorn = pytest.importorskip("uvicorn", reason="the dashboard's extra: pip install "
                              "'fdbrecipes[web]'")
websocket = pytest.importorskip("websocket", reason="the browser tests' DevTools client: "
                                "pip install websocket-client")

pytestmark = pytest.mark.integration

BROWSER = shutil.which("chromium") or shutil.which("chromium-browser")
#: Seconds any wait of these tests lasts at most.
DEADLINE = 30.0


def needs_browser() -> str:
    if BROWSER is None:
        reason = "no chromium: apt-get install -y chromium (the tests never download one)"
        if os.environ.get("FDBRECIPES_REQUIRE_BROWSER") == "1":
            pytest.fail(reason)
        pytest.skip(reason)
    return BROWSER


def until(check: Any, what: str) -> Any:
    """``check()`` once it is truthy; fails after :data:`DEADLINE` seconds."""
    return eventually(check, DEADLINE, what)


class Browser:
    """One headless Chromium page, driven over the DevTools protocol."""

    def __init__(self, path: str, profile: Path) -> None:
        self.process = subprocess.Popen(
            [path, "--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
             "--remote-debugging-port=0", f"--user-data-dir={profile}", "about:blank"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        port_file = profile / "DevToolsActivePort"
        port = until(lambda: port_file.exists() and port_file.read_text().split("\n")[0],
                     "chromium's DevTools port")
        targets = until(lambda: self._targets(int(port)), "a page")
        self.ws = websocket.create_connection(targets[0]["webSocketDebuggerUrl"],
                                              timeout=DEADLINE)
        self.next_id = 0

    @staticmethod
    def _targets(port: int) -> Optional[Any]:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/json/list", timeout=5) as f:
                pages = [t for t in json.load(f) if t["type"] == "page"]
        except OSError:
            return None
        return pages or None

    def call(self, method: str, **params: Any) -> Dict[str, Any]:
        self.next_id += 1
        self.ws.send(json.dumps({"id": self.next_id, "method": method, "params": params}))
        while True:  # events come in between; each recv is bounded by the timeout
            answer = json.loads(self.ws.recv())
            if answer.get("id") == self.next_id:
                assert "error" not in answer, answer
                result: Dict[str, Any] = answer["result"]
                return result

    def js(self, expression: str) -> Any:
        found = self.call("Runtime.evaluate", expression=expression, returnByValue=True)
        return found["result"].get("value")

    def loaded(self, before: Optional[float]) -> bool:
        origin = self.js("document.readyState === 'complete' && performance.timeOrigin")
        return bool(origin) and origin != before

    def go(self, url: str) -> str:
        before = self.js("performance.timeOrigin")
        self.call("Page.navigate", url=url)
        until(lambda: self.loaded(before), f"loading {url}")
        return self.text()

    def click(self, selector: str) -> str:
        """Click what ``selector`` finds and wait for the page it leads to."""
        before = self.js("performance.timeOrigin")
        assert self.js(f"!!document.querySelector({json.dumps(selector)})"), selector
        self.js(f"document.querySelector({json.dumps(selector)}).click()")
        until(lambda: self.loaded(before), f"the page after clicking {selector}")
        return self.text()

    def confirm(self, form: str, button: str) -> str:
        """Tick the confirmation box of ``form`` (a selector), then click ``button`` in
        it; the page it leads to."""
        self.js(f"document.querySelector({json.dumps(form + ' input[name=yes]')}).checked = true")
        return self.click(f"{form} {button}")

    def text(self) -> str:
        return str(self.js("document.body.innerText"))

    def screenshot(self, path: Path, width: int = 1200, height: int = 360) -> None:
        import base64

        self.call("Emulation.setDeviceMetricsOverride", width=width, height=height,
                  deviceScaleFactor=1, mobile=False)
        data = self.call("Page.captureScreenshot", format="png")["data"]
        path.write_bytes(base64.b64decode(data))

    def close(self) -> None:
        self.ws.close()
        self.process.terminate()
        self.process.wait(DEADLINE)


@pytest.fixture
def browser(tmp_path: Path) -> Iterator[Browser]:
    b = Browser(needs_browser(), tmp_path / "profile")
    yield b
    b.close()


@pytest.fixture
def jobs(db: Any, fdb_subspace: Any) -> Queue[Any]:
    return Queue(fdb_subspace, history=3600, max_deliveries=2)


def serve(db: Any, jobs: Queue[Any], **options: Any) -> Iterator[Served]:
    yield from serve_app(create_app(db, {"jobs": jobs}, **options))


@pytest.fixture
def full(db: Any, jobs: Queue[Any]) -> Iterator[Served]:
    yield from serve(db, jobs, access=FULL)


def bury(db: Any, jobs: Queue[Any], value: str) -> None:
    jobs.push(db, value)
    lease = jobs.claim(db, 30)
    assert lease is not None and jobs.bury(db, lease, "<b>broken</b>")


def artefact(shot: Path, name: str) -> None:
    """Keep ``shot`` as ``name`` in ``$FDBRECIPES_ARTEFACTS``, when it names a directory."""
    artefacts = os.environ.get("FDBRECIPES_ARTEFACTS")
    if artefacts:
        shutil.copy(shot, os.path.join(artefacts, name))


def test_overview_to_a_job_and_its_retry(db: Any, jobs: Queue[Any], full: Served,
                                         browser: Browser, tmp_path: Path) -> None:
    jobs.push(db, "<script>document.title='owned'</script>", id=b"job-7")
    lease = jobs.claim(db, 30)
    assert lease is not None and jobs.bury(db, lease, "<b>broken</b>")
    page = browser.go(full.url)
    assert "jobs" in page and browser.js("document.title") != "owned"
    shot = tmp_path / "overview.png"
    browser.screenshot(shot)
    assert shot.stat().st_size > 1000
    artefact(shot, "web-overview-journey.png")
    page = browser.click("a[href$='structure?s=jobs']")
    page = browser.click("a[href$='tab=dead']")
    assert "<script>document.title='owned'</script>" in page  # shown as text
    page = browser.click("td.v a")
    assert "dead" in page and "<b>broken</b>" in page and "Retry" in page
    page = browser.confirm("form:has(input[value=requeue])", "button")
    assert "requeued 1 of 1 chosen" in page and "pending" in page
    record = jobs.job(db, b"job-7")
    assert record is not None and record.state == "pending"
    page = browser.confirm("#cancel", "button")
    assert "cancelled" in page


def test_pages_follow_by_key(db: Any, jobs: Queue[Any], full: Served,
                             browser: Browser) -> None:
    for value in ("one", "two", "three"):
        bury(db, jobs, value)
    page = browser.go(full.url + "structure?s=jobs&tab=dead&limit=2")
    assert "'one'" in page and "'two'" in page and "'three'" not in page
    page = browser.click("nav.pager a")
    assert "'three'" in page and "'one'" not in page and "first page" in page


def test_dead_letters_requeued_and_a_pause(db: Any, jobs: Queue[Any], full: Served,
                                           browser: Browser) -> None:
    bury(db, jobs, "one")
    bury(db, jobs, "two")
    page = browser.go(full.url + "structure?s=jobs&tab=dead")
    assert "<b>broken</b>" in page
    page = browser.confirm("form:has(input[value=requeue])", "button")
    assert "requeued 2 dead letter(s); 0 remain" in page
    assert jobs.stats(db).dead == 0 and jobs.stats(db).visible == 2
    page = browser.confirm("form:has(input[value=pause])", "button")
    assert "Resume" in page and "nothing is taken" in page and jobs.paused(db) is not None
    page = browser.click("input[value=resume] ~ button")
    assert "running" in page and jobs.paused(db) is None


def test_denied_access_and_a_cross_site_form(db: Any, jobs: Queue[Any], browser: Browser,
                                             full: Served) -> None:
    bury(db, jobs, "kept")
    for served in serve(db, jobs, access=READ_ONLY):
        page = browser.go(served.url + "structure?s=jobs&tab=dead")
        assert "read only" in page
        assert not browser.js("document.querySelector('form[method=post]')")
    # a page of another origin (no CSP of ours) posting to the dashboard: refused
    evil = ("<form method=post action='" + full.url + "act'><input name=action value=purge>"
            "<input name=s value=jobs><input name=yes value=1><button>go</button></form>")
    other = Served(page_of(evil))
    try:
        browser.go(other.url)
        page = browser.click("button")
        assert "refused: cross-site request" in page
    finally:
        other.stop()
    assert jobs.stats(db).dead == 1


def page_of(html: str) -> Any:
    """An ASGI app answering every request with ``html``."""
    async def app(scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return
        await send({"type": "http.response.start", "status": 200,
                    "headers": [(b"content-type", b"text/html; charset=utf-8")]})
        await send({"type": "http.response.body", "body": html.encode()})
    return app


def test_chosen_items_in_flight_given_back(db: Any, jobs: Queue[Any], full: Served,
                                           browser: Browser) -> None:
    jobs.push_many(db, ["stuck 1", "stuck 2"])
    assert len(jobs.claim_many(db, 2, 300)) == 2
    browser.go(full.url + "structure?s=jobs&tab=in-flight")
    browser.js("document.querySelector('input[form=chosen][name=token]').checked = true")
    page = browser.confirm("#chosen", "button[value=release]")
    assert "gave 1 of 1 back" in page
    assert jobs.stats(db).visible == 1 and jobs.stats(db).in_flight == 1
    page = browser.confirm("#shown", "button[value=ack]")
    assert "deleted 1 of 1" in page and jobs.size(db) == 1


def test_screenshots_of_a_busy_dashboard(db: Any, fdb_subspace: Any, browser: Browser,
                                         tmp_path: Path) -> None:
    """The overview, a queue's dead letters and a job's page of a dashboard over every
    kind of structure, one queue served by a worker: screenshots kept as artefacts
    (docs/web-overview.png and docs/web-dead.png are these)."""
    from fdbrecipes import FairQueue, PriorityQueue, WeightTree, Worker

    images = Queue(fdb_subspace["images"], history=3600, max_deliveries=3)
    mail = PriorityQueue(fdb_subspace["mail"], history=3600)
    tenants = FairQueue(fdb_subspace["tenants"], history=3600)
    pool = WeightTree(fdb_subspace["pool"])
    done = threading.Event()

    def resize(job: Any) -> str:
        if job.value == "sleep":
            done.wait(DEADLINE)
        return f"resized {job.value}"

    images.push_many(db, [f"photo-{i}.jpg" for i in range(40)] + ["sleep"])
    worker = Worker(db, images, resize, concurrency=4, lease_seconds=1.5)
    thread = threading.Thread(target=worker.run, daemon=True)
    thread.start()
    try:
        until(lambda: images.stats(db).visible == 0 and images.stats(db).in_flight == 1,
              "the worker done with the photos")
        until(lambda: any(m.done for m in images.throughput(db, 5)), "the history written")
        assert images.command(db, worker.id, "quiet")  # it takes no more: the rest waits
        until(lambda: [w.state for w in images.workers(db)] == ["quiet"], "a quiet worker")
        for name, why in (("corrupt.jpg", "PIL.UnidentifiedImageError: cannot identify image"),
                          ("huge.tiff", "MemoryError"), ("<script>x</script>.gif", "<b>bad</b>")):
            images.push(db, name, id=name.encode())
            images.bury(db, drive_claim(db, images), why)
        images.push_many(db, [f"upload-{i}.png" for i in range(7)])
        images.push(db, "thumbnail-later.png", delay=900)
        mail.push_many(db, [(f"welcome {i}", i % 3) for i in range(12)])
        for g, n in (("acme", 5), ("globex", 2), ("initech", 9)):
            tenants.push_many(db, [f"{g} report {i}" for i in range(n)], group=g)
        tenants.set_group(db, "acme", share=3, limit=2)
        pool.push_many(db, [(f"server-{i}", 10 + i) for i in range(5)])
        mail.pause(db)
        app = create_app(db, {"images": images, "mail": mail, "tenants": tenants,
                              "pool": pool}, access=FULL)
        for served in serve_app(app):
            browser.go(served.url)
            shot = tmp_path / "web-overview.png"
            browser.screenshot(shot, 1200, 330)
            artefact(shot, "web-overview.png")
            browser.go(served.url + "structure?s=images&tab=dead")
            shot = tmp_path / "web-dead.png"
            browser.screenshot(shot, 1200, 620)
            artefact(shot, "web-dead.png")
            browser.go(served.url + "job?s=images&text=corrupt.jpg")
            shot = tmp_path / "web-job.png"
            browser.screenshot(shot, 1200, 620)
            artefact(shot, "web-job.png")
            assert "PIL.UnidentifiedImageError" in browser.text()
    finally:
        done.set()
        worker.stop()
        thread.join(DEADLINE)
    assert not thread.is_alive()


def drive_claim(db: Any, q: Queue[Any]) -> Any:
    """One lease of ``q``'s oldest item, claimed under a worker's name."""
    from fdbrecipes import drive

    [lease] = drive(q.ops.claim_many(db, 1, 300, holder="host-7-resizer"))
    return lease


def serve_app(app: Any) -> Iterator[Served]:
    served = Served(app)
    yield served
    served.stop()


def test_a_workflows_graph_drawn_then_cancelled(db: Any, fdb_subspace: Any, browser: Browser,
                                                tmp_path: Path) -> None:
    """A workflow's page in the browser: its SVG graph laid out (every box and arrow
    drawn, nothing blocked by the page's policy), then the cancel button (a screenshot
    kept as an artefact: docs/web-workflow.png is this)."""
    from fdbrecipes import Worker
    from fdbrecipes.workflow import Workflows

    fetch = Queue(fdb_subspace["fetch"], history=3600)
    quick = Queue(fdb_subspace["quick"], history=3600)
    flows = Workflows(fdb_subspace["flows"], structures=[fetch, quick])
    flow = flows.new()
    source = flow.add(quick, "source", name="download <raw>")
    parts = [flow.add(quick if i < 2 else fetch, i, deps=[source], name=f"parse part {i}")
             for i in range(4)]
    merged = flow.add(fetch, "merge", deps=parts, name="merge")
    flow.add(fetch, "index", deps=[merged], name="index")
    flow.add(fetch, "notify", deps=[merged], name="notify")
    w = flows.create(db, flow)
    Worker(db, quick, str, lease_seconds=10).run(burst=True)  # the source, parts 0 and 1
    assert flows.status(db, w).counts["succeeded"] == 3
    for served in serve_app(create_app(db, {"fetch": fetch}, workflows=[flows],
                                       access=FULL)):
        page = browser.go(served.url + "workflows")
        assert w.hex() in page
        page = browser.click(f"a[href$='{w.hex()}']")
        assert "running" in page and "download <raw>" in page
        assert browser.js("document.querySelectorAll('svg.dag g.node').length") == 8
        assert browser.js("document.querySelectorAll('svg.dag path.edge').length") == 10
        assert browser.js("document.querySelector('svg.dag rect').getBBox().width") > 0
        shot = tmp_path / "web-workflow.png"
        browser.screenshot(shot, 1200, 560)
        assert shot.stat().st_size > 1000
        artefact(shot, "web-workflow.png")
        # the nodes whose job was pushed into a structure of the dashboard link to its
        # page: parts 2 and 3 (fetch's, queued), not the waiting ones nor quick's
        linked = "[...document.querySelectorAll('svg.dag a.job title')].map(t => t.textContent)"
        assert browser.js(linked) == ["parse part 2: queued", "parse part 3: queued"]
        before = browser.js("performance.timeOrigin")
        browser.js("document.querySelector('svg.dag a.job').dispatchEvent(new MouseEvent("
                   "'click', {bubbles: true, cancelable: true, view: window}))")
        until(partial(browser.loaded, before), "the job page after clicking a node")
        page = browser.text()
        assert "Job" in page and "pending" in page and "fetch" in page
        browser.go(served.url + f"workflow?store=0&id={w.hex()}")
        page = browser.confirm("form:has(input[value=cancel-workflow])", "button")
        assert "cancelled: nothing not started will run" in page
    assert flows.status(db, w).state == "cancelled"
