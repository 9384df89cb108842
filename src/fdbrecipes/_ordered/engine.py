"""The engine behind Queue and PriorityQueue: items in key order, taken from either end.

Queue is this with an empty group; PriorityQueue with the group ``(priority,)``.  The
keys are those of :class:`._layout.OrderedLayout`.  An item is *visible* (under
``i``), *held* (under ``h``, with a deadline: a lease, a high-contention result or a
delay) or *dead* (under ``x``).  What comes next is read by :mod:`.front` (which
this engine extends); a hold whose deadline has passed counts as visible again at its
original place, and writers put such items back (or, for a lease whose item reached
``max_deliveries``, bury them among the dead letters) as they meet them.

Every method here runs inside one transaction; :mod:`.._retry` decides which.
"""

from __future__ import annotations

import time
from typing import Any, Dict, Iterable, List, Optional, Sequence, Set, Tuple

from fdb.tuple import pack

from .._attempt import Attempt, gather
from .._clock import Clock
from .._fdb import (
    Gen,
    Range,
    Tally,
    clear_structure,
    fdb_impl,
    get_value,
    read_le64,
)
from .._ids import Ids
from .._layout import DELAY, LEASE, Item, OrderedLayout, RecordLayout
from .._limits.gate import Gate
from .._limits.slots import Comeback
from .._records.records import (
    DEAD,
    DELAYED,
    EXPIRED_REASON,
    LEASE_EXPIRED,
    PENDING,
    RETRYING,
    SUCCEEDED,
    Kept,
    Records,
)
from .._store_layout import forgotten_at_once, workflow_tag
from .._values import Value, decode_value, made_bytes
from ..errors import UnknownWorkflowStoreError
from .counts import Counts
from .front import RESTORE_BATCH, Entry, Front, Hold, value_of
from .requests import PushRequest
from .sequences import Sequences
from .unique import UniqueKeys, id_keyed, mark_of


class Takes:
    """A pop of one item, for what pops ``n`` (an engine, or the engine over the shards
    of a sharded structure, :class:`.shards.ShardedEngine`)."""

    __slots__ = ()

    def pop(self, tr: Any, attempt: Attempt, n: int, end: str,
            spread: int) -> Gen[List[Value]]:
        """Remove and return up to ``n`` values."""
        raise NotImplementedError

    def pop_one(self, tr: Any, attempt: Attempt, end: str,
                spread: int) -> Gen[Optional[Value]]:
        """:meth:`pop` of one item: the value, or None when none is visible."""
        values = yield from self.pop(tr, attempt, 1, end, spread)
        return values[0] if values else None


def told(workflows: Dict[bytes, Any], id_: Optional[bytes], structure: Any) -> Iterable[Any]:
    """The workflow stores (``workflows``: those made with ``structure``, by tag) to
    tell that job ``id_`` ends without its worker's ack (each asks for its node's step
    if the job is its node: see ``WorkflowOps.step``).

    Raises:
        UnknownWorkflowStoreError: ``id_`` is a workflow's node (or expander) of a
            store not among them: its step would be lost (the caller writes nothing).
    """
    tag = workflow_tag(id_)
    if tag is not None and tag not in workflows:
        assert id_ is not None
        raise UnknownWorkflowStoreError(id_, structure)
    return workflows.values()


