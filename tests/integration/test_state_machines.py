"""Model-based tests: random sequences of operations against plain-Python models.

Each machine drives a structure on a real server and a model side by side and checks
every result; lease expiry and delays are driven by advancing a shared test clock.
The ordered machines cover delays, releases with delay, dead letters (max_deliveries
3), requeues and purges, and check stats() against the model after every step.  Each
machine drives the sync API and, again, the async one (``fdbrecipes.aio``)."""

from __future__ import annotations

import random
import uuid
from collections import Counter
from typing import Any, Dict, List, Optional, Tuple

import fdb
import pytest
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    Bundle,
    RuleBasedStateMachine,
    consumes,
    invariant,
    multiple,
    precondition,
    rule,
    run_state_machine_as_test,
)

from fdbrecipes import Lease, LeaseExpiredError, PriorityQueue, Queue, WeightTree, aio
from tests.helpers import Blocking, TestClock

pytestmark = pytest.mark.integration

values = st.one_of(st.integers(-1000, 1000), st.binary(max_size=8), st.text(max_size=4))
ids = st.one_of(st.none(), st.sampled_from([b"a", b"b", b"c", b"d"]))
# Times in seconds on the test clock.  Steps of the clock are multiples of STEP and
# every deadline is an odd multiple of 1,000 away from its start, so a deadline
# never falls on a step, and the real time that passes during a run (seconds) never
# decides whether it has passed.
LEASE_SECONDS = 1_000
STEP = 2_000
delays = st.sampled_from([None, 0, 1_000, 9_000])
MAX_DELIVERIES = 3
MACHINE_SETTINGS = settings(max_examples=25, stateful_step_count=30, deadline=None)


class Item:
    """The model of one item: its place in the order, value, earlier deliveries, and
    when it is visible (a clock reading in seconds)."""

    def __init__(self, place: Tuple[Any, ...], value: Any, visible_at: float,
                 deliveries: int = 0) -> None:
        self.place, self.value, self.deliveries = place, value, deliveries
        self.visible_at = visible_at


def structure(api: str, sync: Any, twin: Any, *args: Any, **kwargs: Any) -> Any:
    """The structure a machine drives: the sync class, or (api "async") its async
    twin, called through :class:`tests.helpers.Blocking`."""
    if api == "sync":
        return sync(*args, **kwargs)
    return Blocking(twin(*args, **kwargs))


