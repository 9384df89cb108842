"""Named queues of one directory, on the library's structures (kombu's and
Dramatiq's queues).

Layout under the transport's directory ``D``:

* ``D/"q"/name/...``: the queue itself, a :class:`fdbrecipes.Queue`, or a
  :class:`fdbrecipes.PriorityQueue` when it was declared with ``x-max-priority``;
* ``D/"m"/name``: what the queue is, ``(kind, expires)``, written by its first
  declaration (a later one of another kind is refused, as RabbitMQ refuses it);
* ``D/"a"/name``: for an expiring queue (``x-expires``, ``auto_delete``), the clock
  reading until which it counts as consumed; its consumers' heartbeats move it on;
* ``D/"b"/(name, id, i)``: the chunks of a message too large for one value (the
  queue's item is then ``("blob", id)``, or ``("blob", id, name)`` where limits
  are configured: the task's or actor's name its limits are keyed by).

A message is the bytes the integration gives (kombu's message as JSON, Dramatiq's
encoded message).  Nothing here imports a framework: the kombu transport and the
Dramatiq broker map their calls onto these.
"""

from __future__ import annotations

import logging
import threading
import time
import uuid
from typing import Any, Dict, Iterable, List, NamedTuple, Optional, Sequence, Tuple

from .. import JobError, LeaseExpiredError, Queue, _kinds, drive
from .._values import MAX_REASON, storable
from .._worker.ahead import claim_spread
from ..protocol import Finished
from ._blobs import Blobs
from ._database import transact
from ._flow import Flow
from ._keeper import Held

__all__ = ["FIFO", "INLINE", "MAX_DELIVERIES", "PRIORITY", "STRUCTURES", "Delivery", "QueueMeta",
           "QueueSettings", "Queues", "Undecodable", "error_reason", "fit_reason"]

log = logging.getLogger("fdbrecipes.contrib")

FIFO = "fifo"
PRIORITY = "priority"
#: The structure each kind of queue is kept in, by its kind's name (see
#: :mod:`fdbrecipes._kinds`).
STRUCTURES = {FIFO: "queue", PRIORITY: "priority-queue"}

#: Messages up to this many bytes are a queue item themselves; larger ones are
#: chunked (FoundationDB values are at most 100,000 bytes).
INLINE = 90_000

#: The integrations' default ``max_deliveries``: a message whose lease ends without ack
#: this many times (its worker died each time, or it was rejected with requeue) is a
#: dead letter, not delivered again forever (a message that kills its worker would be
#: a crash loop).  RabbitMQ's quorum queues have the same default delivery limit
#: since RabbitMQ 4.0.
MAX_DELIVERIES = 20

#: Most leases one ack_many transaction acks.
_ACK_BATCH = 1_000

#: Messages a purge takes per transaction.
_PURGE_BATCH = 1_000

#: Versions per second on the cluster's clock (read versions).
_PER_SECOND = 1_000_000


class QueueSettings(NamedTuple):
    """How :class:`Queues` claims and expires.

    Attributes:
        lease_seconds: the lease of a claimed message.
        spread: a claim of ``n`` messages from a plain queue takes a block of ``n``
            among the ``n * spread`` oldest (one of the ``spread`` oldest for one).
        max_deliveries: the structures' ``max_deliveries`` (None: never dead).
        expiry_grace: seconds past its expiry before an expiring queue counts as
            expired.
    """

    lease_seconds: float
    spread: int
    max_deliveries: Optional[int]
    expiry_grace: float


class QueueMeta(NamedTuple):
    """What a queue is: ``kind`` (FIFO or PRIORITY) and, for a queue that goes away
    when nobody consumes it, ``expires`` (seconds; None: it stays)."""

    kind: str
    expires: Optional[float]


class Delivery(NamedTuple):
    """A message taken from a queue: its bytes, its lease (None when it was popped
    for a consumer that does not ack) and the name of its blob (None: inline)."""

    payload: bytes
    lease: Any
    blob: Optional[Tuple[Any, ...]]


