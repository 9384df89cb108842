"""Tasks on a real server, in this process: defer (in a caller's transaction or its own
retry loop), arguments refused before anything is written, Worker(db, app) and
AsyncWorker(db, app) running them (results, retries, a task's own retries and backoff,
follow-ups, unknown task names dead-lettered), priority and fair queues, and one trace
from a request to a follow-up's run (an in-memory OpenTelemetry exporter)."""

from __future__ import annotations

import asyncio
import dataclasses
import datetime
import enum
import time
from typing import Any, Dict, List, Optional

import fdb
import pytest

from fdbrecipes import Backoff, JobFailedError, Queue, Worker
from fdbrecipes.aio import AsyncWorker
from fdbrecipes.tasks import App, current_job
from fdbrecipes.tasks.envelope import seal
from tests.helpers import dump

pytestmark = pytest.mark.integration


class Size(enum.Enum):
    SMALL = "s"
    LARGE = "l"


@dataclasses.dataclass
class Image:
    name: str
    size: Size
    taken: datetime.datetime


def make_app(subspace: Any, **options: Any) -> App:
    app = App(subspace, **options)
    ran: Dict[str, int] = {}

    @app.task(name="resize")
    def resize(image: Image, width: int = 100) -> str:
        return f"{image.name}@{width}:{image.size.value}:{image.taken.year}"

    @app.task(name="flaky")
    def flaky(key: str) -> int:
        ran[key] = ran.get(key, 0) + 1
        if ran[key] < 3:
            raise RuntimeError(f"attempt {ran[key]} of {key} failed")
        return ran[key]

    @app.task(name="hopeless", retries=1, backoff=Backoff(base=0.01, cap=0.01))
    def hopeless(key: str) -> None:
        ran[key] = ran.get(key, 0) + 1
        raise ValueError("never works")

    @app.task(name="chain")
    def chain(n: int) -> List[int]:
        if n > 0:
            chain.then(n - 1)
        return [n]

    app.ran = ran  # type: ignore[attr-defined]
    return app


def test_defer_checks_arguments_and_runs_them_in_a_worker(fdb_database: Any,
                                                         fdb_subspace: Any) -> None:
    db = fdb_database
    app = make_app(fdb_subspace, max_deliveries=5)
    resize = app.tasks["resize"]
    taken = datetime.datetime(2024, 5, 17, 12, 30, tzinfo=datetime.timezone.utc)
    handle = resize.defer(db, Image("cat.png", Size.LARGE, taken), width=640)
    assert handle.status(db) == "pending"
    flaky = app.tasks["flaky"].defer(db, key="f")
    hopeless = app.tasks["hopeless"].defer(db, "h")
    chained = app.tasks["chain"].defer(db, 3)
    Worker(db, app, backoff=Backoff(base=0.01, cap=0.01)).run(burst=True)
    assert handle.result(db, timeout=10) == "cat.png@640:l:2024"
    assert handle.status(db) == "succeeded"
    assert flaky.result(db, timeout=10) == 3  # two failures retried, by the worker
    with pytest.raises(JobFailedError) as failed:
        hopeless.result(db, timeout=10)
    assert app.ran["h"] == 2  # type: ignore[attr-defined]
    assert failed.value.record.error.type == "ValueError"
    queue = app.structure("default")
    reasons = [d.reason for d in queue.dead(db)]
    assert reasons == ["ValueError: never works"]
    assert chained.result(db, timeout=10) == [3]
    assert queue.stats(db).visible == 0
    finished = {j.id for j in queue.finished(db)}
    assert len(finished) == 4 + 3 + 1 - 1  # the four above, the three follow-ups; hopeless


