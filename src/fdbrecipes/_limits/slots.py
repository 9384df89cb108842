"""What the limits' gate stores and counts (see :mod:`.gate`, :mod:`.admission`): the
tags the leases of a claim hold (``L/"lt"/(claim prefix,)``, or ``L/"lt"/(hold id,)``
each), what the slots of a concurrency limit hold (one key a run of slots,
:func:`claim_runs`, :func:`slot_span`), what moving a parked job back writes for its
structure (:class:`Comeback`) and the move itself (:func:`move_back`), and one (limit,
key)'s state as a claim reads it (:class:`StateRead`) and counts what it adds
(:class:`Usage`)."""

from __future__ import annotations

import bisect
import itertools
import random
from typing import Any, Dict, Iterable, Iterator, List, NamedTuple, Optional, Sequence, Set, Tuple

import fdb.tuple
from fdb.subspace_impl import Subspace

from .._fdb import Gen, Range, Tally, read, seconds_to_versions
from .._layout import DELAY, OrderedLayout
from .._store_layout import LimitLayout
from .._values import BATCH_ID_LEN, id_spans
from .specs import CONCURRENCY, Limit

__all__ = ["BLOCKS_FROM", "BLOCKS_READ", "RUN_ALIGN", "Comeback", "HeldTags", "Run", "Slot",
           "StateRead", "Tag", "TagReads", "Usage", "aligned", "block_size", "claim_runs",
           "claim_slots", "draw", "id_runs", "live_slots", "move_back", "pack_batch",
           "pack_tags", "run_value", "runs", "slot_runs", "slot_span", "slot_value",
           "unpack_batch", "unpack_tags"]

#: A claim that needs ``c`` slots of a concurrency limit of ``n`` at least
#: ``BLOCKS_FROM`` times its block (see :func:`block_size`) reads :data:`BLOCKS_READ`
#: blocks of its slots drawn at random, not all of them.
BLOCKS_FROM = 4
BLOCKS_READ = 3

#: A key of a concurrency limit's slots holds a run of consecutive slots of one claim
#: (:func:`claim_runs`), never across a multiple of ``RUN_ALIGN``: a read of the slots
#: from a multiple of it on (:func:`aligned`) sees every run that covers them.  Blocks
#: (:func:`block_size`: powers of two) of ``RUN_ALIGN`` slots or more start at one.
RUN_ALIGN = 128

#: The draws of slots and blocks.
draw = random.Random()

#: (name, key) of a limit.
Slot = Tuple[str, Any]


class Comeback(NamedTuple):
    """What the transaction that moves a parked job back writes for the structure the
    job is in, beside the job itself, when its engine has one (``Ordered.comeback``):
    ``mark`` set (empty), ``counter`` added one (an atomic ADD).  A FairQueue's group
    has one: a look at the group, due at once, and the FairQueue's wake counter, so
    the group, which a claim took out of the lottery when its jobs were parked, is
    looked at by the next claim and its waiters wake.  Stored as the parked entry's
    value (a plain queue's is empty)."""

    mark: bytes
    counter: bytes

    def pack(self) -> bytes:
        """The parked entry's value."""
        packed: bytes = fdb.tuple.pack(tuple(self))
        return packed


class Tag(NamedTuple):
    """A limit a job carries: the limit's name and kind, the job's key under it (None:
    global), its cost, and the slot its lease holds (a concurrency limit; -1 for a
    rate)."""

    name: str
    key: Any
    cost: int
    kind: str
    slot: int = -1


def pack_tags(tags: Sequence[Tag]) -> bytes:
    """What ``L/"lt"/(hold id,)`` holds."""
    packed: bytes = fdb.tuple.pack(tuple(tuple(t) for t in tags))
    return packed


def slot_value(deadline: int, hold_id: bytes) -> bytes:
    """What the key of a slot of a concurrency limit holds while lease ``hold_id``
    runs in it alone (a lease with a tags key of its own, ``L/"lt"/(hold id,)``)."""
    packed: bytes = fdb.tuple.pack((deadline, hold_id))
    return packed


