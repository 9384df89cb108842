"""What a limit is: its definition, how it is stored, and how a structure uses it.

A :class:`Limit` is ``concurrency(n)`` (at most ``n`` jobs running at once) or
``rate(n, per_seconds)`` (at most ``n`` starts, weighed by their cost, in any window of
``per_seconds``).  A :class:`LimitUse` says which limit a structure's jobs carry and how
a job's key (and, for a rate, its cost) is found from its value.
"""

from __future__ import annotations

import math
import re
from typing import Any, Callable, Dict, NamedTuple, Optional, Sequence, Tuple, Union

import fdb.tuple
from fdb.subspace_impl import Subspace

from .._values import MAX_VALUE_BYTES, check_int, check_matching, encode_value

__all__ = ["CONCURRENCY", "EXEMPT", "GLOBAL", "RATE", "Limit", "LimitUse",
           "check_limit_keys", "check_limit_spec", "check_name", "check_use", "check_uses",
           "concurrency", "decode_limit", "encode_limit", "given_keys", "rate",
           "with_limit_keys"]

CONCURRENCY, RATE = "concurrency", "rate"

#: A limit's name: letters, digits and ``._:-``, 1 to 100 characters.
_NAME = re.compile(r"^[A-Za-z0-9._:-]{1,100}\Z")

#: The largest ``n`` of a limit (a claim reads a concurrency limit's running jobs, and a
#: rate limit's starts in its window, for each key it checks).
MAX_LIMIT = 100_000


class Limit(NamedTuple):
    """A limit's definition.

    Attributes:
        kind: ``"concurrency"`` or ``"rate"``.
        n: at most this many jobs running at once (concurrency), or this much cost
            started in any window of ``per_seconds`` (rate; a job's cost is 1 unless
            its use says otherwise).
        per_seconds: the rate's window, in seconds; None for a concurrency limit.
    """

    kind: str
    n: int
    per_seconds: Optional[float] = None

    def __str__(self) -> str:
        if self.kind == CONCURRENCY:
            return f"concurrency({self.n})"
        return f"rate({self.n}, per_seconds={self.per_seconds:g})"


def concurrency(n: int) -> Limit:
    """A limit of ``n`` jobs running at once (1 to 100,000).

    Raises:
        TypeError or ValueError: ``n`` is not an int in that range.
    """
    return Limit(CONCURRENCY, check_int(n, "n", low=1, high=MAX_LIMIT))


def rate(n: int, per_seconds: float) -> Limit:
    """A limit of ``n`` starts (1 to 100,000, each weighed by its job's cost) in any
    window of ``per_seconds`` seconds (more than 0, at most a day).

    Raises:
        TypeError or ValueError: ``n`` or ``per_seconds`` is out of range (a zero or
            negative window among them).
    """
    count = check_int(n, "n", low=1, high=MAX_LIMIT)
    if isinstance(per_seconds, bool) or not isinstance(per_seconds, (int, float)):
        raise TypeError(f"per_seconds must be a number of seconds, not "
                        f"{type(per_seconds).__name__}")
    window = float(per_seconds)
    if not (math.isfinite(window) and 0 < window <= 86_400.0):
        raise ValueError(f"per_seconds must be more than 0 and at most 86400 (a day), "
                         f"got {per_seconds!r}")
    return Limit(RATE, count, window)


def check_limit_spec(limit: Any) -> Limit:
    """``limit`` if it is a :class:`Limit` made by :func:`concurrency` or :func:`rate`
    (checked again: a NamedTuple can be made by hand)."""
    if not isinstance(limit, Limit):
        raise TypeError(f"limit must be made by fdbrecipes.concurrency() or "
                        f"fdbrecipes.rate(), not {type(limit).__name__}")
    if limit.kind == CONCURRENCY and limit.per_seconds is None:
        return concurrency(limit.n)
    if limit.kind == RATE:
        return rate(limit.n, limit.per_seconds)  # type: ignore[arg-type]
    raise ValueError(f"limit has an unknown kind {limit.kind!r}")


