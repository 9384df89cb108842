"""The tokens that name the rows of a queue's listings, and where a listing goes on
after one (its cursor).

Every row a listing returns carries a ``token`` (bytes, tuple-encoded, opaque to the
caller): a :class:`fdbrecipes.PendingItem`'s, a :class:`fdbrecipes.DelayedItem`'s, a
:class:`fdbrecipes.LeaseInfo`'s (its lease's), a :class:`fdbrecipes.DeadLetter`'s, a
:class:`fdbrecipes.FinishedJob`'s.  Given back as ``after=``, it names the place in
the listing's order where the next page starts: paging is by key, never by offset, so
a page costs the same on the first or the millionth row, and rows that come and go
meanwhile neither repeat nor shift the pages after them.  A token keeps what fixes its
row's place (see :class:`.._layout.OrderedLayout`)::

    pending:   ("p", *place)                  place = (*group, seq, random)
    delayed:   ("d", deadline, place)         the hold's deadline, a clock reading
    dead:      ("dead", died, place)          when it died (a clock reading)
    finished:  ("f", expires_at, *where, id[, n])  the key of the index of finished
                                              records that names it (n: its n-th
                                              entry after the key's own)

Parsing checks every element's type and the token's size, so a token from anywhere
(a URL) either names a place inside the listing's own range or raises ValueError.
"""

from __future__ import annotations

from typing import Any, Callable, List, NamedTuple, Optional, Tuple, TypeVar

import fdb.tuple

from .._values import materialize, unpack_token

T = TypeVar("T")

__all__ = ["MAX_TOKEN_BYTES", "MOST_NAMED", "IndexPlace", "TimedPlace", "after_key",
           "check_place", "dead_token", "delayed_token", "finished_token", "optional",
           "parse_dead", "parse_delayed", "parse_finished", "parse_pending", "parse_removable",
           "parse_tokens", "pending_token"]

#: The longest token accepted (an id of 1,000 bytes and a group of 1,000 fit).
MAX_TOKEN_BYTES = 2_500
#: Rows one call names by their tokens at most (one transaction).
MOST_NAMED = 1_000
#: The longest random part of an item's place (the library writes 20 bytes).
RANDOM_BYTES = 64


def _pack(parts: Tuple[Any, ...]) -> bytes:
    packed: bytes = fdb.tuple.pack(parts)
    return packed


def pending_token(place: Tuple[Any, ...]) -> bytes:
    """The token of a visible item at ``place``."""
    return _pack(("p", *place))


def delayed_token(deadline: int, place: Tuple[Any, ...]) -> bytes:
    """The token of an item delayed until ``deadline``, at ``place``."""
    return _pack(("d", deadline, place))


def dead_token(died: int, place: Tuple[Any, ...]) -> bytes:
    """The token of a dead letter that died at ``died``, of the item at ``place``."""
    return _pack(("dead", died, place))


class IndexPlace(NamedTuple):
    """Where a finished job is named in the index of finished records: the key that
    names it, as its own entry ``(expires_at, *where, id)``, and which of the key's
    entries it is (0: the key's own; see ``_records.records.index_entries``)."""

    entry: Tuple[Any, ...]
    at: int = 0


def finished_token(place: IndexPlace) -> bytes:
    """The token of the finished job at ``place`` in the index of finished records:
    ``("f", *entry)``, and the entry's number after it when it is not the key's own."""
    return _pack(("f", *place.entry, *((place.at,) if place.at else ())))


def _parts(token: Any, name: str, tag: str) -> Tuple[Any, ...]:
    parts = unpack_token(token, name, "a token of this listing (bytes)")
    if parts is None or len(token) > MAX_TOKEN_BYTES or not parts or parts[0] != tag:
        raise ValueError(f"{name} is not a token of this listing")
    return parts[1:]


def _is_int(value: Any) -> bool:
    return type(value) is int


def check_place(place: Any, group_len: int, name: str) -> Tuple[Any, ...]:
    """``place`` if it is an item's place in a structure whose groups have
    ``group_len`` elements (``(*group, seq, random)``: ints, then bytes).

    Raises:
        ValueError: otherwise (naming ``name``).
    """
    if (type(place) is not tuple or len(place) != group_len + 2
            or not all(_is_int(p) for p in place[:-1]) or type(place[-1]) is not bytes
            or not 0 < len(place[-1]) <= RANDOM_BYTES):
        raise ValueError(f"{name} is not a token of this listing")
    return place


def parse_pending(token: Any, group_len: int, name: str = "after") -> Tuple[Any, ...]:
    """The place a pending item's token names.

    Raises:
        TypeError: not bytes.
        ValueError: not a pending item's token of a structure like this one.
    """
    return check_place(_parts(token, name, "p"), group_len, name)


