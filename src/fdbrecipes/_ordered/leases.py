"""Leases: an item claimed by a consumer stays hidden until ack, release or expiry.

A claim moves an item under a hold of kind LEASE (see :class:`.engine.Ordered`):
``h/(lease id, item, deadline, LEASE)``.  A lease is named by its id alone, so it
keeps its identity when ``extend`` moves its deadline: the original Lease object and
its token stay valid until the lease really expires or is acked.  ``ack`` removes the
item for good, ``release`` puts it back (at once, or after a delay), and an expired
lease's item counts as visible again with one more delivery, or, once it has been
delivered ``max_deliveries`` times, goes to the dead letters.
"""

from __future__ import annotations

import logging
from typing import Any, Dict, Generic, List, NamedTuple, Optional, Sequence, Tuple

import fdb.tuple

from .._attempt import Attempt
from .._fdb import Gen, Range, Tally, seconds_to_versions
from .._layout import DELAY, LEASE
from .._limits.admission import Admission
from .._limits.slots import Tag, TagReads
from .._records.history import terms, terms_known
from .._records.records import DELAYED, LEASE_EXPIRED, RETRYING, SUCCEEDED, JobError, Kept, Records
from .._values import BATCH_BYTES, V, batch_ids, decode_value, id_spans, unpack_token
from ..errors import LeaseExpiredError
from .engine import Ordered
from .front import Entry, Hold, choose, value_of

__all__ = ["Claims", "Lease", "Leases", "answers", "claimed", "expired", "lease_id",
           "refused"]

log = logging.getLogger("fdbrecipes")

#: The most reads of the front a claim of a structure with limits makes: after a
#: read whose candidates were held back by their limits (parked or delayed, so the
#: next read no longer meets them), it reads again for what it still lacks.
ROUNDS = 5
#: The fewest candidates each of those reads after the first takes in: a key at its
#: limit holding the front is parked in blocks of this many.
SCAN = 64


class Lease(Generic[V]):
    """A claimed item, hidden from other consumers until ack, release or expiry.

    Attributes:
        value: the item's value.
        deliveries: how many times the item has been delivered, this time included
            (1 the first time; more after leases expired or were released).
        deadline: when the lease expires, in the cluster's read-version units
            (about 1,000,000 per second), as of the call that made this object.
        token: bytes naming the lease; ``ack``/``extend``/``release`` accept the token in
            place of the Lease, so another process can finish the work.  It names
            the lease, not a deadline: it stays valid across ``extend``.
        visible_since: when the item last became visible (pushed, or its delay or
            previous lease ended), and ``claimed_at`` when this claim took it: clock
            readings, so ``(claimed_at - visible_since) / 1e6`` is how many seconds
            it waited for a consumer.  0 when not known (a Lease made by ``extend``
            from a token).
        id: the item's id (given to ``push``, or made for it by a structure with
            job records), or None.
        time_limit: the job's own time limit, in seconds (given to ``push`` in a
            structure with job records), or None.
        cancel_requested: a cancel of the job was asked while an earlier delivery
            ran (a structure with job records): its worker should not run it.
    """

    __slots__ = ("cancel_requested", "claimed_at", "deadline", "deliveries", "id",
                 "time_limit", "token", "value", "visible_since")

    def __init__(self, value: V, deliveries: int, deadline: int, token: bytes,
                 visible_since: int = 0, claimed_at: int = 0,
                 id: Optional[bytes] = None) -> None:
        self.value = value
        self.deliveries = deliveries
        self.deadline = deadline
        self.token = token
        self.visible_since = visible_since
        self.claimed_at = claimed_at
        self.id = id
        self.time_limit: Optional[float] = None
        self.cancel_requested = False

    def __repr__(self) -> str:
        return (
            f"Lease(value={self.value!r}, deliveries={self.deliveries}, "
            f"deadline={self.deadline})"
        )

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Lease) and other.token == self.token

    def __hash__(self) -> int:
        return hash(self.token)


