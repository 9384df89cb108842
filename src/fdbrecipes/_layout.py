"""The key layout of every structure, written once (the stores' keys: schedules,
limits, workflows, in :mod:`._store_layout`).

docs/data-model.md draws these; every key a structure writes is named here.  A
structure lives in one subspace ``S`` and never writes outside it.  Short names keep
keys small.  Counters are little-endian int64 changed only by atomic operations.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from typing import Any, Callable, ClassVar, Dict, List, NamedTuple, Optional, Tuple

import fdb.tuple
from fdb.subspace_impl import Subspace

from ._values import made_random, random_suffix

#: fdb.tuple.pack, typed: the key builders below join packed elements.
_pack: Callable[[Tuple[Any, ...]], bytes] = fdb.tuple.pack

#: The tuple layer's codes of the elements of an item key that every push packs and
#: reads itself (see :func:`_uint`): an int of n bytes (0 <= n <= 8) is the code
#: ``INT_ZERO + n`` and its n big-endian bytes; bytes are ``BYTES_CODE``, the bytes
#: with each zero byte followed by 0xFF, and a zero byte; None is ``NULL`` (top level).
_INT_ZERO, _BYTES_CODE, _NULL = 0x14, b"\x01", b"\x00"
_UINT_LIMIT = 1 << 64


def _uint(n: int) -> bytes:
    """``fdb.tuple.pack((n,))``, written out for an int from 0 to 2**64 - 1 (a sequence
    number, a delivery count, a clock reading); anything else is packed by the tuple
    layer.  Every push packs three such ints, and the tuple layer's pack is a chain of
    type checks per element."""
    if type(n) is int and 0 <= n < _UINT_LIMIT:
        size = (n.bit_length() + 7) // 8
        return (_INT_ZERO + size).to_bytes(1, "big") + n.to_bytes(size, "big")
    return _pack((n,))


def packed_bytes(data: bytes) -> bytes:
    """``fdb.tuple.pack((data,))`` for bytes ``data``, the same bytes without the tuple
    layer's walk over its argument: the type code, ``data`` with each NUL escaped, a
    NUL (a job id's encoding, in every key of its record)."""
    return _BYTES_CODE + data.replace(b"\x00", b"\x00\xff") + _NULL


__all__ = ["DELAY", "FAIR_FOOTPRINT", "LEASE", "LEFT_BEHIND", "MAX_SHARDS",
           "ORDERED_FOOTPRINT", "PAUSED", "RESULT", "SHARDED", "SHARDS",
           "TREE_FOOTPRINT", "FairLayout", "Firsts", "Footprint", "Item", "Marker",
           "OrderedLayout", "RecordLayout", "TreeLayout", "packed_bytes", "shard_space"]

#: An item of a Queue or PriorityQueue: ``group + (seq, random, deliveries, id,
#: since)``.  The group is ``()`` for a Queue and ``(priority,)`` for a
#: PriorityQueue; ``seq`` is its push order within the group and ``random`` 20 random
#: bytes, so ``group + (seq, random)`` fixes its place; ``deliveries`` counts earlier
#: deliveries, ``id`` is its idempotency id or None (False: an id made for it, the
#: hex of its first 16 random bytes, see ``OrderedLayout.new_item``; True: the same,
#: pushed by the earlier layout, which wrote the id's key), ``since`` the clock
#: reading when it last became visible.
Item = Tuple[Any, ...]

#: Why an item is held: a consumer's lease, a high-contention pop's result, a delay.
LEASE, RESULT, DELAY = 0, 1, 2
#: The pause flag's key in a FairQueue, ``S/"z"``: present while the structure is
#: paused (see ``JobOps.pause``).  A Queue's or PriorityQueue's is ``S/"d"``
#: (:attr:`OrderedLayout.paused`).
PAUSED = "z"
#: Where a sharded structure (Queue, PriorityQueue, FairQueue made with ``shards`` > 1)
#: says so, ``S/"l"`` (its :class:`Marker`), and keeps its shards 1, 2, ...:
#: ``S/"l"/(k,)/...``.  Shard 0 is ``S`` itself, laid out exactly as an unsharded
#: structure, which has no marker (see :func:`shard_space`).
SHARDS = "l"
#: The layout version a marker names: 2, sharded.  Version 1 is the layout of an
#: unsharded structure (and of fdbrecipes before shards), which writes no marker.
SHARDED = 2
#: The most shards a structure may have (a waiter watches one key per shard, and a take
#: from an empty structure reads every shard).
MAX_SHARDS = 64


#: What any structure, even a cleared one, may leave at its place, by the first element
#: of its keys: receipt slots "c", idempotency ids "g" and "k", counters "n" (the wake
#: counter "pushed" among them), job records "j" and their index "o", its workers'
#: records "u", a FairQueue's pause flag "z" and the throughput history "m".  None of
#: them tells which structure is there.
LEFT_BEHIND = ("c", "g", "k", "n", "j", "o", "u", "z", "m")

#: The first keys read under each range a :class:`Footprint` names (a snapshot range
#: read of one key each), by the range's first tuple element.
Firsts = Dict[str, List[Any]]


@dataclass(frozen=True)
class Footprint:
    """What tells a structure's keys at a place, by the first tuple element of its
    keys (the operator commands and the dashboard recognise a kind by it, see
    :mod:`fdbrecipes._kinds`).

    Attributes:
        ranges: ranges any key of which says the structure is there.
        keys: single keys (``S/(name,)``) that say so.
        traces: ranges whose first key may say so, as ``traced`` judges it.
        traced: whether the first keys read under ``traces`` are this structure's.
        length: the length of the item tuple the first keys read show, 0 if none (the
            structures of one footprint that differ by it are told apart by it).
    """

    ranges: Tuple[str, ...]
    keys: Tuple[str, ...] = ()
    traces: Tuple[str, ...] = ()
    traced: Optional[Callable[[Subspace, Firsts], bool]] = None
    length: Optional[Callable[[Subspace, Firsts], int]] = None

    def shows(self, subspace: Subspace, firsts: Firsts, found: Tuple[str, ...]) -> bool:
        """Whether the first keys read (``firsts``) and the single keys present
        (``found``) are this structure's."""
        return (any(firsts[m] for m in self.ranges) or any(k in found for k in self.keys)
                or (self.traced is not None and self.traced(subspace, firsts)))


def shard_space(subspace: Subspace, shard: int) -> Subspace:
    """The subspace of shard ``shard`` of the structure at ``subspace``: the
    structure's own for shard 0, ``S/"l"/(shard,)`` for the others.  Each holds a whole
    structure's keys (items, holds, counters, dead letters...) but for what a
    structure keeps once (see docs/data-model.md#shards)."""
    return subspace if shard == 0 else subspace[SHARDS][shard]


class Marker(NamedTuple):
    """What ``S/"l"`` holds in a sharded structure: the layout version
    (:data:`SHARDED`), the kind (``"queue"``, ``"priority-queue"``, ``"fair-queue"``)
    and the number of shards, tuple-packed."""

    version: int
    kind: str
    shards: int

    @staticmethod
    def key(subspace: Subspace) -> bytes:
        """The marker's key, ``S/"l"``."""
        return bytes(subspace.pack((SHARDS,)))

    def pack(self) -> bytes:
        """The marker's value."""
        return _pack(tuple(self))

    @classmethod
    def unpack(cls, raw: bytes) -> Marker:
        """The marker stored as ``raw``; a value this library cannot read (a later
        layout's) has ``kind`` "" and ``shards`` 0, and its version."""
        parts = fdb.tuple.unpack(raw)
        if len(parts) == 3 and parts[0] == SHARDED:
            return cls(*parts)
        return cls(parts[0] if parts and type(parts[0]) is int else 0, "", 0)


def kept_by_clear(subspace: Subspace, *keys: bytes) -> List[Tuple[bytes, bytes]]:
    """The key ranges a structure's ``clear`` leaves alone, in key order: the single
    ``keys`` (its wake counters, "pushed": they must only grow, or a waiter's watch
    could miss a change, and clear sets "taken" to match; a sharded structure's
    marker) and its commit receipts (in-flight calls of other clients rely on
    theirs)."""
    receipts = subspace["c"].range()
    kept = [(key, key + b"\x00") for key in keys]
    return sorted(kept + [(bytes(receipts.start), bytes(receipts.stop))])


class OrderedLayout:
    """Keys of a Queue (``group_len`` 0) or PriorityQueue (``group_len`` 1), or of
    one shard of a sharded one (``subspace`` is then the shard's)::

        S/"i"/(*g, seq, random, deliveries, id, since) = value   visible items, in order
        S/"i"/(True,)                       = int64   Queue: floor, highest seq ever held
        S/"f"                               = int64   PriorityQueue: the same floor
        S/"n"/(name,)                       = int64   counters (atomic ADD, only growing):
            pushed, taken                             items in and out; size = their
                                                      difference; "pushed" is the wake key
            held in, held out                         in flight: leases, pop results
            delayed in, delayed out                   delayed
            dead in, dead out                         dead letters (not in size)
        S/"h"/(hold id, item, deadline, kind) = value held items (leases, results, delays)
        S/"d"                               = (paused_at,)  present while paused
        S/"d"/(deadline, hold id, item, kind) = ''    holds by deadline
        S/"x"/(died, item, died_at[, reason]) = value dead letters, oldest first
        S/"k"/(id,), S/"g"/(expiry, id)               idempotency ids (see _ids)
        S/"U"/"k"/(key,), S/"U"/"g"/(expiry, key)     unique keys (_ordered.unique)
        S/"Q"/"h"/(key,), S/"Q"/"w"/(key, n, id)      sequences: heads, waiting jobs
                                                      (_ordered.sequences)
        S/"j"/..., S/"o"/...                          job records (see RecordLayout)
        S/"u"/...                                     the workers serving it (see
                                                      _worker.registry)
        S/"m"/(minute, worker)              = (done, failed, backlog)  history (_records/series)
        S/"c"/(process, thread, generation) = receipt receipt slots (see _receipts)
        S/"l"                               = (2, kind, shards)  a sharded one's Marker
        S/"l"/(k,)/"i", "f", "n", "h", "d", "x"       shard k's items, floor, counters,
                                                      holds, pause flag, deadlines and
                                                      dead letters (k >= 1; shard 0's
                                                      are the keys above)

    A sharded structure keeps its ids, job records, workers, history and receipts
    once, under ``S``; each shard has the rest, the pause flag included (pausing
    writes every shard's).  The Queue's floor sorts after every item, inside the item
    range, so a push reads the last item and the floor in one range read.  The pause
    flag is the deadline index's own prefix: it sorts just before every deadline,
    outside the index's range, so a take reads it with the earliest deadlines, in one
    range read.  Counters only grow: each change is one atomic ADD (no
    compare-and-clear), and a watch on "pushed" never sees it return to an earlier
    value.  Times (``deadline``, ``since``, ``died``) are clock readings: read
    versions, about 1,000,000 per second; ``died_at`` is seconds since the epoch.
    """

    #: Elements of a Queue's item tuple (a PriorityQueue's has ``group_len`` more).
    ITEM_LEN: ClassVar[int] = 5

    __slots__ = ("dead", "dead_in", "dead_out", "delayed_in", "delayed_out", "due",
                 "due_prefix", "due_range", "floor_key", "group_len", "held", "held_in",
                 "held_out", "held_prefix", "items", "items_end", "items_prefix",
                 "items_range", "paused", "pushed", "subspace", "taken", "wake_key")

    def __init__(self, subspace: Subspace, group_len: int) -> None:
        self.subspace = subspace
        self.group_len = group_len
        self.items = subspace["i"]
        self.items_prefix: bytes = self.items.key()
        self.held = subspace["h"]
        self.due = subspace["d"]
        self.dead = subspace["x"]
        #: The whole ranges of the items and of the deadline index (packed once: every
        #: pop reads both).
        self.items_range = self.items.range()
        self.due_range = self.due.range()
        self.held_prefix: bytes = self.held.key()
        self.due_prefix: bytes = self.due.key()
        counts = subspace["n"]
        self.pushed = bytes(counts.pack(("pushed",)))
        self.taken = bytes(counts.pack(("taken",)))
        self.held_in = bytes(counts.pack(("held in",)))
        self.held_out = bytes(counts.pack(("held out",)))
        self.delayed_in = bytes(counts.pack(("delayed in",)))
        self.delayed_out = bytes(counts.pack(("delayed out",)))
        self.dead_in = bytes(counts.pack(("dead in",)))
        self.dead_out = bytes(counts.pack(("dead out",)))
        self.wake_key = self.pushed
        self.paused = self.due_prefix  # read with the earliest deadlines
        if group_len == 0:  # after every item: read with the last one
            self.floor_key = bytes(self.items.pack((True,)))
            self.items_end = self.floor_key
        else:
            self.floor_key = bytes(subspace.pack(("f",)))
            self.items_end = bytes(self.items_range.stop)

    def kept_by_clear(self) -> List[Tuple[bytes, bytes]]:
        """Key ranges ``clear`` leaves alone (see :func:`kept_by_clear`)."""
        return kept_by_clear(self.subspace, self.wake_key)

    # -- item tuples -----------------------------------------------------------------

    def new_item(self, group: Item, seq: int, id_: Optional[bytes], since: int,
                 made: bool = False) -> Item:
        """A new item tuple at ``seq`` within ``group``, never delivered.  ``made``: its
        id was made for it by its push; when it is of 32 hex characters, the place's
        random bytes begin with its 16 bytes and the item holds False in its stead (34
        bytes less in each key that holds the item: see :meth:`item_id`,
        :meth:`made`); its push writes no id key (its job's record says where it is:
        see ``Records.pushed``)."""
        random = made_random(id_) if made and id_ is not None else None
        if random is not None:
            return group + (seq, random, 0, False, since)
        return group + (seq, random_suffix(), 0, id_, since)

    def made(self, item: Item) -> bool:
        """Whether the item's id was made for it by its push (see :meth:`new_item`):
        nothing keeps it once the item leaves (no push gave it)."""
        made = item[self.group_len + 3]
        return made is False or made is True

    def keyed(self, item: Item) -> bool:
        """Whether the item's id, made for it by its push (:meth:`made`), has an id key
        (pushed by the earlier layout, which wrote one: True in the id's stead)."""
        return item[self.group_len + 3] is True

    def group(self, item: Item) -> Item:
        """The item's group: ``()`` in a Queue, ``(priority,)`` in a PriorityQueue."""
        return item[: self.group_len]

    def seq(self, item: Item) -> int:
        """The sequence number of an item (its push order within its group)."""
        seq: int = item[self.group_len]
        return seq

    def deliveries(self, item: Item) -> int:
        """How many times the item was delivered before."""
        n: int = item[self.group_len + 2]
        return n

    def item_id(self, item: Item) -> Optional[bytes]:
        """The item's idempotency id, or None (an id made for it: the hex of the
        first 16 of its place's random bytes, see :meth:`new_item`)."""
        id_: Any = item[self.group_len + 3]
        if id_ is False or id_ is True:
            made: bytes = item[self.group_len + 1][:16].hex().encode()
            return made
        given: Optional[bytes] = id_
        return given

    def since(self, item: Item) -> int:
        """When the item last became visible (a clock reading)."""
        since: int = item[self.group_len + 4]
        return since

    def renewed(self, item: Item, deliveries: int, since: int) -> Item:
        """The item at the same place with another delivery count and visibility time."""
        return item[: self.group_len + 2] + (deliveries, item[self.group_len + 3], since)

    def place(self, item: Item) -> Item:
        """What fixes an item's place in the order: ``group + (seq, random)``."""
        return item[: self.group_len + 2]

    def delay_id(self, item: Item) -> bytes:
        """The id of the hold that delays ``item``: drawn from its random bytes, so its
        place tells where a delayed item is (see ``Listing.remove``)."""
        suffix: bytes = item[self.group_len + 1]
        return b"delay:" + suffix[:16]

    # -- keys ------------------------------------------------------------------------

    def item_key(self, item: Item) -> bytes:
        """The key of a visible item: ``items.pack(item)``, its elements after the group
        encoded here when they are of the types an item holds (:func:`_uint`)."""
        g = self.group_len
        if len(item) != g + 5:
            return bytes(self.items.pack(item))
        seq, random, deliveries, id_, since = item[g:]
        if type(random) is not bytes:
            return bytes(self.items.pack(item))
        tag = _NULL if id_ is None else _pack((id_,))
        return b"".join((self.items_prefix if not g else self.items_prefix + _pack(item[:g]),
                         _uint(seq), packed_bytes(random), _uint(deliveries), tag, _uint(since)))

    def seq_of(self, key: bytes) -> int:
        """The sequence number of the item whose key is ``key`` (read from the key's
        first element after the group, without unpacking the rest when the group is
        empty: a Queue's push reads it for its tail)."""
        if not self.group_len:
            pos = len(self.items_prefix)
            size = key[pos] - _INT_ZERO
            if 0 <= size <= 8:
                return int.from_bytes(key[pos + 1:pos + 1 + size], "big")
        return self.seq(self.items.unpack(key))

    def hold_keys(self, hold_id: bytes, item: Item, deadline: int,
                  kind: int) -> Tuple[bytes, bytes]:
        """The two keys of an item under a hold: where it is held (under ``h``, the
        value) and the index of the hold by its deadline (under ``d``)."""
        # A packed tuple is the concatenation of its packed elements: each element,
        # the nested item above all, is encoded once for both keys.
        hold, nested = _pack((hold_id,)), _pack((item,))
        when, how = _pack((deadline,)), _pack((kind,))
        return (self.held_prefix + hold + nested + when + how,
                self.due_prefix + when + hold + nested + how)

    def due_key(self, held_key: bytes, hold_id: bytes, deadline: int, kind: int) -> bytes:
        """The deadline index key of the hold stored under ``held_key`` (as
        :meth:`hold_keys` makes it, with the item's encoding cut from ``held_key``
        instead of encoded again)."""
        hold, when, how = _pack((hold_id,)), _pack((deadline,)), _pack((kind,))
        nested = held_key[len(self.held_prefix) + len(hold): -len(when) - len(how)]
        return self.due_prefix + when + hold + nested + how

    def held_span(self, low: bytes, high: bytes) -> Tuple[bytes, bytes]:
        """The range of the held keys whose hold id is from ``low`` to ``high``, both
        included (ids of one length: the leases of one claim, see
        ``_values.batch_ids``).  A packed id less its terminator sorts before every
        key of that id, and the range ends where keys stop starting with ``high``'s."""
        last = (self.held_prefix + _pack((high,))[:-1]).rstrip(b"\xff")
        return self.held_prefix + _pack((low,))[:-1], last[:-1] + bytes([last[-1] + 1])

    def dead_letter_key(self, died: int, item: Item, died_at: float,
                        reason: Optional[str] = None) -> bytes:
        """The key of a dead letter: by when it died (a clock reading), then by place;
        with the reason it was buried for, if one was given."""
        parts = (died, item, died_at) if reason is None else (died, item, died_at, reason)
        return bytes(self.dead.pack(parts))

    @staticmethod
    def item_length(subspace: Subspace, firsts: Firsts) -> int:
        """The length of the item tuple in the first item, hold or dead-letter key read
        (the item is the whole key, its second and its second element); 0 if none.  A
        Queue's floor key (``(True,)``, after its items) counts as a Queue's item."""
        for marker, index in (("i", None), ("h", 1), ("x", 1)):
            for kv in firsts[marker]:
                try:
                    key = subspace[marker].unpack(kv.key)
                    item = key if index is None else key[index]
                except Exception:
                    continue
                if item == (True,) and index is None:
                    return OrderedLayout.ITEM_LEN
                if type(item) is tuple:
                    return len(item)
        return 0


#: What tells a Queue's or PriorityQueue's keys: ranges of items (a Queue's floor among
#: them), holds, deadlines and dead letters; a PriorityQueue's floor key and the pause
#: flag (the deadlines' prefix, outside their range).  The two are told apart by the
#: length of their items.
ORDERED_FOOTPRINT = Footprint(("i", "h", "d", "x"), ("f", "d"), length=OrderedLayout.item_length)


class TreeLayout:
    """Keys of a WeightTree::

        S/"w"/(seq, random)  = int64 weight [+ id]   one per item: the leaves
        S/"v"/(seq, random)  = value                 the item's value
        S/"s"/(level, index) = int64 sum             node ``index`` at ``level`` covers
                                                     seq in [index*64**level, (index+1)*64**level)
        S/"t" = int64 total weight
        S/"n"/("pushed",), S/"n"/("taken",)          items in and out (only growing);
                                                     "pushed" is the wake key
        S/"k"/(id,), S/"g"/(expiry, id)              idempotency ids (see _ids)
        S/"c"/(process, thread, generation) = receipt  receipt slots (see _receipts)
    """

    __slots__ = ("leaves", "nodes", "pushed", "subspace", "taken", "total_key", "values",
                 "wake_key")

    def __init__(self, subspace: Subspace) -> None:
        self.subspace = subspace
        self.leaves = subspace["w"]
        self.values = subspace["v"]
        self.nodes = subspace["s"]
        self.total_key = bytes(subspace.pack(("t",)))
        counts = subspace["n"]
        self.pushed = bytes(counts.pack(("pushed",)))
        self.taken = bytes(counts.pack(("taken",)))
        self.wake_key = self.pushed

    def kept_by_clear(self) -> List[Tuple[bytes, bytes]]:
        """Key ranges ``clear`` leaves alone (see :func:`kept_by_clear`)."""
        return kept_by_clear(self.subspace, self.wake_key)


#: What tells a WeightTree's keys: ranges of leaves, values and sums; the total weight.
TREE_FOOTPRINT = Footprint(("w", "v", "s"), ("t",))


class FairLayout:
    """Keys of a FairQueue::

        S/"q"/(group,)/...        the group's items: a Queue's keys (OrderedLayout; its
                                  job records too, see RecordLayout)
        S/"p"/(group,)   = policy (share, limit, rate count, rate seconds), packed
        S/"r"/(group,)   = times  the group's latest claim times (for its rate)
        S/"a"/(group,)   = ''     the groups that were given work (``groups()``)
        S/"t"/...                 the eligible groups: a WeightTree (value: the
                                  group, weight: its share, id: the group)
        S/"w"/(time, group) = ''  when to look at a group's eligibility again
        S/"n"/("pushed",) = int64 the wake counter: every push, ack, release touches it
        S/"o"/(expires_at, group, id) = ''  finished job records by when they go
        S/"u"/...                 the workers serving it (see _worker.registry)
        S/"z"            = (paused_at,)  present while paused
        S/"m"/(minute, worker) = (done, failed, None)  history (see _records/series)
        S/"c"/(process, thread, generation) = receipt  receipt slots (see _receipts)
    """

    __slots__ = ("active", "expiry", "groups", "paused", "policies", "pushed", "rates",
                 "subspace", "tree", "wakes", "wakes_range")

    def __init__(self, subspace: Subspace) -> None:
        self.subspace = subspace
        self.groups = subspace["q"]
        self.policies = subspace["p"]
        self.rates = subspace["r"]
        self.active = subspace["a"]
        self.tree = subspace["t"]
        self.wakes = subspace["w"]
        self.wakes_range = self.wakes.range()
        self.pushed = bytes(subspace["n"].pack(("pushed",)))
        self.expiry = subspace["o"]
        self.paused = bytes(subspace.pack((PAUSED,)))

    def kept_by_clear(self) -> List[Tuple[bytes, bytes]]:
        """Key ranges ``clear`` leaves alone (see :func:`kept_by_clear`)."""
        return kept_by_clear(self.subspace, self.pushed)

    def wake_key(self, when: int, group: Any) -> bytes:
        """The key asking for ``group``'s eligibility to be looked at at ``when``."""
        return bytes(self.wakes.pack((when, group)))

    @staticmethod
    def traced(subspace: Subspace, firsts: Firsts) -> bool:
        """Whether the first keys read under "w" and "o" are a FairQueue's (one whose
        groups all left its index of groups, drained or retired): a look asked for (an
        empty value, its key a time and a group; a WeightTree's leaves there hold their
        weight) or a finished job's entry in the index of records, which names its
        group, ``(expires_at, group, id)`` (a Queue's: ``(expires_at, id)``)."""
        for kv in firsts["w"]:
            with contextlib.suppress(Exception):  # not a tuple: no look
                wake = subspace["w"].unpack(kv.key)
                if not kv.value and len(wake) == 2 and type(wake[0]) is int:
                    return True
        for kv in firsts["o"]:
            with contextlib.suppress(Exception):
                entry = subspace["o"].unpack(kv.key)
                if len(entry) == 3 and type(entry[0]) is float:
                    return True
        return False


#: What tells a FairQueue's keys: its index of groups, where every group with work or a
#: policy has an entry, or what it leaves once they all left it (:meth:`FairLayout.traced`).
#: Its other ranges (its groups' queues under "q", policies under "p", its lottery under
#: "t", a WeightTree) look like structures nested under those names; its looks under
#: "w" lie where a WeightTree's leaves would.
FAIR_FOOTPRINT = Footprint(("a",), traces=("w", "o"), traced=FairLayout.traced)


class RecordLayout:
    """Keys of the job records of one queue (a structure made with ``history``)::

        Q/"j"/(id, "a")    = (pushed_at, time_limit, state, 0, due[, place])  the push
                                                           (time_limit: seconds or None),
                                                           the state it left the job in,
                                                           and, for an id the push made,
                                                           its item's place (no id key)
        Q/"j"/(id, "s")    = (state, attempts, due)         the state a return from a
                                                           lease, a requeue, a delay wrote;
                                                           due: when a delayed or retrying
                                                           job is visible again (a clock
                                                           reading), or None
        Q/"j"/(id, "b")    = (started_at, worker, lease id, attempts)  the attempt that
                                                           began last: running while its
                                                           lease's hold is there
        Q/"j"/(id, "f")    = (finished_at, expires_at, state, attempts, due)  the end:
                                                           the finished state (overrides
                                                           "s"; due: when a dead one died),
                                                           and when it is pruned
        Q/"j"/(id, "e")    = (type, message, traceback)     the last error
        Q/"j"/(id, "p")    = (fraction, message)            progress, as the handler set it
        Q/"j"/(id, "r", n) = bytes                          the result, tuple-encoded, in
                                                           chunks of :data:`RESULT_CHUNK`
        Q/"j"/(id, "c")    = (requested_at,)                a cancel request, while it runs
        Q/"n"/("terms",)   = int64                          jobs pushed with a time limit or
                                                           cancelled while they ran (atomic
                                                           ADD): a claim reads each job's
                                                           "a" and "c" only when it is not 0
        S/"o"/(expires_at, *where, id) = (*where, id, ...)  finished records, by when they
                                                           go: the key names one, its value
                                                           those finished with it by one
                                                           operation ('' for none; see
                                                           ``_fdb.Tally.group``)

    ``Q`` is the queue's subspace (a FairQueue's group's, ``S/"q"/(group,)``), ``S``
    the structure's, and ``where`` locates the queue in it: ``()``, or ``(group,)``.
    Times are wall-clock seconds (``time.time()`` of the client that wrote them).
    Each step writes one key of the four that say the state: a push "a", a claim
    "b", a finish "f", the others "s" (see ``_records.records.facts_of``).  Records of
    the earlier layout (every step wrote "s"; "a", "b" and "f" without their last
    elements) read as they did.
    """

    __slots__ = ("expiry", "jobs", "prefix", "terms", "where", "where_packed")

    #: The tuple encoding of each part's name: a record's key is the encoding of
    #: ``(id,)`` under ``jobs``, then that of ``(part,)`` (tuple encodings concatenate).
    PARTS: ClassVar[Dict[str, bytes]] = {
        part: _pack((part,)) for part in ("a", "s", "b", "f", "e", "p", "c")}

    def __init__(self, queue: Subspace, expiry: Subspace, where: Tuple[Any, ...] = ()) -> None:
        self.jobs = queue["j"]
        self.prefix = bytes(self.jobs.key())
        self.terms = bytes(queue["n"].pack(("terms",)))
        self.expiry = expiry
        self.where = where
        self.where_packed = _pack(where)

    def key(self, id_: bytes, part: str) -> bytes:
        """The key of one part of job ``id_``'s record (``jobs.pack((id_, part))``,
        built from its parts)."""
        return self.prefix + packed_bytes(id_) + self.PARTS[part]

    def chunk(self, id_: bytes, n: int) -> bytes:
        """The key of chunk ``n`` of job ``id_``'s result."""
        return bytes(self.jobs.pack((id_, "r", n)))

    def expiry_key(self, expires_at: float, id_: bytes) -> bytes:
        """The key of job ``id_``'s entry in the index of finished records, alone in
        its key (:meth:`expiry_prefix` then :meth:`entry`)."""
        return self.expiry_prefix(expires_at) + self.entry(id_)

    def expiry_prefix(self, expires_at: float) -> bytes:
        """Where the entries that go at ``expires_at`` begin in the index of finished
        records."""
        return bytes(self.expiry.pack((expires_at,)))

    def entry(self, id_: bytes) -> bytes:
        """Job ``id_``'s entry in the index of finished records, after its time: its
        queue's place in the structure and its id (packed)."""
        return self.where_packed + packed_bytes(id_)
