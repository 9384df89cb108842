"""The key layout of every structure, written once.

docs/data-model.md draws these; every key a structure writes is named here.  A
structure lives in one subspace ``S`` and never writes outside it.  Short names keep
keys small.  Counters are little-endian int64 changed only by atomic operations.
"""

from __future__ import annotations

from typing import Any, Optional, Tuple

from fdb.subspace_impl import Subspace

__all__ = ["OrderedLayout", "TreeLayout"]

#: An item of a Queue or PriorityQueue: ``group + (seq, random)``, then
#: ``(deliveries, id)`` when it has metadata.  The group is ``()`` for a Queue and
#: ``(priority,)`` for a PriorityQueue.
Item = Tuple[Any, ...]


class OrderedLayout:
    """Keys of a Queue (``group_len`` 0) or PriorityQueue (``group_len`` 1)::

        S/"i"/(*g, seq, random[, deliveries, id]) = value    items, in order
        S/"n"                                     = int64    size (atomic ADD)
        S/"w"                                     = int64    wake counter, touched by pushes
        S/"f"                                     = int64    floor: highest seq ever held
        S/"h"/(lease_id, item, deadline, kind)    = value    held items (leases, pop results)
        S/"d"/(deadline, lease_id, item, kind)    = ''       holds by deadline
        S/"r"/(end, ticket, request_id)           = int64    waiting high-contention pops
        S/"k"/(id,), S/"g"/(expiry, id)                      idempotency ids (see _ids)
        S/"c"/(version, call id)                  = int      commit receipts (see _receipts)
    """

    __slots__ = ("count_key", "due", "floor_key", "g", "held", "items", "requests",
                 "subspace", "wake_key")

    def __init__(self, subspace: Subspace, group_len: int) -> None:
        self.subspace = subspace
        self.g = group_len
        self.items = subspace["i"]
        self.held = subspace["h"]
        self.due = subspace["d"]
        self.requests = subspace["r"]
        self.count_key = bytes(subspace.pack(("n",)))
        self.wake_key = bytes(subspace.pack(("w",)))
        self.floor_key = bytes(subspace.pack(("f",)))

    # -- item tuples -----------------------------------------------------------------

    def seq(self, item: Item) -> int:
        """The sequence number of an item (its push order within its group)."""
        seq: int = item[self.g]
        return seq

    def meta(self, item: Item) -> Tuple[int, Optional[bytes]]:
        """(previous deliveries, id) of an item tuple."""
        if len(item) == self.g + 2:
            return 0, None
        return item[self.g + 2], item[self.g + 3]

    def with_deliveries(self, item: Item, deliveries: int) -> Item:
        """The item tuple with its delivery count set (its place is unchanged)."""
        _, id_ = self.meta(item)
        return item[: self.g + 2] + (deliveries, id_)

    def item_key(self, item: Item) -> bytes:
        """The key of a visible item."""
        return bytes(self.items.pack(item))

    def held_key(self, lease_id: bytes, item: Item, deadline: int, kind: int) -> bytes:
        """The key of an item under a hold."""
        return bytes(self.held.pack((lease_id, item, deadline, kind)))

    def due_key(self, lease_id: bytes, item: Item, deadline: int, kind: int) -> bytes:
        """The key indexing a hold by its deadline."""
        return bytes(self.due.pack((deadline, lease_id, item, kind)))

    def request_key(self, end: int, ticket: int, request_id: bytes) -> bytes:
        """The key of a waiting high-contention pop."""
        return bytes(self.requests.pack((end, ticket, request_id)))


class TreeLayout:
    """Keys of a WeightTree::

        S/"w"/(seq, random)  = int64 weight [+ id]   one per item: the leaves
        S/"v"/(seq, random)  = value                 the item's value
        S/"s"/(level, index) = int64 sum             node ``index`` at ``level`` covers
                                                     seq in [index*64**level, (index+1)*64**level)
        S/"t" = int64 total weight, S/"n" = int64 item count, S/"z" = wake counter
        S/"k"/(id,), S/"g"/(expiry, id)              idempotency ids (see _ids)
        S/"c"/(version, call id) = int               commit receipts (see _receipts)
    """

    __slots__ = ("count_key", "leaves", "nodes", "subspace", "total_key", "values",
                 "wake_key")

    def __init__(self, subspace: Subspace) -> None:
        self.subspace = subspace
        self.leaves = subspace["w"]
        self.values = subspace["v"]
        self.nodes = subspace["s"]
        self.total_key = bytes(subspace.pack(("t",)))
        self.count_key = bytes(subspace.pack(("n",)))
        self.wake_key = bytes(subspace.pack(("z",)))