class Ordered(Counts, Takes):
    """Items kept in key order, taken from either end (see the module docstring).

    In a sharded structure there is one per shard (``shard``: its number, None in an
    unsharded one), each with its own layout; the ids and the job records are the
    structure's, shared (see :mod:`.shards`).
    """

    __slots__ = ("comeback", "gate", "ids", "records", "sequences", "shard", "tail",
                 "unique", "workflows")

    def __init__(self, layout: OrderedLayout, clock: Clock, ids: Ids,
                 max_deliveries: Optional[int], records: Optional[Records] = None,
                 shard: Optional[int] = None, gate: Optional[Gate] = None,
                 workflows: Optional[Dict[bytes, Any]] = None) -> None:
        super().__init__(layout, clock, max_deliveries)
        self.ids = ids
        #: the workflow stores made with the structure, by tag (see :meth:`bury`)
        self.workflows: Dict[bytes, Any] = {} if workflows is None else workflows
        #: the limits its claims check (a structure made with ``limits=``), or None
        self.gate = gate
        self.comeback: Optional[Comeback] = None  #: a FairQueue group's (see Comeback)
        #: the job records (written only by a structure with ``history``)
        self.records = records or Records(
            RecordLayout(layout.subspace, layout.subspace["o"]), None)
        self.shard = shard
        #: the unique keys (an unsharded Queue's or PriorityQueue's; None elsewhere)
        self.unique: Optional[UniqueKeys] = None
        #: the sequences (an unsharded Queue's or PriorityQueue's; None elsewhere)
        self.sequences: Optional[Sequences] = None
        #: a Queue's item range as key selectors, made at its first push (see
        #: :meth:`next_seqs`; the bindings' selectors need the API version selected)
        self.tail: Optional[Tuple[Any, Any]] = None

    def record(self, item: Item, kept: Kept = ()) -> Optional[bytes]:
        """The id whose job record changes as ``item`` moves: the item's id, if this
        object keeps records or the id is one of ``kept`` (records it found: see
        ``Records.look``); None otherwise."""
        id_ = self.keys.item_id(item)
        return id_ if id_ is not None and (self.records.keeps or id_ in kept) else None

    # -- moving items -----------------------------------------------------------------

    def take(self, tr: Any, entry: Entry, now: int, tally: Tally,
             count: bool = True, read: bool = False) -> Item:
        """Remove ``entry`` from where it is; return its item tuple as visible now.

        Takes a read conflict on the removed key, so two transactions can never both
        take the same item (``read``: the caller read that key without snapshot,
        which took the conflict already).  An item coming back from a lease counts one more
        delivery (unless ``count`` is False: the lease is given back as if it never
        was); one coming back from any hold became visible at its deadline (or now,
        if the hold ends early).
        """
        h = entry.hold
        if h is None:
            tr.add_read_conflict_key(entry.key)
            tr.clear(entry.key)
            return entry.item
        held_key, due_key = self.hold_keys(entry)
        if not read:
            tr.add_read_conflict_key(held_key)
        tr.clear(held_key)
        tr.clear(due_key)
        tally.add(self.keys.delayed_out if h.kind == DELAY else self.keys.held_out)
        deliveries = self.keys.deliveries(entry.item) + (count and h.kind == LEASE)
        return self.keys.renewed(entry.item, deliveries, min(h.deadline, now))

    def put_back(self, tr: Any, entry: Entry, now: int, tally: Tally,
                 count: bool = True, error: Optional[Tuple[str, str, str]] = None,
                 kept: Kept = ()) -> None:
        """Return an item under a hold to its place in the order (``count``: as for
        :meth:`take`).  An item coming back from a lease is, in its job record,
        retrying (``count``; with ``error``, if given) or pending again (``kept``: as
        for :meth:`record`)."""
        assert entry.value is not None and entry.hold is not None
        item = self.take(tr, entry, now, tally, count)
        tr.set(self.keys.item_key(item), entry.value)
        self.wake(tally)
        id_ = self.record(item, kept)
        if id_ is not None and entry.hold.kind == LEASE:
            self.records.state(tr, id_, RETRYING if count else PENDING,
                               self.keys.deliveries(item))
            if error is not None:
                self.records.failed(tr, id_, error)

    def came_back(self, tr: Any, item: Item) -> None:
        """An item taken back from an expired lease and held again (parked by a limit):
        its job record, if it has one, retrying after the lease's expiry."""
        id_ = self.record(item)
        if id_ is not None:
            self.records.state(tr, id_, RETRYING, self.keys.deliveries(item))
            self.records.failed(tr, id_, LEASE_EXPIRED)

    def wake(self, tally: Tally) -> None:
        """Touch the wake key (waiters look again) without changing the size: one more
        in and one more out."""
        tally.add(self.keys.pushed)
        tally.add(self.keys.taken)

    def bury(self, tr: Any, entry: Entry, now: int, tally: Tally,
             reason: Optional[str] = None, error: Optional[Tuple[str, str, str]] = None,
             kept: Kept = ()) -> None:
        """Move an item under an ended lease to the dead letters, in the order the
        leases ended (at their deadlines, or now if released or buried), with the
        ``reason`` it was buried for, if any; its job record is dead (with ``error``,
        if given; ``kept``: as for :meth:`record`); each of :attr:`workflows` is told
        (``buried``), and asks for its node's step later in the transaction.

        Raises:
            UnknownWorkflowStoreError: the item is a workflow's node (or expander) of
                a store this object was not made with: its step would be lost (the
                transaction fails, nothing written; a process that made the store
                buries it).
        """
        assert entry.value is not None and entry.hold is not None
        stores = told(self.workflows, self.keys.item_id(entry.item), self.keys.subspace)
        died = min(entry.hold.deadline, now)
        item = self.take(tr, entry, now, tally)
        tr.set(self.keys.dead_letter_key(died, item, time.time(), reason), entry.value)
        self.unique_left(tr, item, now, self.ids)
        if self.sequences is not None:  # its sequence is blocked
            self.sequences.ended(tally, self, self.keys.item_id(item), True)
        for store in stores:
            store.buried(tally, self.keys.item_id(item), reason, error)
        id_ = self.record(item, kept)
        if id_ is not None:
            self.records.finished(tr, id_, DEAD, self.keys.deliveries(item), died=died,
                                  tally=tally)
            if error is not None:
                self.records.failed(tr, id_, error)
        tally.note(f"an item of {self.keys.subspace!r} became a dead letter after "
                   f"{self.keys.deliveries(item)} deliveries"
                   + (f": {reason!r}" if reason else ""))  # quoted: one line, whatever it holds
        tally.add(self.keys.dead_in)
        tally.add(self.keys.taken)

    def hold(self, tr: Any, item: Item, value: bytes, hold_id: bytes, deadline: int,
             kind: int, tally: Tally) -> Hold:
        """Hide an item (already taken, or new) under a hold until ``deadline``; the
        hold, with its keys.

        Raises the floor (atomic MAX, conflict-free) to the item's sequence number, so
        later pushes land after it even if the visible items run out meanwhile: when
        the hold ends the item returns to a place before them.
        """
        keys = self.keys.hold_keys(hold_id, item, deadline, kind)
        tr.set(keys[0], value)
        tr.set(keys[1], b"")
        tally.max(self.keys.floor_key, self.keys.seq(item))
        tally.add(self.keys.delayed_in if kind == DELAY else self.keys.held_in)
        return Hold(hold_id, deadline, kind, keys)

    def gone(self, tr: Any, item: Item, now: int, tally: Tally, finish: str = SUCCEEDED,
             attempts: Optional[int] = None, result: Optional[bytes] = None,
             kept: Kept = ()) -> None:
        """An item left the structure for good (pop, ack, collected result, removal);
        its job record says ``finish`` (with ``result``) after ``attempts`` (None: one
        more than the item's deliveries, for a pop; ``kept``: as for :meth:`record`)."""
        tally.add(self.keys.taken)
        id_ = self.keys.item_id(item)
        if id_ is None:  # no id: no unique key, sequence nor record
            return
        self.forget(tr, item, now, id_)
        if not self.keys.made(item):  # a made id is no unique job's nor a sequence's
            self.unique_left(tr, item, now)
            if self.sequences is not None:  # the next job of its sequence goes in
                self.sequences.ended(tally, self, id_, False)
        if self.records.keeps or id_ in kept:  # see record()
            done = self.keys.deliveries(item) + 1 if attempts is None else attempts
            self.records.finished(tr, id_, finish, done, result, tally=tally)

    def forget(self, tr: Any, item: Item, now: int, id_: Optional[bytes] = None) -> None:
        """``item`` left for good: its id (``id_``, if the caller has it already), if
        any, is retired (a push of it stores nothing for ``id_retention`` more), or, an
        id made by its push (a unique job's; a workflow node's, see
        :func:`.._store_layout.forgotten_at_once`: never given to one, nothing to keep
        it for), forgotten at once (one clear), so that there are no retired ids to
        collect.  An id made for a job in a structure with records has no key to
        clear (its record says where its item is: see :meth:`OrderedLayout.made`; one
        the earlier layout wrote is cleared)."""
        id_ = self.keys.item_id(item) if id_ is None else id_
        if self.keys.made(item):  # its push wrote no id key (but the earlier layout's)
            if self.keys.keyed(item) and id_ is not None:
                tr.clear(self.ids.key(id_))
        elif id_ is not None and (mark_of(id_) is not None or forgotten_at_once(id_)):
            tr.clear(self.ids.key(id_))
        else:
            self.ids.retire(tr, id_, now)

    def unique_claimed(self, tr: Any, item: Item) -> None:
        """A consumer claimed ``item``: the unique key it holds while queued is free
        (see :meth:`.unique.UniqueKeys.claimed`; an id made by its push is no unique
        job's)."""
        if self.unique is not None and not self.keys.made(item):
            self.unique.claimed(tr, self.keys.item_id(item), self.keys.place(item))

    def unique_left(self, tr: Any, item: Item, now: int, died: Optional[Ids] = None) -> None:
        """``item`` left the structure or died (``died``: this object's ids): its unique
        key is free, or finished (see :meth:`.unique.UniqueKeys.left`)."""
        if self.unique is not None:
            self.unique.left(tr, self.keys.item_id(item), self.keys.place(item), now, died)

    def settle(self, tr: Any, front: Front, tally: Tally) -> bool:
        """Put back the expired holds ``front`` named, bury its dead; True if any."""
        for entry in front.expired:
            expired = entry.hold is not None and entry.hold.kind == LEASE
            self.put_back(tr, entry, front.now, tally, error=LEASE_EXPIRED if expired else None)
        for entry in front.dead:
            self.bury(tr, entry, front.now, tally, EXPIRED_REASON, LEASE_EXPIRED)
        return bool(front.expired or front.dead)

    def expired_slots(self, tr: Any, front: Front, taken: Sequence[Entry] = ()) -> Gen[int]:
        """Give back the limit slots of the expired leases ``front`` met (and
        :meth:`settle` put back or buried) and of those among ``taken`` (expired leases
        a claim takes again), if this structure has limits: one round trip more when
        there were any (see ``Gate.free``)."""
        if self.gate is None:
            return 0
        ended = {e.hold.hold_id: e.hold.deadline for e in [*front.expired, *front.dead, *taken]
                 if e.hold is not None and e.hold.kind == LEASE}
        if not ended:
            return 0
        held = yield from self.gate.read_tags(tr, list(ended)).read()
        return (yield from self.gate.free(tr, held, ended, front.now))

    def bury_dying(self, tr: Any, now: int, tally: Tally) -> Gen[int]:
        """Move up to :data:`RESTORE_BATCH` expired leases whose items died to the dead
        letters (a read conflict on each), their job records dead (read first when
        this object keeps none: one round trip more, if any died), their limit slots
        given back (see :meth:`expired_slots`); how many."""
        dead = yield from self.dying(tr, now, RESTORE_BATCH)
        kept = yield from self.records.kept(tr, [self.keys.item_id(e.item) for e in dead])
        for entry in dead:
            self.bury(tr, entry, now, tally, EXPIRED_REASON, LEASE_EXPIRED, kept)
        yield from self.expired_slots(tr, Front([], [], dead, now, []))
        return len(dead)

    def remove(self, tr: Any, entries: Sequence[Entry], now: int, tally: Tally,
               finish: str = SUCCEEDED,
               results: Optional[Sequence[Optional[bytes]]] = None,
               read: bool = False, kept: Kept = ()) -> List[bytes]:
        """Take ``entries`` out of the structure for good (acked: their job records say
        ``finish``, with ``results``; ``kept``: as for :meth:`record`); their values
        (``read``: as for :meth:`take`)."""
        values = []
        for i, entry in enumerate(entries):
            item = self.take(tr, entry, now, tally, read=read)
            self.gone(tr, item, now, tally, finish, self.keys.deliveries(item),
                      None if results is None else results[i], kept)
            assert entry.value is not None
            values.append(entry.value)
        return values

    def taken(self, tr: Any, attempt: Attempt, entries: Sequence[Entry], now: int,
              tally: Tally) -> List[Value]:
        """:meth:`remove` for a pop: the decoded values; the attempt learns how to
        give them back (see :meth:`unpop`)."""
        items: List[Tuple[Item, bytes]] = []
        for entry in entries:
            item = self.take(tr, entry, now, tally)
            self.gone(tr, item, now, tally)
            items.append((item, value_of(entry)))
        if items:
            attempt.undo = (self.unpop, (items, now))
        return [decode_value(value) for _, value in items]

    def unpop(self, tr: Any, attempt: Attempt, items: List[Tuple[Item, bytes]],
              popped_at: int) -> Gen[None]:
        """Give popped items back, each at its place, no delivery counted, its id live
        again (the undo of a pop whose caller was cancelled); a unique job takes its
        key back unless another job took it meanwhile (one read of each such key's
        entry, in parallel: see :meth:`.unique.UniqueKeys.back`)."""
        tally = Tally()
        looked = None if self.unique is None else self.unique.look(
            tr, [self.keys.item_id(item) for item, _ in items])
        for item, value in items:
            tr.set(self.keys.item_key(item), value)
            tally.add(self.keys.pushed)
            if not self.keys.made(item) or self.keys.keyed(item):  # made: no id key
                self.ids.unretire(tr, self.keys.item_id(item), popped_at)
            if self.unique is not None and looked is not None:
                yield from self.unique.back(tr, looked, self.keys.item_id(item),
                                            self.keys.place(item), popped_at)
            id_ = self.record(item)
            if id_ is not None:
                self.records.revived(tr, id_)
                self.records.state(tr, id_, PENDING, self.keys.deliveries(item))
        tally.write(tr, attempt)

    # -- push ----------------------------------------------------------------------------

    def push(self, tr: Any, attempt: Attempt, requests: Sequence[PushRequest],
             into: Optional[Sequence[Ordered]] = None) -> Gen[List[bool]]:
        """Store each request's ``(group, encoded value)`` pairs, in order, after the
        last of each group (delayed ones under DELAY holds); for each request,
        whether it stored them (False: its id is remembered).  The reads of every
        request go out together: the ids' keys, the groups' last items, the floor.
        ``into``: the engine each request goes to, a shard of this structure (by
        default this one); the ids are checked once for all.  A request with a unique
        key (unsharded only) reads its entry too, and pushes only when the key is free
        (see :meth:`.unique.UniqueKeys.meet`)."""
        checks = self.ids.check(tr, (r.id for r in requests),
                                any(r.ids for r in requests if r.unique is None))
        made = {r.id: self.records.look_made(tr, r.id) for r in requests  # ids a push may
                if r.id is not None and made_bytes(r.id) is not None}    # have made
        uniques = [r.unique for r in requests if r.unique is not None]
        held = None if self.unique is None or not uniques else self.unique.check(tr, uniques)
        sequenced = [r.sequence for r in requests if r.sequence is not None]
        heads = (None if self.sequences is None or not sequenced
                 else self.sequences.check(tr, sequenced))
        engines: Sequence[Ordered] = [self] * len(requests) if into is None else into
        wanted: Dict[Ordered, Set[Item]] = {}
        for engine, r in zip(engines, requests):
            wanted.setdefault(engine, set()).update(group for group, _ in r.batch)
        if len(wanted) == 1:  # one engine (always, unsharded): no need to gather
            [(engine, groups)] = wanted.items()
            seqs = {engine: (yield from engine.next_seqs(tr, groups))}
        else:
            found = yield from gather([engine.next_seqs(tr, groups)
                                       for engine, groups in wanted.items()])
            seqs = dict(zip(wanted, found))
        now = yield from attempt.now(tr, self.clock)
        tally = Tally()
        stored = []
        wrote = False
        for engine, r in zip(engines, requests):
            known = None if checks is None or r.id is None else (
                yield from self.ids.known(checks, r.id, now))
            if known is None and r.id in made:  # an id made for a job still here?
                known = b"" if (yield from self.records.made_there(made[r.id])) else None
            if known is not None:
                stored.append(False)
                continue
            if held is not None and r.unique is not None and self.unique is not None:
                met = yield from self.unique.meet(tr, self.keys, held, r.unique, now)
                if met is not None:  # the key is held: nothing pushed
                    if met.entry is not None:
                        self.replace(tr, met.entry, r, now, tally)
                        wrote = True
                    stored.append(False)
                    continue
            if r.id is not None and self.records.keeps:  # a new job: an old record goes
                self.records.renewed(tr, r.id)
            if heads is not None and r.sequence is not None and self.sequences is not None:
                if (yield from self.sequences.waits(heads, r.sequence)):
                    group, value = r.batch[0]
                    self.sequences.wait(tr, heads, r.sequence, group, value, now + r.delay)
                    self.pushed_record(tr, r, DELAYED if r.delay > 0 else PENDING, None)
                    stored.append(True)
                    continue
                self.sequences.started(tr, heads, r.sequence)
            items = [engine.append(tr, group, seqs[engine], value, (0, r.item_id(i)), now,
                                   r.delay, tally, kept=(), made=r.made())  # record: below
                     for i, (group, value) in enumerate(r.batch)]
            if checks is not None and r.id is not None:  # the id tells where its item is
                yield from self.ids.remember(tr, checks, r.id, pack(self.keys.place(items[0])))
            for id_, item in zip(r.ids, items if id_keyed(r.unique) else ()):  # made: new
                if not self.keys.made(item):  # else its record says where it is
                    self.ids.fresh(tr, checks, id_, pack(self.keys.place(item)))
            if held is not None and r.unique is not None and self.unique is not None:
                yield from self.unique.taken(tr, held, r.unique, self.keys.place(items[0]))
            delayed = r.delay > 0
            self.pushed_record(tr, r, DELAYED if delayed else PENDING,
                               now + r.delay if delayed else None, items)
            stored.append(True)
        if checks is not None:
            yield from self.ids.collect(tr, checks, now)
        if held is not None and self.unique is not None:
            yield from self.unique.table.collect(tr, held, now)
        tally.write(tr, attempt)
        attempt.idle = not (any(stored) or wrote)
        return stored

    def push_plain(self, tr: Any, attempt: Attempt,
                   requests: Sequence[PushRequest]) -> Gen[List[bool]]:
        """:meth:`push` of requests whose items carry no id (each ``plain()``): no id,
        unique key or sequence to read and no job record to write, so it reads only
        the groups' last items and the floor (snapshot reads, one round trip) and
        stores every item; each request stores its items (True for each)."""
        groups = {group for r in requests for group, _ in r.batch}
        seqs = yield from self.next_seqs(tr, groups)
        now = yield from attempt.now(tr, self.clock)
        tally = Tally()
        for r in requests:
            for group, value in r.batch:
                self.append(tr, group, seqs, value, (0, None), now, r.delay, tally, kept=())
        tally.write(tr, attempt)
        return [True] * len(requests)

    def replace(self, tr: Any, entry: Entry, r: PushRequest, now: int, tally: Tally) -> None:
        """Give the pending or delayed item ``entry`` (read with read conflicts: the
        holder of ``r``'s unique key, see :meth:`.unique.UniqueKeys.meet`) ``r``'s
        value and delay (from ``now``) at its place (debounce); its job record, if
        any, says pending or delayed."""
        item = self.take(tr, entry, now, tally, read=True)
        deliveries = self.keys.deliveries(item)
        item = self.keys.renewed(item, deliveries, now + r.delay)
        value = r.batch[0][1]
        if r.delay > 0:
            self.hold(tr, item, value, self.keys.delay_id(item), now + r.delay, DELAY, tally)
        else:
            tr.set(self.keys.item_key(item), value)
        self.wake(tally)
        id_ = self.record(item)
        if id_ is not None:
            self.records.state(tr, id_, DELAYED if r.delay > 0 else PENDING, deliveries,
                               now + r.delay if r.delay > 0 else None)

    def pushed_record(self, tr: Any, r: PushRequest, state: str, due: Optional[int],
                      items: Sequence[Item] = ()) -> None:
        """With job records, those of ``r``'s jobs: pushed now, ``state`` (``due``
        then; a job waiting in its sequence says so, though its item is not in the
        queue yet); the record of an item (of ``items``, in order) whose id the push
        made holds its place (see :meth:`OrderedLayout.made`)."""
        if self.records.keeps:
            for i, id_ in enumerate(r.job_ids()):
                item = items[i] if i < len(items) else None
                self.records.pushed(tr, id_, r.time_limit, state, due,
                                    self.keys.place(item) if item is not None
                                    and self.keys.made(item) else None)

    def next_seqs(self, tr: Any, groups: Any) -> Gen[Any]:
        """The next free sequence number of each group, from snapshot reads in parallel
        (no conflicts): after the group's last item and after the floor.  A Queue's
        floor sorts after its items: one reverse read of two keys finds both."""
        if self.keys.group_len == 0:
            if self.tail is None:
                r, selector = self.keys.items_range, fdb_impl().KeySelector
                self.tail = (selector.first_greater_or_equal(r.start),
                             selector.first_greater_or_equal(r.stop))
            begin, end = self.tail
            found = yield from Range(tr.snapshot, begin, end, 2, reverse=True).read()
            floor, last = -1, -1
            for kv in found:
                if kv.key == self.keys.floor_key:
                    floor = read_le64(kv.value)
                else:
                    last = self.keys.seq_of(kv.key)
                    break
            return {(): max(last, floor) + 1}
        floor_f = tr.snapshot.get(self.keys.floor_key)
        lasts = {}
        for group in groups:
            r = self.keys.items.range(group)
            lasts[group] = Range(tr.snapshot, r.start, r.stop, 1, reverse=True)
        yield floor_f
        floor_value = get_value(floor_f)
        lowest = 0 if floor_value is None else read_le64(floor_value) + 1
        seqs = {}
        for group, started in lasts.items():
            kv = yield from started.first()
            last = -1 if kv is None else self.keys.seq_of(kv.key)
            seqs[group] = max(last + 1, lowest)
        return seqs

    def append(self, tr: Any, group: Item, seqs: Any, value: bytes,
               meta: Tuple[int, Optional[bytes]], now: int, delay: int, tally: Tally,
               kept: Optional[Kept] = None, made: bool = False) -> Item:
        """Write one item at its group's next sequence number (advancing it);
        ``meta`` = (deliveries, id) (``made``: the id was made for it); with ``delay``
        > 0 under a DELAY hold.  Its job record says pending (or delayed): if this
        object keeps records, or, given ``kept`` (the records found: see
        ``Records.look``), if the id is one of them.  The item."""
        deliveries, id_ = meta
        item = self.keys.new_item(group, seqs[group], id_, now + delay, made)
        if deliveries:
            item = self.keys.renewed(item, deliveries, now + delay)
        seqs[group] += 1
        tally.add(self.keys.pushed)
        if delay > 0:
            self.hold(tr, item, value, self.keys.delay_id(item), now + delay, DELAY, tally)
        else:
            tr.set(self.keys.item_key(item), value)
        if id_ is not None and (self.records.keeps if kept is None else id_ in kept):
            self.records.state(tr, id_, DELAYED if delay > 0 else PENDING, deliveries,
                               now + delay if delay > 0 else None)
        return item

    # -- pop, peek ------------------------------------------------------------------------

    def pop(self, tr: Any, attempt: Attempt, n: int, end: str,
            spread: int) -> Gen[List[Value]]:
        """Remove and return ``n`` values (fewer if fewer are visible), each among the
        first ``n + spread - 1`` (see :meth:`chosen`)."""
        front, entries = yield from self.chosen(tr, attempt, end, n, spread)
        tally = Tally()
        settled = self.settle(tr, front, tally)
        values = self.taken(tr, attempt, entries, front.now, tally)
        tally.write(tr, attempt)
        attempt.idle = not (values or settled)
        return values

    def peek(self, tr: Any, end: str, n: Optional[int],
             after: Optional[Entry] = None) -> Gen[List[Entry]]:
        """The entries the next pops would take, without removing them (read
        conflict on the visible range read)."""
        front = yield from self.front(tr, end, n, conflict=True, after=after, writing=False)
        return front.entries

    def restore(self, tr: Any, attempt: Attempt, limit: int) -> Gen[int]:
        """Put back (or bury) up to ``limit`` expired holds, earliest deadline first;
        the number handled."""
        now = yield from attempt.now(tr, self.clock)
        holds = (yield from self.expired_now(tr, now))[:limit]
        live, dead = yield from self.read_held(tr, self.split_dead(holds))
        tally = Tally()
        settled = Front([], live, dead, now, holds)
        handled = self.settle(tr, settled, tally)
        yield from self.expired_slots(tr, settled)
        tally.write(tr, attempt)
        attempt.idle = not handled
        return len(holds)

    def clear(self, tr: Any, _attempt: Attempt) -> Gen[None]:
        """Remove every key of the structure except the wake counter "pushed" (it
        must only grow, or a waiter's watch could miss the next push: it is touched,
        and "taken" set to match it, so the size is 0) and the receipt slots.  Reads
        "pushed" (a conflict with concurrent pushes, so the reset is exact)."""
        yield from clear_structure(tr, self.keys.subspace, self.keys.kept_by_clear(),
                                   [(self.keys.pushed, self.keys.taken)])
