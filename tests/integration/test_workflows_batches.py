"""Open batches against a real server: members added over time, callbacks pushed
exactly once after the close (docs/workflows.md, "Batches with callbacks")."""

from __future__ import annotations

import os
import random
import threading
from collections import Counter
from typing import Any, List, Sequence, Tuple

import fdb.tuple
import pytest

from fdbrecipes import BatchClosedError, Queue, Worker
from fdbrecipes.errors import UnknownWorkflowError
from fdbrecipes.workflow import Workflows
from tests.helpers import dump, eventually
from tests.integration.test_workflows import Runs

pytestmark = pytest.mark.integration


def setup(fdb_subspace: Any) -> Tuple[Queue, Queue, Workflows]:
    q = Queue(fdb_subspace["q"])
    callbacks = Queue(fdb_subspace["callbacks"])
    return q, callbacks, Workflows(fdb_subspace["flows"], structures=[q, callbacks])


def open_batch(flows: Workflows, callbacks: Queue) -> Any:
    return flows.open_batch(on_success=(callbacks, "all good"),
                            on_complete=(callbacks, "complete"),
                            on_failure=(callbacks, "some failed"))


def drain(db: Any, structure: Any, handler: Any) -> None:
    Worker(db, structure, handler, lease_seconds=10).run(burst=True)


def states(flows: Workflows, db: Any, w: bytes) -> Any:
    return {n.name: n.state for n in flows.status(db, w, limit=10_000).nodes}


def test_members_that_ended_before_the_close_push_the_callbacks_at_the_close(
        db: Any, fdb_subspace: Any) -> None:
    q, callbacks, flows = setup(fdb_subspace)
    w = flows.create(db, open_batch(flows, callbacks))
    ids = flows.add_to_batch(db, w, q, ["a", "b", "c"])
    ids += flows.add_to_batch(db, w, q, ["d", "e"])
    assert len(set(ids)) == 5
    runs = Runs(flows, db)
    drain(db, q, runs)
    assert runs.count == Counter("abcde")
    assert callbacks.claim(db, 10) is None  # open: the callbacks wait
    assert flows.status(db, w).state == "running"
    assert flows.close_batch(db, w) is True
    assert flows.close_batch(db, w) is False
    done = Runs(flows, db)
    drain(db, callbacks, done)
    assert done.count == Counter({"all good": 1, "complete": 1})
    assert sorted(done.inputs["complete"]) == ["3", "4", "5", "6", "7"]
    assert flows.result(db, w, timeout=5) == {"on_success": "did all good",
                                              "on_complete": "did complete",
                                              "on_failure": None}
    status = flows.status(db, w)
    assert status.state == "succeeded" and status.total == 8  # on_failure skipped


def test_the_last_member_to_end_after_the_close_pushes_the_callbacks(
        db: Any, fdb_subspace: Any) -> None:
    q, callbacks, flows = setup(fdb_subspace)
    w = flows.create(db, open_batch(flows, callbacks))
    flows.add_to_batch(db, w, q, list(range(130)))  # two counters in each callback
    flows.add_to_batch(db, w, q, ["fail-1"])
    assert flows.close_batch(db, w) is True
    with pytest.raises(BatchClosedError):
        flows.add_to_batch(db, w, q, ["late"])
    assert states(flows, db, w)["on_complete"] == "waiting"
    runs = Runs(flows, db)
    drain(db, q, runs)
    assert runs.count == Counter([*range(130), "fail-1"])
    done = Runs(flows, db)
    drain(db, callbacks, done)
    assert done.count == Counter({"some failed": 1, "complete": 1})
    seen = done.inputs["some failed"]
    assert len(seen) == 131
    assert Counter(i.state for i in seen.values()) == Counter({"succeeded": 130,
                                                               "failed": 1})
    assert states(flows, db, w)["on_success"] == "skipped"