#: How a lease token (``("lease", id)``, packed) begins.
_TOKEN_HEAD = fdb.tuple.pack(("lease", b""))[:-1]


def lease_id(lease: Any, name: str = "lease") -> bytes:
    """The id a Lease or its token names.

    Raises:
        TypeError or ValueError: ``lease`` is not a Lease or a token made by the library.
    """
    token = lease.token if isinstance(lease, Lease) else lease
    if type(token) is bytes and token.startswith(_TOKEN_HEAD) and token.endswith(b"\0"):
        # ("lease", id) packed: the id's bytes, each 0 byte as 0 0xFF, then a 0
        escaped = token[len(_TOKEN_HEAD): -1]
        if b"\0" not in escaped.replace(b"\0\xff", b""):
            return escaped.replace(b"\0\xff", b"\0")
    parts = unpack_token(token, name, "a Lease or its token (bytes)")
    if parts is None or len(parts) != 2 or parts[0] != "lease" or type(parts[1]) is not bytes:
        raise ValueError(f"{name} is not a lease token made by this library")
    found: bytes = parts[1]
    return found


def expired(doing: str) -> LeaseExpiredError:
    """The error for ``doing`` something (ack, extend...) with a lease that expired."""
    return LeaseExpiredError(f"cannot {doing}: the lease expired; its item may have been "
                             "delivered to another consumer")


def refused(doing: str, subspace: Any) -> LeaseExpiredError:
    """:func:`expired`, said on the ``fdbrecipes`` logger (a WARNING) when ``doing`` is
    an ack or an extend: work was done, or goes on, under a lease another consumer may
    now hold."""
    if doing in ("ack", "extend"):
        log.warning("%s of an expired lease of %r refused: its item may be with another "
                    "consumer (a lease too short for the work, or a stalled process)",
                    doing, subspace)
    return expired(doing)


def reason_of(error: Optional[Tuple[str, str, str]]) -> Optional[str]:
    """A dead letter's reason for a job that failed with ``error`` (type, message,
    traceback): ``Type: message`` (at most 1,000 characters), or None."""
    return None if error is None else JobError(*error).reason()


def with_terms(tr: Any, claimed: Sequence[Tuple[Records, Lease]],
               known: Optional[Dict[bytes, Any]] = None) -> Gen[None]:
    """Set each lease's ``time_limit`` and ``cancel_requested`` from its job's record
    (``claimed``: each lease with its queue's records; ``known``: see
    :func:`.._records.history.terms`), in the claim's transaction: snapshot reads, all in
    parallel (no conflicts)."""
    found = yield from terms(tr, [records for records, _ in claimed],
                             [lease for _, lease in claimed], known)
    for (_, lease), term in zip(claimed, found):
        lease.time_limit, lease.cancel_requested = term


def answers(done: List[bool], batches: Sequence[List[Any]]) -> List[List[bool]]:
    """``done``, the answers for the leases of ``batches`` one after the other, cut
    into each batch's."""
    out, at = [], 0
    for batch in batches:
        out.append(done[at:at + len(batch)])
        at += len(batch)
    return out


def claimed(tr: Any, attempt: Attempt, tally: Tally, leases: List[Lease], settled: bool,
            records: Records, known: Optional[Dict[bytes, Any]]) -> Gen[List[Lease]]:
    """The end of a claim that made ``leases`` (``settled``: it put back or buried
    expired holds too): its counters written, and each lease's terms read from its
    job's record (``known``: see :func:`.._records.history.terms_known`; None: no records)."""
    tally.write(tr, attempt)
    attempt.idle = not (leases or settled)
    if known is not None:
        yield from with_terms(tr, [(records, lease) for lease in leases], known)
    return leases


def token_of(hold_id: bytes) -> bytes:
    """The token naming lease ``hold_id``."""
    token: bytes = fdb.tuple.pack(("lease", hold_id))
    return token


class Live(NamedTuple):
    """A lease found alive: its entry (item, value, hold) and the clock's reading."""

    entry: Entry
    now: int