def check_name(name: Any, arg: str = "name") -> str:
    """A limit's name: letters, digits and ``._:-``, 1 to 100 characters."""
    return check_matching(name, arg, _NAME,
                          "a limit name (1 to 100 letters, digits or ._:-)")


def encode_limit(limit: Limit) -> bytes:
    """A definition as stored."""
    packed: bytes = fdb.tuple.pack(tuple(limit))
    return packed


def decode_limit(raw: bytes) -> Optional[Limit]:
    """A stored definition; None if this library cannot read it (a later version's)."""
    parts = fdb.tuple.unpack(raw)
    if len(parts) == 3 and parts[0] in (CONCURRENCY, RATE) and type(parts[1]) is int:
        return Limit(parts[0], parts[1], parts[2])
    return None


#: What a use computes a job's key, or cost, with: a function of the job's value.
KeyOf = Callable[[Any], Any]
CostOf = Union[int, Callable[[Any], int]]


class LimitUse(NamedTuple):
    """A limit a structure's jobs carry (made by :meth:`fdbrecipes.Limits.use`).

    Attributes:
        name: the limit's name in its store.
        key: a function of a job's value giving its key under the limit (a str, bytes,
            int or tuple of them; None: the job is not subject to it); None: one key
            for every job, a global limit.
        cost: what a start weighs against a rate limit: an int, or a function of the
            value giving one (>= 1; a cost above the limit's ``n`` counts as ``n``).
        space: the subspace of the store (:class:`fdbrecipes.Limits`) that keeps it.
    """

    name: str
    key: Optional[KeyOf] = None
    cost: CostOf = 1
    space: Any = None

    def key_of(self, value: Any) -> Any:
        """The job's key under this limit (None: global, or :data:`EXEMPT`).  A key
        function may return :data:`GLOBAL` for the global key (a job of a structure
        whose jobs carry the limit, some keyed and some not)."""
        if self.key is None:
            return None
        found = self.key(value)
        if found is None:
            return EXEMPT
        if found is GLOBAL:
            return None
        try:
            fdb.tuple.pack((found,))
        except Exception:
            raise TypeError(f"the key function of limit {self.name!r} returned "
                            f"{type(found).__name__}, which is not a tuple-encodable "
                            "key (str, bytes, int or a tuple of them)") from None
        return found

    def cost_of(self, value: Any) -> int:
        """The job's cost under this limit (>= 1)."""
        cost = self.cost(value) if callable(self.cost) else self.cost
        if type(cost) is not int or cost < 1:
            raise ValueError(f"the cost of a job under limit {self.name!r} must be an int "
                             f">= 1, got {cost!r}")
        return cost


class _Exempt:
    """The key of a job its use's key function left out (returned None)."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "EXEMPT"


#: A job whose key function returned None: the limit does not apply to it.
EXEMPT: Any = _Exempt()


class _Global:
    """What a key function returns for the global key of its limit."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "GLOBAL"


#: Returned by a key function: the job counts under the limit's global key (the one a
#: use without a key function gives every job).
GLOBAL: Any = _Global()


def check_use(use: Any, arg: str) -> LimitUse:
    """``use`` if it is a LimitUse with a valid name, key and cost."""
    if not isinstance(use, LimitUse):
        raise TypeError(f"{arg} must be made by Limits.use(), not {type(use).__name__}")
    check_name(use.name, f"{arg}.name")
    if use.key is not None and not callable(use.key):
        raise TypeError(f"{arg}.key must be a function of the value or None, not "
                        f"{type(use.key).__name__}")
    if not callable(use.cost):
        check_int(use.cost, f"{arg}.cost", low=1, high=MAX_LIMIT)
    if not isinstance(use.space, Subspace):
        raise TypeError(f"{arg} must be made by Limits.use() (it names no store)")
    return use


