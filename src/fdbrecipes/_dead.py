"""Dead letters: items whose leases ended without ack ``max_deliveries`` times.

They wait under ``x/(died, item, died_at)``, oldest first, out of the order
and out of ``size``, until an operator requeues them (back at the tail, delivery
count reset) or purges them.  See :class:`._ordered.Ordered` for how they get there.
"""

from __future__ import annotations

from typing import Any, List, NamedTuple, Optional

import fdb.tuple

from ._fdb import WANT_ALL, Tally, get_value, read_le64
from ._ordered import Ordered
from ._run import Attempt
from ._values import Value, decode_value

__all__ = ["DeadLetter", "DeadLetters"]

#: Dead letters one transaction moves at most; past it, a call given a Database runs
#: several transactions and one given a Transaction is refused.
DEAD_BATCH = 1_000
#: Value bytes one requeue transaction writes at most.
DEAD_BYTES = 4_000_000


class DeadLetter(NamedTuple):
    """An item that was delivered ``max_deliveries`` times without being acked.

    Attributes:
        value: the item's value.
        deliveries: how many times it was delivered.
        died_at: when it became a dead letter, in seconds since the epoch (the clock
            of the client that moved it).
        token: bytes naming this dead letter.
    """

    value: Value
    deliveries: int
    died_at: float
    token: bytes


class DeadLetters:
    """The dead letters of an :class:`._ordered.Ordered` engine."""

    __slots__ = ("o",)

    def __init__(self, engine: Ordered) -> None:
        self.o = engine

    def _read(self, tr: Any, limit: Optional[int]) -> Any:
        r = self.o.k.dead.range()
        return tr.get_range(r.start, r.stop, limit=limit or 0, streaming_mode=WANT_ALL)

    def letters(self, tr: Any, limit: Optional[int]) -> List[DeadLetter]:
        """The oldest ``limit`` dead letters (all when None), oldest first."""
        out = []
        for kv in self._read(tr, limit):
            died, item, died_at = self.o.k.dead.unpack(kv.key)
            token: bytes = fdb.tuple.pack(("dead", died, self.o.k.place(item)))
            out.append(DeadLetter(decode_value(kv.value), self.o.k.deliveries(item),
                                  died_at, token))
        return out

    def count(self, tr: Any) -> int:
        """The dead-letter counter, by snapshot."""
        return read_le64(get_value(tr.snapshot.get(self.o.k.dead_key)))

    def requeue(self, tr: Any, attempt: Attempt, limit: int) -> int:
        """Push the oldest ``limit`` dead letters back at the tail of their groups, with
        a fresh delivery count (ids kept); the number moved."""
        letters = list(self._read(tr, limit))
        items = [self.o.k.dead.unpack(kv.key)[1] for kv in letters]
        seqs = self.o.next_seqs(tr, {self.o.k.group(item) for item in items})
        now = self.o.clock(tr)
        tally = Tally()
        moved = 0
        size = 0
        for kv, item in zip(letters, items):
            size += len(kv.value)
            if moved and size > DEAD_BYTES:
                break
            tr.clear(kv.key)
            self.o.append(tr, self.o.k.group(item), seqs, kv.value,
                          (0, self.o.k.item_id(item)), now, 0, tally)
            moved += 1
        if moved:
            tally.add(self.o.k.dead_key, -moved)
            tally.add(self.o.k.wake_key, 1)
        tally.write(tr)
        attempt.idle = not moved
        return moved

    def purge(self, tr: Any, attempt: Attempt, limit: int) -> int:
        """Remove the oldest ``limit`` dead letters for good; the number removed.  The
        range read takes a read conflict, so a concurrent new dead letter conflicts."""
        letters = list(self._read(tr, limit))
        now = self.o.clock(tr)
        for kv in letters:
            tr.clear(kv.key)
            self.o.ids.retire(tr, self.o.k.item_id(self.o.k.dead.unpack(kv.key)[1]), now)
        tally = Tally()
        tally.add(self.o.k.dead_key, -len(letters))
        tally.write(tr)
        attempt.idle = not letters
        return len(letters)