class OrderedModel(RuleBasedStateMachine):
    """Shared by the Queue and PriorityQueue machines (priority None for a Queue)."""

    leases = Bundle("leases")

    def __init__(self, db: Any, api: str) -> None:
        super().__init__()
        self.db = db
        self.space = fdb.Subspace(("fdbrecipes-test", "machine", uuid.uuid4().hex))
        self.clock = TestClock()
        self.now = 0.0
        self.waiting: List[Item] = []  # visible or delayed, by visible_at
        self.held: Dict[bytes, Tuple[Item, float, int]] = {}  # token -> (item, deadline, n)
        self.deadlines = 0  # deadlines set so far: ties end in the order they were set
        self.dead_letters: List[Item] = []
        self.known_ids: set[bytes] = set()
        self.pushes = 0

    def teardown(self) -> None:
        r = self.space.range()
        self.db.clear_range(r.start, r.stop)
        if isinstance(self.s, Blocking):
            self.s.close()

    # -- the model -----------------------------------------------------------------

    def place(self, priority: Optional[int]) -> Tuple[Any, ...]:
        self.pushes += 1
        return (priority, self.pushes) if priority is not None else (self.pushes,)

    def visible(self) -> List[Item]:
        return [i for i in self.waiting if i.visible_at <= self.now]

    def ordered(self, end: str) -> List[Item]:
        if end == "min":
            return sorted(self.visible(), key=lambda i: i.place)
        return sorted(self.visible(), key=lambda i: (-i.place[0], i.place[1]))

    def take(self, end: str) -> Optional[Item]:
        order = self.ordered(end)
        if not order:
            return None
        self.waiting.remove(order[0])
        return order[0]

    def order(self, end: str) -> List[Any]:
        return [i.value for i in self.ordered(end)]

    def accept_push(self, value: Any, priority: Optional[int], id_: Optional[bytes],
                    delay: Optional[int]) -> None:
        if id_ is not None:
            if id_ in self.known_ids:
                return
            self.known_ids.add(id_)
        self.waiting.append(Item(self.place(priority), value, self.now + (delay or 0)))

    def end_lease(self, item: Item, visible_at: float) -> None:
        """A lease ended without ack: the item comes back, or dies."""
        item.deliveries += 1
        if item.deliveries >= MAX_DELIVERIES:
            self.dead_letters.append(item)
        else:
            item.visible_at = visible_at
            self.waiting.append(item)

    # -- rules shared by both structures ---------------------------------------------

    @rule(target=leases, lease=consumes(leases))
    def extend(self, lease: Lease) -> Lease:
        if lease.token in self.held:
            longer = self.s.extend(self.db, lease, LEASE_SECONDS)
            assert longer == lease and longer.value == lease.value
            assert longer.deliveries == lease.deliveries
            item = self.held[lease.token][0]
            self.hold(lease.token, item)
            return lease  # the original keeps working
        with pytest.raises(LeaseExpiredError):
            self.s.extend(self.db, lease, LEASE_SECONDS)
        return lease

    @rule(lease=consumes(leases))
    def ack(self, lease: Lease) -> None:
        if lease.token in self.held:
            self.s.ack(self.db, lease)
            del self.held[lease.token]
        else:
            with pytest.raises(LeaseExpiredError):
                self.s.ack(self.db, lease)

    @rule(lease=consumes(leases), delay=delays)
    def release(self, lease: Lease, delay: Optional[int]) -> None:
        held = self.held.pop(lease.token, None)
        assert self.s.release(self.db, lease, delay=delay) is (held is not None)
        if held is not None:
            self.end_lease(held[0], self.now + (delay or 0))

    @rule()
    def advance(self) -> None:
        self.clock.advance(STEP)
        self.now += STEP
        ending = sorted((deadline, n, token) for token, (_, deadline, n) in self.held.items()
                        if deadline <= self.now)
        for deadline, _, token in ending:
            self.end_lease(self.held.pop(token)[0], deadline)

    @rule(limit=st.none() | st.integers(1, 3))
    def requeue_dead(self, limit: Optional[int]) -> None:
        moved = self.dead_letters[:limit] if limit is not None else list(self.dead_letters)
        assert self.s.requeue_dead(self.db, limit) == len(moved)
        for item in moved:
            self.dead_letters.remove(item)
            self.waiting.append(Item(self.place(item.place[0] if len(item.place) == 2
                                                else None), item.value, self.now))

    @rule()
    def purge_dead(self) -> None:
        assert self.s.purge_dead(self.db) == len(self.dead_letters)
        self.dead_letters.clear()

    @rule()
    def dead(self) -> None:
        letters = self.s.dead(self.db)
        assert [d.value for d in letters] == [i.value for i in self.dead_letters]
        assert [d.deliveries for d in letters] == [MAX_DELIVERIES] * len(letters)

    @rule()
    def clear(self) -> None:
        self.s.clear(self.db)
        self.waiting.clear()
        self.held.clear()
        self.dead_letters.clear()
        self.known_ids.clear()

    @invariant()
    def sizes(self) -> None:
        visible = len(self.visible())
        assert self.s.size(self.db) == len(self.waiting) + len(self.held)
        assert self.s.is_empty(self.db) == (not visible)
        stats = self.s.stats(self.db)
        assert (stats.visible, stats.delayed, stats.in_flight, stats.dead) == (
            visible, len(self.waiting) - visible, len(self.held), len(self.dead_letters))
        assert (stats.oldest_age is None) == (visible == 0)

    def check_lease(self, lease: Optional[Lease], item: Optional[Item]) -> Optional[Lease]:
        if item is None:
            assert lease is None
            return None
        assert lease is not None
        assert lease.value == item.value and lease.deliveries == item.deliveries + 1
        self.hold(lease.token, item)
        return lease

    def hold(self, token: bytes, item: Item) -> None:
        self.deadlines += 1
        self.held[token] = (item, self.now + LEASE_SECONDS, self.deadlines)