def test_bad_arguments_write_nothing_and_name_the_argument(fdb_database: Any,
                                                          fdb_subspace: Any) -> None:
    db = fdb_database
    app = make_app(fdb_subspace)
    resize = app.tasks["resize"]
    resize.defer(db, Image("x", Size.SMALL, datetime.datetime(2020, 1, 1)))  # the layout
    before = dump(db, fdb_subspace)
    now = datetime.datetime(2020, 1, 1)
    cases = [
        ((), {"image": Image("x", Size.SMALL, now), "width": "wide"}, "'width'"),
        ((), {"image": Image("x", Size.SMALL, now), "height": 3}, "'height'"),
        ((), {}, "'image'"),
        ((), {"image": {"name": "x"}}, "'image'"),
        ((), {"image": Image("x", "s", now)}, "'image'.size"),  # type: ignore[arg-type]
        ((), {"image": Image("x", Size.SMALL, "2020")}, "'image'.taken"),  # type: ignore[arg-type]
        ((), {"image": Image("x", Size.SMALL, now), "width": True}, "'width'"),
    ]
    for args, kwargs, named in cases:
        with pytest.raises(TypeError) as error:
            resize.defer(db, *args, **kwargs)
        assert named in str(error.value), (kwargs, error.value)

    @fdb.transactional
    def two_pushes(tr: Any) -> None:
        resize.defer(tr, Image("y", Size.SMALL, now))
        resize.defer(tr, Image("z", Size.SMALL, now), width=-1.5)  # type: ignore[arg-type]

    with pytest.raises(TypeError, match="'width' must be an int"):
        two_pushes(db)
    assert dump(db, fdb_subspace) == before


def test_a_defer_in_a_transaction_commits_with_it(fdb_database: Any, fdb_subspace: Any) -> None:
    db = fdb_database
    app = make_app(fdb_subspace)
    chain = app.tasks["chain"]
    marker = fdb_subspace.pack(("marker",))

    @fdb.transactional
    def order(tr: Any, fail: bool) -> Any:
        tr[marker] = b"ordered"
        handle = chain.defer(tr, 0)
        if fail:
            raise RuntimeError("rolled back")
        return handle

    with pytest.raises(RuntimeError):
        order(db, True)
    assert app.structure("default").size(db) == 0
    handle = order(db, False)
    assert db[marker] == b"ordered"
    assert handle.status(db) == "pending"


def test_unknown_tasks_and_foreign_items_are_dead_letters(fdb_database: Any,
                                                         fdb_subspace: Any) -> None:
    db = fdb_database
    app = make_app(fdb_subspace)
    queue = app.structure("default")
    assert isinstance(queue, Queue)
    queue.push(db, seal("gone.task", b"{}", None))
    queue.push(db, b"raw bytes")
    queue.push(db, seal("resize", b"{not json", None))
    app.tasks["chain"].defer(db, 0)
    Worker(db, app).run(burst=True)
    reasons = sorted(d.reason or "" for d in queue.dead(db))
    assert reasons[0].startswith("not a task's item")
    assert reasons[1].startswith("task resize: its arguments cannot be read: CodecError")
    assert reasons[2] == ("unknown task 'gone.task': no task of that name in this worker's "
                          "app")
    assert queue.stats(db).visible == 0


def test_priority_and_fair_queues_and_options(fdb_database: Any, fdb_subspace: Any) -> None:
    db = fdb_database
    app = App(fdb_subspace)
    order: List[str] = []

    @app.task(queue="urgent", priority=5)
    def urgent(name: str) -> str:
        order.append(name)
        return name

    @app.task(queue="tenants", group="tenant")
    def report(tenant: str, month: int) -> int:
        return month

    urgent.defer(db, "normal")
    urgent.configure(priority=1).defer(db, "first")
    first = urgent.configure(id=b"once").defer(db, "once")
    again = urgent.configure(id=b"once").defer(db, "once")
    assert first.id == again.id == b"once"
    reports = [report.defer(db, tenant=t, month=m) for t in ("acme", "umbrella")
               for m in (1, 2)]
    delayed = urgent.configure(delay=3600).defer(db, "later")
    Worker(db, app, concurrency=1, prefetch=0, queues=["urgent"]).run(burst=True)
    assert order == ["first", "normal", "once"]
    assert delayed.status(db) == "delayed"
    Worker(db, app, queues=["tenants"]).run(burst=True)
    assert [h.result(db, timeout=10) for h in reports] == [1, 2, 1, 2]
    assert reports[0].group == "acme"
    with pytest.raises(TypeError, match="fair-queue takes no priority"):
        report.configure(priority=1).defer(db, tenant="acme", month=1)


