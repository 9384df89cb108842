"""``fdbrecipes demo``: push and pop through every structure, printing as it goes.

It uses only the public API (Queue, PriorityQueue, WeightTree, leases) in a fresh
subspace ``("fdbrecipes-demo", <random>)``, cleared at the end.
"""

from __future__ import annotations

import os
import uuid
from collections import Counter
from typing import Any, Callable, List

from . import PriorityQueue, Queue, WeightTree
from ._cluster import open_database


def run(cluster_file: str) -> int:
    """The demo on ``cluster_file``: say which cluster, run it; return 0."""
    where = ("FDB_CLUSTER_FILE" if os.environ.get("FDB_CLUSTER_FILE")
             else "a throwaway local fdbserver")
    print(f"Using {where} ({cluster_file})")
    demo(open_database(cluster_file))
    print("Demo finished.")
    return 0


def demo(db: Any) -> None:
    """Push and pop through every structure in a fresh subspace, printing as it goes."""
    import fdb

    root = fdb.Subspace(("fdbrecipes-demo", uuid.uuid4().hex))
    try:
        jobs = show_queue(db, root)
        tasks = show_priority_queue(db, root)
        pool = show_weight_tree(db, root)
        show_leases(db, jobs)
        print(f"Everything popped: queue size {jobs.size(db)}, priority queue size "
              f"{tasks.size(db)}, tree size {pool.size(db)}")
    finally:
        r = root.range()
        db.clear_range(r.start, r.stop)


def show_queue(db: Any, root: Any) -> Queue:
    """Push three items, pop them in order in transactions that also record them."""
    import fdb

    jobs = Queue(root["queue"])
    jobs.push_many(db, [b"first", b"second"])
    jobs.push(db, "third")

    def take_job(tr: Any) -> Any:
        job = jobs.pop(tr)  # commits together with the next write
        if job is not None:
            tr[root.pack(("done", str(job)))] = b""
        return job

    take: Callable[[Any], Any] = fdb.transactional(take_job)

    print(f"Queue: pushed 3 items, size {jobs.size(db)}")
    print(f"  popped in order: {take(db)!r}, {take(db)!r}, {take(db)!r}; "
          f"then {take(db)!r}")
    return jobs


def show_priority_queue(db: Any, root: Any) -> PriorityQueue:
    """Push four prioritized items; pop from both ends."""
    tasks = PriorityQueue(root["priority"])
    tasks.push_many(db, [("low", 1), ("urgent", 9), ("normal", 5), ("urgent too", 9)])
    print("PriorityQueue: pushed low/1, urgent/9, normal/5, urgent too/9")
    print(f"  pop_max: {tasks.pop_max(db)!r}, pop_min: {tasks.pop_min(db)!r}, "
          f"pop_max: {tasks.pop_max(db)!r}, pop_max: {tasks.pop_max(db)!r}")
    return tasks


def show_weight_tree(db: Any, root: Any) -> WeightTree:
    """Push three weighted items; show how often 500 peeks pick each; pop them all."""
    pool = WeightTree(root["weights"])
    pool.push_many(db, [("light", 1), ("medium", 3), ("heavy", 6)])
    picks: Counter[Any] = Counter(pool.peek(db) for _ in range(500))
    print(f"WeightTree: weights light 1, medium 3, heavy 6 (total "
          f"{pool.total_weight(db)}); 500 random peeks:")
    for name in ("light", "medium", "heavy"):
        print(f"  {name:<6} {picks[name] / 500:6.1%}")
    drained: List[Any] = []
    while (value := pool.pop(db)) is not None:
        drained.append(value)
    print(f"  popped all, heaviest most likely first: {drained}")
    return pool


def show_leases(db: Any, jobs: Queue) -> None:
    """Claim an item under a 30-second lease (it is hidden meanwhile) and ack it."""
    jobs.push(db, b"leased job")
    lease = jobs.claim(db, 30)
    assert lease is not None
    print(f"Leases: claimed {lease.value!r} (delivery {lease.deliveries}), "
          f"visible now: {not jobs.is_empty(db)}; ack")
    jobs.ack(db, lease)
