"""Pushes given a Database by the threads of one process share transactions
(:mod:`fdbrecipes._drivers.sharing`), on a real server: every item stored once and in
each thread's order, every id made once, under unknown commit results too; far fewer
commits than pushes; a bad push fails alone, before the transaction or in it (a unique
key held); a shared transaction failing for good runs each of its pushes again alone,
so only the push whose own transaction fails raises; Ctrl-C reaching a waiting push
writes nothing of it and stops no other thread."""

from __future__ import annotations

import signal
import sys
import threading
from functools import partial
from typing import Any, List, Optional, Tuple

import fdb
import pytest

from fdbrecipes import PriorityQueue, Queue, Unique, UniqueConflictError, Worker
from fdbrecipes.tasks import App, Task
from tests.helpers import RandomFaults, eventually, run_threads, unknown_results

pytestmark = pytest.mark.integration

#: Threads, and pushes each makes.
THREADS, PUSHES = 16, 50
#: Seconds any thread of a test may take.
DEADLINE = 120.0


class Commits:
    """A plan for :func:`tests.helpers.unknown_results` that counts the commits (and
    makes each faulty as ``faults`` says, if given)."""

    def __init__(self, faults: Optional[RandomFaults] = None) -> None:
        self.faults = faults
        self.count = 0
        self.lock = threading.Lock()

    def __call__(self) -> Optional[str]:
        with self.lock:
            self.count += 1
        return None if self.faults is None else self.faults()


def pushers(push: Any, errors: List[BaseException],
            returned: Optional[List[Any]] = None) -> List[threading.Thread]:
    """:data:`THREADS` threads, thread ``t`` pushing ``(t, i)`` for i in 0 ..
    :data:`PUSHES` - 1, one push a call, all started together (what each push
    returned appended to ``returned``, if given)."""
    start = threading.Barrier(THREADS)

    def pusher(t: int) -> None:
        try:
            start.wait(timeout=DEADLINE)
            for i in range(PUSHES):
                answer = push((t, i))
                if returned is not None:
                    returned.append(answer)
        except BaseException as e:
            errors.append(e)

    return [threading.Thread(target=pusher, args=(t,)) for t in range(THREADS)]


def in_order(values: List[Any]) -> bool:
    """Whether every thread's items are all there, once each, in its order."""
    return all([i for t_, i in values if t_ == t] == list(range(PUSHES))
               for t in range(THREADS))


def test_threads_pushes_share_transactions(fdb_cluster_file: str, db: Any,
                                           fdb_subspace: Any) -> None:
    commits = Commits()
    counted = unknown_results(fdb_cluster_file, commits)
    q: Queue[Tuple[int, int]] = Queue(fdb_subspace)
    errors: List[BaseException] = []
    run_threads(pushers(partial(q.push, counted), errors), errors, DEADLINE)
    values = q.items(db)
    assert len(values) == THREADS * PUSHES and in_order(values)
    # alone, each push is a commit; shared, a commit carries every push waiting
    assert commits.count <= THREADS * PUSHES / 2, commits.count
    print(f"{THREADS} threads x {PUSHES} pushes: {commits.count} commits")


def defer_pair(task: Task[Any, Any], db: Any, pair: Tuple[int, int]) -> bytes:
    """Defer ``task``'s call with the pair's two numbers; the call's id."""
    handle = task.defer(db, *pair)
    assert handle.id is not None
    return handle.id


@pytest.mark.parametrize("queue", ["plain", "urgent"])
def test_threads_deferring_tasks_share_transactions(fdb_cluster_file: str, db: Any,
                                                    fdb_subspace: Any, queue: str) -> None:
    """An app's task deferred given a Database by a process's threads (a web
    application's request threads): its calls share transactions as ``push`` does,
    on a Queue and on a PriorityQueue, each stored and run once, with its own id;
    fewer commits than calls, also with a fifth of them reporting
    ``commit_unknown_result``."""
    commits = Commits(RandomFaults(seed=12))
    faulty = unknown_results(fdb_cluster_file, commits)
    app = App(fdb_subspace)
    ran: List[Tuple[int, int]] = []
    lock = threading.Lock()

    def mark(t: int, i: int) -> None:
        with lock:
            ran.append((t, i))

    task = app.task(name="mark", queue=queue, priority=1 if queue == "urgent" else None)(mark)
    errors: List[BaseException] = []
    ids: List[bytes] = []
    run_threads(pushers(partial(defer_pair, task, faulty), errors, ids), errors, DEADLINE)
    assert len(set(ids)) == len(ids) == THREADS * PUSHES
    assert commits.count <= THREADS * PUSHES / 2, commits.count
    Worker(db, app).run(burst=True)
    assert sorted(ran) == [(t, i) for t in range(THREADS) for i in range(PUSHES)]
    assert {job.id for job in app.structure(queue).finished(db, limit=None)} == set(ids)