def test_an_empty_batch_closed_runs_its_callbacks(db: Any, fdb_subspace: Any) -> None:
    _, callbacks, flows = setup(fdb_subspace)
    w = flows.create(db, open_batch(flows, callbacks))
    assert flows.close_batch(db, w) is True
    done = Runs(flows, db)
    drain(db, callbacks, done)
    assert done.count == Counter({"all good": 1, "complete": 1})


def test_bad_adds_are_refused_before_anything_is_written(db: Any, fdb_subspace: Any) -> None:
    q, callbacks, flows = setup(fdb_subspace)
    other = Queue(fdb_subspace["other"])
    w = flows.create(db, open_batch(flows, callbacks))
    closed = flows.create(db, flows.batch(q, ["x"], on_complete=(callbacks, "done")))
    before = dump(db, fdb_subspace)
    with pytest.raises(ValueError, match="unknown to this workflow store"):
        flows.add_to_batch(db, w, other, ["a"])
    with pytest.raises(TypeError):
        flows.add_to_batch(db, w, q, [object()])
    with pytest.raises(UnknownWorkflowError):
        flows.add_to_batch(db, b"no such batch", q, ["a"])
    with pytest.raises(BatchClosedError):  # a batch made whole is not open
        flows.add_to_batch(db, closed, q, ["a"])
    with pytest.raises(UnknownWorkflowError):
        flows.close_batch(db, b"no such batch")
    assert dump(db, fdb_subspace) == before
    with pytest.raises(ValueError, match="on_success, on_complete or on_failure"):
        flows.open_batch()
    assert flows.cancel(db, w) is True
    with pytest.raises(BatchClosedError):
        flows.add_to_batch(db, w, q, ["a"])
    assert flows.close_batch(db, w) is False


def test_adds_in_the_callers_transaction(db: Any, fdb_subspace: Any) -> None:
    """An add commits with the caller's writes, or not at all."""
    q, callbacks, flows = setup(fdb_subspace)
    w = flows.create(db, open_batch(flows, callbacks))
    before = dump(db, fdb_subspace)
    tr = db.create_transaction()
    flows.add_to_batch(tr, w, q, ["a", "b"])
    tr.reset()  # never committed
    assert dump(db, fdb_subspace) == before
    tr = db.create_transaction()
    flows.add_to_batch(tr, w, q, ["a", "b"])
    flows.close_batch(tr, w)
    tr.commit().wait()
    runs = Runs(flows, db)
    drain(db, q, runs)
    drain(db, callbacks, runs)
    assert runs.count == Counter({"a": 1, "b": 1, "all good": 1, "complete": 1})


def test_random_adds_racing_the_members_ends_and_the_close(db: Any, fdb_subspace: Any) -> None:
    """Adders in threads add members (some failing) while workers run them and the
    close comes after the last add, at a random moment: every member runs once, and
    each callback that should runs exactly once, seeing every member.  The seed is
    printed (``FDBRECIPES_BATCH_SEED`` replays one)."""
    race(db, fdb_subspace, seed_of(), (1, 1, 2, 5, 20), range(4, 8))


@pytest.mark.soak
@pytest.mark.parametrize("run", range(20))
def test_random_adds_racing_soak(db: Any, fdb_subspace: Any, run: int) -> None:
    """The race above, 20 times, with larger adds (counted in many counters)."""
    race(db, fdb_subspace[run], seed_of(), (1, 1, 2, 5, 20, 130, 300), range(4, 16))


def seed_of() -> int:
    seed = int(os.environ.get("FDBRECIPES_BATCH_SEED") or random.randrange(1 << 30))
    print(f"seed {seed}")
    return seed