def check_uses(limits: Any) -> Tuple[LimitUse, ...]:
    """A structure's ``limits`` argument: None, a LimitUse, or a list or tuple of
    them, all of one store, each name once."""
    if limits is None:
        return ()
    uses = [limits] if isinstance(limits, LimitUse) else limits
    if not isinstance(uses, (list, tuple)):
        raise TypeError(f"limits must be a LimitUse (Limits.use()) or a list of them, not "
                        f"{type(limits).__name__}")
    checked = tuple(check_use(use, f"limits[{i}]") for i, use in enumerate(uses))
    if len({use.space.key() for use in checked}) > 1:
        raise ValueError("limits must all come from one store (one Limits object's "
                         "subspace)")
    if len({use.name for use in checked}) < len(checked):
        raise ValueError("limits names a limit twice")
    return checked



#: The most bytes a key given at push encodes to (it is part of the limit's keys).
MAX_GIVEN_KEY = 1_000

#: The (limit name, key) pairs a job was given at push, as stored after its value.
GivenKeys = Tuple[Tuple[str, Any], ...]


def check_limit_keys(limit_keys: Any, uses: Sequence[LimitUse]) -> GivenKeys:
    """A push's ``limit_keys``: None (or empty), or a dict from the names of limits the
    structure uses (``uses``) to the job's key under each (a str, bytes, int or a
    tuple of them: a value the tuple layer gives back exactly, encoded in at most
    :data:`MAX_GIVEN_KEY` bytes, not None); as stored, in name order.

    Raises:
        TypeError or ValueError: not a dict, a name that is not a str or that no use
            of the structure names, a key that is None, not tuple-encodable (a list
            among them) or too long.
    """
    if limit_keys is None:
        return ()
    if not isinstance(limit_keys, dict):
        raise TypeError(f"limit_keys must be None or a dict from limit names to keys, "
                        f"not {type(limit_keys).__name__}")
    used = {use.name for use in uses}
    out = []
    for name, key in limit_keys.items():
        if not isinstance(name, str):
            raise TypeError(f"limit_keys names must be str (a limit's name), not "
                            f"{type(name).__name__}")
        if name not in used:
            raise ValueError(f"limit_keys names {name!r}, a limit this structure does not "
                             f"use (its limits: {sorted(used) or 'none'})")
        if key is None:
            raise TypeError(f"limit_keys[{name!r}] must be a key (str, bytes, int or a "
                            "tuple of them), not None")
        encode_value(key, f"limit_keys[{name!r}]", MAX_GIVEN_KEY)  # given back exactly
        out.append((name, key))
    return tuple(sorted(out, key=lambda pair: pair[0]))


def with_limit_keys(raw: bytes, keys: GivenKeys, name: str = "value") -> bytes:
    """A stored value ``raw`` (one tuple-packed element) with the keys given at push
    after it, as a second element: every reader of values takes the first element
    only (``decode_value``), so only the limits' gate sees them.

    Raises:
        ValueError: value and keys together pass what FoundationDB stores under one
            key (naming ``name``).
    """
    if not keys:
        return raw
    stored: bytes = raw + fdb.tuple.pack((keys,))
    if len(stored) > MAX_VALUE_BYTES:
        raise ValueError(f"{name} with its limit_keys encodes to {len(stored):,} bytes; "
                         f"FoundationDB stores at most {MAX_VALUE_BYTES:,} bytes per value")
    return stored


def given_keys(parts: Tuple[Any, ...]) -> Dict[str, Any]:
    """The keys given at push of a stored value unpacked as ``parts`` (its value, then,
    if any were given, the (name, key) pairs)."""
    if len(parts) < 2 or type(parts[1]) is not tuple:
        return {}
    return {pair[0]: pair[1] for pair in parts[1]
            if type(pair) is tuple and len(pair) == 2 and type(pair[0]) is str}