def test_shared_pushes_are_stored_once_under_unknown_results(fdb_cluster_file: str, db: Any,
                                                             fdb_subspace: Any) -> None:
    """A fifth of the commits report ``commit_unknown_result`` (half of them after
    really committing): every item is stored once, with the id its push returned, a
    PriorityQueue's too."""
    commits = Commits(RandomFaults(seed=11))
    faulty = unknown_results(fdb_cluster_file, commits)
    q: Queue[Tuple[int, int]] = Queue(fdb_subspace["q"], history=60)
    errors: List[BaseException] = []
    ids: List[bytes] = []
    run_threads(pushers(partial(q.push, faulty), errors, ids), errors, DEADLINE)
    rows = q.pending(db)
    assert len(rows) == THREADS * PUSHES and in_order([row.value for row in rows])
    assert len(set(ids)) == len(ids) == THREADS * PUSHES  # an id of its own each...
    assert sorted(row.id for row in rows) == sorted(ids)  # ...its item's, stored once
    assert q.stats(db).visible == THREADS * PUSHES  # one job record and count each
    assert commits.count < THREADS * PUSHES  # the pushes did share transactions
    pq: PriorityQueue[Tuple[int, int]] = PriorityQueue(fdb_subspace["pq"])
    run_threads(pushers(partial(pq.push, faulty, priority=3), errors), errors, DEADLINE)
    assert in_order(pq.items(db))


def test_a_bad_push_fails_alone(db: Any, fdb_subspace: Any) -> None:
    q: Queue[Any] = Queue(fdb_subspace)
    errors: List[BaseException] = []
    refused: List[BaseException] = []
    start = threading.Barrier(4)

    def push(value: Any) -> None:
        start.wait(timeout=DEADLINE)
        try:
            q.push(db, value)
        except ValueError as e:
            refused.append(e)

    run_threads([threading.Thread(target=push, args=(v,))
                 for v in (b"good", None, b"also good", b"x" * 200_000)], errors, DEADLINE)
    assert sorted(q.items(db)) == [b"also good", b"good"]
    assert len(refused) == 2


def waiting_for_its_turn(thread: threading.Thread) -> bool:
    """Whether ``thread`` is blocked in a shared push's wait (read from the
    interpreter's stack of that thread: the test's synchronisation, not the
    library's state)."""
    frame = sys._current_frames().get(thread.ident or 0)  # noqa: SLF001 (documented)
    while frame is not None:
        if frame.f_code.co_name == "wait" and "sharing" in frame.f_code.co_filename:
            return True
        frame = frame.f_back
    return False


#: Shared transactions of one structure and database in flight at once (docs/asyncio.md).
IN_FLIGHT = 2


def test_ctrl_c_while_a_push_waits_writes_nothing_of_it(fdb_cluster_file: str, db: Any,
                                                        fdb_subspace: Any) -> None:
    """Pushes of other threads hold every turn (their commits blocked until the test
    lets them go); the main thread's push waits; SIGINT to the main thread: its push
    leaves, writing nothing (KeyboardInterrupt); the held pushes land; later pushes
    still run."""
    release = threading.Event()
    holding = threading.Semaphore(0)

    def hold() -> None:
        holding.release()
        assert release.wait(timeout=DEADLINE)

    plan = iter(["applied"] * IN_FLIGHT)
    held_db = unknown_results(fdb_cluster_file, partial(next, plan, None), hold)
    q: Queue[bytes] = Queue(fdb_subspace)
    errors: List[BaseException] = []
    held = [threading.Thread(target=q.push, args=(held_db, b"held %d" % i), daemon=True)
            for i in range(IN_FLIGHT)]
    try:
        for thread in held:
            thread.start()
        for _ in held:  # their commits are in flight: every turn is held
            assert holding.acquire(timeout=DEADLINE)
        main = threading.main_thread()

        def interrupt() -> None:
            try:
                eventually(partial(waiting_for_its_turn, main), DEADLINE, "the main thread's "
                           "push waiting for its turn")
                signal.pthread_kill(main.ident or 0, signal.SIGINT)
            except BaseException as e:
                errors.append(e)

        interrupter = threading.Thread(target=interrupt, daemon=True)
        interrupter.start()
        with pytest.raises(KeyboardInterrupt) as raised:
            q.push(held_db, b"interrupted")
        assert type(raised.value) is KeyboardInterrupt  # not on its way: nothing to settle
        interrupter.join(timeout=DEADLINE)
    finally:
        release.set()
    for thread in held:
        thread.join(timeout=DEADLINE)
    assert not errors and not any(thread.is_alive() for thread in held)
    q.push(held_db, b"after")  # the turn was handed on: a later push runs
    assert sorted(q.items(db)) == [b"after", b"held 0", b"held 1"]


