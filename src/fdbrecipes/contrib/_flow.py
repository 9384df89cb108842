"""Shared limits for the Celery transport and the Dramatiq broker: the options that
name them, the limits they define in a :class:`fdbrecipes.Limits` store, and the uses
each queue's structure is made with (see docs/celery-dramatiq.md, "Limits").

Two scopes of limits, each a mapping of a name to ``{"concurrency": n, "rate": r}``
(either or both):

* a **queue**'s: every message of the queue counts (a global use on the queue's
  structure), limits named ``queue.concurrency:NAME`` and ``queue.rate:NAME``;
* a **task**'s (Celery) or an **actor**'s (Dramatiq): the messages naming it count,
  in whatever queue (a use keyed by the name, on every queue), limits named
  ``task.concurrency:NAME`` and ``task.rate:NAME`` (``actor....`` for Dramatiq).

A rate is Celery's form: ``"10/s"``, ``"100/m"``, ``"1000/h"``, or an int (per
second).  The name a message carries is read from its bytes by the integration's
``name_of`` (a module-level function), and kept beside a chunked message's reference.
The definitions are written when the integration first opens its directory, where
they differ from the stored ones (the options are the truth: a change made with
``fdbrecipes limits set`` lasts until a process opens the store with other options).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache, partial
from typing import Any, Callable, Dict, List, Mapping, Optional, Tuple

from .._limits.specs import check_name
from ..limits import Limit, Limits, LimitUse, concurrency, rate
from ._database import directory, directory_path, transact

__all__ = ["Flow", "FlowSettings", "named", "parse_rate"]

#: A rate as Celery writes it: a count, then per second, minute or hour.
_RATE = re.compile(r"^\s*(\d+)\s*(?:/\s*([smh]))?\s*\Z")
_PER = {"s": 1.0, "m": 60.0, "h": 3600.0, None: 1.0}
#: What a scope's limits may say.
_KINDS = ("concurrency", "rate")

#: A scope's limits as checked: name -> ((kind, Limit), ...).
Specs = Tuple[Tuple[str, Tuple[Tuple[str, Limit], ...]], ...]


def parse_rate(value: Any, option: str) -> Limit:
    """A rate limit from Celery's form: ``"10/s"``, ``"100/m"``, ``"1000/h"``, ``"10"``
    or an int (per second).

    Raises:
        TypeError or ValueError: anything else, naming ``option``.
    """
    if isinstance(value, bool) or not isinstance(value, (int, str)):
        raise TypeError(f"{option} must be a rate such as '10/s', '100/m' or '1000/h', "
                        f"not {type(value).__name__}")
    found = _RATE.match(str(value))
    if found is None or int(found.group(1)) < 1:
        raise ValueError(f"{option} must be a rate such as '10/s', '100/m' or '1000/h' "
                         f"(a whole count >= 1), got {value!r}")
    try:
        return rate(int(found.group(1)), _PER[found.group(2)])
    except (TypeError, ValueError) as e:
        raise ValueError(f"{option}: {e}") from None


def _specs(value: Any, option: str, scope: str) -> Specs:
    """A scope's option, ``{name: {"concurrency": n, "rate": r}}``, checked."""
    if value is None:
        return ()
    if not isinstance(value, Mapping):
        raise TypeError(f"{option} must be a dict of names to limits such as "
                        f"{{'concurrency': 4, 'rate': '10/s'}}, not {type(value).__name__}")
    out = []
    for name, spec in sorted(value.items(), key=_first_str):
        where = f"{option}[{name!r}]"
        if type(name) is not str or not name:
            raise TypeError(f"{option} must map names (non-empty str) to limits, got "
                            f"the key {name!r}")
        if not isinstance(spec, Mapping) or not spec:
            raise TypeError(f"{where} must be a dict such as {{'concurrency': 4, "
                            f"'rate': '10/s'}}, not {spec!r}")
        made = []
        for kind in sorted(spec):
            if kind not in _KINDS:
                raise ValueError(f"{where} has an unknown limit {kind!r} (it takes "
                                 f"'concurrency' and 'rate')")
            if kind == "rate":
                limit = parse_rate(spec[kind], f"{where}['rate']")
            else:
                try:
                    limit = concurrency(spec[kind])
                except (TypeError, ValueError) as e:
                    raise type(e)(f"{where}['concurrency']: {e}") from None
            limit_name = f"{scope}.{kind}:{name}"
            try:
                check_name(limit_name)
            except (TypeError, ValueError):
                raise ValueError(f"{option}: {name!r} cannot name a limit ({limit_name!r} "
                                 "must be 1 to 100 letters, digits or ._:-)") from None
            made.append((limit_name, limit))
        out.append((name, tuple(made)))
    return tuple(out)


