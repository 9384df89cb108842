"""Exchanges and bindings, kept in the cluster so every process routes alike.

kombu's virtual transports keep exchanges and bindings in each process's memory, so a
publisher only reaches queues it declared itself; a fanout (Celery's remote control)
or topic exchange (its events) must see the bindings other processes made.  Layout
under the transport's directory ``D``:

* ``D/"x"/exchange``: the exchange's type (``direct``, ``topic``, ``fanout``);
* ``D/"bx"/(exchange, queue, routing_key)`` and ``D/"bq"/(queue, exchange,
  routing_key)``: a binding, found by exchange (routing) and by queue (deleting);
* ``D/"v"``: a counter every change of bindings adds to (atomic, conflict-free).

A publisher caches each exchange's bindings with the counter it read them at, and its
publish reads the counter again (1 snapshot read, in the publish's own transaction,
before its pushes): a binding committed before a publish starts is always seen, and an
unchanged table costs one key read, no transaction of its own.
"""

from __future__ import annotations

import struct
import threading
from typing import Any, Callable, Dict, List, NamedTuple, Optional, Tuple, TypeVar

from .._database import transact

__all__ = ["Binding", "Routing"]

T = TypeVar("T")

_ONE = struct.pack("<q", 1)

#: ``(routing_key, queue)`` for every binding of an exchange.
Rows = List[Tuple[str, str]]


class Binding(NamedTuple):
    """A queue bound to an exchange with a routing key."""

    exchange: str
    queue: str
    routing_key: str


class _Table(NamedTuple):
    version: Optional[bytes]
    rows: Rows


class Routing:
    """The exchanges and bindings of one transport directory (one per process and
    directory)."""

    def __init__(self, db: Any, root: Any) -> None:
        self.db = db
        self._types = root.subspace(("x",))
        self._by_exchange = root.subspace(("bx",))
        self._by_queue = root.subspace(("bq",))
        self._version = root.pack(("v",))
        self._tables: Dict[str, _Table] = {}
        self._known_types: Dict[str, str] = {}
        self._lock = threading.Lock()

    # -- exchanges -----------------------------------------------------------------------

    def declare_exchange(self, name: str, type_: str) -> None:
        """Record that ``name`` is an exchange of ``type_``, unless it is already
        (the first declaration's type stays).  Cost: 1 read, a write the first time."""
        if self.exchange_type(name) is None:
            transact(self.db, self._declare_exchange, name, type_)
            with self._lock:
                self._known_types.pop(name, None)

    def _declare_exchange(self, tr: Any, name: str, type_: str) -> None:
        if not tr[self._types.pack((name,))].present():
            tr[self._types.pack((name,))] = type_.encode()

    def exchange_type(self, name: str) -> Optional[str]:
        """The type ``name`` was declared with, or None.  Read once per process."""
        with self._lock:
            known = self._known_types.get(name)
        if known is not None:
            return known
        raw = self.db[self._types.pack((name,))]
        if raw is None:
            return None
        with self._lock:
            self._known_types[name] = bytes(raw).decode()
        return self._known_types[name]

    def delete_exchange(self, tr: Any, name: str) -> None:
        """Remove ``name`` and its bindings in ``tr``.  Range clears, O(1)."""
        tr.clear(self._types.pack((name,)))
        for binding in self._bindings(tr, self._by_exchange, name):
            self._clear(tr, binding)
        tr.add(self._version, _ONE)
        with self._lock:
            self._known_types.pop(name, None)

    # -- bindings ------------------------------------------------------------------------

    def bind(self, binding: Binding) -> None:
        """Store ``binding`` (nothing when it exists).  Cost: 1 read, 1 write."""
        transact(self.db, self._bind, binding)

    def _bind(self, tr: Any, b: Binding) -> None:
        key = self._by_exchange.pack(b)
        if not tr[key].present():
            tr[key] = b""
            tr[self._by_queue.pack((b.queue, b.exchange, b.routing_key))] = b""
            tr.add(self._version, _ONE)

    def unbind(self, binding: Binding) -> None:
        """Remove ``binding``.  Cost: 1 round trip."""
        transact(self.db, self._unbind, binding)

    def _unbind(self, tr: Any, b: Binding) -> None:
        self._clear(tr, b)
        tr.add(self._version, _ONE)

    def _clear(self, tr: Any, b: Binding) -> None:
        tr.clear(self._by_exchange.pack(b))
        tr.clear(self._by_queue.pack((b.queue, b.exchange, b.routing_key)))

    def drop_queue(self, tr: Any, queue: str) -> None:
        """Remove every binding of ``queue`` in ``tr`` (it is being deleted).  Reads
        the queue's bindings (one range read)."""
        for q, exchange, routing_key in self._rows(tr, self._by_queue, queue):
            self._clear(tr, Binding(exchange, q, routing_key))
        tr.add(self._version, _ONE)

    def _rows(self, tr: Any, subspace: Any, first: str) -> List[Tuple[str, str, str]]:
        r = subspace.range((first,))
        return [subspace.unpack(kv.key) for kv in tr.get_range(r.start, r.stop)]

    def _bindings(self, tr: Any, subspace: Any, exchange: str) -> List[Binding]:
        return [Binding(*row) for row in self._rows(tr, subspace, exchange)]

    def table(self, exchange: str) -> Rows:
        """``(routing_key, queue)`` for every binding of ``exchange``, as of now (see
        :meth:`deliver`).  Cost: 1 round trip (2 when the table changed)."""
        return transact(self.db, self.deliver, exchange, _rows)

    def deliver(self, tr: Any, exchange: str, send: Callable[[Any, Rows], T]) -> T:
        """``send(tr, rows)`` with ``exchange``'s bindings as of ``tr``'s read
        version: the cached table while the change counter is the one it was read
        at, else the table read in ``tr`` (then cached).  The routing is settled
        before ``send`` runs, so nothing is pushed to a queue the bindings no longer
        name (a push to an unknown queue declares it).  Reads the counter, and the
        table when it changed, by snapshot (no conflicts).  Cost: 1 round trip (the
        counter) when the table is unchanged, 2 when it changed; then ``send``'s."""
        version = tr.snapshot[self._version]
        with self._lock:
            cached = self._tables.get(exchange)
        if cached is None or cached.version != (bytes(version) if version.present() else None):
            cached = self._read_table(tr, exchange)
            with self._lock:
                self._tables[exchange] = cached
        return send(tr, cached.rows)

    def _read_table(self, tr: Any, exchange: str) -> _Table:
        version = tr.snapshot[self._version]
        rows = [(b.routing_key, b.queue) for b in self._bindings(tr.snapshot,
                                                                 self._by_exchange, exchange)]
        return _Table(bytes(version) if version.present() else None, rows)


def _rows(tr: Any, rows: Rows) -> Rows:
    return rows