def test_threads_pushing_one_id_store_it_once(db: Any, fdb_subspace: Any) -> None:
    """16 threads push under one id, ten ids in turn: each id's item stored once, in
    whichever transaction the threads' pushes shared."""
    q: Queue[bytes] = Queue(fdb_subspace)
    errors: List[BaseException] = []
    start = threading.Barrier(THREADS)

    def pusher(t: int) -> None:
        try:
            for n in range(10):
                start.wait(timeout=DEADLINE)
                assert q.push(db, b"item %d from %d" % (n, t), id=b"id-%d" % n) == b"id-%d" % n
        except BaseException as e:
            errors.append(e)

    run_threads([threading.Thread(target=pusher, args=(t,)) for t in range(THREADS)], errors,
                DEADLINE)
    values = q.items(db)
    assert len(values) == 10 and sorted(int(v.split()[1]) for v in values) == list(range(10))


class Turns:
    """A Database whose first :data:`IN_FLIGHT` commits are held (applied, then held
    until :meth:`release`, then reported ``commit_unknown_result``: their pushes settle
    by their receipts), so pushes made meanwhile wait and go together in the next shared
    transaction; the commits after those go as ``then`` says, one entry a commit (see
    :func:`tests.helpers.unknown_results`), then normally.  It counts the commits."""

    def __init__(self, cluster_file: str, then: List[Optional[str]]) -> None:
        self.plan: List[Optional[str]] = ["applied"] * IN_FLIGHT + then
        self.commits = self.faulty = 0
        self.lock = threading.Lock()
        self.holding = threading.Semaphore(0)
        self.released = threading.Event()
        self.db = unknown_results(cluster_file, self.next, self.hold)

    def next(self) -> Optional[str]:
        with self.lock:
            self.commits += 1
            return self.plan.pop(0) if self.plan else None

    def hold(self) -> None:
        with self.lock:
            faulty, self.faulty = self.faulty, self.faulty + 1
        if faulty < IN_FLIGHT:
            self.holding.release()
            assert self.released.wait(timeout=DEADLINE)

    def take(self, q: Queue[Any]) -> List[threading.Thread]:
        """Hold every turn: :data:`IN_FLIGHT` pushes of ``b"held i"``, their commits
        in flight."""
        held = [threading.Thread(target=q.push, args=(self.db, b"held %d" % i), daemon=True)
                for i in range(IN_FLIGHT)]
        for thread in held:
            thread.start()
        for _ in held:
            assert self.holding.acquire(timeout=DEADLINE)
        return held

    def release(self) -> None:
        self.released.set()


def shared_once(turns: Turns, q: Queue[Any], pushes: List[Any]) -> List[Any]:
    """Run ``pushes`` (each a function of the Database: one push), each in a thread of
    its own, all waiting for a turn while :class:`Turns` holds every one, so they go
    in one shared transaction; what each returned or raised, in their order."""
    outcomes: List[Any] = [None] * len(pushes)

    def run(i: int) -> None:
        try:
            outcomes[i] = pushes[i](turns.db)
        except Exception as e:
            outcomes[i] = e

    held = turns.take(q)
    threads = [threading.Thread(target=run, args=(i,)) for i in range(len(pushes))]
    try:
        for thread in threads:
            thread.daemon = True
            thread.start()
        for thread in threads:
            eventually(partial(waiting_for_its_turn, thread), DEADLINE,
                       "a push waiting for its turn")
    finally:
        turns.release()
    for thread in threads + held:
        thread.join(timeout=DEADLINE)
    assert not any(thread.is_alive() for thread in threads + held)
    return outcomes


