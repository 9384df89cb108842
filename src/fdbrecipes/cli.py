"""The ``fdbrecipes`` command: ``demo`` and ``bench``.

This is an application, so unlike the library it selects the FDB API version.
"""

from __future__ import annotations

import argparse
import os
import sys
import uuid
from collections import Counter
from typing import Any, Callable, List, Optional

from . import PriorityQueue, Queue, WeightTree, __version__
from .testing import INSTALL_HINT, ServerNotFoundError, client_library_problem, local_cluster

API_VERSION = 730


def open_database(cluster_file: str) -> Any:
    """Select the API version (730, or the bindings' newest if lower) and open."""
    import fdb

    if not fdb.is_api_version_selected():
        fdb.api_version(min(API_VERSION, fdb.LATEST_API_VERSION))
    return fdb.open(cluster_file)


def demo(db: Any) -> None:
    """Push and pop through every structure in a fresh subspace, printing as it goes."""
    import fdb

    root = fdb.Subspace(("fdbrecipes-demo", uuid.uuid4().hex))
    try:
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

        tasks = PriorityQueue(root["priority"])
        tasks.push_many(db, [("low", 1), ("urgent", 9), ("normal", 5), ("urgent too", 9)])
        print("PriorityQueue: pushed low/1, urgent/9, normal/5, urgent too/9")
        print(f"  pop_max: {tasks.pop_max(db)!r}, pop_min: {tasks.pop_min(db)!r}, "
              f"pop_max: {tasks.pop_max(db)!r}, pop_max: {tasks.pop_max(db)!r}")

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

        jobs.push(db, b"leased job")
        lease = jobs.claim(db, 30)
        assert lease is not None
        print(f"Leases: claimed {lease.value!r} (delivery {lease.deliveries}), "
              f"visible now: {not jobs.is_empty(db)}; ack")
        jobs.ack(db, lease)
        print(f"Everything popped: queue size {jobs.size(db)}, priority queue size "
              f"{tasks.size(db)}, tree size {pool.size(db)}")
    finally:
        r = root.range()
        db.clear_range(r.start, r.stop)


def with_cluster(command: str, body: Callable[[str], int]) -> int:
    """Run ``body(cluster_file)`` on FDB_CLUSTER_FILE or a throwaway local fdbserver.

    Returns what ``body`` returns, or 1 (the reason on stderr) when neither the
    client library nor a cluster can be had.
    """
    problem = client_library_problem()
    if problem:
        print(f"fdbrecipes {command}: cannot run: {problem}", file=sys.stderr)
        return 1
    try:
        with local_cluster() as cluster_file:
            return body(cluster_file)
    except ServerNotFoundError as e:
        print(f"fdbrecipes {command}: cannot run: {e}", file=sys.stderr)
        return 1


def run_demo() -> int:
    def body(cluster_file: str) -> int:
        where = ("FDB_CLUSTER_FILE" if os.environ.get("FDB_CLUSTER_FILE")
                 else "a throwaway local fdbserver")
        print(f"Using {where} ({cluster_file})")
        demo(open_database(cluster_file))
        print("Demo finished.")
        return 0

    return with_cluster("demo", body)


def main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser(
        prog="fdbrecipes",
        description="Transactional Queue, PriorityQueue and WeightTree on FoundationDB. "
        f"Needs a FoundationDB cluster: FDB_CLUSTER_FILE, or {INSTALL_HINT}.",
    )
    parser.add_argument("--version", action="version", version=f"fdbrecipes {__version__}")
    commands = parser.add_subparsers(dest="command", required=True)
    commands.add_parser("demo", help="push and pop through every structure")
    bench = commands.add_parser("bench", help="run the benchmark suite (table + PNG chart)")
    from .bench import add_arguments

    add_arguments(bench)
    args = parser.parse_args(argv)
    if args.command == "demo":
        return run_demo()
    from .bench import run_bench

    return run_bench(args)


if __name__ == "__main__":
    sys.exit(main())