class Claims:
    """A claim of one item, for what claims ``n`` (leases of one engine, or over the
    shards of a sharded structure, :class:`.shards.ShardedLeases`)."""

    __slots__ = ()

    def claim(self, tr: Any, attempt: Attempt, n: int, end: str, seconds: float,
              spread: int, budget: int, holder: Optional[str] = None) -> Gen[List[Lease]]:
        """Take up to ``n`` items, each under a lease of its own."""
        raise NotImplementedError

    def claim_one(self, tr: Any, attempt: Attempt, end: str, seconds: float,
                  spread: int) -> Gen[Optional[Lease]]:
        """:meth:`claim` of one item: its Lease, or None when none is visible."""
        leases = yield from self.claim(tr, attempt, 1, end, seconds, spread, BATCH_BYTES)
        return leases[0] if leases else None


class Leases(Claims):
    """Claim, ack, extend and release on an :class:`.engine.Ordered` engine."""

    __slots__ = ("engine",)

    def __init__(self, engine: Ordered) -> None:
        self.engine = engine

    def make(self, entry: Entry, claimed_at: int) -> Lease:
        """The Lease handed to the consumer of a held item (claimed at ``claimed_at``,
        0: not known)."""
        assert entry.hold is not None and entry.value is not None
        keys = self.engine.keys
        return Lease(decode_value(entry.value), keys.deliveries(entry.item) + 1,
                     entry.hold.deadline, token_of(entry.hold.hold_id),
                     keys.since(entry.item), claimed_at, keys.item_id(entry.item))

    def claim(self, tr: Any, attempt: Attempt, n: int, end: str, seconds: float,
              spread: int, budget: int, holder: Optional[str] = None) -> Gen[List[Lease]]:
        """Take ``n`` items (fewer if fewer are visible, or once their values pass
        ``budget`` bytes), each among the first ``n + spread - 1`` (see
        :meth:`Ordered.chosen`), and hold each under a lease of its own for
        ``seconds`` (``holder``: the worker taking them, for their job records)."""
        records = self.engine.records
        known = terms_known(tr, [records]) if records.keeps else None  # read meanwhile
        if self.engine.gate is not None:
            admission = self.engine.gate.admission(tr, n + spread - 1)
            leases = yield from self.limited(tr, attempt, admission, n, end, seconds, spread,
                                             budget, holder)
            return (yield from claimed(tr, attempt, Tally(), leases, True, records, known))
        front, entries = yield from self.engine.chosen(tr, attempt, end, n, spread)
        tally = Tally()
        settled = self.engine.settle(tr, front, tally)
        leases = self.hold_entries(tr, attempt, front.now, entries, seconds, budget, tally,
                                   holder)
        return (yield from claimed(tr, attempt, tally, leases, settled, records, known))

    def limited(self, tr: Any, attempt: Attempt, admission: Admission, n: int, end: str,
                seconds: float, spread: int, budget: int,
                holder: Optional[str]) -> Gen[List[Lease]]:
        """:meth:`claim` in a structure with limits: reads the first ``n + spread -
        1`` candidates by snapshot (a read conflict on each item it takes or moves),
        checks them against their limits (:class:`.._limits.admission.Admission`: the
        blocked ones met are parked or delayed, so no later read meets them again)
        and takes ``n`` of the runnable ones as a take with ``spread`` would; while it
        lacks some and held some back, it reads again, the first ``max(n + spread -
        1, SCAN)`` still lacking, up to :data:`ROUNDS` reads in all.  The expired
        leases met give their slots back."""
        tally = Tally()
        leases: List[Lease] = []
        for round_ in range(ROUNDS):
            want = n - len(leases)
            scan = want + spread - 1 if round_ == 0 else max(want + spread - 1, SCAN)
            front = yield from self.engine.front(tr, end, scan, conflict=False,
                                                 attempt=attempt)
            entries = [] if self.engine.paused_front(tr, front) else front.entries
            self.engine.settle(tr, front, tally)
            freed = yield from self.engine.expired_slots(tr, front, entries)
            admitted, blocked = yield from admission.admit(tr, self.engine, front.now, entries,
                                                           tally, want, spread, choose)
            blocked = blocked or freed > 0  # parked jobs may have come back: read again
            part = attempt.fork()
            got = self.hold_entries(tr, part, front.now, [e for e, _ in admitted], seconds,
                                    budget, tally, holder, [t for _, t in admitted])
            attempt.join([part])
            leases += got
            budget -= sum(len(value_of(e)) for e, _ in admitted[:len(got)])
            if not blocked or len(leases) >= n or len(got) < len(admitted) or budget <= 0:
                break
        tally.write(tr, attempt)
        return leases

    def hold_entries(self, tr: Any, attempt: Attempt, now: int, entries: List[Entry],
                     seconds: float, budget: int, tally: Tally,
                     holder: Optional[str] = None,
                     tags: Optional[List[List[Tag]]] = None) -> List[Lease]:
        """Hold each of ``entries`` (read at ``now``) under a lease of its own for
        ``seconds``, until their values pass ``budget`` bytes; the leases (their job
        records say running, held by ``holder``; ``tags``: the limits each carries, its
        slots written with its lease).  The attempt learns how to give them back."""
        deadline = now + seconds_to_versions(seconds)
        leases: List[Lease] = []
        size = 0
        ids = batch_ids(len(entries), now, self.engine.shard)  # one key range (see read_many)
        for entry, hold_id in zip(entries, ids):
            assert entry.value is not None
            size += len(entry.value)
            if leases and size > budget:
                break
            item = self.engine.take(tr, entry, now, tally)
            hold = self.engine.hold(tr, item, entry.value, hold_id, deadline, LEASE, tally)
            self.engine.unique_claimed(tr, item)
            leases.append(self.make(Entry(item, entry.key, entry.value, hold), now))
            id_ = leases[-1].id  # the item's (see Ordered.record)
            if id_ is not None and self.engine.records.keeps:
                records = self.engine.records
                if entry.hold is not None and entry.hold.kind == LEASE:  # taken back
                    records.failed(tr, id_, LEASE_EXPIRED)
                records.began(tr, id_, self.engine.keys.deliveries(item) + 1, holder, hold_id,
                              tally)
        if tags and self.engine.gate is not None:
            self.engine.gate.held(tr, ids[:len(leases)], tags, now, deadline)
        if leases:
            attempt.undo = (self.unclaim, (ids[: len(leases)],))
        return leases

    def unclaim(self, tr: Any, attempt: Attempt, ids: List[bytes]) -> Gen[None]:
        """Give the items of live leases back to their places, no delivery counted
        (the undo of a claim whose caller was cancelled)."""
        tags = self.start_tags(tr, ids)
        found = yield from self.read_many(tr, ids)
        now = yield from attempt.now(tr, self.engine.clock)
        tally = Tally()
        back = []
        for hold_id, (kv, parts) in found.items():
            entry = self.alive(kv, hold_id, now, parts)
            if entry is not None:
                self.engine.put_back(tr, entry, now, tally, count=False)
                back.append(entry)
        yield from self.give_back(tr, tags, back, now)
        tally.write(tr, attempt)
        attempt.idle = not found

    def start_tags(self, tr: Any, ids: List[bytes]) -> Optional[TagReads]:
        """Start reading the limits each lease of ``ids`` holds, if this structure has
        limits (beside the leases' own reads: no round trip of their own)."""
        gate = self.engine.gate
        return None if gate is None else gate.read_tags(tr, ids)

    def give_back(self, tr: Any, started: Optional[TagReads], ended: Sequence[Entry],
                  now: int) -> Gen[None]:
        """The slots of the leases of ``ended`` (entries under live leases, their tags
        read by :meth:`start_tags`) given back, and the jobs parked under their keys
        moved back: two round trips more when a parked job waits (see ``Gate.free``),
        none without limits."""
        gate = self.engine.gate
        holds = [e.hold for e in ended if e.hold is not None]
        if gate is not None and started is not None and holds:
            found = yield from started.read()
            yield from gate.free(tr, found, {h.hold_id: h.deadline for h in holds}, now)

    def find(self, tr: Any, attempt: Attempt, lease: Any, doing: str) -> Gen[Live]:
        """The live lease ``lease`` names, read with a conflict on it.

        Raises:
            LeaseExpiredError: it is gone (acked, taken back, cleared) or its deadline
                has passed (even if nobody took the item back yet).
        """
        hold_id = lease_id(lease)
        found = yield from self.start_read(tr, hold_id).first()
        now = yield from attempt.now(tr, self.engine.clock)  # after the read: no wait
        entry = self.alive(found, hold_id, now)
        if entry is not None:
            return Live(entry, now)
        raise refused(doing, self.engine.keys.subspace)

    def start_read(self, tr: Any, hold_id: bytes) -> Range:
        """Start reading lease ``hold_id``'s held key (a read conflict on its range)."""
        r = self.engine.keys.held.range((hold_id,))
        return Range(tr, r.start, r.stop, 1)

    def alive(self, kv: Any, hold_id: bytes, now: int,
              parts: Optional[Tuple[Any, ...]] = None) -> Optional[Entry]:
        """The leased entry held under ``kv`` (the first result of :meth:`start_read`,
        or None), if the lease is still alive at ``now``; else None.  ``parts``: the
        key, unpacked already."""
        if kv is None:
            return None
        key = bytes(kv.key)
        _, item, deadline, kind = self.engine.keys.held.unpack(key) if parts is None else parts
        if kind != LEASE or now > deadline:
            return None
        layout = self.engine.keys
        keys = (key, layout.due_key(key, hold_id, deadline, kind))
        return Entry(item, layout.item_key(item), kv.value, Hold(hold_id, deadline, kind, keys))

    def ack(self, tr: Any, attempt: Attempt, lease: Any) -> Gen[None]:
        """Remove a leased item for good (its job record, if it has one, succeeded:
        see :meth:`kept`)."""
        tags = self.start_tags(tr, [lease_id(lease)])
        live = yield from self.find(tr, attempt, lease, "ack")
        kept = yield from self.kept(tr, [live.entry])
        tally = Tally()
        self.engine.remove(tr, [live.entry], live.now, tally, read=True, kept=kept)
        yield from self.give_back(tr, tags, [live.entry], live.now)
        tally.write(tr, attempt)

    def kept(self, tr: Any, entries: Sequence[Entry]) -> Gen[Kept]:
        """Which of the leased ``entries`` have a job record, for an object that keeps
        none (an operator's, acking or releasing by token what a worker with
        ``history`` claimed): read after the leases, one round trip more (none for an
        object that keeps records: it writes them as it moves the items)."""
        return (yield from self.engine.records.kept(  # the ids made as they are read
            tr, (self.engine.keys.item_id(e.item) for e in entries)))

    def ack_many(self, tr: Any, attempt: Attempt, leases: List[Any],
                 results: Optional[Sequence[Optional[bytes]]] = None,
                 states: Optional[Sequence[str]] = None) -> Gen[List[bool]]:
        """Ack every lease still alive (each job's record with its result of
        ``results`` and its final state of ``states``, succeeded or cancelled, if
        given); for each, whether it was (all reads in parallel, see
        :meth:`read_many`).  A lease named twice is acked once: False the second time,
        as a second :meth:`ack` would have raised."""
        ids = [lease_id(lease) for lease in leases]
        tags = self.start_tags(tr, ids)
        found = yield from self.read_many(tr, ids)
        now = yield from attempt.now(tr, self.engine.clock)  # after the reads: no wait
        alive = []
        for hold_id in ids:
            kv, parts = found.pop(hold_id, (None, None))
            alive.append(self.alive(kv, hold_id, now, parts))
        kept = yield from self.kept(tr, [e for e in alive if e is not None])
        tally = Tally()
        done = []
        for i, entry in enumerate(alive):
            if entry is not None:
                self.engine.remove(tr, [entry], now, tally,
                                   SUCCEEDED if states is None else states[i],
                                   None if results is None else [results[i]], read=True,
                                   kept=kept)
            done.append(entry is not None)
        yield from self.give_back(tr, tags, [e for e in alive if e is not None], now)
        tally.write(tr, attempt)
        attempt.idle = not any(done)
        return done

    def ack_batches(self, tr: Any, attempt: Attempt,
                    batches: Sequence[List[Any]]) -> Gen[List[List[bool]]]:
        """:meth:`ack_many` of the leases of several calls, in one transaction; each
        call's answers (a lease named by two calls is acked for the first)."""
        done = yield from self.ack_many(tr, attempt, [lease for b in batches for lease in b])
        return answers(done, batches)

    def read_many(self, tr: Any, ids: List[bytes]) -> Gen[Dict[bytes, Tuple[Any, Any]]]:
        """The held key-value of each lease in ``ids`` that is held, with its key
        unpacked, by lease id; read in parallel with read conflicts.

        Leases of one claim (ids of :data:`BATCH_ID_LEN` bytes sharing their first
        16, then numbered) are read with one range read from the lowest number asked
        for to the highest, when at most half the leases in that span are left out:
        it conflicts with any change to a lease of the claim in the span.  Other
        leases are read one by one (a read conflict on each).
        """
        started: List[Range] = []
        for low, high in id_spans(ids):
            if low == high:
                started.append(self.start_read(tr, low))
            else:
                started.append(Range(tr, *self.engine.keys.held_span(low, high)))
        wanted = set(ids)
        found: Dict[bytes, Tuple[Any, Any]] = {}
        for reading in started:
            for kv in (yield from reading.read()):
                parts = self.engine.keys.held.unpack(kv.key)
                if parts[0] in wanted:
                    found[parts[0]] = (kv, parts)
        return found

    def extend(self, tr: Any, attempt: Attempt, lease: Any, seconds: float) -> Gen[Lease]:
        """Move a live lease's deadline to now + ``seconds``; the same lease, renewed."""
        tags = self.start_tags(tr, [lease_id(lease)])
        live = yield from self.find(tr, attempt, lease, "extend")
        tally = Tally()
        renewed = self.renew(tr, live.entry, live.now + seconds_to_versions(seconds), tally,
                             lease)
        yield from self.extended(tr, tags, [renewed])
        tally.write(tr, attempt)
        return renewed

    def extended(self, tr: Any, started: Optional[TagReads],
                 renewed: Sequence[Optional[Lease]]) -> Gen[None]:
        """The running entries of the ``renewed`` leases (their tags read by
        :meth:`start_tags`) moved to their new deadlines."""
        gate = self.engine.gate
        if gate is None or started is None:
            return
        found = yield from started.read()
        gate.extended(tr, found, {lease_id(lease): lease.deadline for lease in renewed
                                  if lease is not None})

    def extend_many(self, tr: Any, attempt: Attempt, leases: List[Any],
                    seconds: float) -> Gen[List[Optional[Lease]]]:
        """Move every live lease's deadline to now + ``seconds`` (reads in parallel, see
        :meth:`read_many`); for each, the renewed lease, or None if it had expired (or
        was named earlier in ``leases``)."""
        ids = [lease_id(lease) for lease in leases]
        tags = self.start_tags(tr, ids)
        found = yield from self.read_many(tr, ids)
        now = yield from attempt.now(tr, self.engine.clock)
        deadline = now + seconds_to_versions(seconds)
        tally = Tally()
        out: List[Optional[Lease]] = []
        for hold_id, lease in zip(ids, leases):
            kv, parts = found.pop(hold_id, (None, None))
            entry = self.alive(kv, hold_id, now, parts)
            out.append(None if entry is None else self.renew(tr, entry, deadline, tally, lease))
        yield from self.extended(tr, tags, out)
        tally.write(tr, attempt)
        attempt.idle = not any(out)
        return out

    def renew(self, tr: Any, entry: Entry, deadline: int, tally: Tally, lease: Any) -> Lease:
        """Rewrite a live lease's hold with a new ``deadline``; the same lease, renewed
        (``lease``: what the caller named it by, for what a token does not carry).  A
        deadline moved earlier touches the wake key: waiters sleeping until the old
        one look again."""
        hold = entry.hold
        assert hold is not None and entry.value is not None
        for key in self.engine.hold_keys(entry):
            tr.clear(key)
        keys = self.engine.keys.hold_keys(hold.hold_id, entry.item, deadline, LEASE)
        tr.set(keys[0], entry.value)
        tr.set(keys[1], b"")
        if deadline < hold.deadline:
            self.engine.wake(tally)
        claimed_at = lease.claimed_at if isinstance(lease, Lease) else 0
        return self.make(Entry(entry.item, entry.key, entry.value,
                               Hold(hold.hold_id, deadline, LEASE, keys)), claimed_at)

    def release(self, tr: Any, attempt: Attempt, lease: Any, delay: int,
                count: bool = True, error: Optional[Tuple[str, str, str]] = None) -> Gen[bool]:
        """End a live lease without ack: the item goes back to its place, visible at
        once or after ``delay`` clock units, or to the dead letters once it has been
        delivered ``max_deliveries`` times (``count`` False: no delivery counted, and
        it never dies of this).  ``error`` (type, message, traceback): what the job
        failed with, for its record and, when it dies, as its reason.  False (nothing
        written) if the lease had already expired."""
        tags = self.start_tags(tr, [lease_id(lease)])
        live = yield from self.live(tr, attempt, lease)
        if live is None:
            return False
        entry = live.entry
        kept = yield from self.kept(tr, [entry])
        yield from self.give_back(tr, tags, [live.entry], live.now)
        tally = Tally()
        if count and self.engine.dies(entry.item):
            self.engine.bury(tr, entry, live.now, tally, reason_of(error), error, kept)
        elif delay > 0:
            item = self.engine.take(tr, entry, live.now, tally, count)
            assert entry.value is not None
            self.engine.hold(tr, item, entry.value, self.engine.keys.delay_id(item),
                             live.now + delay, DELAY, tally)
            self.engine.wake(tally)  # waiters learn of the new deadline
            id_ = self.engine.record(item, kept)
            if id_ is not None:
                self.engine.records.state(tr, id_, RETRYING if count else DELAYED,
                                          self.engine.keys.deliveries(item), live.now + delay)
                if error is not None:
                    self.engine.records.failed(tr, id_, error)
        else:
            self.engine.put_back(tr, entry, live.now, tally, count, error, kept)
        tally.write(tr, attempt)
        return True

    def bury(self, tr: Any, attempt: Attempt, lease: Any, reason: Optional[str],
             error: Optional[Tuple[str, str, str]] = None) -> Gen[bool]:
        """End a live lease by moving its item to the dead letters now, with
        ``reason`` (``error``: what the job failed with, for its record).  False
        (nothing written) if the lease had already expired."""
        tags = self.start_tags(tr, [lease_id(lease)])
        live = yield from self.live(tr, attempt, lease)
        if live is None:
            return False
        kept = yield from self.kept(tr, [live.entry])
        yield from self.give_back(tr, tags, [live.entry], live.now)
        tally = Tally()
        self.engine.bury(tr, live.entry, live.now, tally, reason, error, kept)
        tally.write(tr, attempt)
        return True

    def live(self, tr: Any, attempt: Attempt, lease: Any) -> Gen[Optional[Live]]:
        """:meth:`find`, or None (the attempt idle) for a lease that expired."""
        try:
            return (yield from self.find(tr, attempt, lease, "end"))
        except LeaseExpiredError:
            attempt.idle = True
            return None
