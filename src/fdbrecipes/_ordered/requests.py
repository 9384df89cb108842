"""What a push call of Queue or PriorityQueue asks the engine (:mod:`.engine`) to store:
its items, id, delay, made ids, time limit, unique key and sequence, checked."""

from __future__ import annotations

from typing import List, NamedTuple, Optional, Sequence, Tuple

from .._layout import Item
from .sequences import SequencePush
from .unique import UniquePush

__all__ = ["PushRequest"]


class PushRequest(NamedTuple):
    """One push call's items: ``(group, encoded value)`` pairs, its idempotency id
    (None: none), its delay in clock units (0: none), the ids made for its items (a
    structure with job records: one per item, when no id was given; a unique job's
    id; a sequence's job's), its jobs' time limit (seconds, or None), its unique key
    and its sequence (one item each)."""

    batch: Sequence[Tuple[Item, bytes]]
    id: Optional[bytes]
    delay: int
    ids: Tuple[bytes, ...] = ()
    time_limit: Optional[float] = None
    unique: Optional[UniquePush] = None
    sequence: Optional[SequencePush] = None

    def item_id(self, i: int) -> Optional[bytes]:
        """The id of item ``i`` of the batch, or None."""
        return self.id if self.id is not None else (self.ids[i] if self.ids else None)

    def made(self) -> bool:
        """Whether its ids were made for its items (no id given, no unique key, no
        sequence: see ``OrderedLayout.made``)."""
        return self.id is None and self.unique is None and self.sequence is None

    def plain(self) -> bool:
        """Whether its items carry no id (none given, none made, no unique key, no
        sequence): nothing to read but the tail, nothing to write but the items (see
        :meth:`.engine.Ordered.push_plain`)."""
        return self.id is None and not self.ids and self.unique is None and self.sequence is None

    def job_ids(self) -> List[bytes]:
        """The ids of its items (given or made)."""
        return [self.id] if self.id is not None else list(self.ids)

    def answer(self) -> Optional[bytes]:
        """What a push of one item returns: its id (with a unique key, the id of the
        job holding the key: see :meth:`.unique.UniquePush.answer`, which may raise)."""
        return self.item_id(0) if self.unique is None else self.unique.answer()

    def size(self) -> int:
        """About how many bytes of writes it makes (for shared transactions)."""
        return sum(len(value) + 100 for _, value in self.batch)
