"""What the kombu transports of one process share, per settings: the queues, the
routing, the lease keeper, the acker and the set of queues being consumed.

A Celery worker opens several connections (tasks, remote control, events); they share
one :class:`Shared`, hence one heartbeat thread and one cache of queue kinds and
bindings.
"""

from __future__ import annotations

import json
import threading
from collections import Counter
from functools import partial
from typing import Any, Callable, Dict, List, NamedTuple, Optional, Set

from .._acker import Acker
from .._database import database, directory, transact
from .._flow import Flow
from .._keeper import LeaseKeeper
from .._queues import Queues, QueueSettings
from ._routing import Routing, Rows
from ._settings import TransportSettings

__all__ = ["Outgoing", "Shared", "shared", "task_of"]

#: The keeper beats at least this often: it also keeps expiring queues alive, and
#: Celery's remote-control queues expire after 10 seconds without a consumer.
_MAX_PERIOD = 3.0

_lock = threading.Lock()
_shared: Dict[TransportSettings, Shared] = {}


class Outgoing(NamedTuple):
    """A message to push: its bytes, its priority (priority queues only) and its
    delay in seconds (None: visible at once)."""

    payload: bytes
    priority: int
    delay: Optional[float]


def task_of(value: Any) -> Optional[str]:
    """The task a queued kombu message names (its limits' key): the ``task`` header
    Celery's task protocol 2 writes, read from the message's JSON, or from a chunked
    message's reference; None when it names none (a message that does not decode: it
    is a dead letter when claimed; protocol 1 messages name their task in the body)."""
    if isinstance(value, tuple):
        return value[2] if len(value) == 3 and isinstance(value[2], str) else None
    try:
        message = json.loads(value)
    except Exception:
        return None
    headers = message.get("headers") if isinstance(message, dict) else None
    name = headers.get("task") if isinstance(headers, dict) else None
    return name if isinstance(name, str) else None


def shared(settings: TransportSettings) -> Shared:
    """The process's :class:`Shared` for ``settings`` (made on first use: opens the
    database and the directory, bounded by the first-contact timeout)."""
    with _lock:
        found = _shared.get(settings)
        if found is None:
            found = _shared[settings] = Shared(settings)
        return found


class Shared:
    """One transport directory, as this process sees it."""

    def __init__(self, settings: TransportSettings) -> None:
        self.settings = settings
        self.db = database(settings.cluster_file)
        root = directory(self.db, settings.directory, settings.cluster_file)
        flow = Flow(self.db, settings.directory, settings.flow, task_of) \
            if settings.flow else None
        self.queues = Queues(self.db, root, QueueSettings(
            settings.lease_seconds, settings.spread, settings.max_deliveries,
            settings.expiry_grace), flow)
        self.routing = Routing(self.db, root)
        self.acker = Acker(self.queues)
        self.keeper = LeaseKeeper(self.db, settings.lease_seconds,
                                  period=min(settings.lease_seconds / 3, _MAX_PERIOD),
                                  also=self._touch_consumed, clock_key=root.pack(("clock",)))
        self._consumed: Counter[str] = Counter()
        self._auto_delete: Set[str] = set()
        self._lock = threading.Lock()

    # -- consumers and auto-delete queues ---------------------------------------------------

    def consuming(self, queue: str) -> None:
        """A consumer of ``queue`` started here: its expiry moves on with the
        keeper's beats (the keeper starts now)."""
        with self._lock:
            self._consumed[queue] += 1
        self.queues.touch([queue])
        self.keeper.start()

    def stopped_consuming(self, queue: str) -> bool:
        """A consumer of ``queue`` stopped here; True when it was the last one here
        and the queue was declared ``auto_delete`` here (the caller deletes it)."""
        with self._lock:
            self._consumed[queue] -= 1
            if self._consumed[queue] > 0:
                return False
            del self._consumed[queue]
            return queue in self._auto_delete

    def auto_delete(self, queue: str) -> None:
        """``queue`` was declared ``auto_delete``: it goes when its last consumer here
        stops."""
        with self._lock:
            self._auto_delete.add(queue)

    def _touch_consumed(self) -> None:
        with self._lock:
            names = list(self._consumed)
        self.queues.touch(names)

    # -- deleting -------------------------------------------------------------------------

    def delete_queue(self, queue: str) -> None:
        """Delete ``queue``, its messages and its bindings, in one transaction."""
        transact(self.db, self._delete_queue, queue)
        self._deleted([queue])

    def _delete_queue(self, tr: Any, queue: str) -> None:
        self.queues.delete(tr, queue)
        self.routing.drop_queue(tr, queue)

    def delete_exchange(self, exchange: str) -> None:
        """Delete ``exchange`` and its bindings (its queues stay, as in AMQP)."""
        transact(self.db, self.routing.delete_exchange, exchange)

    def put(self, queue: str, message: Outgoing) -> None:
        """Push ``message`` to ``queue``: one transaction (see :meth:`publish`)."""
        self._deleted(transact(self.db, self._send, message, [queue]))

    def publish(self, exchange: str, pick: Callable[[Rows], List[str]],
                message: Outgoing) -> None:
        """Push ``message`` to each queue ``pick`` chooses from ``exchange``'s
        bindings, as of the publish: one transaction holds the routing check and the
        pushes (see :meth:`Routing.deliver`).  An expiring queue nobody consumes any
        more is deleted instead, in the same transaction (its message with it).
        Conflicts with nothing but a concurrent change of a deleted queue.  Cost: 1
        commit; 2 round trips before it while the bindings do not change (the
        counter, the pushes' reads), 3 when they did."""
        self._deleted(transact(self.db, self._publish, exchange, pick, message))

    def _publish(self, tr: Any, exchange: str, pick: Callable[[Rows], List[str]],
                 message: Outgoing) -> List[str]:
        return self._drop(tr, self.routing.deliver(tr, exchange,
                                                   partial(self._route, pick, message)))

    def _route(self, pick: Callable[[Rows], List[str]], message: Outgoing, tr: Any,
               rows: Rows) -> List[str]:
        return self._push(tr, message, pick(rows))

    def _send(self, tr: Any, message: Outgoing, queues: List[str]) -> List[str]:
        return self._drop(tr, self._push(tr, message, queues))

    def _drop(self, tr: Any, expired: List[str]) -> List[str]:
        """Delete the ``expired`` queues in ``tr``; them."""
        for queue in expired:
            self._delete_queue(tr, queue)
        return expired

    def _push(self, tr: Any, message: Outgoing, queues: List[str]) -> List[str]:
        """Push ``message`` to each usable queue of ``queues`` in ``tr``; the expired
        ones (pushed nothing), to be deleted."""
        expired = []
        for queue in queues:
            if self.queues.usable(queue):
                self.queues.push(tr, queue, *message)
            else:
                expired.append(queue)
        return expired

    def _deleted(self, queues: List[str]) -> None:
        """Forget ``queues``, deleted by a committed transaction."""
        for queue in queues:
            self.queues.forget(queue)
            with self._lock:
                self._auto_delete.discard(queue)