def run_value(deadline: int, prefix: bytes, last: int) -> bytes:
    """What the key of the first slot of a run of a claim's slots holds (see
    :func:`claim_runs`): the leases' deadline, the claim's prefix of lease ids, the
    run's last slot."""
    packed: bytes = fdb.tuple.pack((deadline, prefix, last))
    return packed


def slot_span(first: int, raw: bytes) -> Tuple[int, int]:
    """The deadline and the last slot of the key of slot ``first`` holding ``raw``
    (:func:`slot_value`: that slot alone; :func:`run_value`: a run)."""
    parts = fdb.tuple.unpack(raw)
    return parts[0], parts[2] if len(parts) > 2 else first


class Run(NamedTuple):
    """One key of a concurrency limit's slots as read (:func:`slot_runs`): the first
    and the last slot it holds, its leases' deadline (live at ``now`` while
    ``deadline >= now``), and the key and value read (what a compare-and-clear of an
    expired one compares)."""

    first: int
    last: int
    deadline: int
    key: bytes
    value: bytes


def slot_runs(keys: LimitLayout, within: Tuple[Any, ...], kvs: Iterable[Any]) -> Iterator[Run]:
    """The runs of slots the keys ``kvs`` of a concurrency limit's slots hold (as read
    from the range ``within``: a limit's ``(name,)``, or a key's ``(name, key)``, of
    ``L/"lr"/(name, key, first slot)``), one a key: the one reading of those keys (only
    what follows ``within``) and their values (:func:`slot_span`)."""
    skip = len(keys.running.pack(within))
    for kv in kvs:
        first = fdb.tuple.unpack(kv.key[skip:])[-1]
        deadline, last = slot_span(first, kv.value)
        yield Run(first, last, deadline, kv.key, kv.value)


def live_slots(keys: LimitLayout, within: Tuple[Any, ...], kvs: Iterable[Any], now: int) -> int:
    """How many slots the keys ``kvs`` of a concurrency limit's slots (as read from the
    range ``within``, see :func:`slot_runs`) give to leases alive at ``now`` (the runs
    of live leases never overlap)."""
    return sum(run.last - run.first + 1 for run in slot_runs(keys, within, kvs)
               if run.deadline >= now)


def aligned(slot: int) -> int:
    """The multiple of :data:`RUN_ALIGN` at or below ``slot``: where a read must begin
    to see every run that covers ``slot`` and after."""
    return slot - slot % RUN_ALIGN


def claim_runs(slots: Sequence[int]) -> List[Tuple[int, int]]:
    """The keys of the slots ``slots`` that a claim's leases hold in one (limit, key):
    the :func:`runs` of them, each cut at the multiples of :data:`RUN_ALIGN`; (first,
    last) each.  The claim writes them (``Gate.held``) and the ends of its leases
    clear them (``Gate.free``), both computing them from the claim's record."""
    out: List[Tuple[int, int]] = []
    for low, high in runs(slots):
        while aligned(low) != aligned(high):
            cut = aligned(low) + RUN_ALIGN
            out.append((low, cut - 1))
            low = cut
        out.append((low, high))
    return out


def unpack_tags(raw: bytes) -> List[Tag]:
    """The tags stored as ``raw``."""
    return [Tag(*parts) for parts in fdb.tuple.unpack(raw)]


def runs(numbers: Sequence[int]) -> List[Tuple[int, int]]:
    """The distinct ``numbers`` as runs of consecutive ones: (first, last) each."""
    out: List[Tuple[int, int]] = []
    for number in sorted(set(numbers)):
        if out and out[-1][1] == number - 1:
            out[-1] = (out[-1][0], number)
        else:
            out.append((number, number))
    return out


