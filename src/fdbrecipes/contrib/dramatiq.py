"""A Dramatiq broker on fdbrecipes' Queue.

::

    import fdb
    fdb.api_version(730)
    import dramatiq
    from fdbrecipes.contrib.dramatiq import FdbBroker

    dramatiq.set_broker(FdbBroker(directory="myapp/dramatiq"))

Each Dramatiq queue is a :class:`fdbrecipes.Queue`.  A consumer *claims* messages
(the message and its lease in one transaction: no crash loses one in between), the
process's heartbeat extends the leases it holds, ``ack`` acks (with the consumer's
next claim, in its transaction), ``nack`` makes the
message a dead letter of the queue (``Queue.dead``) with the actor's error as its
reason, and a message whose worker died comes back after ``lease_seconds`` (after
``max_deliveries`` such deliveries, 20 by default, it is a dead letter).  A message
that is not a Dramatiq message of its queue (its bytes do not decode) is a dead letter
at once, its reason naming the problem, and the rest of its claim runs.  A delayed
message (``send_with_options(delay=...)``, retries) is pushed delayed: it waits in the
cluster, not in a worker's memory, so Dramatiq's delay queues (``.DQ``) stay empty.
Needs the ``dramatiq`` extra: ``pip install 'fdbrecipes[dramatiq]'``.
"""

from __future__ import annotations

import itertools
import threading
import time
from collections import deque
from typing import Any, Deque, Dict, Iterable, List, Optional

try:
    import dramatiq
    from dramatiq.errors import DecodeError, QueueJoinTimeout, QueueNotFound
except ImportError as e:  # pragma: no cover (the extra is installed for the tests)
    raise ImportError("fdbrecipes.contrib.dramatiq needs Dramatiq: pip install "
                      "'fdbrecipes[dramatiq]'") from e

from .._values import check_int
from .._worker.ahead import Ahead
from ._database import database, directory, directory_path, transact
from ._flow import Flow, FlowSettings
from ._keeper import Held, LeaseKeeper
from ._options import check_cluster_file, check_count, check_seconds
from ._queues import MAX_DELIVERIES, Queues, QueueSettings, Undecodable, error_reason

__all__ = ["FdbBroker", "actor_of"]

#: The fields of a Dramatiq message other than its queue, and their types.
_FIELDS = (("actor_name", str), ("kwargs", dict), ("options", dict), ("message_id", str),
           ("message_timestamp", int))
#: Seconds an ack waits at most for a claim to carry it.
ACK_RIDE = 0.05
#: Delivery tags: one per message a process claims.
_TAGS = itertools.count()


class _Proxy(dramatiq.MessageProxy):
    """A delivered message and the tag its lease is held under."""

    def __init__(self, message: Any, tag: int) -> None:
        super().__init__(message)
        self.tag = tag


def _reason(message: Any) -> str:
    """Why a nacked message died: the actor's last error, if Dramatiq kept it."""
    error = getattr(message, "_exception", None)
    if error is None:
        return "rejected by the worker (nack)"
    return error_reason(error)


def _decode(payload: bytes, queue_name: str) -> Any:
    """The Dramatiq message ``payload`` encodes (with Dramatiq's encoder), which must
    be a message of ``queue_name`` with fields of a message's types: what Dramatiq's
    consumer and worker threads rely on, so that no message can stop them.

    Raises:
        Undecodable: it is not (its text says why).
    """
    try:
        message = dramatiq.Message.decode(payload)
    except Exception as e:  # dramatiq.errors.DecodeError, from the encoder's error
        cause: BaseException = e
        while isinstance(cause, DecodeError) and isinstance(cause.error, BaseException):
            cause = cause.error
        raise Undecodable.of(cause) from e
    if message.queue_name != queue_name:
        raise Undecodable(f"a message of queue {message.queue_name!r} found in queue "
                          f"{queue_name!r}")
    for name, kind in _FIELDS:
        value = getattr(message, name)
        if not isinstance(value, kind) or isinstance(value, bool):
            raise Undecodable(f"not a Dramatiq message: its {name} is of type "
                              f"{type(value).__name__}, not {kind.__name__}")
    return message


def actor_of(value: Any) -> Optional[str]:
    """The actor a queued message names (its limits' key): read from its bytes with
    Dramatiq's encoder, or from a chunked message's reference; None when it names
    none (a message that does not decode: it is a dead letter when claimed)."""
    if isinstance(value, tuple):
        return value[2] if len(value) == 3 and isinstance(value[2], str) else None
    try:
        fields = dramatiq.get_encoder().decode(value)
    except Exception:
        return None
    name = fields.get("actor_name") if isinstance(fields, dict) else None
    return name if isinstance(name, str) else None


