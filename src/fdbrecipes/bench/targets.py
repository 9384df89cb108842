"""The project's performance targets, checked against a run's figures.

Client-count targets are defined at 16 clients and checked at K (``--clients``); the
WeightTree latency target is defined from 10^3 to 10^6 items and checked over the sizes
measured.  A target whose figure the run did not measure is SKIP; a miss is reported,
never an error.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import List, Optional, Sequence

from .results import Latency, NoisyNeighbour, Row, Tail, cores, find, growth, plural, ratio
from .settings import (
    AWAITED_READ,
    BARE_CLAIMS,
    BLOCKING_READ,
    CLAIM_ACK,
    FAIR_CLAIM,
    FLOW_KEYS,
    FLOW_PUSH_PROCESSES,
    HC_POP,
    HISTORY_WORKER,
    HOT_SPREAD_POP,
    HOT_TREE_POP,
    ID_PUSH,
    IDLE_STARTED,
    IDLE_STORED,
    IDLE_WORKER,
    LIMIT,
    LIMITED_CLAIMS,
    PLAIN_CLAIMS,
    PUSH,
    QUEUE_CLAIM,
    RAW_PUSH,
    RAW_WORKER,
    SHARD_PAIRS,
    SPREAD,
    SPREAD_POP,
    TASK_PROCESSES,
    TASK_PUSH,
    TASK_WORKER,
    THREAD_PUSH,
    THREAD_PUSH_ALONE,
    THREAD_PUSH_UNSHARED,
    THREAD_WRITE,
    TREE_POP,
    UNIQUE_PUSH,
    WORKER,
    WORKFLOW_CREATE,
    WORKFLOW_FANIN,
    WORKFLOW_JOBS,
    WORKFLOW_PROCESSES,
    WORKFLOW_PUSH_MANY,
    Kind,
    aio_kinds,
)

#: Where the client-count targets are defined.
TARGET_CLIENTS = 16


@dataclass(frozen=True)
class Target:
    """One of the project's performance targets, checked against this run."""

    name: str
    value: Optional[float]
    threshold: float
    at_most: bool = False
    note: str = ""

    @property
    def status(self) -> str:
        """PASS, FAIL, or SKIP when the run did not measure the figure."""
        if self.value is None:
            return "SKIP"
        met = self.value <= self.threshold if self.at_most else self.value >= self.threshold
        return "PASS" if met else "FAIL"


def scope_note(clients: int) -> str:
    """Why a target measured at ``clients`` (not 16) speaks of a different scope."""
    if clients == TARGET_CLIENTS:
        return ""
    return f"measured at {plural(clients, 'client')}; the target is at {TARGET_CLIENTS}"


def field(row: Optional[Row], name: str) -> Optional[float]:
    """The figure ``name`` of ``row``, or None when the row was not measured."""
    value: Optional[float] = None if row is None else getattr(row, name)
    return value


class _Checker:
    """Makes the targets of one run at K = ``most`` clients."""

    def __init__(self, rows: Sequence[Row], most: int) -> None:
        self.rows = rows
        self.most = most

    def at_k(self, kind: Kind, what: str, name: str, threshold: float,
             at_most: bool = False) -> Target:
        """The target that ``kind``'s figure ``name`` at K clients is at least (or at
        most) ``threshold``; ``what`` names it in the output."""
        value = field(find(self.rows, kind, self.most), name)
        return Target(what, value, threshold, at_most, scope_note(self.most))

    def at(self, kind: Kind, clients: int, what: str, name: str,
           threshold: float) -> Target:
        """The target that ``kind``'s figure ``name`` at ``clients`` is at least
        ``threshold`` (clients 1: no scope note, the target is at 1 client)."""
        value = field(find(self.rows, kind, clients), name)
        note = "" if clients == 1 else scope_note(clients)
        return Target(what, value, threshold, note=note)