def _first_str(item: Tuple[Any, Any]) -> str:
    return str(item[0])


@dataclass(frozen=True)
class FlowSettings:
    """The limits options of an integration, checked (hashable: part of its settings).

    Attributes:
        store: the directory of the :class:`fdbrecipes.Limits` store (None: the
            integration's directory plus ``"limits"``).
        queues: each queue's limits.
        names: each task's (actor's) limits.
        scope: ``"task"`` (Celery) or ``"actor"`` (Dramatiq).
    """

    store: Optional[Tuple[str, ...]] = None
    queues: Specs = ()
    names: Specs = ()
    scope: str = "task"

    @classmethod
    def from_options(cls, store: Any, queues: Any, names: Any, scope: str,
                     names_option: str) -> FlowSettings:
        """Check the options ``limits`` (``store``), ``queue_limits`` (``queues``) and
        ``names_option`` (``names``).

        Raises:
            TypeError or ValueError: an option is wrong (named).
        """
        return cls(None if store is None else directory_path(store, "limits"),
                   _specs(queues, "queue_limits", "queue"),
                   _specs(names, names_option, scope), scope)

    def __bool__(self) -> bool:
        return bool(self.queues or self.names)


def named(name_of: Callable[[Any], Optional[str]], name: str, value: Any) -> Optional[str]:
    """The key of a message under a limit of task (actor) ``name``: ``name`` when
    ``name_of(value)`` is it, else None (the message is not subject to it)."""
    return name if name_of(value) == name else None


class Flow:
    """The limits of one integration's directory: its store, the definitions its
    options make (written when it is opened), and each queue's uses.

    Args:
        db: the database.
        root_path: the integration's directory path (the store defaults to a
            directory ``limits`` in it).
        settings: the options.
        name_of: a module-level function of a message's value (its bytes, or a
            chunked message's ``("blob", id, name)``) giving the task's (actor's) name,
            None when it has none; called by claims, so it must not raise.
    """

    def __init__(self, db: Any, root_path: Tuple[str, ...], settings: FlowSettings,
                 name_of: Callable[[Any], Optional[str]]) -> None:
        self.settings = settings
        self._name_of = name_of
        # a claim asks each named use about each candidate: one decode per message
        self.name_of = lru_cache(maxsize=256)(name_of)
        path = settings.store or (*root_path, "limits")
        self.limits = Limits(directory(db, path))
        wanted = {n: limit for _, made in (*settings.queues, *settings.names)
                  for n, limit in made}
        transact(db, self._define, wanted)
        named_uses: List[LimitUse] = []
        for name, made in settings.names:
            key = partial(named, self.name_of, name)
            named_uses.extend(self.limits.use(n, key=key) for n, _ in made)
        self._named = tuple(named_uses)
        self._queues = dict(settings.queues)

    def _define(self, tr: Any, wanted: Dict[str, Limit]) -> None:
        """Set each wanted definition that differs from the stored one."""
        for name, limit in wanted.items():
            if self.limits.get(tr, name) != limit:
                self.limits.set(tr, name, limit)

    def uses(self, queue: str) -> Tuple[LimitUse, ...]:
        """The uses the structure of ``queue`` is made with: its own limits (global),
        then every task's (actor's)."""
        own = tuple(self.limits.use(n) for n, _ in self._queues.get(queue, ()))
        return own + self._named

    def label(self, payload: bytes) -> Optional[str]:
        """The name a message carries (kept beside a chunked message's reference)."""
        return self._name_of(payload)
