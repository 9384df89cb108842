"""A schedule store's checked calls: :class:`ScheduleOps`, the operations object of
:class:`fdbrecipes.Schedules` and its async twin.

Every call checks its arguments before anything is read or written (a TypeError or
ValueError naming the argument), then hands the store's transaction (:mod:`.store`)
to the retry loop: given a Transaction it runs there, given a Database or Tenant in a
loop of its own, with commit receipts (see :mod:`fdbrecipes._retry`).
"""

from __future__ import annotations

import os
import time
from typing import Any, Dict, Iterable, List, Optional, Tuple

from .._fdb import Gen, Transactor
from .._ops.base import Ops
from .._retry import read, read_pages
from .._values import (
    MAX_DELAY,
    check_bool,
    check_int,
    check_limit,
    check_seconds,
    check_subspace,
    check_timeout,
    encode_value,
)
from .._waiting import Wake, wait_until_ready
from ..protocol import Workable, workable
from .cron import Cron, Every, Rule
from .records import SKIP, CatchUp, Definition, ScheduleInfo, now_job_id, slot_job_id
from .store import Entry, Store

__all__ = ["DEFAULT_GRACE", "DEFAULT_RECENT", "MAX_NAME", "MAX_STORED_VALUE", "ScheduleOps",
           "Stored", "check_name", "check_rule", "check_target", "check_timing"]

#: Longest schedule name, in characters.
MAX_NAME = 200
#: Largest value a stored schedule pushes, encoded (its definition is one key).
MAX_STORED_VALUE = 90_000
#: Seconds a slot may be late and still fire as on time, unless a schedule says.
DEFAULT_GRACE = 60.0
#: Latest fires each schedule keeps, unless the store says.
DEFAULT_RECENT = 10


def check_name(name: Any) -> str:
    """A schedule's name: a non-empty str of at most :data:`MAX_NAME` characters."""
    if type(name) is not str:
        raise TypeError(f"name must be a str, not {type(name).__name__}")
    if not 0 < len(name) <= MAX_NAME:
        raise ValueError(f"name must be 1 to {MAX_NAME} characters, got {len(name)}")
    return name


def check_rule(cron: Any, tz: Any, every: Any) -> Rule:
    """The rule of ``cron`` (with ``tz``, default UTC) or ``every``: exactly one.

    Raises:
        TypeError or ValueError: neither or both, an invalid expression, an unknown
            time zone, ``tz`` without ``cron``, a bad period.
        ImportError: ``cron`` without the extra ``fdbrecipes[cron]``.
    """
    if (cron is None) == (every is None):
        raise TypeError("a schedule needs exactly one of cron= and every=")
    if every is not None:
        if tz is not None:
            raise ValueError("tz applies to cron= only (every= counts seconds since the epoch)")
        return Every(check_seconds(every, "every"))
    return Cron(cron, "UTC" if tz is None else tz)


def check_timing(misfire: Any, grace: Any, jitter: Any) -> Tuple[int, float, float]:
    """The misfire policy as a count of slots to catch up (0: ``"skip"``), the grace
    and the jitter (seconds).

    Raises:
        TypeError or ValueError: naming the argument.
    """
    if misfire == SKIP and type(misfire) is str:
        n = 0
    elif isinstance(misfire, CatchUp):
        n = check_int(misfire.n, "misfire", low=1)
    else:
        raise TypeError(f"misfire must be 'skip' or catch_up(n), not {misfire!r}")
    if isinstance(jitter, bool) or not isinstance(jitter, (int, float)):
        raise TypeError(f"jitter must be seconds, not {type(jitter).__name__}")
    if not 0 <= jitter < MAX_DELAY:
        raise ValueError(f"jitter must be >= 0 seconds and finite, got {jitter!r}")
    return n, check_seconds(grace, "grace"), float(jitter)


def check_target(target: Any, name: str, value: Any, where: Dict[str, Any],
                 jitter: float, limit_keys: Any = None) -> Workable[Any]:
    """The operations of ``target``, once a push of ``value`` there (``where``,
    ``limit_keys``) passes its checks.

    Raises:
        TypeError or ValueError: ``target`` is no Queue, PriorityQueue or FairQueue,
            or the push is refused (the value, a priority, a group, ``limit_keys``).
    """
    ops = workable(target, "target")
    ops.push_job(None, value, id=slot_job_id(name, 0.0), delay=jitter or None,
                 limit_keys=limit_keys, **where).close()
    return ops