class Undecodable(ValueError):
    """A claimed message its integration cannot make a message of (not JSON, not an
    object, not the framework's message); its text says why."""

    @classmethod
    def of(cls, error: BaseException) -> Undecodable:
        """The decoder's ``error`` as an Undecodable (its text ``"Type: message"``)."""
        return cls(error_reason(error))


def error_reason(error: BaseException) -> str:
    """``"Type: message"`` of ``error`` as a dead letter's reason, as the Worker writes
    it (:meth:`fdbrecipes.JobError.reason`: a message whose ``str()`` raises is
    ``<str() failed>``, lone surrogates escaped, at most 1,000 characters)."""
    return JobError.of(error).reason()


def fit_reason(text: str) -> str:
    """``text`` fit to be a dead letter's reason: lone surrogates escaped (a reason
    is stored as UTF-8), at most :data:`fdbrecipes._values.MAX_REASON` characters."""
    return storable(text)[:MAX_REASON]


def _pack_meta(meta: QueueMeta) -> bytes:
    import fdb.tuple

    return bytes(fdb.tuple.pack((meta.kind, meta.expires)))


def _unpack_meta(raw: bytes) -> QueueMeta:
    import fdb.tuple

    kind, expires = fdb.tuple.unpack(raw)
    return QueueMeta(kind, expires)