def id_runs(ids: Sequence[bytes]) -> List[Tuple[bytes, bytes]]:
    """The lease ids ``ids`` as runs (lowest, highest) of ids of one claim
    (``_values.batch_ids``: one prefix, then numbered) numbered one after the other;
    every other id alone, as (id, id).  Every lease id from a run's lowest to its
    highest is in ``ids``."""
    claims: Dict[bytes, List[int]] = {}
    out: List[Tuple[bytes, bytes]] = []
    for hold_id in ids:
        if len(hold_id) == BATCH_ID_LEN:
            claims.setdefault(hold_id[:16], []).append(int.from_bytes(hold_id[16:], "big"))
        else:
            out.append((hold_id, hold_id))
    for prefix, numbers in claims.items():
        out += [(prefix + low.to_bytes(4, "big"), prefix + high.to_bytes(4, "big"))
                for low, high in runs(numbers)]
    return out


def block_size(count: int) -> int:
    """The slots of a block from which a claim draws ``count`` slots: the smallest power
    of two at least ``count`` and 16."""
    return 1 << (max(count, 16) - 1).bit_length()


def pack_batch(deadline: int, carried: Sequence[Tuple[int, Sequence[Tag]]]) -> bytes:
    """What ``L/"lt"/(claim prefix,)`` holds for the leases of one claim, each its
    number and its tags (see :class:`TagReads`), all until ``deadline``: the deadline,
    then for each set of limits (name, key, cost, kind) some of them carry, the leases
    carrying them as runs: leases numbered one after the other whose slots (of each
    limit) are one after the other too, stored as the first lease's number, the
    run's length and the first lease's slots (a claim's leases and slots are mostly
    such runs: a few numbers for the whole claim)."""
    groups: Dict[Tuple[Any, ...], List[int]] = {}
    for number, tags in carried:
        flat = groups.setdefault(tuple([t[:4] for t in tags]), [])  # (name, key, cost, kind)
        width = len(tags) + 2
        if flat and flat[-width] + flat[-width + 1] == number:  # the run's next lease?
            length = flat[-width + 1]
            for j, t in enumerate(tags):
                if flat[-width + 2 + j] + (length if t.kind == CONCURRENCY else 0) != t.slot:
                    break
            else:
                flat[-width + 1] += 1
                continue
        flat.append(number)
        flat.append(1)
        flat.extend([t.slot for t in tags])
    packed: bytes = fdb.tuple.pack((deadline,) + tuple((carries, tuple(flat))
                                                       for carries, flat in groups.items()))
    return packed


def unpack_batch(prefix: bytes, raw: bytes) -> Tuple[int, Dict[bytes, List[Tag]]]:
    """The deadline of the leases of the claim of lease ids ``prefix`` + number, and
    the tags of each by lease id, as :func:`pack_batch` stored them (``raw``)."""
    out: Dict[bytes, List[Tag]] = {}
    deadline, *groups = fdb.tuple.unpack(raw)
    for carries, flat in groups:
        step = len(carries) + 2
        for i in range(0, len(flat), step):
            number, length = flat[i], flat[i + 1]
            for k in range(length):
                out[prefix + (number + k).to_bytes(4, "big")] = [
                    Tag(name, key, cost, kind, flat[i + 2 + j] + k if kind == CONCURRENCY
                        else flat[i + 2 + j])
                    for j, (name, key, cost, kind) in enumerate(carries)]
    return deadline, out


class HeldTags(NamedTuple):
    """What some leases hold, as :class:`TagReads` read it: the tags of each lease
    asked for that holds any, by lease id; the leases whose tags are a key of their
    own (``L/"lt"/(lease id,)``); for each claim whose record was read
    (``L/"lt"/(claim prefix,)``) every lease it lists, with its tags, by prefix; and
    the deadline of the leases each record lists, by prefix."""

    tags: Dict[bytes, List[Tag]]
    own: Set[bytes]
    listed: Dict[bytes, Dict[bytes, List[Tag]]]
    deadlines: Dict[bytes, int]
    #: reads of the jobs parked under some (limit, key)s, started with these
    parked: Dict[Slot, Range]