def race(db: Any, fdb_subspace: Any, seed: int, sizes: Sequence[int], adds: range) -> None:
    """Add members in two threads (plans drawn from ``seed``: ``adds`` adds of
    ``sizes`` members, 5% failing) while workers run them; close after the last add
    (half the time once every member ran); check every member ran once and each
    callback that should ran once, seeing every member."""
    rng = random.Random(seed)
    q, callbacks, flows = setup(fdb_subspace)
    w = flows.create(db, open_batch(flows, callbacks))
    plans: List[List[Any]] = []
    count = 0
    for _ in range(rng.choice(adds)):
        size = rng.choice(sizes)
        plans.append([f"fail-{count + k}" if rng.random() < 0.05 else count + k
                      for k in range(size)])
        count += size
    failing = any(isinstance(v, str) for plan in plans for v in plan)
    runs = Runs(flows, db)
    done = Runs(flows, db)

    def adder(mine: List[List[Any]]) -> None:
        for plan in mine:
            flows.add_to_batch(db, w, q, plan)

    with Worker(db, q, runs, lease_seconds=10, concurrency=4), \
            Worker(db, callbacks, done, lease_seconds=10):
        threads = [threading.Thread(target=adder, args=(half,))
                   for half in (plans[0::2], plans[1::2])]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
            assert not t.is_alive()
        if rng.random() < 0.5:  # sometimes once every member ended
            eventually(lambda: sum(runs.count.values()) == count, 60, "every member ran")
        assert flows.close_batch(db, w) is True
        flows.result(db, w, timeout=60)
    assert sum(runs.count.values()) == count and set(runs.count.values()) == {1}
    expected = {"complete": 1, "some failed" if failing else "all good": 1}
    assert done.count == Counter(expected)
    assert len(done.inputs["complete"]) == count


def test_the_async_twins(db: Any, fdb_subspace: Any) -> None:
    import asyncio

    from fdbrecipes.aio.workflow import AsyncWorkflows

    q = Queue(fdb_subspace["q"])
    callbacks = Queue(fdb_subspace["callbacks"])
    flows = AsyncWorkflows(fdb_subspace["flows"], structures=[q, callbacks])

    async def main() -> bytes:
        w = await flows.create(db, flows.open_batch(on_complete=(callbacks, "complete")))
        assert len(await flows.add_to_batch(db, w, q, ["a", "b"])) == 2
        assert await flows.close_batch(db, w) is True
        with pytest.raises(BatchClosedError):
            await flows.add_to_batch(db, w, q, ["c"])
        return w

    w = asyncio.run(main())
    sync = Workflows(fdb_subspace["flows"], structures=[q, callbacks])
    runs = Runs(sync, db)
    drain(db, q, runs)
    drain(db, callbacks, runs)
    assert runs.count == Counter({"a": 1, "b": 1, "complete": 1})
    assert sync.status(db, w).state == "succeeded"


def test_the_create_expanders_and_the_close_of_one_batch_stay_apart(
        db: Any, fdb_subspace: Any) -> None:
    """An open batch whose callback shares a structure with first nodes too large
    for the create to push them all (their writes past 9 MB): the create's expanders
    (source -1) and the close's pushes (source -1 - its count of nodes:
    ``Batches.source``) never share an id or a chunk's key; every node runs once, the
    callback once, after the close."""
    q = Queue(fdb_subspace["q"])
    flows = Workflows(fdb_subspace["flows"], structures=[q])
    flow = flows.open_batch(on_complete=(q, "complete"))
    pad = "." * 8_000  # 510 values of 8 KB: written twice (definitions, pushes)
    flow.add_many(q, [f"first-{k}{pad}" for k in range(510)])
    w = flows.create(db, flow)
    assert any(len(fdb.tuple.unpack(row.id)) == 5  # (mark, tag, w, source, chunk)
               for row in q.pending(db, 1_000)), "the create made no expander"
    flows.add_to_batch(db, w, q, ["a", "b"])
    runs = Runs(flows, db)
    drain(db, q, runs)
    assert flows.close_batch(db, w) is True  # every member ended: the close pushes
    drain(db, q, runs)
    assert runs.count == Counter([*(f"first-{k}{pad}" for k in range(510)), "a", "b",
                                  "complete"])
    assert sorted(runs.inputs["complete"]) == ["511", "512"]  # the members only
    status = flows.status(db, w, 0)
    assert status.state == "succeeded" and status.total == 1 + 510 + 2
    assert status.counts["succeeded"] == status.total
