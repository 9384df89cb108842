"""The dashboard with big data: how long each page takes to answer.

``python benchmarks/web.py [--pending 1000000] [--dead 100000] [--groups 10000]``
fills, on ``FDB_CLUSTER_FILE``'s cluster or a throwaway local server, a Queue holding
``--pending`` pending items, ``--dead`` dead letters, ``--delayed`` delayed items,
``--in-flight`` leased items and ``--finished`` finished job records, and a FairQueue of
``--groups`` groups (one or two items each); serves ``fdbrecipes.web.create_app`` over
them with uvicorn on 127.0.0.1; then asks every page ``--rounds`` times in turn over one
keep-alive HTTP connection (after two unmeasured rounds) and prints, per page, the
median, p90 and largest answer time in milliseconds, and the median as a multiple of
two floors measured in the same run, interleaved with the pages:

* ``http floor``: a page that reads nothing from the cluster (``/schedules`` without
  schedules): HTTP, the app and its template;
* ``1-key read``: a transaction reading one key (its read version and the read), from
  this process.

Beside them, the reads the pages made before they were bounded and side by side, as
library calls in this process (no HTTP): the first 50 groups' stats and policies read
group after group (``stats(tr, g)`` then ``group_policy(tr, g)``), against
``ops.stats_of`` for the same groups; and the FairQueue's ``stats`` (every group's,
what the overview read), against the overview's bounded reads (``views.overview``).

Deep pages start from a cursor half way into their listing (made from the listing's
own tokens, as the page's "next" link would be).  The target (issue 30) is every page
under 300 ms.  Run it on a quiet machine and give the load (it prints ``uptime``).
Results: a table on stdout, ``--out`` JSON.
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import statistics
import sys
import threading
import time
import uuid
from functools import partial
from typing import Any, Callable, Dict, List, Tuple
from urllib.parse import urlencode

import fdb.tuple

TARGET_MS = 300.0


def fill(db: Any, space: Any, args: argparse.Namespace) -> Dict[str, Any]:
    """Fill the structures (see the module docstring); what the pages need to know."""
    from fdbrecipes import FairQueue, Queue

    big = Queue(space["big"], max_deliveries=5)
    records = Queue(space["big"], history=7 * 86400, max_deliveries=5)
    fair = FairQueue(space["tenants"], history=7 * 86400)
    started = time.perf_counter()
    for at in range(0, args.dead, 1000):  # pushed, claimed and buried, 1,000 at a time
        n = min(1000, args.dead - at)
        big.push_many(db, [("dead", at + i, "x" * 40) for i in range(n)])
        committed(db, buried, big, n)
    reading = db.create_transaction()
    dead_until = reading.get_read_version().wait()
    print(f"  {args.dead:,} dead letters: {time.perf_counter() - started:.0f} s", flush=True)
    for at in range(0, args.finished, 1000):  # pushed, claimed and acked
        n = min(1000, args.finished - at)
        records.push_many(db, [("done", at + i) for i in range(n)])
        records.ack_many(db, records.claim_many(db, n, 600))
    running = records.push(db, ("running", 0))
    assert running is not None and len(records.claim_many(db, 1, 3600)) == 1
    print(f"  {args.finished:,} finished jobs: {time.perf_counter() - started:.0f} s",
          flush=True)
    threads = [threading.Thread(target=push_pending, args=(db, big, k, args.pending, 8))
               for k in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    print(f"  {args.pending:,} pending: {time.perf_counter() - started:.0f} s", flush=True)
    for i in range(0, args.delayed, 500):
        big.push_many(db, [("later", i + k) for k in range(min(500, args.delayed - i))],
                      delay=3600)
    taken = 0
    while taken < args.in_flight:
        taken += len(big.claim_many(db, min(1000, args.in_flight - taken), 3600))
    groups = [f"tenant-{i:05d}" for i in range(args.groups)]
    for at in range(0, len(groups), 100):
        committed(db, pushed_to, fair, groups[at:at + 100])
    print(f"  {args.groups:,} groups: {time.perf_counter() - started:.0f} s", flush=True)
    return {"big": big, "fair": fair, "groups": groups, "running": running,
            "dead_until": dead_until}


def committed(db: Any, body: Callable[..., None], *args: Any) -> None:
    """``body(tr, *args)`` in a transaction, committed, retried on retryable errors."""
    tr = db.create_transaction()
    while True:
        try:
            body(tr, *args)
            tr.commit().wait()
            return
        except fdb.FDBError as e:
            tr.on_error(e).wait()


def buried(tr: Any, q: Any, n: int) -> None:
    """Claim ``n`` items and bury them."""
    for lease in q.claim_many(tr, n, 60):
        q.bury(tr, lease, "bench: a dead letter")


def push_pending(db: Any, q: Any, k: int, total: int, threads: int) -> None:
    """Thread ``k`` of ``threads`` pushes its share of ``total`` pending items, 1,000 a
    transaction."""
    for at in range(k * 1000, total, threads * 1000):
        q.push_many(db, [("job", at + i, "payload " * 4) for i in range(min(1000, total - at))])


def pushed_to(tr: Any, fair: Any, groups: List[str]) -> None:
    """Two items in each of ``groups``."""
    for g in groups:
        fair.push_many(tr, [("t", g, 1), ("t", g, 2)], group=g)


def pages(db: Any, made: Dict[str, Any]) -> List[Tuple[str, str]]:
    """The pages asked (name, path and query), their deep cursors made from tokens."""
    from fdbrecipes.web.show import group_hex

    big = made["big"]
    first = big.pending(db, 1)[0]
    seq = fdb.tuple.unpack(first.token)[1]
    deep_pending = fdb.tuple.pack(("p", seq + big.stats(db).visible // 2, b"\x00")).hex()
    died = fdb.tuple.unpack(big.dead(db, 1)[0].token)[1]  # the first; the last died before
    deep_dead = fdb.tuple.pack(("dead", (died + made["dead_until"]) // 2, (0, b"\x00"))).hex()
    finished = big.finished(db, 5000)
    deep_finished = finished[-1].token.hex() if finished else None
    groups = made["groups"]
    mid = group_hex(groups[len(groups) // 2]) if groups else None

    def url(path: str, **query: Any) -> str:
        kept = {k: v for k, v in query.items() if v is not None}
        return path + ("?" + urlencode(kept) if kept else "")

    return [("overview", url("/")),
            ("pending, first page", url("/structure", s="big")),
            ("pending, half way", url("/structure", s="big", after=deep_pending)),
            ("pending, search 1,000 rows", url("/structure", s="big", q="no such value")),
            ("delayed", url("/structure", s="big", tab="delayed")),
            ("in flight", url("/structure", s="big", tab="in-flight")),
            ("dead, first page", url("/structure", s="big", tab="dead")),
            ("dead, half way", url("/structure", s="big", tab="dead", after=deep_dead)),
            ("finished, first page", url("/structure", s="big", tab="finished")),
            ("finished, deep", url("/structure", s="big", tab="finished", after=deep_finished)),
            ("a running job", url("/job", s="big", id=made["running"].hex())),
            ("workers", url("/workers", s="big")),
            ("groups, first page", url("/structure", s="tenants")),
            ("groups, half way", url("/structure", s="tenants", after=mid)),
            ("one group", url("/structure", s="tenants", g=group_hex(groups[0]))),
            ("fair finished", url("/structure", s="tenants", tab="finished"))]


def serve(app: Any) -> Tuple[Any, int]:
    import uvicorn

    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=0, log_level="warning",
                                           timeout_keep_alive=300))
    threading.Thread(target=server.run, daemon=True).start()
    deadline = time.monotonic() + 30
    while not server.started:
        if time.monotonic() > deadline:
            raise RuntimeError("uvicorn did not start")
        time.sleep(0.05)
    return server, server.servers[0].sockets[0].getsockname()[1]


def timed(call: Callable[[], Any]) -> float:
    started = time.perf_counter()
    call()
    return (time.perf_counter() - started) * 1000


def before_and_after(db: Any, made: Dict[str, Any]) -> List[Tuple[str, Callable[[], Any]]]:
    """The library reads of the groups page and of the overview, before and now."""
    from fdbrecipes import drive
    from fdbrecipes.admin.commands import read_only
    from fdbrecipes.web import views

    fair = made["fair"]
    first = made["groups"][:50]

    def one_by_one(tr: Any) -> None:
        for g in first:
            fair.stats(tr, g)
            fair.group_policy(tr, g)

    def side_by_side(tr: Any) -> None:
        drive(fair.ops.stats_of(tr, first))

    both = {"big": made["big"], "tenants": fair}
    return [("lib: 50 groups, one by one", partial(read_only, db, one_by_one)),
            ("lib: 50 groups, stats_of", partial(read_only, db, side_by_side)),
            ("lib: FairQueue.stats, all", partial(read_only, db, fair.stats)),
            ("lib: overview reads", partial(views.overview, db, both))]


def measure(db: Any, port: int, asked: List[Tuple[str, str]], rounds: int,
            made: Dict[str, Any]) -> Dict[str, List[float]]:
    """Every page (and the floors) ``rounds`` times in turn; milliseconds."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)

    def get(path: str) -> Callable[[], None]:
        def call() -> None:
            conn.request("GET", path)
            answer = conn.getresponse()
            body = answer.read()
            if answer.status != 200:
                raise RuntimeError(f"{path}: {answer.status} {body[:300]!r}")
        return call

    def one_key() -> None:
        tr = db.create_transaction()
        tr.get(b"fdbrecipes-bench-web/floor").wait()

    calls = [("http floor", get("/schedules")), ("1-key read", one_key)]
    calls += [(name, get(path)) for name, path in asked]
    calls += before_and_after(db, made)
    times: Dict[str, List[float]] = {name: [] for name, _ in calls}
    for n in range(rounds + 2):
        for name, call in calls:
            ms = timed(call)
            if n >= 2:
                times[name].append(ms)
    conn.close()
    return times