def check_targets(rows: Sequence[Row], latencies: Sequence[Latency], most: int,
                  fair: Sequence[Latency] = (),
                  noisy: Optional[NoisyNeighbour] = None,
                  flow: Sequence[Tail] = ()) -> List[Target]:
    """The targets, checked against ``rows`` (with ratios), ``latencies`` (the
    WeightTree's), the fair queue's latencies and noisy neighbour, and the flow
    group's claim latencies (plain, then under a keyed limit).

    In order: the high-contention pop, the spread pop, claim_many+ack, Queue.push at
    1 and K clients, WeightTree.pop throughput, WeightTree pop latency growth, the
    hot paths (:func:`hot_targets`), the async rows (:func:`aio_targets`), the
    workers (:func:`worker_targets`), the fair queue (:func:`fair_targets`), the
    shards, the tasks (:func:`task_targets`), flow control (:func:`flow_targets`),
    workflows (:func:`workflow_targets`).
    """
    check = _Checker(rows, most)
    poppers = plural(most, "popper")
    hc = f"high-contention pop, {poppers}"
    spread = f"pop spread={SPREAD}, {poppers}"
    targets = [
        check.at_k(HC_POP, f"{hc}: x recipe pop", "ratio_recipe", 5.0),
        check.at_k(HC_POP, f"{hc}: x recipe pop", "ratio_recipe", 3.0),
        check.at_k(HC_POP, f"{hc}: x limit", "ratio_limit", 0.5),
        check.at_k(HC_POP, f"{hc}: conflicts per pop", "retries_per_op", 0.2, at_most=True),
        check.at_k(SPREAD_POP, f"{spread}: x limit", "ratio_limit", 0.5),
        check.at_k(SPREAD_POP, f"{spread}: x recipe pop", "ratio_recipe", 2.5),
        check.at_k(SPREAD_POP, f"{spread}: retries per pop", "retries_per_op", 0.5,
                   at_most=True),
        check.at_k(CLAIM_ACK, f"{CLAIM_ACK.label}, {plural(most, 'client')}: x limit",
                   "ratio_limit", 5.0),
    ]
    for clients in sorted({1, most}):
        push = f"{PUSH.label}, {plural(clients, 'client')}"
        targets.append(check.at(PUSH, clients, f"{push}: x limit", "ratio_limit", 0.8))
        targets.append(check.at(PUSH, clients, f"{push}: x recipe push", "ratio_recipe", 0.95))
    targets.append(check.at_k(TREE_POP, f"{TREE_POP.label}, {plural(most, 'client')}: x limit",
                              "ratio_limit", 0.4))
    sizes = sorted(lat.n for lat in latencies) or [10**3, 10**6]
    full = sizes[0] <= 10**3 and sizes[-1] >= 10**6
    targets.append(Target(
        f"WeightTree pop median growth, {sizes[0]:,} to {sizes[-1]:,} items",
        growth(latencies), 2.0, at_most=True,
        note="" if full else "the target is from 10^3 to 10^6 items",
    ))
    return (targets + hot_targets(rows, most) + aio_targets(rows, most)
            + worker_targets(rows, most) + fair_targets(rows, most, fair, noisy)
            + shard_targets(rows, most) + task_targets(rows, most)
            + flow_targets(rows, most, flow) + workflow_targets(rows, most))


def flow_targets(rows: Sequence[Row], most: int, flow: Sequence[Tail]) -> List[Target]:
    """Flow control against the same work without it, in the same run: claim+ack at
    K clients under a global concurrency limit far above what they hold over the
    same queue without limits (at least 0.9x); ``Queue.claim``'s p99 with 10,000
    keys under a keyed limit over a plain Queue's (at most 2x); a push with a unique
    key over one with an id, at 4 processes or K (at least 0.9x)."""
    pushers = min(FLOW_PUSH_PROCESSES, most)
    plain, keyed = (flow[0], flow[1]) if len(flow) == 2 else (None, None)
    return [
        Target(f"{LIMITED_CLAIMS.label}, {plural(most, 'client')}: x {PLAIN_CLAIMS.label}",
               rate_ratio(find(rows, LIMITED_CLAIMS, most), find(rows, PLAIN_CLAIMS, most)),
               0.9, note=scope_note(most)),
        Target(f"flow: Queue.claim p99, {FLOW_KEYS:,} keys under a keyed limit: x a plain "
               "Queue's", None if plain is None or keyed is None
               else ratio(keyed.p99_ms, plain.p99_ms), 2.0, at_most=True),
        Target(f"{UNIQUE_PUSH.label}, {plural(pushers, 'client')}: x {ID_PUSH.label}",
               rate_ratio(find(rows, UNIQUE_PUSH, pushers), find(rows, ID_PUSH, pushers)),
               0.9, note="" if pushers == FLOW_PUSH_PROCESSES
               else f"measured at {plural(pushers, 'client')}"),
    ]


