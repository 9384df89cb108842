"""A starvation-free task scheduler on a WeightTree.

Three recurring tasks (weights 1, 3 and 6) share the scheduler with a stream of heavy
one-off tasks (weight 10) that keeps arriving: one every other tick.  Each tick the
scheduler pops one task at random by weight and runs it; a recurring task is pushed back
after it runs.  Heavy work gets most of the runs, yet the weight-1 task keeps running: its
chance each tick never drops to zero, so it cannot starve.

Run it against the cluster of FDB_CLUSTER_FILE (or the default cluster file); it works
in a directory of its own, removed at the end:

    python docs/examples/scheduler.py
"""

from __future__ import annotations

import uuid
from collections import Counter
from typing import Any, Dict, List

import fdb

from fdbrecipes import WeightTree

RECURRING = {"backup": 1, "report": 3, "reindex": 6}
HEAVY = 10


def simulate(db: Any, subspace: Any, ticks: int) -> List[str]:
    """Run the scheduler for ``ticks`` ticks; return the kind of task run at each."""
    pool = WeightTree(subspace)
    pool.push_many(db, list(RECURRING.items()))

    @fdb.transactional
    def tick(tr: Any, n: int) -> str:
        if n % 2 == 0:
            pool.push(tr, ("heavy", n), HEAVY)  # arrives in the same transaction
        task = pool.pop(tr)
        if isinstance(task, str):  # a recurring task runs and goes back in
            pool.push(tr, task, RECURRING[task])
            return task
        return "heavy"

    return [tick(db, n) for n in range(ticks)]


def report(runs: List[str]) -> Dict[str, float]:
    """Print and return each kind's share of the runs, and the longest wait of backup."""
    counts = Counter(runs)
    shares = {kind: counts[kind] / len(runs) for kind in (*RECURRING, "heavy")}
    for kind, share in shares.items():
        print(f"{kind:<8} {counts[kind]:6d} runs  {share:6.1%}")
    starts = [n for n, k in enumerate(runs) if k == "backup"]
    longest = max((b - a for a, b in zip(starts, starts[1:])), default=len(runs))
    print(f"backup (weight 1) ran {counts['backup']} times; longest gap {longest} ticks")
    return shares


def main() -> None:
    fdb.api_version(730)
    db = fdb.open()  # FDB_CLUSTER_FILE, or the default cluster file
    db.options.set_transaction_timeout(10_000)  # a cluster that does not answer: an error
    path = ("fdbrecipes-example", "scheduler", uuid.uuid4().hex)
    try:
        report(simulate(db, fdb.directory.create(db, path), 4000))
    finally:
        fdb.directory.remove_if_exists(db, path)


if __name__ == "__main__":
    main()