class QueueMachine(OrderedModel):
    def __init__(self, db: Any, api: str) -> None:
        super().__init__(db, api)
        self.s = structure(api, Queue, aio.AsyncQueue, self.space, clock=self.clock,
                           id_retention=10**6, max_deliveries=MAX_DELIVERIES)

    @rule(value=values, id_=ids, delay=delays)
    def push(self, value: Any, id_: Optional[bytes], delay: Optional[int]) -> None:
        self.s.push(self.db, value, id=id_, delay=delay)
        self.accept_push(value, None, id_, delay)

    @rule(batch=st.lists(values, max_size=5), delay=delays)
    def push_many(self, batch: List[Any], delay: Optional[int]) -> None:
        self.s.push_many(self.db, batch, delay=delay)
        for value in batch:
            self.accept_push(value, None, None, delay)

    @rule()
    def pop(self) -> None:
        item = self.take("min")
        assert self.s.pop(self.db) == (None if item is None else item.value)

    @rule(n=st.integers(0, 4))
    def pop_many(self, n: int) -> None:
        expected = [item.value for item in (self.take("min") for _ in range(n)) if item]
        assert self.s.pop_many(self.db, n) == expected

    @rule()
    def peek(self) -> None:
        order = self.order("min")
        assert self.s.peek(self.db) == (order[0] if order else None)

    @rule(limit=st.none() | st.integers(0, 5))
    def items(self, limit: Optional[int]) -> None:
        order = self.order("min")
        assert self.s.items(self.db, limit=limit) == (order if limit is None else order[:limit])

    @rule(target=OrderedModel.leases)
    def claim(self) -> Any:
        item = self.take("min")
        lease = self.check_lease(self.s.claim(self.db, LEASE_SECONDS), item)
        return lease if lease is not None else multiple()

    @rule(target=OrderedModel.leases, n=st.integers(0, 3))
    def claim_many(self, n: int) -> Any:
        items = [item for item in (self.take("min") for _ in range(n)) if item]
        leases = self.s.claim_many(self.db, n, LEASE_SECONDS)
        assert len(leases) == len(items)
        return multiple(*[self.check_lease(lease, item) for lease, item in zip(leases, items)])


class PriorityQueueMachine(OrderedModel):
    def __init__(self, db: Any, api: str) -> None:
        super().__init__(db, api)
        self.s = structure(api, PriorityQueue, aio.AsyncPriorityQueue, self.space,
                           clock=self.clock, id_retention=10**6,
                           max_deliveries=MAX_DELIVERIES)

    @rule(value=values, priority=st.integers(-3, 3) | st.sampled_from([-(2**70), 2**70]),
          id_=ids, delay=delays)
    def push(self, value: Any, priority: int, id_: Optional[bytes],
             delay: Optional[int]) -> None:
        self.s.push(self.db, value, priority, id=id_, delay=delay)
        self.accept_push(value, priority, id_, delay)

    @rule(batch=st.lists(st.tuples(values, st.integers(-3, 3)), max_size=5), delay=delays)
    def push_many(self, batch: List[Tuple[Any, int]], delay: Optional[int]) -> None:
        self.s.push_many(self.db, batch, delay=delay)
        for value, priority in batch:
            self.accept_push(value, priority, None, delay)

    @rule(end=st.sampled_from(["min", "max"]))
    def pop(self, end: str) -> None:
        item = self.take(end)
        got = self.s.pop_min(self.db) if end == "min" else self.s.pop_max(self.db)
        assert got == (None if item is None else item.value)

    @rule(end=st.sampled_from(["min", "max"]), n=st.integers(0, 3))
    def pop_many(self, end: str, n: int) -> None:
        expected = [item.value for item in (self.take(end) for _ in range(n)) if item]
        pop_many = self.s.pop_min_many if end == "min" else self.s.pop_max_many
        assert pop_many(self.db, n) == expected

    @rule(end=st.sampled_from(["min", "max"]))
    def peek(self, end: str) -> None:
        order = self.order(end)
        got = self.s.peek_min(self.db) if end == "min" else self.s.peek_max(self.db)
        assert got == (order[0] if order else None)

    @rule(limit=st.none() | st.integers(0, 5), reverse=st.booleans())
    def items(self, limit: Optional[int], reverse: bool) -> None:
        order = self.order("max" if reverse else "min")
        got = self.s.items(self.db, limit=limit, reverse=reverse)
        assert got == (order if limit is None else order[:limit])

    @rule(target=OrderedModel.leases, end=st.sampled_from(["min", "max"]))
    def claim(self, end: str) -> Any:
        item = self.take(end)
        claim = self.s.claim_min if end == "min" else self.s.claim_max
        lease = self.check_lease(claim(self.db, LEASE_SECONDS), item)
        return lease if lease is not None else multiple()


