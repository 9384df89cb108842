"""The argument checks Queue's, PriorityQueue's and FairQueue's operations share: an
end, a priority, a batch of leases (TypeError or ValueError naming the argument,
raised before anything is read or written)."""

from __future__ import annotations

from typing import Any, Callable, Iterable, List, Tuple, cast

import fdb.tuple

from .._ordered.front import MAX, MIN
from .._ordered.leases import lease_id
from .._values import MAX_TAKE, check_int, materialize

__all__ = ["check_end", "check_priority", "lease_batch", "reverse_end"]


def check_end(end: Any, group_len: int) -> str:
    """``end`` if it is an end of this kind of structure ("max" needs a priority).

    Raises:
        TypeError or ValueError: otherwise.
    """
    if end not in (MIN, MAX):
        raise ValueError(f"end must be 'min' or 'max', got {end!r}")
    if end == MAX and group_len == 0:
        raise ValueError("end='max' needs a PriorityQueue")
    return cast(str, end)


def reverse_end(reverse: Any) -> str:
    """The end ``items(reverse=...)`` lists from.

    Raises:
        TypeError: ``reverse`` is not a bool.
    """
    if type(reverse) is not bool:
        raise TypeError(f"reverse must be a bool, not {type(reverse).__name__}")
    return MAX if reverse else MIN


def check_priority(priority: Any, name: str = "priority") -> Tuple[int]:
    """The group of a PriorityQueue item: ``(priority,)``, checked."""
    check_int(priority, name)
    try:
        fdb.tuple.pack((priority,))
    except Exception:  # beyond the tuple layer's 255-byte integers
        raise ValueError(f"{name} is too large for the tuple layer") from None
    return (priority,)


def lease_batch(leases: Iterable[Any], check: Callable[[Any, str], Any] = lease_id) -> List[Any]:
    """``leases``, checked: each a Lease or token (``check(lease, its name)``: of a
    Queue's by default), at most :data:`MAX_TAKE`."""
    batch = materialize(leases, "leases")
    for i, lease in enumerate(batch):
        check(lease, f"leases[{i}]")
    if len(batch) > MAX_TAKE:
        raise ValueError(f"leases: at most {MAX_TAKE:,} per call, got {len(batch):,}")
    return batch