def report(times: Dict[str, List[float]]) -> List[Dict[str, Any]]:
    http_floor = statistics.median(times["http floor"])
    read_floor = statistics.median(times["1-key read"])
    rows = []
    print(f"\n{'page':28} {'median ms':>10} {'p90 ms':>8} {'max ms':>8} {'x http':>7} "
          f"{'x read':>7}  target")
    for name, ms in times.items():
        ms = sorted(ms)
        median, p90 = statistics.median(ms), ms[int(0.9 * (len(ms) - 1))]
        met = "" if name in ("http floor", "1-key read") or name.startswith("lib:") else (
            "PASS" if max(ms) < TARGET_MS else "FAIL")
        print(f"{name:28} {median:10.1f} {p90:8.1f} {ms[-1]:8.1f} {median / http_floor:7.1f} "
              f"{median / read_floor:7.1f}  {met}")
        rows.append({"page": name, "median_ms": median, "p90_ms": p90, "max_ms": ms[-1],
                     "x_http_floor": median / http_floor, "x_read": median / read_floor,
                     "target": met or None})
    return rows


def run(cluster_file: str, args: argparse.Namespace) -> int:
    from fdbrecipes.testing import open_database
    from fdbrecipes.web import READ_ONLY, create_app

    db = open_database(cluster_file)
    space = fdb.Subspace(("fdbrecipes-bench-web", uuid.uuid4().hex))
    try:
        print("filling:", flush=True)
        made = fill(db, space, args)
        asked = pages(db, made)
        app = create_app(db, {"big": made["big"], "tenants": made["fair"]}, access=READ_ONLY)
        server, port = serve(app)
        try:
            print(f"load before measuring: {os.getloadavg()}", flush=True)
            times = measure(db, port, asked, args.rounds, made)
        finally:
            server.should_exit = True
        rows = report(times)
        print(f"load after: {os.getloadavg()}")
        if args.out:
            with open(args.out, "w") as f:
                json.dump({"settings": vars(args), "load": os.getloadavg(), "pages": rows}, f,
                          indent=2)
        return 0
    finally:
        if not args.keep:
            r = space.range()
            db.clear_range(r.start, r.stop)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pending", type=int, default=1_000_000)
    parser.add_argument("--dead", type=int, default=100_000)
    parser.add_argument("--groups", type=int, default=10_000)
    parser.add_argument("--delayed", type=int, default=1_000)
    parser.add_argument("--in-flight", type=int, default=1_000)
    parser.add_argument("--finished", type=int, default=10_000)
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--out", default="")
    parser.add_argument("--keep", action="store_true", help="leave the data in the cluster")
    args = parser.parse_args()
    from fdbrecipes.testing import local_cluster

    with local_cluster() as cluster_file:
        return run(cluster_file, args)


if __name__ == "__main__":
    sys.exit(main())