class ShardedQueueMachine(OrderedModel):
    """A Queue over three shards: between shards the order is relaxed, so each take
    must return some visible item (values are unique: the model knows which), and
    listings hold the visible items in some order; the rest is exact, as for an
    unsharded queue (leases, delays, dead letters, ids, stats)."""

    def __init__(self, db: Any, api: str) -> None:
        super().__init__(db, api)
        self.s = structure(api, Queue, aio.AsyncQueue, self.space, clock=self.clock,
                           id_retention=10**6, max_deliveries=MAX_DELIVERIES, shards=3)

    def fresh(self) -> int:
        self.pushes += 1
        return self.pushes

    def taken(self, value: Any, deliveries: Optional[int] = None) -> Item:
        """The visible item the structure took: the one with ``value``."""
        [item] = [i for i in self.visible() if i.value == value]
        if deliveries is not None:
            assert deliveries == item.deliveries + 1
        self.waiting.remove(item)
        return item

    @rule(id_=ids, delay=delays)
    def push(self, id_: Optional[bytes], delay: Optional[int]) -> None:
        value = self.fresh()
        self.s.push(self.db, value, id=id_, delay=delay)
        self.accept_push(value, None, id_, delay)

    @rule(n=st.integers(0, 5), delay=delays)
    def push_many(self, n: int, delay: Optional[int]) -> None:
        batch = [self.fresh() for _ in range(n)]
        self.s.push_many(self.db, batch, delay=delay)
        for value in batch:
            self.accept_push(value, None, None, delay)

    @rule(n=st.integers(1, 4), spread=st.sampled_from([1, 3]))
    def pop_many(self, n: int, spread: int) -> None:
        expect = min(n, len(self.visible()))
        got = self.s.pop_many(self.db, n, spread=spread) if n > 1 else \
            [v for v in [self.s.pop(self.db, spread=spread)] if v is not None]
        assert len(got) == expect
        for value in got:
            self.taken(value)

    @rule(limit=st.none() | st.integers(0, 5))
    def items(self, limit: Optional[int]) -> None:
        visible = sorted(i.value for i in self.visible())
        got = self.s.items(self.db, limit=limit)
        assert len(got) == (len(visible) if limit is None else min(limit, len(visible)))
        assert set(got) <= set(visible) and len(set(got)) == len(got)
        peeked = self.s.peek(self.db)
        assert (peeked is None) == (not visible) and (peeked is None or peeked in visible)

    @rule(target=OrderedModel.leases, n=st.integers(1, 3))
    def claim_many(self, n: int) -> Any:
        expect = min(n, len(self.visible()))
        leases = self.s.claim_many(self.db, n, LEASE_SECONDS) if n > 1 else \
            [x for x in [self.s.claim(self.db, LEASE_SECONDS)] if x is not None]
        assert len(leases) == expect
        for lease in leases:
            self.hold(lease.token, self.taken(lease.value, lease.deliveries))
        return multiple(*leases)

    @rule(limit=st.none() | st.integers(1, 3))
    def requeue_dead(self, limit: Optional[int]) -> None:
        before = Counter(d.value for d in self.s.dead(self.db))
        moved = self.s.requeue_dead(self.db, limit)
        assert moved == min(len(self.dead_letters), limit or len(self.dead_letters))
        gone = before - Counter(d.value for d in self.s.dead(self.db))
        assert sum(gone.values()) == moved
        for item in [i for i in self.dead_letters if i.value in gone]:
            self.dead_letters.remove(item)
            self.waiting.append(Item((self.fresh(),), item.value, self.now))

    @rule()
    def dead(self) -> None:
        letters = self.s.dead(self.db)
        assert sorted(d.value for d in letters) == sorted(i.value for i in self.dead_letters)
        assert [d.deliveries for d in letters] == [MAX_DELIVERIES] * len(letters)


