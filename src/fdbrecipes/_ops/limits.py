"""A limit store's checked calls: :class:`LimitsOps`, the operations object of
:class:`fdbrecipes.Limits` and its async twin.

Every call checks its arguments before anything is read or written (a TypeError or
ValueError naming the argument), then hands the store's transaction (:mod:`.store`)
to the retry loop: given a Transaction it runs there, given a Database or Tenant in a
loop of its own, with commit receipts (see :mod:`fdbrecipes._retry`).
"""

from __future__ import annotations

from typing import Any, Dict, List, Optional

import fdb.tuple

from .._clock import database_clock
from .._fdb import Gen, Transactor
from .._limits.specs import CostOf, KeyOf, Limit, LimitUse, check_limit_spec, check_name, check_use
from .._limits.store import LimitState, LimitTotals, Store
from .._retry import read
from .._store_layout import LimitLayout
from .._values import check_clock, check_int, check_subspace
from .base import Ops

__all__ = ["LimitsOps"]


def check_key(key: Any) -> Any:
    """A limit's key: None (global) or a tuple-encodable value."""
    try:
        fdb.tuple.pack((key,))
    except Exception:
        raise TypeError(f"key must be None or a tuple-encodable value (str, bytes, int or "
                        f"a tuple of them), not {type(key).__name__}") from None
    return key


class LimitsOps(Ops):
    """What :class:`fdbrecipes.Limits` runs (see the module docstring)."""

    def __init__(self, subspace: Any, clock: Any = None) -> None:
        subspace = check_subspace(subspace)
        super().__init__(subspace)
        self.keys = LimitLayout(subspace)
        self.store = Store(self.keys, check_clock(clock) or database_clock)

    def use(self, name: Any, key: Optional[KeyOf], cost: CostOf) -> LimitUse:
        """A checked use of limit ``name`` (see :class:`.specs.LimitUse`)."""
        return check_use(LimitUse(check_name(name), key, cost, self.subspace), "use")

    def set(self, tr: Transactor, name: Any, limit: Any) -> Gen[Optional[Limit]]:
        """Define or change limit ``name``; the definition it replaced."""
        checked = check_limit_spec(limit)
        return self.loop(tr, self.store.set, check_name(name), checked)

    def delete(self, tr: Transactor, name: Any) -> Gen[Limit]:
        """Forget limit ``name`` (ValueError if there is none); its definition."""
        return self.loop(tr, self.store.delete, check_name(name))

    def get(self, tr: Transactor, name: Any) -> Gen[Optional[Limit]]:
        """Limit ``name``, or None."""
        return read(tr, self.store.get, check_name(name))

    def list(self, tr: Transactor) -> Gen[Dict[str, Limit]]:
        """Every limit, by name."""
        return read(tr, self.store.definitions)

    def state(self, tr: Transactor, name: Any, key: Any) -> Gen[Optional[LimitState]]:
        """What key ``key`` of limit ``name`` holds now."""
        return read(tr, self.store.state, check_name(name), check_key(key))

    def totals(self, tr: Transactor, cap: Any = None) -> Gen[List[LimitTotals]]:
        """Each limit with its jobs running and parked (for the metrics, and the
        dashboard: ``cap``, the keys each count reads at most; None: all).

        Raises:
            TypeError or ValueError: ``cap`` is not None or an int >= 1.
        """
        return read(tr, self.store.totals, None if cap is None else check_int(cap, "cap", low=1))

    def version(self, tr: Transactor) -> Gen[int]:
        """The change counter."""
        return read(tr, self.store.version)