class FdbBroker(dramatiq.Broker):
    """A Dramatiq broker whose queues are :class:`fdbrecipes.Queue` structures.

    Args:
        cluster_file: the cluster file (None: ``FDB_CLUSTER_FILE`` or the default).
        directory: the directory its keys live in (``"dramatiq"``; ``"a/b"`` or a
            tuple).
        lease_seconds: a claimed message's lease, extended by the heartbeat while
            the worker holds it: how long a dead worker's messages wait.
        spread: a claim of ``n`` messages takes a block of ``n`` drawn among the
            ``n * spread`` oldest (consumers rarely collide).
        max_deliveries: deliveries after which a message whose lease keeps ending
            without ack (its worker dies each time) becomes a dead letter
            (20 by default; None: never, so a message that kills its worker is
            delivered again forever).  Dramatiq's retries are new
            messages: they do not count.
        claim_ahead: messages a consumer may claim beyond its prefetch, held under
            leases (extended by the heartbeat) until Dramatiq has room for them, so
            that one transaction claims dozens (None: 4 times the prefetch, at most
            1,000; 0: none).  Only while messages are short: as many as would wait
            about 0.1 s, judged by how long the recent ones took from delivery to
            ack; given back at once when the worker stops.
        middleware: as for :class:`dramatiq.Broker`.
        limits: the directory of the :class:`fdbrecipes.Limits` store the limits
            below are kept in, shared by every process (and any structure) using it
            (None: ``directory`` plus ``"limits"``).
        queue_limits: limits of a queue's messages, ``{queue: {"concurrency": n,
            "rate": "10/s"}}`` (either or both; a rate as Celery writes it:
            ``"10/s"``, ``"100/m"``, ``"1000/h"``): limits ``queue.concurrency:QUEUE``
            and ``queue.rate:QUEUE`` of the store.
        actor_limits: limits of an actor's messages, in whatever queue, ``{actor:
            {...}}`` as above: limits ``actor.concurrency:ACTOR`` and
            ``actor.rate:ACTOR``, keyed by the actor's name.  Each is checked in the
            claim's own transaction (docs/flow-control.md); the definitions are
            written to the store when the broker first opens its directory.

    Raises:
        TypeError or ValueError: an option is wrong (named).
    """

    def __init__(self, *, cluster_file: Optional[str] = None, directory: Any = "dramatiq",
                 lease_seconds: float = 30.0, spread: int = 8,
                 max_deliveries: Optional[int] = MAX_DELIVERIES,
                 claim_ahead: Optional[int] = None,
                 middleware: Any = None, limits: Any = None,
                 queue_limits: Optional[Dict[str, Dict[str, Any]]] = None,
                 actor_limits: Optional[Dict[str, Dict[str, Any]]] = None) -> None:
        self._cluster_file = check_cluster_file(cluster_file)
        self._flow = FlowSettings.from_options(limits, queue_limits, actor_limits, "actor",
                                               "actor_limits")
        self._claim_ahead = None if claim_ahead is None else check_int(
            claim_ahead, "claim_ahead", low=0, high=10_000)
        self._path = directory_path(directory, "directory")
        self._settings = QueueSettings(
            check_seconds(lease_seconds, "lease_seconds"),
            check_count(spread, "spread") or 1,
            check_count(max_deliveries, "max_deliveries", optional=True),
            60.0)
        self._opened: Optional[Queues] = None
        self._keeper: Optional[LeaseKeeper] = None
        self._open_lock = threading.Lock()
        super().__init__(middleware=middleware)
        self.queues: Dict[str, bool] = {}

    @property
    def store(self) -> Queues:
        """The queues in the cluster (opened on first use, in the process using them)."""
        with self._open_lock:
            if self._opened is None:
                db = database(self._cluster_file)
                root = directory(db, self._path, self._cluster_file)
                flow = Flow(db, self._path, self._flow, actor_of) if self._flow else None
                self._opened = Queues(db, root, self._settings, flow)
                self._keeper = LeaseKeeper(db, self._settings.lease_seconds,
                                           clock_key=root.pack(("clock",)))
            return self._opened

    @property
    def keeper(self) -> LeaseKeeper:
        """The heartbeat of the leases this process holds."""
        self.store  # noqa: B018 (opens it)
        assert self._keeper is not None
        return self._keeper

    def close(self) -> None:
        """Stop the heartbeat (each consumer commits its acks as it closes)."""
        if self._keeper is not None:
            self._keeper.close()

    def declare_queue(self, queue_name: str) -> None:
        """Declare ``queue_name`` (idempotent; no delay queue: delays wait in the
        queue itself)."""
        if queue_name in self.queues:
            return
        self.emit_before("declare_queue", queue_name)
        self.queues[queue_name] = True
        self.emit_after("declare_queue", queue_name)

    def enqueue(self, message: Any, *, delay: Optional[int] = None) -> Any:
        """Push ``message`` to its queue, visible after ``delay`` milliseconds.

        Raises:
            dramatiq.errors.QueueNotFound: its queue was not declared here.
        """
        if message.queue_name not in self.queues:
            raise QueueNotFound(message.queue_name)
        self.emit_before("enqueue", message, delay)
        self.store.put(message.queue_name, message.encode(), 0,
                       delay / 1000 if delay else None)
        self.emit_after("enqueue", message, delay)
        return message

    def consume(self, queue_name: str, prefetch: int = 1, timeout: int = 30000) -> Any:
        """A consumer of ``queue_name`` claiming up to ``prefetch`` messages, waiting
        up to ``timeout`` milliseconds on a watch for one.

        Raises:
            dramatiq.errors.QueueNotFound: the queue was not declared here.
        """
        if queue_name not in self.queues:
            raise QueueNotFound(queue_name)
        ahead = min(4 * max(prefetch, 1), 1_000) if self._claim_ahead is None \
            else self._claim_ahead
        return _Consumer(self, queue_name, prefetch, timeout, ahead)

    def flush(self, queue_name: str) -> None:
        """Drop every message of ``queue_name``: waiting, delayed, in flight (their
        acks will fail, logged) and dead."""
        transact(self.store.db, self.store.delete, queue_name)
        self.store.forget(queue_name)

    def flush_all(self) -> None:
        """:meth:`flush` every declared queue."""
        for queue_name in self.queues:
            self.flush(queue_name)

    def join(self, queue_name: str, *, interval: int = 100,
             timeout: Optional[int] = None) -> None:
        """Wait until ``queue_name`` holds nothing (visible, delayed or in flight),
        checking its stats (one snapshot read) every ``interval`` milliseconds.  For
        tests, as Dramatiq's other brokers.

        Raises:
            dramatiq.errors.QueueJoinTimeout: ``timeout`` milliseconds passed first.
        """
        if queue_name not in self.queues:
            raise QueueNotFound(queue_name)
        deadline = None if timeout is None else time.monotonic() + timeout / 1000
        structure = self.store.structure(queue_name)
        while True:
            stats = structure.stats(self.store.db)
            if stats.visible + stats.delayed + stats.in_flight == 0:
                return
            if deadline is not None and time.monotonic() >= deadline:
                raise QueueJoinTimeout(queue_name)
            time.sleep(interval / 1000)

    def dead_letters(self, queue_name: str) -> List[Any]:
        """The dead letters of ``queue_name`` (:class:`fdbrecipes.DeadLetter`, their
        values the encoded messages: ``dramatiq.Message.decode(letter.value)``)."""
        return list(self.store.structure(queue_name).dead(self.store.db))


