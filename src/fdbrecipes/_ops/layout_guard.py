"""Which layout a structure has, and the check each structure object makes of it.

An unsharded structure (``shards=1``, the default) has layout 1, that of fdbrecipes
before shards, and no marker.  A sharded one (Queue, PriorityQueue or FairQueue made
with ``shards`` > 1) has layout 2: shard 0 at ``S`` exactly as an unsharded structure,
shards 1, 2... under ``S/"l"/(k,)``, and at ``S/"l"`` its :class:`.._layout.Marker`:
(2, kind, shards), written before its first item.

Every structure object reads the marker before its first call (in a read-only
transaction of its own, so it reads committed data, never a caller's uncommitted
write; once it matched, never again) and refuses what is not laid out as it is, with
:class:`~fdbrecipes.LayoutError`, before anything is written:

* a marker of another kind or number of shards, or of a later layout;
* a marker, for an unsharded object;
* no marker for a sharded object when the structure was used unsharded already (its
  wake counter ``S/"n"/("pushed",)`` exists): its pushes would land in shards the
  unsharded clients never read.

A sharded object's first call that writes writes the marker when there is none yet, in
the call's transaction (the caller's, or its own), reading the marker and the wake
counter with conflicts: a first push of an unsharded client, or a marker of another
sharded client, committed meanwhile makes it retry and refuse.  Clients that cannot
check (fdbrecipes before shards) see shard 0 alone: what they push lands in shard 0,
where every client takes it, and what they take is taken once; only their counts and
listings leave the other shards out.
"""

from __future__ import annotations

from typing import Any, Optional, TypeVar

from fdb.subspace_impl import Subspace

from .._attempt import Attempt
from .._fdb import Gen, Transactor, is_transaction, read, snap
from .._layout import SHARDED, Marker
from .._retry import RetryLoop
from .._retry import read as read_op
from ..errors import LayoutError

__all__ = ["LayoutGuard"]

T = TypeVar("T")


class LayoutGuard:
    """The layout check of one structure object (see the module docstring).

    Attributes:
        kind: the structure's kind, as the marker names it ("queue",
            "priority-queue", "fair-queue").
        shards: this object's number of shards.
        settled: the stored layout was found to be this object's; nothing is read
            any more.
    """

    __slots__ = ("key", "kind", "settled", "shards", "subspace", "used_key")

    def __init__(self, subspace: Subspace, kind: str, shards: int, used_key: bytes) -> None:
        self.subspace = subspace
        self.kind = kind
        self.shards = shards
        self.key = Marker.key(subspace)
        self.used_key = used_key  # S/"n"/("pushed",): there once anything was pushed
        self.settled = False

    def judge(self, raw: Optional[bytes], used: bool) -> bool:
        """Whether the structure, whose marker is ``raw`` (None: none) and which was
        ``used`` (something was pushed), is laid out as this object for good; False
        while a sharded object meets a fresh structure (its first push writes the
        marker).

        Raises:
            LayoutError: it is laid out otherwise (see the module docstring).
        """
        where = f"the structure at {self.subspace!r}"
        if raw is None:
            if self.shards == 1:
                return True
            if used:
                raise LayoutError(
                    f"{where} is unsharded (made with shards=1, or by fdbrecipes before "
                    f"shards): it cannot be opened with shards={self.shards}; move its "
                    "items into a new structure to shard them")
            return False
        found = Marker.unpack(raw)
        if found.version != SHARDED:
            raise LayoutError(f"{where} has layout {found.version}, which this fdbrecipes "
                              "does not know: upgrade fdbrecipes")
        if (found.kind, found.shards) != (self.kind, self.shards):
            raise LayoutError(
                f"{where} is a {found.kind} with shards={found.shards}: open it so "
                f"(this object is a {self.kind} with shards={self.shards})")
        return True

    def check(self, tr: Any) -> Gen[None]:
        """Read the marker (and, for a sharded object, whether the structure was used)
        by snapshot; settle if they agree with this object (``tr``: a transaction of
        the guard's own, which sees only committed data).

        Raises:
            LayoutError: they do not.
        """
        reader = snap(tr)
        marker = reader.get(self.key)
        used = None if self.shards == 1 else reader.get(self.used_key)
        raw = yield from read(marker)
        was_used = used is not None and (yield from read(used)) is not None
        if self.judge(raw, was_used):
            self.settled = True

    def ensure(self, tr: Any, attempt: Attempt) -> Gen[None]:
        """Write this sharded object's marker if the structure is fresh (the marker and
        the wake counter read with conflicts: a concurrent first push or marker makes
        this transaction conflict).

        Raises:
            LayoutError: the structure is laid out otherwise.
        """
        marker, used = tr.get(self.key), tr.get(self.used_key)
        raw = yield from read(marker)
        if self.judge(raw, (yield from read(used)) is not None):
            attempt.idle = True  # written meanwhile: the next call's check settles
            return
        tr.set(self.key, Marker(SHARDED, self.kind, self.shards).pack())

    def guarded(self, tr: Transactor, loop: RetryLoop, op: Gen[T],
                writes: bool = False) -> Gen[T]:
        """``op`` (an operation of this object's call given ``tr``), after the check
        if the layout is not settled yet (one round trip, in a transaction of its own)
        and, for a call of a sharded object that ``writes`` to a fresh structure, the
        marker written (in ``tr``, or a transaction of ``loop``'s).  A marker written
        in a caller's transaction settles nothing: that transaction may not commit,
        and the next call checks again."""
        if self.settled:
            return op
        return self.first(tr, loop, op, writes)

    def first(self, tr: Transactor, loop: RetryLoop, op: Gen[T], writes: bool) -> Gen[T]:
        """The check, then ``op`` (see :meth:`guarded`)."""
        yield from read_op(getattr(tr, "db", tr), self.check)  # committed data only
        if not self.settled and writes and self.shards > 1:
            yield from loop.idempotent(tr, self.ensure)
            if not is_transaction(tr):
                self.settled = True  # its own transaction committed
        return (yield from op)
