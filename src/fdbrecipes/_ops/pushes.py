"""The checks of a Queue's or PriorityQueue's push call: :class:`PushChecks` turns its
arguments into a checked :class:`.._ordered.requests.PushRequest` (TypeError or
ValueError before anything is written), which :class:`.ordered.OrderedOps` hands to the
engine (:meth:`.._ordered.engine.Ordered.push`)."""

from __future__ import annotations

from typing import Any, List, Optional, Sequence, Tuple

from .._layout import Item, OrderedLayout
from .._limits.specs import LimitUse, check_limit_keys, with_limit_keys
from .._ordered.requests import PushRequest
from .._ordered.sequences import ID_HEAD as SEQUENCE_ID_HEAD
from .._ordered.sequences import SequencePush, check_sequence
from .._ordered.unique import ID_HEAD as UNIQUE_ID_HEAD
from .._ordered.unique import UniquePush, check_unique
from .._records.history import check_time_limit, made_ids
from .._values import check_batch_bytes, check_delay, check_key, push_bytes

__all__ = ["PushChecks"]


class PushChecks:
    """One structure's push checks: its limits (``uses``), its ``history`` (None:
    no job records), its number of ``shards``, the length of its prefix and the layout
    of its longest-prefixed shard (``longest``: what an item key with a given id must
    fit)."""

    def __init__(self, uses: Sequence[LimitUse], history: Optional[float], shards: int,
                 prefix: int, longest: OrderedLayout) -> None:
        self.uses, self.history, self.shards = uses, history, shards
        self.prefix, self.longest = prefix, longest

    def request(self, batch: List[Tuple[Item, bytes]], id_: Optional[bytes], delay: Any,
                name: str, time_limit: Any = None, unique: Any = None,
                sequence: Any = None, limit_keys: Any = None) -> PushRequest:
        """A checked push of ``batch`` ((group, encoded value) pairs; ``name``: the
        argument it came from), refused if it cannot fit in a transaction.  A
        structure with job records makes an id for every item pushed without one; a
        push with a ``unique`` key or a ``sequence`` (one item) makes its job's id (see
        :mod:`.._ordered.unique`, :mod:`.._ordered.sequences`).  ``limit_keys``: the
        jobs' keys under the structure's limits, stored after each value (see
        :func:`.._limits.specs.with_limit_keys`)."""
        if (id_ is None and time_limit is None and unique is None and sequence is None
                and limit_keys is None):  # the common push: only its delay to check
            return self.sized(batch, None, check_delay(delay), None,
                              made_ids(len(batch), None, self.history), name)
        keyed = check_limit_keys(limit_keys, self.uses)
        batch = [(group, with_limit_keys(value, keyed, name)) for group, value in batch]
        versions = check_delay(delay)
        limit = check_time_limit(time_limit, self.history)
        spec, token = check_unique(unique), check_sequence(sequence)
        for head, what in ((UNIQUE_ID_HEAD, "unique jobs"), (SEQUENCE_ID_HEAD, "sequences' jobs")):
            if id_ is not None and id_.startswith(head):
                raise ValueError(f"id must not begin with {head!r}: the ids of {what}, "
                                 "made by push")
        given = [option for option, value in
                 (("unique", spec), ("sequence", token), ("id", id_)) if value is not None]
        if len(given) > 1:
            raise ValueError(f"{' and '.join(given)} cannot be given together: a unique "
                             "job's id, and a sequence's job's, is made by push")
        if given[:1] in (["unique"], ["sequence"]) and self.shards > 1:
            raise ValueError(f"{given[0]} needs an unsharded structure (shards=1)")
        pushing = None if spec is None else UniquePush(spec)
        queued = None if token is None else SequencePush(token)
        made = (pushing.id,) if pushing is not None else (
            (queued.id,) if queued is not None else made_ids(len(batch), id_, self.history))
        if id_ is not None:  # the id becomes part of the item's key
            group = batch[0][0]
            check_key(self.longest.item_key(group + (2**64, bytes(20), 2**32, id_, 2**64)),
                      "id")
        return self.sized(batch, id_, versions, limit, made, name, pushing, queued)

    def sized(self, batch: List[Tuple[Item, bytes]], id_: Optional[bytes], delay: int,
              time_limit: Optional[float], made: Tuple[bytes, ...], name: str,
              unique: Optional[UniquePush] = None,
              sequence: Optional[SequencePush] = None) -> PushRequest:
        """The request of checked arguments, refused if its writes cannot fit in a
        transaction (``name``: the argument the batch came from)."""
        sample = id_ if id_ is not None else (made[0] if made else None)
        check_batch_bytes(sum(push_bytes(self.prefix, group, value, sample)
                              for group, value in batch), len(batch), name)
        return PushRequest(batch, id_, delay, made, time_limit, unique, sequence)