class TagReads:
    """What some leases hold (``L/"lt"``), being read by snapshot: the record of the
    claim of each (one key for the leases of one claim, written by the claim: see
    ``Gate.held``) and the leases' own keys (written for the leases left when some
    of a claim's leases ended, see ``Gate.free``): one range read for the leases of
    one claim (see ``_values.id_spans``), one read for each other."""

    __slots__ = ("claims", "keys", "parked", "reads", "wanted")

    def __init__(self, tr: Any, keys: LimitLayout, hold_ids: Sequence[bytes],
                 parked: Dict[Slot, Range]) -> None:
        self.keys = keys
        self.parked = parked
        self.wanted = set(hold_ids)
        self.claims = {prefix: tr.snapshot.get(keys.tags_key(prefix))
                       for prefix in {h[:16] for h in hold_ids if len(h) == BATCH_ID_LEN}}
        self.reads = [Range(tr.snapshot, keys.tags_key(low), keys.tags_key(high) + b"\0")
                      for low, high in id_spans(hold_ids)]

    def read(self) -> Gen[HeldTags]:
        """The tags stored for each lease asked for that holds any."""
        found = HeldTags({}, set(), {}, {}, self.parked)
        for prefix, future in self.claims.items():
            raw = yield from read(future)
            if raw is not None:
                found.deadlines[prefix], listed = unpack_batch(prefix, raw)
                found.listed[prefix] = listed
                found.tags.update((h, tags) for h, tags in listed.items() if h in self.wanted)
        for reading in self.reads:
            for kv in (yield from reading.read()):
                hold_id = self.keys.tags.unpack(kv.key)[0]
                if hold_id in self.wanted:
                    found.tags[hold_id] = unpack_tags(kv.value)
                    found.own.add(hold_id)
        return found


class Usage:
    """One (limit, key)'s state as a claim read it, with what the claim added: the
    slots of a concurrency limit (live ones by index, and the free ones below ``n``),
    or the starts of a rate in the window, and the starts a rate's delayed candidates
    were planned at."""

    __slots__ = ("high", "last", "limit", "live", "low", "planned", "starts", "taken")

    def __init__(self, limit: Limit, low: int = 0, high: Optional[int] = None) -> None:
        self.limit = limit
        #: the slots read, and drawn from: ``low`` to ``high`` - 1 (all ``n``, or a
        #: block of them, read with the slots above ``n``, of which none was live)
        self.low, self.high = low, limit.n if high is None else high
        self.live = 0  # running jobs, in any slot read
        self.taken: Set[int] = set()  # the slots drawn from held by running jobs
        self.starts: List[Tuple[int, int]] = []  # (start, cost), in order
        self.planned: List[Tuple[int, int]] = []
        self.last = -1  # the slot drawn last by this claim (-1: none yet)

    def fits(self, cost: int, now: int) -> bool:
        """Whether a job of ``cost`` may start at ``now``."""
        if self.limit.kind == CONCURRENCY:
            return self.live < self.limit.n and len(self.taken) < self.high - self.low
        return self.weight() + min(cost, self.limit.n) <= self.limit.n

    def short(self, count: int) -> bool:
        """Whether a concurrency key read by blocks has fewer free slots left in its
        block than ``count`` (then it is read whole: only that read can tell it is
        full)."""
        return (self.limit.kind == CONCURRENCY and self.high - self.low < self.limit.n
                and self.high - self.low - len(self.taken) < count)

    def add(self, cost: int, now: int) -> int:
        """Count a job of ``cost`` started at ``now``; the slot drawn for it (a
        concurrency limit: a free one below ``n``; -1 for a rate).  A claim's first
        slot of the key is drawn at random, each next one is the first free slot
        after the one before (from the first slot drawn from again past the last): the
        slots a claim takes are runs, written with one read conflict range a run
        (see ``Gate.held``) and cleared with one range clear a run (``Gate.free``),
        and two claims of the key still conflict only where their runs overlap."""
        if self.limit.kind != CONCURRENCY:
            self.starts.append((now, min(cost, self.limit.n)))
            return -1
        self.live += 1
        slot = -1
        if self.last >= 0:  # the next free slot after this claim's last: one run
            for slot in itertools.chain(range(self.last + 1, self.high),
                                        range(self.low, self.last)):
                if slot not in self.taken:
                    break
            else:
                slot = -1
        if slot < 0:
            for _ in range(16):  # a few draws find a free slot unless nearly all are taken
                slot = draw.randrange(self.low, self.high)
                if slot not in self.taken:
                    break
            else:
                slot = draw.choice([i for i in range(self.low, self.high)
                                    if i not in self.taken])
        self.taken.add(slot)
        self.last = slot
        return slot

    def weight(self) -> int:
        """The cost started in the window (every start read was in it)."""
        return sum(cost for _, cost in self.starts)

    def opens(self, cost: int, now: int) -> int:
        """The first time at or after ``now`` when a start of ``cost`` fits in the
        window, counting the starts read and those planned for delayed candidates
        (then planned there too)."""
        cost = min(cost, self.limit.n)
        window = seconds_to_versions(self.limit.per_seconds or 0.0)
        events = sorted(self.starts + self.planned)
        times = [t for t, _ in events]
        sums = [0]
        for _, c in events:
            sums.append(sums[-1] + c)
        for when in [now] + [t + window for t in times]:
            if when < now:
                continue
            inside = sums[bisect.bisect_right(times, when)] - sums[
                bisect.bisect_right(times, when - window)]
            if inside + cost <= self.limit.n:
                self.planned.append((when, cost))
                return when
        last = max(times[-1] + window, now)  # past every start (not reached: cost <= n)
        self.planned.append((last, cost))
        return last