class _Consumer(dramatiq.Consumer):
    """Claims messages of one queue under leases the broker's keeper extends: up to
    ``prefetch`` delivered and unsettled, claimed once half of that is free (a busy
    consumer claims in batches, not one message for each ack), and, while messages
    are short, up to ``ahead`` more, held until there is room (see
    :mod:`fdbrecipes._worker.ahead`: the same rule as a Worker's).  Acks ride on the
    next claim, in its transaction; those no claim takes within :data:`ACK_RIDE`
    (the worker's threads are all busy) are committed together by the consumer's
    thread, and while it waits for the queue to fill each ack is committed by the
    thread that acks."""

    def __init__(self, broker: FdbBroker, queue_name: str, prefetch: int,
                 timeout: int, ahead: int) -> None:
        self._broker = broker
        self._queue = queue_name
        self._prefetch = max(prefetch, 1)
        self._timeout = timeout / 1000
        self._ahead = Ahead(self._prefetch, ahead, False)
        self._delivered: Dict[int, float] = {}  # tag: time.monotonic() of delivery
        self._buffer: Deque[_Proxy] = deque()  # claimed, not delivered
        self._outstanding = 0  # delivered, not yet acked, nacked or requeued
        self._acks: List[Held] = []  # acked, not yet committed
        self._acked_at = 0.0  # time.monotonic() of the oldest of them
        self._closed = False
        self._idle = False  # waiting on the watch: no claim is coming
        self._settled = threading.Condition()

    def __next__(self) -> Optional[_Proxy]:
        if self._buffer:
            if not self._room(1):
                return None
        else:
            room = self._room(max(1, self._prefetch // 2))
            if not room:
                return None
            with self._settled:
                wanted = room + self._ahead.jobs()
            self._claim(wanted)
            if not self._buffer:
                self._wait_for_work()
                self._claim(wanted)
            if not self._buffer:
                return None
        proxy = self._buffer.popleft()
        with self._settled:
            self._outstanding += 1
            self._delivered[proxy.tag] = time.monotonic()
        return proxy

    def _room(self, need: int) -> int:
        """Wait (at most the consumer's timeout) until ``need`` of the prefetch is
        free; how much is (0: not enough yet).  Acks that waited :data:`ACK_RIDE`
        for a claim are committed meanwhile."""
        deadline = time.monotonic() + self._timeout
        while True:
            with self._settled:
                room = self._prefetch - self._outstanding
                if room >= need:
                    return room
                now = time.monotonic()
                if now >= deadline:
                    return 0
                if not self._acks or now < self._acked_at + ACK_RIDE:
                    wake = deadline if not self._acks else self._acked_at + ACK_RIDE
                    self._settled.wait(min(wake, deadline) - now)
                    continue
            self._commit_acks()

    def _wait_for_work(self) -> None:
        """Wait on the queue's watch (at most the consumer's timeout); acks meanwhile
        are committed by the threads that ack, as no claim will carry them."""
        with self._settled:
            self._idle = True
        try:
            self._commit_acks()
            self._broker.store.structure(self._queue).wait(self._broker.store.db,
                                                          self._timeout)
        finally:
            with self._settled:
                self._idle = False

    def _take_acks(self) -> List[Held]:
        with self._settled:
            acks, self._acks = self._acks, []
        return acks

    def _commit_acks(self) -> None:
        """Commit the acks waiting, in one transaction (per structure)."""
        acks = self._take_acks()
        if acks:
            self._broker.store.ack_many(acks)

    def _claim(self, n: int) -> None:
        """Claim up to ``n`` messages into the buffer, with the acks waiting.  Each is
        decoded on its own: one that is not a message of this queue is buried at once
        (its reason says why), after the others are held, which are delivered as if
        it had not been there; a claim that took nothing else claims again."""
        store = self._broker.store
        structure = store.structure(self._queue)
        acks = self._take_acks()
        while True:
            try:
                taken = store.take(self._queue, n, leased=True, acks=acks)
            except BaseException:
                with self._settled:  # committed or not, they are settled by the next try
                    self._acks[:0] = acks
                raise
            acks = []
            bad = []
            for delivery in taken:
                try:
                    message = _decode(delivery.payload, self._queue)
                except Undecodable as e:
                    bad.append((delivery, e))
                    continue
                proxy = _Proxy(message, next(_TAGS))
                self._broker.keeper.hold(proxy.tag,
                                         Held(structure, delivery.lease, delivery.blob))
                self._buffer.append(proxy)
            for delivery, error in bad:
                store.undecodable(self._queue, delivery, error)
            if len(bad) < len(taken) or not taken:
                return

    def _settle(self, message: Any) -> None:
        """A delivered message was settled: its room is free again, and how long it
        took counts for the claims ahead."""
        with self._settled:
            self._outstanding -= 1
            tag = getattr(message, "tag", None)
            delivered = None if tag is None else self._delivered.pop(tag, None)
            if delivered is not None:
                self._ahead.ran(time.monotonic() - delivered)
            self._settled.notify_all()

    def ack(self, message: dramatiq.MessageProxy) -> None:
        """The message was processed: its lease is acked with the next claim (a lease
        lost meanwhile is logged, not acked)."""
        held = self._broker.keeper.take(getattr(message, "tag", None))
        if held is not None:
            with self._settled:
                now = held.extra is not None or self._closed or self._idle
                if not now:
                    if not self._acks:
                        self._acked_at = time.monotonic()
                    self._acks.append(held)
            if now:  # no claim to carry it (or a chunked message: its chunks go too)
                self._broker.store.ack_many([held])
        self._settle(message)

    def nack(self, message: dramatiq.MessageProxy) -> None:
        """The message failed for good: a dead letter of its queue, with the actor's
        error as its reason."""
        held = self._broker.keeper.take(getattr(message, "tag", None))
        if held is not None:
            self._broker.store.bury(held, _reason(message))
        self._settle(message)

    def requeue(self, messages: Iterable[dramatiq.MessageProxy]) -> None:
        """Give back messages delivered but not processed (a worker shutting down),
        at their places, no delivery counted."""
        for message in messages:
            held = self._broker.keeper.take(getattr(message, "tag", None))
            if held is not None:
                self._broker.store.release(held, count=False)
            self._settle(message)

    def close(self) -> None:
        """Give back the messages claimed but never delivered; commit the acks."""
        self._closed = True
        while self._buffer:
            held = self._broker.keeper.take(self._buffer.popleft().tag)
            if held is not None:
                self._broker.store.release(held, count=False)
        self._commit_acks()