def test_configured_follow_ups_take_their_options(fdb_database: Any,
                                                  fdb_subspace: Any) -> None:
    """``configure(id=..., priority=...).then(...)``: the follow-up goes with the ack,
    under its id (a second run's same follow-up stores nothing) and its priority."""
    db = fdb_database
    app = App(fdb_subspace)
    order: List[str] = []

    @app.task(queue="work", priority=5)
    def step(name: str) -> str:
        order.append(name)
        if name == "parent":
            for child in ("late", "early"):
                handle = step.configure(id=f"child-{child}".encode(),
                                        priority=1 if child == "early" else 9).then(child)
                assert handle.id == f"child-{child}".encode()
        return name

    step.defer(db, "parent")
    step.defer(db, "sibling")  # priority 5: after "early", before "late"
    Worker(db, app, concurrency=1, prefetch=0).run(burst=True)
    assert order == ["parent", "early", "sibling", "late"]  # the ack pushes before the claim
    assert app.structure("work").job(db, b"child-early").state == "succeeded"
    with pytest.raises(TypeError, match="takes no group"):
        step.configure(group="x").defer(db, "bad")


def test_an_async_app_in_an_async_worker(fdb_database: Any, fdb_subspace: Any) -> None:
    db = fdb_database
    app = App(fdb_subspace)

    @app.task
    async def double(x: int) -> int:
        await asyncio.sleep(0)  # a task that awaits (a real coroutine), not a wait
        job = current_job()
        assert job is not None and job.deliveries >= 1
        if x == 7:
            await follow.defer_async(db, x)  # a defer from a task: its own transaction
        return 2 * x

    @app.task
    def follow(x: int) -> str:  # a sync task under an AsyncWorker: in a thread
        return f"followed {x}"

    async def main() -> List[Any]:
        handles = [await double.defer_async(db, i) for i in range(10)]
        await AsyncWorker(db, app).run(burst=True)
        return [await h.result_async(db, timeout=10) for h in handles]

    assert asyncio.run(main()) == [2 * i for i in range(10)]
    assert app.structure("default").stats(db).visible == 0


def test_a_tasks_own_time_limit_ends_its_run(fdb_database: Any, fdb_subspace: Any) -> None:
    db = fdb_database
    app = App(fdb_subspace)

    @app.task(name="stuck", time_limit=0.3, retries=0)
    async def stuck(seconds: float) -> None:
        await asyncio.sleep(seconds)  # work longer than the task may take

    @app.task(name="allowed", time_limit=30)
    async def allowed(x: int) -> Optional[float]:
        job = current_job()
        return None if job is None else job.time_limit

    async def main() -> Any:
        handles = (await stuck.defer_async(db, 60.0), await allowed.defer_async(db, 1))
        began = time.monotonic()
        await AsyncWorker(db, app).run(burst=True)
        return handles, time.monotonic() - began

    (late, fine), seconds = asyncio.run(main())
    assert seconds < 30  # the stuck run was stopped, not waited for
    assert fine.result(db, timeout=10) == 30
    assert late.status(db) == "dead"
    with pytest.raises(JobFailedError) as failed:
        late.result(db, timeout=10)
    assert failed.value.record.error.type == "fdbrecipes.jobs.TimeLimitExceeded"
    assert [d.reason for d in app.structure("default").dead(db)] == [
        "TimeLimitExceeded: the job ran past its time limit of 0.3 s"]


def test_one_trace_from_the_request_to_the_follow_ups_run(fdb_database: Any,
                                                         fdb_subspace: Any) -> None:
    sdk = pytest.importorskip("opentelemetry.sdk.trace")
    from opentelemetry import trace
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    exporter = InMemorySpanExporter()
    provider = sdk.TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    trace.set_tracer_provider(provider)
    tracer = trace.get_tracer("the-web-app")
    db = fdb_database
    app = App(fdb_subspace)

    @app.task(name="signup")
    def signup(user: str) -> None:
        with tracer.start_as_current_span("insert user"):
            pass
        welcome.then(user)

    @app.task(name="welcome")
    def welcome(user: str) -> None:
        pass

    with tracer.start_as_current_span("POST /signup"):
        signup.defer(db, "ada")
    Worker(db, app).run(burst=True)
    spans = {s.name: s for s in exporter.get_finished_spans()}
    request = spans["POST /signup"]
    chain = ["POST /signup", "send signup", "process signup", "send welcome",
             "process welcome"]
    for parent, child in zip(chain, chain[1:]):
        assert spans[child].parent is not None, child
        assert spans[child].parent.span_id == spans[parent].context.span_id, child
    assert spans["insert user"].parent.span_id == spans["process signup"].context.span_id
    assert {s.context.trace_id for s in spans.values()} == {request.context.trace_id}
    assert spans["process welcome"].kind == trace.SpanKind.CONSUMER
    assert spans["send signup"].kind == trace.SpanKind.PRODUCER