def workflow_targets(rows: Sequence[Row], most: int) -> List[Target]:
    """Workflows against the same jobs without them, in the same run (times: the
    reference's rate over the workflow's): the fan-in of 1,000 children and a
    callback over 1,000 independent jobs on the same workers, at 4 processes or K
    (at most 1.5x); ``Workflows.create`` of 10,000 nodes over ``push_many`` of 10,000
    items (at most 1.5x)."""
    workers = min(WORKFLOW_PROCESSES, most)
    return [
        Target(f"{WORKFLOW_FANIN.label}, {plural(workers, 'client')}: time x "
               f"{WORKFLOW_JOBS.label}",
               rate_ratio(find(rows, WORKFLOW_JOBS, workers), find(rows, WORKFLOW_FANIN, workers)),
               1.5, at_most=True, note="" if workers == WORKFLOW_PROCESSES
               else f"measured at {plural(workers, 'client')}"),
        Target(f"{WORKFLOW_CREATE.label}: time x {WORKFLOW_PUSH_MANY.label}",
               rate_ratio(find(rows, WORKFLOW_PUSH_MANY, 1), find(rows, WORKFLOW_CREATE, 1)),
               1.5, at_most=True),
    ]


def task_targets(rows: Sequence[Row], most: int) -> List[Target]:
    """Tasks against the raw calls on the same kind of queue, at 4 processes (or K,
    if fewer): ``task.defer(db)`` over ``Queue.push(db)``, ``Worker(db, app)`` over
    the raw Worker."""
    clients = min(TASK_PROCESSES, most)
    note = "" if clients == TASK_PROCESSES else f"measured at {plural(clients, 'client')}"
    return [Target(f"{task.label}, {plural(clients, 'client')}: x {raw.label}",
                   rate_ratio(find(rows, task, clients), find(rows, raw, clients)), 0.9,
                   note=note)
            for task, raw in ((TASK_PUSH, RAW_PUSH), (TASK_WORKER, RAW_WORKER))]


def hot_targets(rows: Sequence[Row], most: int) -> List[Target]:
    """The hot paths at K clients, each against its baseline of the same rounds: the
    spread pop over the bare probe pop, WeightTree.pop over the limit."""
    check = _Checker(rows, most)
    clients = plural(most, "client")
    return [
        check.at_k(HOT_SPREAD_POP, f"{HOT_SPREAD_POP.label}, {clients}: x bare probe pop",
                   "ratio_recipe", 0.9),
        check.at_k(HOT_TREE_POP, f"{HOT_TREE_POP.label}, {clients}: x limit, same rounds",
                   "ratio_recipe", 0.25),
    ]


def rate_ratio(row: Optional[Row], reference: Optional[Row]) -> Optional[float]:
    """``row``'s rate over ``reference``'s (None when either was not measured)."""
    return None if row is None or reference is None else ratio(row.rate, reference.rate)


def aio_targets(rows: Sequence[Row], most: int) -> List[Target]:
    """One async process with 64 tasks against K sync processes, on every row; its
    pushes (sharing transactions) against the limit; one process's 16 threads
    pushing given a Database (sharing transactions) against the same threads pushing
    as before they shared (the note: against the same threads' pushes each in an
    application's transaction, and this machine's floor); an awaited read's client
    CPU over a blocking one's."""
    push, pop, claim = aio_kinds(64)
    sync = plural(most, "sync client")
    note = scope_note(most)
    targets = [Target(f"{kind.label}: x {same.label}, {sync}",
                      rate_ratio(find(rows, kind, 1), find(rows, same, most)), 1.0, note=note)
               for kind, same in ((push, PUSH), (pop, SPREAD_POP), (claim, CLAIM_ACK))]
    targets.append(Target(f"{push.label}: x limit, {sync}",
                          rate_ratio(find(rows, push, 1), find(rows, LIMIT, most)), 2.0,
                          note=note))
    shared, before = find(rows, THREAD_PUSH, 1), find(rows, THREAD_PUSH_UNSHARED, 1)
    over_tr = rate_ratio(shared, find(rows, THREAD_PUSH_ALONE, 1))
    bound = rate_ratio(find(rows, THREAD_WRITE, 1), before)
    notes = ([] if over_tr is None else [f"{over_tr:.2f}x push(tr) a transaction each"]) + (
        [] if bound is None else [f"this machine's floor, a 1-key write tx from the same "
                                  f"threads: {bound:.2f}x"])
    targets.append(Target(f"{THREAD_PUSH.label}: x {THREAD_PUSH_UNSHARED.label}",
                          rate_ratio(shared, before), 3.0, note="; ".join(notes)))
    awaited, blocking = find(rows, AWAITED_READ, 1), find(rows, BLOCKING_READ, 1)
    extra = None
    if awaited and blocking and awaited.cpu_ms_per_op is not None \
            and blocking.cpu_ms_per_op is not None:
        extra = awaited.cpu_ms_per_op - blocking.cpu_ms_per_op
    targets.append(Target("an awaited read's client CPU over a blocking one's (ms)", extra,
                          0.05, at_most=True))
    return targets


