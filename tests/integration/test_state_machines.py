"""Model-based tests: random sequences of operations against plain-Python models.

Each machine drives a structure on a real server and a model side by side and checks
every result; lease expiry is driven by advancing a shared test clock."""

from __future__ import annotations

import random
import uuid
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

from fdbrecipes import Lease, LeaseExpiredError, PriorityQueue, Queue, WeightTree
from tests.helpers import TestClock

pytestmark = pytest.mark.integration

values = st.one_of(st.integers(-1000, 1000), st.binary(max_size=8), st.text(max_size=4))
ids = st.one_of(st.none(), st.sampled_from([b"a", b"b", b"c", b"d"]))
LEASE_SECONDS = 100  # never expires on its own during a run; expire_all advances 1000 s
MACHINE_SETTINGS = settings(max_examples=25, stateful_step_count=30, deadline=None)


class Item:
    """The model of one item: its place in the order, value, earlier deliveries."""

    def __init__(self, place: Tuple[Any, ...], value: Any, deliveries: int = 0) -> None:
        self.place, self.value, self.deliveries = place, value, deliveries


class OrderedModel(RuleBasedStateMachine):
    """Shared by the Queue and PriorityQueue machines (priority None for a Queue)."""

    leases = Bundle("leases")

    def __init__(self, db: Any) -> None:
        super().__init__()
        self.db = db
        self.space = fdb.Subspace(("fdbrecipes-test", "machine", uuid.uuid4().hex))
        self.clock = TestClock()
        self.visible: List[Item] = []
        self.held: Dict[bytes, Item] = {}  # token -> item, for live leases
        self.known_ids: set[bytes] = set()
        self.pushes = 0

    def teardown(self) -> None:
        r = self.space.range()
        self.db.clear_range(r.start, r.stop)

    # -- the model -----------------------------------------------------------------

    def place(self, priority: Optional[int]) -> Tuple[Any, ...]:
        self.pushes += 1
        return (priority, self.pushes) if priority is not None else (self.pushes,)

    def take(self, end: str) -> Optional[Item]:
        if not self.visible:
            return None
        if end == "min":
            item = min(self.visible, key=lambda i: i.place)
        else:
            item = min(self.visible, key=lambda i: (-i.place[0], i.place[1]))
        self.visible.remove(item)
        return item

    def order(self, end: str) -> List[Any]:
        if end == "min":
            return [i.value for i in sorted(self.visible, key=lambda i: i.place)]
        return [i.value for i in sorted(self.visible, key=lambda i: (-i.place[0], i.place[1]))]

    def accept_push(self, value: Any, priority: Optional[int], id_: Optional[bytes]) -> None:
        if id_ is not None:
            if id_ in self.known_ids:
                return
            self.known_ids.add(id_)
        self.visible.append(Item(self.place(priority), value))

    # -- rules shared by both structures ---------------------------------------------

    @rule(target=leases, lease=consumes(leases))
    def extend(self, lease: Lease) -> Lease:
        if lease.token in self.held:
            longer = self.s.extend(self.db, lease, LEASE_SECONDS)
            assert longer.value == lease.value and longer.deliveries == lease.deliveries
            self.held[longer.token] = self.held.pop(lease.token)
            return longer
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

    @rule(lease=consumes(leases))
    def release(self, lease: Lease) -> None:
        item = self.held.pop(lease.token, None)
        assert self.s.release(self.db, lease) is (item is not None)
        if item is not None:
            item.deliveries += 1
            self.visible.append(item)

    @rule()
    def expire_all(self) -> None:
        self.clock.advance(10 * LEASE_SECONDS)
        for item in self.held.values():
            item.deliveries += 1
            self.visible.append(item)
        self.held.clear()

    @rule()
    def clear(self) -> None:
        self.s.clear(self.db)
        self.visible.clear()
        self.held.clear()
        self.known_ids.clear()

    @invariant()
    def sizes(self) -> None:
        assert self.s.size(self.db) == len(self.visible) + len(self.held)
        assert self.s.is_empty(self.db) == (not self.visible)

    def check_lease(self, lease: Optional[Lease], item: Optional[Item]) -> Optional[Lease]:
        if item is None:
            assert lease is None
            return None
        assert lease is not None
        assert lease.value == item.value and lease.deliveries == item.deliveries + 1
        self.held[lease.token] = item
        return lease


class QueueMachine(OrderedModel):
    def __init__(self, db: Any) -> None:
        super().__init__(db)
        self.s = Queue(self.space, clock=self.clock, id_retention=10**6)

    @rule(value=values, id_=ids)
    def push(self, value: Any, id_: Optional[bytes]) -> None:
        self.s.push(self.db, value, id=id_)
        self.accept_push(value, None, id_)

    @rule(batch=st.lists(values, max_size=5))
    def push_many(self, batch: List[Any]) -> None:
        self.s.push_many(self.db, batch)
        for value in batch:
            self.accept_push(value, None, None)

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


class PriorityQueueMachine(OrderedModel):
    def __init__(self, db: Any) -> None:
        super().__init__(db)
        self.s = PriorityQueue(self.space, clock=self.clock, id_retention=10**6)

    @rule(value=values, priority=st.integers(-3, 3) | st.sampled_from([-(2**70), 2**70]),
          id_=ids)
    def push(self, value: Any, priority: int, id_: Optional[bytes]) -> None:
        self.s.push(self.db, value, priority, id=id_)
        self.accept_push(value, priority, id_)

    @rule(batch=st.lists(st.tuples(values, st.integers(-3, 3)), max_size=5))
    def push_many(self, batch: List[Tuple[Any, int]]) -> None:
        self.s.push_many(self.db, batch)
        for value, priority in batch:
            self.accept_push(value, priority, None)

    @rule(end=st.sampled_from(["min", "max"]))
    def pop(self, end: str) -> None:
        item = self.take(end)
        got = self.s.pop_min(self.db) if end == "min" else self.s.pop_max(self.db)
        assert got == (None if item is None else item.value)

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


class WeightTreeMachine(RuleBasedStateMachine):
    handles = Bundle("handles")

    def __init__(self, db: Any) -> None:
        super().__init__()
        self.db = db
        self.space = fdb.Subspace(("fdbrecipes-test", "machine", uuid.uuid4().hex))
        # A seeded rng: pop_random must pop the same item when hypothesis replays
        # the steps, or the draws after it would differ from run to run.
        self.tree = WeightTree(self.space, rng=random.Random(0))
        self.model: List[List[Any]] = []  # [handle, value, weight], in point order

    def teardown(self) -> None:
        r = self.space.range()
        self.db.clear_range(r.start, r.stop)

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


@pytest.mark.parametrize("machine", [QueueMachine, PriorityQueueMachine, WeightTreeMachine])
def test_state_machine(fdb_database: Any, machine: Any) -> None:
    run_state_machine_as_test(lambda: machine(fdb_database), settings=MACHINE_SETTINGS)