class TimedPlace(NamedTuple):
    """What a delayed item's or a dead letter's token names: a clock reading (when the
    delay ends, when it died) and its item's place."""

    at: int
    place: Tuple[Any, ...]


def _timed(token: Any, tag: str, group_len: int, name: str) -> TimedPlace:
    parts = _parts(token, name, tag)
    if len(parts) != 2 or not _is_int(parts[0]):
        raise ValueError(f"{name} is not a token of this listing")
    return TimedPlace(parts[0], check_place(parts[1], group_len, name))


def parse_delayed(token: Any, group_len: int, name: str = "after") -> TimedPlace:
    """When the delay of the item a delayed item's token names ends, and its place.

    Raises:
        TypeError: not bytes.
        ValueError: not a delayed item's token of a structure like this one.
    """
    return _timed(token, "d", group_len, name)


def parse_dead(token: Any, group_len: int, name: str = "after") -> TimedPlace:
    """When the dead letter a token names died, and its item's place.

    Raises:
        TypeError: not bytes.
        ValueError: not a dead letter's token of a structure like this one.
    """
    return _timed(token, "dead", group_len, name)


def parse_finished(token: Any, where_len: int, name: str = "after") -> IndexPlace:
    """Where the finished job a token names is in the index of finished records
    (``where_len``: 0, or 1 for a FairQueue's group).

    Raises:
        TypeError: not bytes.
        ValueError: not a finished job's token of a structure like this one.
    """
    parts = _parts(token, name, "f")
    at = 0
    if len(parts) == where_len + 3 and _is_int(parts[-1]) and parts[-1] > 0:
        parts, at = parts[:-1], parts[-1]
    if (len(parts) != where_len + 2 or type(parts[0]) is not float
            or not all(type(w) in (str, bytes) for w in parts[1:-1])
            or type(parts[-1]) is not bytes):
        raise ValueError(f"{name} is not a token of this listing")
    return IndexPlace(parts, at)


def parse_removable(token: Any, group_len: int, name: str = "token") -> Tuple[Any, ...]:
    """The place a pending or a delayed item's token names.

    Raises:
        TypeError: not bytes.
        ValueError: neither a pending nor a delayed item's token of a structure like
            this one.
    """
    parts = unpack_token(token, name, "a token of a pending or delayed item (bytes)")
    if parts and parts[0] == "d":
        return parse_delayed(token, group_len, name).place
    return parse_pending(token, group_len, name)


class Named(NamedTuple):
    """What a token of any listing names: its ``kind`` (the tag: "p", "d", "lease",
    "dead") and what it parses to (a place, a :class:`TimedPlace`, a lease id, a
    :class:`TimedPlace`)."""

    kind: str
    at: Any


def parse_any(token: Any, group_len: int, name: str = "token") -> Named:
    """What a pending item's, a delayed item's, a lease's or a dead letter's token
    names.

    Raises:
        TypeError: not bytes.
        ValueError: none of those, of a structure like this one.
    """
    parts = unpack_token(token, name, "a token of a listed row (bytes)")
    kind = parts[0] if parts else None
    if kind == "lease" and len(parts or ()) == 2 and type(parts[1]) is bytes:  # type: ignore[index]
        return Named(kind, parts[1])  # type: ignore[index]
    if kind == "d":
        return Named(kind, parse_delayed(token, group_len, name))
    if kind == "dead":
        return Named(kind, parse_dead(token, group_len, name))
    return Named("p", parse_pending(token, group_len, name))


def parse_tokens(tokens: Any, parse: Callable[..., T], group_len: int) -> List[T]:
    """Each of ``tokens`` (an iterable of bytes, at most :data:`MOST_NAMED`) parsed
    by ``parse(token, group_len, its name)``.

    Raises:
        TypeError or ValueError: not an iterable of such tokens (naming the one), or
            too many.
    """
    batch = materialize(tokens, "tokens")
    if len(batch) > MOST_NAMED:
        raise ValueError(f"tokens: at most {MOST_NAMED:,} per call, got {len(batch):,}")
    return [parse(token, group_len, f"tokens[{i}]") for i, token in enumerate(batch)]


def after_key(prefix: bytes) -> bytes:
    """The first key after every key that starts with ``prefix`` (FoundationDB's
    ``strinc``)."""
    stripped = prefix.rstrip(b"\xff")
    return stripped[:-1] + bytes([stripped[-1] + 1])


def optional(parse: Any, token: Optional[bytes], *args: Any) -> Any:
    """``parse(token, *args)``, or None for no token."""
    return None if token is None else parse(token, *args)