class StateRead(NamedTuple):
    """A read of one (limit, key)'s state, started (see :meth:`.admission.Admission.start`): the
    limit, the range reads (the slots above ``n`` first, when read by blocks), the
    first slot of each block read (none: the whole key) and the blocks' size."""

    limit: Limit
    reads: List[Range]
    blocks: Tuple[int, ...] = ()
    size: int = 0


def claim_slots(carried: Iterable[Sequence[Tag]]) -> Dict[Slot, List[int]]:
    """The slots each (limit, key) of a concurrency limit holds for the leases of
    ``carried`` (the tags of each lease of one claim)."""
    out: Dict[Slot, List[int]] = {}
    for tags in carried:
        for t in tags:
            if t.kind == CONCURRENCY:
                out.setdefault((t.name, t.key), []).append(t.slot)
    return out


def move_back(tr: Any, keys: LimitLayout, found: Sequence[Any],
              counts: Optional[Dict[Slot, int]], now: int) -> Gen[int]:
    """Move the parked jobs of the entries ``found`` (``L/"lw"`` key-values) back to
    their places, up to ``counts`` per (limit, key) (None: all): their holds read
    side by side, with read conflicts; entries whose hold ended (deadline passed:
    the job is visible already) or is gone (claimed back, removed) are cleared.  How
    many jobs were moved back."""
    candidates = []
    for kv in found:
        name, key, _, prefix, item, deadline = keys.parked.unpack(kv.key)
        if deadline <= now:
            tr.clear(kv.key)
            continue
        layout = OrderedLayout(Subspace(rawPrefix=prefix), len(item) - 5)
        hold = layout.hold_keys(layout.delay_id(item), item, deadline, DELAY)
        comeback = Comeback(*fdb.tuple.unpack(kv.value)) if kv.value else None
        candidates.append(((name, key), bytes(kv.key), layout, item, hold, comeback,
                           tr.get(hold[0])))
    left = None if counts is None else dict(counts)
    tally = Tally()
    moved = 0
    for slot, key, layout, item, hold, comeback, future in candidates:
        if left is not None and left.get(slot, 0) <= 0:
            continue
        value = yield from read(future)
        tr.clear(key)
        if value is None:
            continue
        tr.clear(hold[0])
        tr.clear(hold[1])
        back = layout.renewed(item, layout.deliveries(item), now)
        tr.set(layout.item_key(back), value)
        tally.add(layout.delayed_out)
        tally.add(layout.pushed)  # the wake key: waiters look again
        tally.add(layout.taken)
        if comeback is not None:  # its structure's own wake (see Comeback)
            tr.set(comeback.mark, b"")
            tally.add(comeback.counter)
        moved += 1
        if left is not None:
            left[slot] -= 1
    tally.write(tr)
    return moved
