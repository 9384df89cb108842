"""A task's limits: ``@app.task(limits=[limits.use("api", key=customer)])``.

A task's uses are :meth:`fdbrecipes.Limits.use` results whose ``key`` and ``cost``
are functions of the **call's arguments** (called as the task's function would be:
``key(*args, **kwargs)``), not of the item's value.  A call computes them when it is
deferred (before anything is written) and its item carries them, in the clear, as the
envelope's fifth element: ``((name, keyed, key, cost), ...)`` (``keyed`` 0: the global
key; a use whose key function returned None is left out: the call is not subject to
it).  The structure of the task's queue is made with one use per limit name its
tasks carry, whose key and cost read that element (:func:`carried_key`,
:func:`carried_cost`): a claim finds a job's keys without decoding its arguments
(encrypted ones too), and the calls of other tasks of the queue are not subject to
limits they do not carry.  Pure computation: no FoundationDB.
"""

from __future__ import annotations

from functools import partial
from typing import Any, Dict, Iterable, List, Tuple

import fdb.tuple

from .._limits.specs import GLOBAL, LimitUse, check_uses

__all__ = ["carried_cost", "carried_key", "carry", "check_task_limits", "structure_uses"]

#: What a call carries of one limit: its name, whether it is keyed (0: the global
#: key), its key and its cost.
Carried = Tuple[str, int, Any, int]


def check_task_limits(limits: Any, task: str) -> Tuple[LimitUse, ...]:
    """A task's ``limits`` option: a use (:meth:`fdbrecipes.Limits.use`) or a list of
    them, all of one store, each name once.

    Raises:
        TypeError or ValueError: it is not (the message names ``limits`` and the task).
    """
    try:
        return check_uses(limits)
    except (TypeError, ValueError) as e:
        raise type(e)(f"task {task}: {e}") from None


def carry(task: str, uses: Iterable[LimitUse], args: Tuple[Any, ...],
          kwargs: Dict[str, Any]) -> Tuple[Carried, ...]:
    """What a call of the task named ``task``, whose limits are ``uses``, carries of
    them with these arguments.

    Raises:
        TypeError or ValueError: a key function returned what the tuple layer cannot
            encode, or a cost is not an int >= 1 (the message names the limit).
    """
    out: List[Carried] = []
    for use in uses:
        cost = use.cost(*args, **kwargs) if callable(use.cost) else use.cost
        if type(cost) is not int or cost < 1:
            raise ValueError(f"task {task}: the cost of a call under limit "
                             f"{use.name!r} must be an int >= 1, got {cost!r}")
        if use.key is None:
            out.append((use.name, 0, None, cost))
            continue
        key = use.key(*args, **kwargs)
        if key is None:
            continue
        try:
            fdb.tuple.pack((key,))
        except Exception:
            raise TypeError(f"task {task}: the key function of limit {use.name!r} "
                            f"returned {type(key).__name__}, which is not a "
                            "tuple-encodable key (str, bytes, int or a tuple of them)"
                            ) from None
        out.append((use.name, 1, key, cost))
    return tuple(out)


def _entry(name: str, value: Any) -> Any:
    """The entry of limit ``name`` an item's value carries, or None."""
    if type(value) is not tuple or len(value) != 5 or type(value[4]) is not tuple:
        return None
    for entry in value[4]:
        if type(entry) is tuple and len(entry) == 4 and entry[0] == name:
            return entry
    return None


def carried_key(name: str, value: Any) -> Any:
    """A job's key under limit ``name``, from what its item carries: its key,
    :data:`fdbrecipes._limits.specs.GLOBAL`, or None (not subject to it)."""
    entry = _entry(name, value)
    if entry is None:
        return None
    return entry[2] if entry[1] else GLOBAL


def carried_cost(name: str, value: Any) -> int:
    """A job's cost under limit ``name``, from what its item carries (1 if none)."""
    entry = _entry(name, value)
    cost = 1 if entry is None else entry[3]
    return cost if type(cost) is int and cost >= 1 else 1


def structure_uses(carried: Iterable[LimitUse]) -> Tuple[LimitUse, ...]:
    """The uses a queue's structure is made with, for the limits its tasks' calls
    carry (``carried``: every task's ``limits``, in turn): one per limit name,
    reading what each item carries.

    Raises:
        ValueError: the tasks' limits are of several stores.
    """
    uses: Dict[str, LimitUse] = {}
    for use in carried:
        uses.setdefault(use.name, use._replace(key=partial(carried_key, use.name),
                                               cost=partial(carried_cost, use.name)))
    return check_uses(list(uses.values()))