class Stored:
    """A stored schedule's arguments, checked: its name, definition and pause."""

    __slots__ = ("definition", "name", "paused")

    def __init__(self, name: Any, *, cron: Any, tz: Any, every: Any, target: Any, value: Any,
                 priority: Any, group: Any, misfire: Any, grace: Any, jitter: Any,
                 paused: Any, limit_keys: Any = None) -> None:
        self.name = check_name(name)
        rule = check_rule(cron, tz, every)
        n, grace_s, jitter_s = check_timing(misfire, grace, jitter)
        where = {key: given for key, given in (("priority", priority), ("group", group))
                 if given is not None}
        encoded = encode_value(value, "value", MAX_STORED_VALUE)
        ops = check_target(target, self.name, value, where, jitter_s, limit_keys)
        self.paused = check_bool(paused, "paused")
        self.definition = Definition(
            cron if isinstance(rule, Cron) else None,
            rule.tz if isinstance(rule, Cron) else None,
            rule.seconds if isinstance(rule, Every) else None,
            bytes(ops.subspace.key()), tuple(sorted(where.items())), encoded, n, grace_s,
            jitter_s, time.time(), tuple(sorted((limit_keys or {}).items())))


class ScheduleOps(Ops):
    """The checked calls of a schedule store (see the module docstring).

    Attributes:
        store: its transactions (:class:`.store.Store`).
        targets: the structures its workers may push into besides their own, by the
            key of their subspace.
    """

    def __init__(self, subspace: Any, targets: Iterable[Any] = (),
                 recent: Any = DEFAULT_RECENT) -> None:
        super().__init__(check_subspace(subspace))
        self.store = Store(subspace, check_int(recent, "recent", low=1, high=1_000))
        self.targets: Dict[bytes, Workable[Any]] = {}
        for i, structure in enumerate(targets):
            ops = workable(structure, f"targets[{i}]")
            self.targets[bytes(ops.subspace.key())] = ops

    @property
    def version_key(self) -> bytes:
        """The change counter's key (workers watch it)."""
        return self.store.keys.version

    # -- writing ---------------------------------------------------------------------

    def add(self, tr: Transactor, stored: Stored) -> Gen[bool]:
        """Store a new schedule (a name taken is refused in the transaction)."""
        return self.loop(tr, self.store.add, stored.name, stored.definition, stored.paused,
                         False)

    def upsert(self, tr: Transactor, stored: Stored) -> Gen[bool]:
        """Store a schedule, or change the one of that name to say the same."""
        return self.loop(tr, self.store.add, stored.name, stored.definition, stored.paused,
                         True)

    def pause(self, tr: Transactor, name: Any, paused: Any = True) -> Gen[bool]:
        """Pause (``paused``) or resume schedule ``name``; whether that changed it."""
        return self.loop(tr, self.store.pause, check_name(name), check_bool(paused, "paused"))

    def run_now(self, tr: Transactor, name: Any) -> Gen[bytes]:
        """Ask for a job of schedule ``name`` now; the id it will have."""
        return self.requesting(tr, check_name(name), os.urandom(8))

    def requesting(self, tr: Transactor, name: str, request: bytes) -> Gen[bytes]:
        """The operation of :meth:`run_now`."""
        yield from self.loop(tr, self.store.request, name, request)
        return now_job_id(name, request)

    def remove(self, tr: Transactor, name: Any) -> Gen[bool]:
        """Forget schedule ``name``; whether it existed."""
        return self.loop(tr, self.store.remove, check_name(name))

    # -- reading ---------------------------------------------------------------------

    def list(self, tr: Transactor, limit: Any = None,
             after: Any = None) -> Gen[List[ScheduleInfo]]:
        """The schedules by name, after the name ``after``, up to ``limit``."""
        limit = check_limit(limit)
        if after is not None:
            check_name(after)
        return read_pages(tr, self.listing_page, (after,), limit)

    def listing_page(self, tr: Any, first_after: Optional[str], limit: Optional[int],
                     after: Optional[ScheduleInfo] = None) -> Gen[List[ScheduleInfo]]:
        """One page of :meth:`list`."""
        return self.store.listing(tr, limit or 0, first_after if after is None else after.name)

    def get(self, tr: Transactor, name: Any) -> Gen[Optional[ScheduleInfo]]:
        """Schedule ``name``, or None."""
        return read(tr, self.store.info, check_name(name))

    def version(self, tr: Transactor) -> Gen[int]:
        """The change counter."""
        return read(tr, self.store.version)

    def entries(self, tr: Transactor) -> Gen[List[Entry]]:
        """Every schedule as stored (given a Database, in pages of 1,000, each in a
        transaction of its own)."""
        return read_pages(tr, self.entries_page, (), None)

    def entries_page(self, tr: Any, limit: Optional[int],
                     after: Optional[Entry] = None) -> Gen[List[Entry]]:
        """One page of :meth:`entries`."""
        return self.store.entries(tr, limit or 0, None if after is None else after.name)

    def wait_changed(self, db: Any, known: int, timeout: Any) -> Gen[bool]:
        """Wait on a watch of the change counter until it is not ``known`` (True) or
        ``timeout`` seconds pass (False)."""
        wake = Wake((self.version_key,), self.store.changed, (known,), self.hooks)
        return wait_until_ready(db, check_timeout(timeout), wake)
