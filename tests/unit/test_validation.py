"""Bad input is refused before anything is read or written.

These tests pass a dummy ``tr``: validation runs before the transaction is touched,
so no server (and no API version) is involved."""

from __future__ import annotations

import random
import subprocess
import sys
from typing import Any, Callable

import fdb.tuple
import pytest
from fdb.subspace_impl import Subspace

from fdbrecipes import FairQueue, Lease, PriorityQueue, Queue, WeightTree
from fdbrecipes._values import check_id, check_int, check_seconds, check_timeout

S = Subspace(("v",))


class Untouchable:
    """A stand-in for a transaction that fails the test if anything uses it."""

    def __getattr__(self, name: str) -> Any:
        raise AssertionError(f"the transaction was used ({name}) before validation")


TR = Untouchable()


def refuses(error: type, match: str, call: Callable[[], Any]) -> None:
    with pytest.raises(error, match=match):
        call()


def test_constructors() -> None:
    refuses(TypeError, "^subspace", lambda: Queue(("jobs",)))
    refuses(TypeError, "^subspace", lambda: PriorityQueue(b"raw"))
    refuses(TypeError, "^subspace", lambda: WeightTree(None))
    refuses(TypeError, "^high_contention", lambda: Queue(S, high_contention=1))  # type: ignore[arg-type]
    refuses(ValueError, "^result_timeout", lambda: Queue(S, result_timeout=0))
    refuses(ValueError, "^id_retention", lambda: Queue(S, id_retention=-1))
    refuses(TypeError, "^rng", lambda: WeightTree(S, rng=42))  # type: ignore[arg-type]
    refuses(TypeError, "^clock", lambda: Queue(S, clock=5))  # type: ignore[arg-type]
    refuses(TypeError, "^shards", lambda: Queue(S, shards=2.0))  # type: ignore[arg-type]
    refuses(ValueError, "^shards must be >= 1", lambda: PriorityQueue(S, shards=0))
    refuses(ValueError, "^shards must be <= 64", lambda: FairQueue(S, shards=65))
    WeightTree(S, rng=random.Random(1))
    assert (Queue(S, shards=64).shards, FairQueue(S).shards) == (64, 1)


def test_queue() -> None:
    q = Queue(S)
    refuses(ValueError, "^value must not be None", lambda: q.push(TR, None))  # type: ignore[arg-type]
    refuses(TypeError, "^value", lambda: q.push(TR, [1]))  # type: ignore[arg-type]
    refuses(ValueError, "^value encodes", lambda: q.push(TR, b"x" * 100_000))
    refuses(TypeError, "^id", lambda: q.push(TR, b"x", id="s"))  # type: ignore[arg-type]
    refuses(ValueError, "^id makes a key", lambda: Queue(Subspace((b"p" * 9_200,))).push(
        TR, b"x", id=b"i" * 1000))
    refuses(TypeError, r"^values\[1\]", lambda: q.push_many(TR, [b"a", [2], b"c"]))
    refuses(ValueError, r"^values\[2\] must not be None", lambda: q.push_many(TR, [1, 2, None]))
    refuses(TypeError, "^values", lambda: q.push_many(TR, b"abc"))
    refuses(TypeError, "^values", lambda: q.push_many(TR, 5))  # type: ignore[arg-type]
    refuses(TypeError, "^n", lambda: q.pop_many(TR, 1.5))  # type: ignore[arg-type]
    refuses(ValueError, "^n", lambda: q.pop_many(TR, -1))
    refuses(ValueError, "^limit", lambda: q.items(TR, limit=-1))
    refuses(ValueError, "^lease_seconds", lambda: q.claim(TR, 0))
    refuses(TypeError, "^lease", lambda: q.ack(TR, "lease"))  # type: ignore[arg-type]
    refuses(ValueError, "^lease", lambda: q.ack(TR, b"not a token"))
    refuses(ValueError, "^seconds", lambda: q.extend(TR, Lease(b"x", 1, 5, b"token"), -3))
    refuses(ValueError, "^timeout", lambda: q.pop_wait(TR, timeout=-1))


def test_oversized_batch_is_refused_whole() -> None:
    q = Queue(S)
    big = [b"x" * 90_000] * 101  # ~9.1 MB: over the budget
    refuses(ValueError, r"^values: 101 items need about [\d,]+ bytes", lambda: q.push_many(TR, big))
    pq = PriorityQueue(S)
    refuses(ValueError, "^items: 101 items", lambda: pq.push_many(TR, [(b, 1) for b in big]))
    tree = WeightTree(S)
    refuses(ValueError, "^items: 101 items", lambda: tree.push_many(TR, [(b, 1) for b in big]))