#: Pushes waiting together in the tests of one shared transaction.
WAITING = 6


def test_a_shared_transaction_failing_for_good_runs_each_push_alone(
        fdb_cluster_file: str, db: Any, fdb_subspace: Any) -> None:
    """Six pushes wait together; their shared transaction fails for good, writing
    nothing (``transaction_too_large`` at its commit), so each runs again in a
    transaction of its own; the first of those fails too: its push alone raises, in
    its own thread, and is not stored; the five others are, once each."""
    # held, held, the shared one, its settling, the first push alone, its settling
    turns = Turns(fdb_cluster_file, ["dropped:2101", None, "dropped:2101"])
    q: Queue[bytes] = Queue(fdb_subspace)
    outcomes = shared_once(turns, q, [partial(q.push, value=b"v%d" % i)
                                      for i in range(WAITING)])
    failed = [i for i, o in enumerate(outcomes) if isinstance(o, BaseException)]
    assert len(failed) == 1, outcomes
    error = outcomes[failed[0]]
    assert isinstance(error, fdb.FDBError) and error.code == 2101
    assert sorted(q.items(db)) == sorted([b"held 0", b"held 1"] + [
        b"v%d" % i for i in range(WAITING) if i not in failed])
    assert turns.commits == IN_FLIGHT + 2 + WAITING + 1  # one shared, then each alone


def test_a_push_refused_in_a_shared_transaction_fails_alone(
        fdb_cluster_file: str, db: Any, fdb_subspace: Any) -> None:
    """A push whose unique key is held (``on_conflict="raise"``) goes in one shared
    transaction with five others: it raises UniqueConflictError in its own thread; the
    others are stored, in that one commit."""
    q: Queue[bytes] = Queue(fdb_subspace)
    holder = q.push(db, b"holder", unique="k")
    turns = Turns(fdb_cluster_file, [])
    pushes = [partial(q.push, value=b"v%d" % i) for i in range(WAITING - 1)]
    pushes.insert(2, partial(q.push, value=b"late", unique=Unique("k", on_conflict="raise")))
    outcomes = shared_once(turns, q, pushes)
    refused = outcomes.pop(2)
    assert isinstance(refused, UniqueConflictError) and refused.job == holder
    assert not any(isinstance(o, BaseException) for o in outcomes), outcomes
    assert sorted(q.items(db)) == sorted([b"held 0", b"held 1", b"holder"] + [
        b"v%d" % i for i in range(WAITING - 1)])
    assert turns.commits == IN_FLIGHT + 1  # the six in one transaction


#: Seconds a push waits for a turn before it runs alone (docs/asyncio.md).
TURN_DEADLINE = 5.0


def test_a_push_kept_waiting_past_the_deadline_runs_alone(fdb_cluster_file: str, db: Any,
                                                          fdb_subspace: Any) -> None:
    """Both turns held by commits that do not end: a push waiting for a turn runs
    alone once it has waited the deadline, and is stored before they end."""
    turns = Turns(fdb_cluster_file, [])
    q: Queue[bytes] = Queue(fdb_subspace)
    held = turns.take(q)
    done = threading.Event()
    errors: List[BaseException] = []

    def push() -> None:
        try:
            q.push(turns.db, b"late")
            done.set()
        except BaseException as e:
            errors.append(e)

    late = threading.Thread(target=push, daemon=True)
    try:
        late.start()
        eventually(partial(waiting_for_its_turn, late), DEADLINE, "the push waiting")
        assert not done.wait(timeout=TURN_DEADLINE / 2)  # it waits for a turn first...
        # ...then runs alone, long before the held commits end (DEADLINE)
        assert done.wait(timeout=TURN_DEADLINE * 4), errors
        assert sorted(q.items(db)) == [b"held 0", b"held 1", b"late"]  # they still hold
    finally:
        turns.release()
    for thread in held + [late]:
        thread.join(timeout=DEADLINE)
    assert not errors and sorted(q.items(db)) == [b"held 0", b"held 1", b"late"]