class WeightTreeMachine(RuleBasedStateMachine):
    handles = Bundle("handles")

    def __init__(self, db: Any, api: str) -> None:
        super().__init__()
        self.db = db
        self.space = fdb.Subspace(("fdbrecipes-test", "machine", uuid.uuid4().hex))
        # A seeded rng: pop_random must pop the same item when hypothesis replays
        # the steps, or the draws after it would differ from run to run.
        self.tree = structure(api, WeightTree, aio.AsyncWeightTree, self.space,
                              rng=random.Random(0))
        self.model: List[List[Any]] = []  # [handle, value, weight], in point order

    def teardown(self) -> None:
        r = self.space.range()
        self.db.clear_range(r.start, r.stop)
        if isinstance(self.tree, Blocking):
            self.tree.close()

    def owner(self, point: int) -> int:
        for index, (_, _, weight) in enumerate(self.model):
            if point < weight:
                return index
            point -= weight
        raise AssertionError("point beyond the total")

    @rule(target=handles, value=values, weight=st.integers(1, 2**32))
    def push(self, value: Any, weight: int) -> bytes:
        handle = self.tree.push(self.db, value, weight)
        self.model.append([handle, value, weight])
        return handle

    @rule(batch=st.lists(st.tuples(values, st.integers(1, 9)), min_size=1, max_size=4))
    def push_many(self, batch: List[Tuple[Any, int]]) -> None:
        handles = self.tree.push_many(self.db, batch)
        self.model.extend([h, v, w] for h, (v, w) in zip(handles, batch))

    @precondition(lambda self: bool(self.model))
    @rule(data=st.data(), remove=st.booleans())
    def pick(self, data: st.DataObject, remove: bool) -> None:
        total = sum(w for _, _, w in self.model)
        point = data.draw(st.integers(0, total - 1))
        index = self.owner(point)
        if remove:
            assert self.tree.pop(self.db, point=point) == self.model.pop(index)[1]
        else:
            assert self.tree.peek(self.db, point=point) == self.model[index][1]

    @rule()
    def pop_random(self) -> None:
        value = self.tree.pop(self.db)
        if not self.model:
            assert value is None
            return
        matches = [i for i, (_, v, _) in enumerate(self.model) if v == value]
        assert matches, f"popped {value!r}, not in the model"
        live = {h for h, _, _ in self.tree.items(self.db)}
        gone = [i for i in matches if self.model[i][0] not in live]
        assert len(gone) == 1
        self.model.pop(gone[0])

    @rule(handle=handles)
    def remove(self, handle: bytes) -> None:
        index = next((i for i, row in enumerate(self.model) if row[0] == handle), None)
        expected = None if index is None else self.model.pop(index)[1]
        assert self.tree.remove(self.db, handle) == expected

    @rule(handle=handles, weight=st.integers(1, 1000))
    def set_weight(self, handle: bytes, weight: int) -> None:
        row = next((row for row in self.model if row[0] == handle), None)
        old = self.tree.set_weight(self.db, handle, weight)
        if row is None:
            assert old is None
        else:
            assert old == row[2]
            row[2] = weight

    @rule(handle=handles)
    def get(self, handle: bytes) -> None:
        row = next((row for row in self.model if row[0] == handle), None)
        assert self.tree.get(self.db, handle) == (None if row is None else (row[1], row[2]))

    @invariant()
    def contents(self) -> None:
        assert self.tree.items(self.db) == [tuple(row) for row in self.model]
        assert self.tree.total_weight(self.db) == sum(w for _, _, w in self.model)
        assert self.tree.size(self.db) == len(self.model)


@pytest.mark.parametrize("api", ["sync", "async"])
@pytest.mark.parametrize("machine", [QueueMachine, PriorityQueueMachine, ShardedQueueMachine,
                                     WeightTreeMachine])
def test_state_machine(fdb_database: Any, machine: Any, api: str) -> None:
    run_state_machine_as_test(lambda: machine(fdb_database, api), settings=MACHINE_SETTINGS)