def test_priority_queue() -> None:
    pq = PriorityQueue(S)
    refuses(TypeError, "^priority must be an int", lambda: pq.push(TR, b"x", 1.0))  # type: ignore[arg-type]
    refuses(TypeError, "^priority must be an int", lambda: pq.push(TR, b"x", True))
    refuses(TypeError, "^priority must be an int", lambda: pq.push(TR, b"x", "1"))  # type: ignore[arg-type]
    refuses(ValueError, "^priority is too large", lambda: pq.push(TR, b"x", 2**2100))
    refuses(ValueError, "^value", lambda: pq.push(TR, None, 1))  # type: ignore[arg-type]
    refuses(TypeError, r"^items\[0\] must be a \(value, priority\)",
            lambda: pq.push_many(TR, [b"x"]))
    refuses(TypeError, r"^items\[1\] priority", lambda: pq.push_many(TR, [(b"x", 1), (b"y", 1.5)]))
    refuses(TypeError, "^reverse", lambda: pq.items(TR, reverse=1))  # type: ignore[arg-type]


def test_weight_tree() -> None:
    t = WeightTree(S)
    refuses(ValueError, "^weight must be >= 1", lambda: t.push(TR, b"x", 0))
    refuses(ValueError, "^weight must be <= 4294967296", lambda: t.push(TR, b"x", 2**32 + 1))
    refuses(TypeError, "^weight must be an int", lambda: t.push(TR, b"x", 2.0))  # type: ignore[arg-type]
    refuses(TypeError, "^weight must be an int", lambda: t.push(TR, b"x", True))
    refuses(ValueError, "^value", lambda: t.push(TR, None, 1))  # type: ignore[arg-type]
    refuses(ValueError, "^point must be >= 0", lambda: t.pop(TR, point=-1))
    refuses(TypeError, "^point must be an int", lambda: t.peek(TR, point=0.5))  # type: ignore[arg-type]
    refuses(TypeError, "^handle", lambda: t.get(TR, "h"))  # type: ignore[arg-type]
    refuses(ValueError, "^handle", lambda: t.remove(TR, b"\x15\x01"))
    refuses(ValueError, "^handle", lambda: t.set_weight(TR, b"", 3))
    refuses(ValueError, r"^items\[1\] weight", lambda: t.push_many(TR, [(b"a", 1), (b"b", 0)]))
    refuses(ValueError, "^n", lambda: t.pop_many(TR, -2))


def test_job_queue_arguments() -> None:
    q, pq = Queue(S), PriorityQueue(S)
    refuses(ValueError, "^max_deliveries", lambda: Queue(S, max_deliveries=0))
    refuses(TypeError, "^max_deliveries", lambda: Queue(S, max_deliveries=2.0))  # type: ignore[arg-type]
    refuses(ValueError, "^delay", lambda: q.push(TR, b"x", delay=-1))
    refuses(ValueError, "^delay", lambda: q.push(TR, b"x", delay=float("inf")))
    refuses(TypeError, "^delay", lambda: q.push_many(TR, [b"x"], delay="1"))  # type: ignore[arg-type]
    refuses(TypeError, "^delay", lambda: pq.push(TR, b"x", 1, delay=True))
    refuses(ValueError, "^delay", lambda: q.release(TR, Lease(b"x", 1, 5, b"t"), delay=-2))
    refuses(ValueError, "^spread", lambda: q.pop(TR, spread=0))
    refuses(TypeError, "^spread", lambda: pq.pop_max(TR, spread=1.5))  # type: ignore[arg-type]
    refuses(ValueError, "^spread", lambda: q.claim(TR, 5, spread=0))
    refuses(ValueError, "^n", lambda: q.claim_many(TR, -1, 5))
    refuses(ValueError, "^lease_seconds", lambda: pq.claim_max_many(TR, 2, 0))
    refuses(ValueError, "^spread", lambda: pq.pop_min_many(TR, 2, spread=-1))
    token = fdb.tuple.pack(("lease", b"L" * 16))
    refuses(TypeError, r"^leases\[1\]", lambda: q.ack_many(TR, [Lease(b"x", 1, 5, token), 7]))
    refuses(ValueError, r"^leases\[0\]", lambda: q.ack_many(TR, [b"not a token"]))
    refuses(TypeError, "^leases", lambda: q.ack_many(TR, 7))  # type: ignore[arg-type]
    refuses(ValueError, "^limit", lambda: q.dead(TR, limit=-1))
    refuses(TypeError, "^limit", lambda: q.requeue_dead(TR, limit="all"))  # type: ignore[arg-type]
    refuses(ValueError, "^lease_seconds", lambda: q.claimed(TR, 0))
    refuses(ValueError, "^release_delay", lambda: q.claimed(TR, 5, release_delay=-1))
    refuses(ValueError, "^timeout", lambda: q.wait(TR, timeout=-1))


def test_batch_size_estimates_count_the_subspace_prefix() -> None:
    """A long prefix makes every key longer: a batch that fits with a short prefix is
    refused with the library's ValueError, not FoundationDB's error 2101."""
    long = Subspace((b"p" * 5_000,))
    values = [b"x" * 700] * 1_600  # ~1.2 MB of values; ~8 MB of keys with this prefix
    refuses(ValueError, "^values: 1,600 items", lambda: Queue(long).push_many(TR, values))
    refuses(ValueError, "^items: 1,600 items",
            lambda: WeightTree(long).push_many(TR, [(v, 1) for v in values]))