class Queues:
    """The queues of one directory (one object per process and directory).

    Args:
        db: the database.
        root: the integration's directory (a subspace).
        settings: leases, spread, dead letters, expiry.
        flow: the limits its queues' structures carry (see :mod:`._flow`); None:
            none.
    """

    def __init__(self, db: Any, root: Any, settings: QueueSettings,
                 flow: Optional[Flow] = None) -> None:
        self.db = db
        self.settings = settings
        self.flow = flow
        self._items = root.subspace(("q",))
        self._meta = root.subspace(("m",))
        self._alive = root.subspace(("a",))
        self.blobs = Blobs(root.subspace(("b",)))
        self._known: Dict[str, QueueMeta] = {}
        self._structures: Dict[str, Any] = {}
        self._alive_until: Dict[str, float] = {}
        self._lock = threading.Lock()

    # -- what a queue is -----------------------------------------------------------------

    def declare(self, name: str, kind: str, expires: Optional[float]) -> QueueMeta:
        """Declare ``name``: its first declaration stores its kind and expiry; later
        ones must agree on the kind.  An expiring queue counts as consumed from now.
        Reads the meta key (a conflict with a concurrent first declaration), writes it
        when absent (and the alive key).  Cost: 1 round trip.

        Raises:
            ValueError: the queue exists with another kind.
        """
        meta = transact(self.db, self._declare, name, QueueMeta(kind, expires))
        if meta.kind != kind:
            raise ValueError(f"queue {name!r} exists as a {meta.kind} queue; it cannot be "
                             f"declared as a {kind} queue (delete it first)")
        self._remember(name, meta)
        return meta

    def _declare(self, tr: Any, name: str, meta: QueueMeta) -> QueueMeta:
        raw = tr[self._meta.pack((name,))]
        if raw.present():
            return _unpack_meta(bytes(raw))
        tr[self._meta.pack((name,))] = _pack_meta(meta)
        if meta.expires is not None:
            self._touch(tr, [(name, meta.expires)])
        return meta

    def _remember(self, name: str, meta: QueueMeta) -> None:
        with self._lock:
            self._known[name] = meta

    def meta(self, name: str) -> QueueMeta:
        """What ``name`` is: remembered, or read (declared as a plain queue, with no
        expiry, if nobody declared it: a publish to an undeclared queue creates it)."""
        with self._lock:
            known = self._known.get(name)
        if known is not None:
            return known
        return self.declare(name, FIFO, None) if not self.exists(name) else self._read(name)

    def _read(self, name: str) -> QueueMeta:
        raw = self.db[self._meta.pack((name,))]
        if raw is None:  # deleted meanwhile
            return self.declare(name, FIFO, None)
        meta = _unpack_meta(bytes(raw))
        self._remember(name, meta)
        return meta

    def exists(self, name: str) -> bool:
        """Whether ``name`` was declared (and not deleted).  1 read."""
        return self.db[self._meta.pack((name,))] is not None

    def structure(self, name: str) -> Any:
        """The Queue or PriorityQueue holding ``name``'s messages."""
        with self._lock:
            made = self._structures.get(name)
        if made is not None:
            return made
        kind = _kinds.kind_named(STRUCTURES[self.meta(name).kind])
        uses = () if self.flow is None else self.flow.uses(name)
        made = kind.make(self._items.subspace((name,)), self.settings.max_deliveries,
                         limits=uses)
        with self._lock:
            return self._structures.setdefault(name, made)

    def forget(self, name: str) -> None:
        """Drop what this process remembers of ``name`` (after a delete)."""
        with self._lock:
            self._known.pop(name, None)
            self._structures.pop(name, None)
            self._alive_until.pop(name, None)

    # -- expiring queues -----------------------------------------------------------------

    def touch(self, names: Iterable[str]) -> None:
        """Move on the alive keys of the expiring queues among ``names`` (their
        consumers are alive): one transaction, nothing read but the read version."""
        expiring = [(n, m.expires) for n in names for m in (self.meta(n),)
                    if m.expires is not None]
        if expiring:
            transact(self.db, self._touch, expiring)

    def _touch(self, tr: Any, expiring: List[Tuple[str, float]]) -> None:
        import fdb.tuple

        now = tr.get_read_version().wait()
        for name, expires in expiring:
            tr[self._alive.pack((name,))] = fdb.tuple.pack((now + int(expires * _PER_SECOND),))

    def expired(self, name: str, meta: QueueMeta) -> bool:
        """Whether the expiring queue ``name`` outlived its consumers by more than
        ``expiry_grace``.  Remembers, by this process's monotonic clock, until when
        it surely did not: 1 read at most per expiry period."""
        if meta.expires is None:
            return False
        with self._lock:
            until = self._alive_until.get(name, 0.0)
        if time.monotonic() < until:
            return False
        left = transact(self.db, self._alive_left, name)
        if left is None:
            return False  # no alive key: declared by a version without one; keep it
        if left < -self.settings.expiry_grace:
            return True
        with self._lock:
            self._alive_until[name] = time.monotonic() + max(left, 0.0)
        return False

    def _alive_left(self, tr: Any, name: str) -> Optional[float]:
        import fdb.tuple

        raw = tr.snapshot[self._alive.pack((name,))]
        now = tr.get_read_version().wait()
        if not raw.present():
            return None
        (deadline,) = fdb.tuple.unpack(bytes(raw))
        return float((deadline - now) / _PER_SECOND)

    # -- messages ------------------------------------------------------------------------

    def put(self, name: str, payload: bytes, priority: int, delay: Optional[float]) -> bool:
        """Push one message (visible after ``delay`` seconds, if given); False when
        ``name`` is an expiring queue nobody consumes any more (see :meth:`usable`;
        nothing is pushed).  Cost: 1 round trip (see :meth:`push`).

        Raises:
            ValueError: the message is over 8,000,000 bytes.
        """
        if not self.usable(name):
            return False
        transact(self.db, self.push, name, payload, priority, delay)
        return True

    def usable(self, name: str) -> bool:
        """Whether a message may be pushed to ``name``: False for an expiring queue
        nobody consumes any more (to be deleted instead, with the message, as
        RabbitMQ's ``x-expires`` would have).  Remembered: no round trip, but 1 read
        per expiry period for an expiring queue (and 1 transaction the first time
        this process sees ``name``)."""
        meta = self.meta(name)
        if self.expired(name, meta):
            log.info("queue %r expired (no consumer for %s s): deleting it", name, meta.expires)
            return False
        return True

    def push(self, tr: Any, name: str, payload: bytes, priority: int,
             delay: Optional[float]) -> None:
        """Push one message to ``name`` in ``tr`` (visible after ``delay`` seconds, if
        given; ``priority`` counts in a priority queue only).  A message over
        :data:`INLINE` bytes is chunked in the same transaction.  Reads and conflicts
        as the structure's push (snapshot reads only); cost: 1 round trip.

        Raises:
            ValueError: the message is over 8,000,000 bytes (before anything is
                written).
        """
        s = self.structure(name)
        where = _kinds.of(s).where(priority=priority)
        if len(payload) <= INLINE:
            s.push(tr, payload, delay=delay, **where)
        else:
            Blobs.check(payload, "a message")
            self._put_blob(tr, s, (name, uuid.uuid4().bytes), payload, where, delay)

    def _put_blob(self, tr: Any, s: Any, ref: Tuple[Any, ...], payload: bytes,
                  where: Dict[str, Any], delay: Optional[float]) -> None:
        self.blobs.write(tr, ref, payload)
        label = None if self.flow is None else self.flow.label(payload)
        item = ("blob", ref[1]) if label is None else ("blob", ref[1], label)
        s.push(tr, item, delay=delay, **where)

    def take(self, name: str, n: int, leased: bool,
             acks: Sequence[Held] = ()) -> List[Delivery]:
        """Up to ``n`` visible messages of ``name``: claimed under leases of
        ``lease_seconds`` (``leased``), or popped (for consumers that do not ack).
        One transaction (a claim of up to ``n``, in relaxed order for a plain queue:
        a block of ``n`` among the ``n * spread`` oldest; in priority order for a
        priority queue),
        plus one read per chunked message.  ``acks``: leases of ``name``'s messages,
        none chunked, acked in the claim's transaction (``finish_and_claim``: at
        most 1,000 claimed then); those that had expired are logged.  Cost: 1 round
        trip."""
        s = self.structure(name)
        priority = _kinds.of(s).priorities
        spread = 1 if priority else claim_spread(n, self.settings.spread)
        if leased and acks:
            claimed = drive(s.ops.finish_and_claim(
                self.db, [Finished(held.lease) for held in acks], n,
                self.settings.lease_seconds, spread=spread, end="max" if priority else "min"))
            expired(len(claimed.acked) - sum(claimed.acked))
            return [self._leased(name, lease) for lease in claimed.leases]
        if leased:
            claim = s.claim_max_many if priority else s.claim_many
            leases = claim(self.db, n, self.settings.lease_seconds, spread=spread)
            return [self._leased(name, lease) for lease in leases]
        pop = s.pop_max_many if priority else s.pop_many
        return [self._popped(name, value) for value in pop(self.db, n, spread=spread)]

    def _leased(self, name: str, lease: Any) -> Delivery:
        value = lease.value
        if isinstance(value, bytes):
            return Delivery(value, lease, None)
        ref = (name, value[1])
        return Delivery(transact(self.db, self.blobs.read, ref) or b"", lease, ref)

    def _popped(self, name: str, value: Any) -> Delivery:
        if isinstance(value, bytes):
            return Delivery(value, None, None)
        ref = (name, value[1])
        payload = transact(self.db, self._take_blob, ref)
        return Delivery(payload or b"", None, None)

    def _take_blob(self, tr: Any, ref: Tuple[Any, ...]) -> Optional[bytes]:
        payload = self.blobs.read(tr, ref)
        self.blobs.clear(tr, ref)
        return payload

    # -- settling a lease ----------------------------------------------------------------

    def ack(self, held: Held) -> bool:
        """The message is done: remove it (and its chunks).  False, logged, when its
        lease had expired (it may be running elsewhere).  Cost: 1 round trip."""
        try:
            if held.extra is None:
                held.structure.ack(self.db, held.lease)
            else:
                transact(self.db, self._ack_blob, held)
            return True
        except LeaseExpiredError:
            log.warning("ack of %r came after its lease expired: it may run again", held.lease)
            return False

    def ack_many(self, batch: List[Held]) -> int:
        """Ack every lease of ``batch``: one ``ack_many`` per structure (and one
        transaction per chunked message); return how many were acked.  Leases that
        had expired are logged (their messages may run again)."""
        by_structure: Dict[int, List[Held]] = {}
        acked = 0
        for held in batch:
            if held.extra is None:
                by_structure.setdefault(id(held.structure), []).append(held)
            else:
                acked += self.ack(held)
        for group in by_structure.values():
            for start in range(0, len(group), _ACK_BATCH):
                part = group[start:start + _ACK_BATCH]
                done = part[0].structure.ack_many(self.db, [h.lease for h in part])
                acked += sum(done)
                expired(len(part) - sum(done))
        return acked

    def _ack_blob(self, tr: Any, held: Held) -> None:
        held.structure.ack(tr, held.lease)
        self.blobs.clear(tr, held.extra)

    def undecodable(self, name: str, delivery: Delivery, error: Undecodable) -> None:
        """A message of ``name`` that cannot be decoded (``error`` says why): claimed,
        it becomes a dead letter at once, no delivery more counted, with the reason
        ``"DecodeError: " + str(error)``; popped (a consumer without acks), it is gone
        already.  Either way it is logged.  Cost: 1 round trip (claimed), none
        (popped).  Raises what the bury raises (its lease then ends by expiry, and the
        message is buried when it is claimed again)."""
        reason = fit_reason(f"DecodeError: {error}")
        if delivery.lease is None:
            log.warning("queue %r: dropped a message that cannot be decoded (taken "
                        "without ack, so it cannot be a dead letter): %r", name, reason)
            return
        log.warning("queue %r: a message that cannot be decoded is a dead letter: %r",
                    name, reason)
        self.bury(Held(self.structure(name), delivery.lease, delivery.blob), reason)

    def release(self, held: Held, *, count: bool) -> bool:
        """Give the message back at its place, visible now (``count``: a delivery is
        counted).  False when its lease had expired.  Cost: 1 round trip."""
        return bool(held.structure.release(self.db, held.lease, count=count))

    def bury(self, held: Held, reason: str) -> bool:
        """Make the message a dead letter with ``reason`` (its chunks stay, for
        ``requeue_dead``).  False when its lease had expired.  Cost: 1 round trip."""
        return bool(held.structure.bury(self.db, held.lease, reason))

    # -- the whole queue -----------------------------------------------------------------

    def size(self, name: str) -> int:
        """Messages waiting in ``name``: visible and delayed (not those under a lease,
        nor dead letters).  1 snapshot read of its stats."""
        stats = self.structure(name).stats(self.db)
        return int(stats.visible + stats.delayed)

    def purge(self, name: str) -> int:
        """Remove the visible messages of ``name`` (delayed ones, leased ones and
        dead letters stay: AMQP purges ready messages) and return how many.
        Transactions of at most 1,000 pops, each clearing its messages' chunks."""
        s = self.structure(name)
        total = 0
        while True:
            taken = transact(self.db, self._purge_batch, name, s)
            total += taken
            if taken < _PURGE_BATCH:
                return total

    def _purge_batch(self, tr: Any, name: str, s: Any) -> int:
        pop = s.pop_max_many if _kinds.of(s).priorities else s.pop_many
        values = pop(tr, _PURGE_BATCH)
        for value in values:
            if not isinstance(value, bytes):
                self.blobs.clear(tr, (name, value[1]))
        return len(values)

    def delete(self, tr: Any, name: str) -> None:
        """Remove ``name`` in ``tr``: every message (visible, delayed, leased, dead),
        its chunks, meta and alive key.  O(1) range clears; declares nothing."""
        with self._lock:
            s = self._structures.get(name)
        (s or Queue(self._items.subspace((name,)))).clear(tr)  # the same keys either kind
        for sub in (self._meta, self._alive):
            tr.clear(sub.pack((name,)))
        self.blobs.clear(tr, (name,))


def expired(n: int) -> None:
    """Say that ``n`` acks came after their leases expired (if any did)."""
    if n:
        log.warning("%d acks came after their leases expired: those messages may run "
                    "again", n)