def worker_targets(rows: Sequence[Row], most: int) -> List[Target]:
    """Workers at K processes against the limit and against the bare claims and acks;
    an idle worker's CPU; an idle worker's carrying 1,000 stored schedules against one
    carrying none (both once started), at most 2x."""
    check = _Checker(rows, most)
    workers = f"{WORKER.label}, {plural(most, 'client')}"
    idle = find(rows, IDLE_WORKER, 1)
    return [
        check.at_k(WORKER, f"{workers}: x limit", "ratio_limit", 2.0),
        Target(f"{workers}: x {BARE_CLAIMS.label}",
               rate_ratio(find(rows, WORKER, most), find(rows, BARE_CLAIMS, most)), 0.8,
               note=scope_note(most)),
        Target(f"{HISTORY_WORKER.label}, {plural(most, 'client')}: x {WORKER.label}",
               rate_ratio(find(rows, HISTORY_WORKER, most), find(rows, WORKER, most)), 0.8,
               note=scope_note(most)),
        Target("an idle worker: cores busy", None if idle is None
               else cores(idle.cpu_seconds, idle.seconds), 0.01, at_most=True),
        Target(f"{IDLE_STORED.label}: CPU x {IDLE_STARTED.label}",
               cpu_ratio(find(rows, IDLE_STORED, 1), find(rows, IDLE_STARTED, 1)), 2.0,
               at_most=True),
    ]


def cpu_ratio(row: Optional[Row], reference: Optional[Row]) -> Optional[float]:
    """``row``'s client CPU per second over ``reference``'s (None when either was not
    measured)."""
    if row is None or reference is None:
        return None
    mine, theirs = cores(row.cpu_seconds, row.seconds), cores(reference.cpu_seconds,
                                                              reference.seconds)
    return None if mine is None or theirs is None else ratio(mine, theirs)


def shard_targets(rows: Sequence[Row], most: int) -> List[Target]:
    """A sharded queue's pushes and claims at K clients against an unsharded one's,
    measured side by side: at least 0.9x (sharding must cost little where it is not
    needed, here one storage server)."""
    return [Target(f"{spread.label}, {plural(most, 'client')}: x {plain.label}",
                   rate_ratio(find(rows, spread, most), find(rows, plain, most)), 0.9,
                   note=scope_note(most))
            for plain, spread in SHARD_PAIRS]


def fair_targets(rows: Sequence[Row], most: int, fair: Sequence[Latency],
                 noisy: Optional[NoisyNeighbour]) -> List[Target]:
    """FairQueue.claim against Queue.claim at 1 and K clients; its latency's growth
    from 10^2 to 10^5 groups; the loud group's claims before the quiet groups were
    served (at most 300 of the first claims)."""
    targets = []
    for clients in sorted({1, most}):
        targets.append(Target(
            f"{FAIR_CLAIM.label}, {plural(clients, 'client')}: x {QUEUE_CLAIM.label}",
            rate_ratio(find(rows, FAIR_CLAIM, clients), find(rows, QUEUE_CLAIM, clients)),
            0.5, note="" if clients == 1 else scope_note(clients)))
    sizes = sorted(lat.n for lat in fair) or [10**2, 10**5]
    targets.append(Target(
        f"FairQueue claim median growth, {sizes[0]:,} to {sizes[-1]:,} groups",
        growth(fair), 2.0, at_most=True,
        note="" if sizes[-1] >= 10**5 else "the target is from 10^2 to 10^5 groups"))
    targets.append(Target("noisy neighbour: the loud group's claims before the quiet "
                          "groups were served", None if noisy is None else noisy.loud,
                          300, at_most=True))
    return targets