USE_BEFORE_API_VERSION = """
import fdb
from fdb.subspace_impl import Subspace
from fdbrecipes import Queue
assert not fdb.is_api_version_selected()
try:
    Queue(Subspace(("v",))).push(object(), b"x")
except RuntimeError as e:
    print(e)
"""


def test_using_a_structure_needs_an_api_version_or_a_transaction() -> None:
    """Before fdb.api_version() is called, the first use says so plainly (in a fresh
    process: this one may have selected a version for other tests)."""
    done = subprocess.run([sys.executable, "-c", USE_BEFORE_API_VERSION],
                          capture_output=True, text=True, check=True, timeout=60)
    assert "call fdb.api_version(730)" in done.stdout


# -- the validators the methods use ---------------------------------------------------


def test_check_int_refuses_bools_and_floats() -> None:
    assert check_int(5, "n", low=0) == 5
    with pytest.raises(TypeError, match="^n must be an int"):
        check_int(True, "n")
    with pytest.raises(TypeError, match="^n must be an int"):
        check_int(1.0, "n")
    with pytest.raises(ValueError, match="^n must be >= 0"):
        check_int(-1, "n", low=0)
    with pytest.raises(ValueError, match="^n must be <= 3"):
        check_int(4, "n", high=3)


def test_seconds_and_timeouts() -> None:
    assert check_seconds(2, "lease_seconds") == 2.0
    for bad in (0, -1, float("inf"), float("nan")):
        with pytest.raises(ValueError, match="^lease_seconds"):
            check_seconds(bad, "lease_seconds")
    with pytest.raises(TypeError, match="^lease_seconds"):
        check_seconds("1", "lease_seconds")
    assert check_timeout(None) is None
    assert check_timeout(0) == 0.0
    with pytest.raises(ValueError, match="^timeout"):
        check_timeout(-1)


def test_ids() -> None:
    assert check_id(None) is None
    assert check_id(b"x") == b"x"
    with pytest.raises(TypeError, match="^id"):
        check_id("x")
    with pytest.raises(ValueError, match="^id"):
        check_id(b"")
    with pytest.raises(ValueError, match="^id"):
        check_id(b"x" * 1001)


def sync_handler(job: Any) -> None:
    """A handler for Worker."""


async def async_handler(job: Any) -> None:
    """A handler for AsyncWorker."""


WORKER_REFUSALS = [
    (dict(concurrency=0), ValueError, "^concurrency must be >= 1, got 0$"),
    (dict(concurrency=1.5), TypeError, "^concurrency must be an int, not float$"),
    (dict(concurrency=10_001), ValueError, "^concurrency must be <= 10000"),
    (dict(lease_seconds=0), ValueError, "^lease_seconds must be more than 0"),
    (dict(lease_seconds="x"), TypeError, "^lease_seconds must be a number of seconds"),
    (dict(backoff=3), TypeError, "^backoff must be a Backoff, not int$"),
    (dict(shutdown_timeout=-1), ValueError, "^shutdown_timeout must be seconds >= 0, got -1$"),
    (dict(shutdown_timeout=True), ValueError, "^shutdown_timeout must be seconds >= 0"),
    (dict(on_event=3), TypeError, "^on_event must be callable or None$"),
    (dict(time_limit=0), ValueError, "^time_limit must be more than 0"),
    (dict(prefetch=-1), ValueError, "^prefetch must be >= 0, got -1$"),
    (dict(prefetch=2.5), TypeError, "^prefetch must be an int, not float$"),
    (dict(name=""), TypeError, "^name must be a str of 1 to 200 characters, not ''$"),
    (dict(end="mid"), ValueError, "^end must be 'min' or 'max', got 'mid'$"),
    (dict(end=None), ValueError, "^end must be 'min' or 'max', got None$"),
    (dict(queues=["a"]), TypeError, "^queues= names the structures of an app$"),
]


@pytest.mark.parametrize("options,error,match", WORKER_REFUSALS)
@pytest.mark.parametrize("asynchronous", [False, True])
def test_worker_options(options: Any, error: type, match: str, asynchronous: bool) -> None:
    """Worker and AsyncWorker check their options alike, before the database is
    touched."""
    from fdbrecipes import Worker
    from fdbrecipes.aio import AsyncWorker

    face: Any = AsyncWorker if asynchronous else Worker
    handler = async_handler if asynchronous else sync_handler
    for structure in (Queue(S), PriorityQueue(S), FairQueue(S)):
        with pytest.raises(error, match=match):
            face(TR, structure, handler, **options)


def test_worker_end_is_one_the_structure_has() -> None:
    """A Queue and a FairQueue have no "max" end (a PriorityQueue's is checked by the
    worker integration tests, which claim from it)."""
    from fdbrecipes import Worker

    for structure in (Queue(S), FairQueue(S)):
        with pytest.raises(ValueError, match="^end='max' needs a PriorityQueue$"):
            Worker(TR, structure, sync_handler, end="max")
