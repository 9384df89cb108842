"""What may be stored, and the arguments that say how: values, limits, validation.

Every public method checks its arguments here before anything is written, so bad
input raises ``TypeError``/``ValueError`` naming the argument.
"""

from __future__ import annotations

import os
import re
import uuid
from typing import TYPE_CHECKING, Any, Callable, Dict, Iterable, List, Optional, Tuple, Union

import fdb.tuple
from fdb.subspace_impl import Subspace

from ._fdb import VERSIONS_PER_SECOND

#: A value a structure can store: one tuple-encodable value, returned exactly as given.
Value = Union[bytes, str, int, float, bool, uuid.UUID, Tuple[Any, ...]]

if TYPE_CHECKING:  # a default (PEP 696) for type checkers; no runtime dependency
    from typing_extensions import TypeVar

    #: The type of the values a Queue or PriorityQueue holds: ``Queue[bytes]`` types
    #: what ``pop`` returns and ``Lease.value``; plain ``Queue`` holds any :data:`Value`.
    V = TypeVar("V", bound=Value, default=Value)
else:
    from typing import TypeVar

    V = TypeVar("V")

# -- FoundationDB's documented limits ----------------------------------------------------

#: Largest encoded value FoundationDB stores under one key.
MAX_VALUE_BYTES = 100_000
#: Largest key FoundationDB accepts.
MAX_KEY_BYTES = 10_000
#: FoundationDB refuses transactions whose writes exceed 10,000,000 bytes (error 2101).
#: A batch is refused above this budget, which leaves room for keys, conflict ranges
#: and the caller's own writes.
MAX_BATCH_BYTES = 9_000_000
#: Bytes a write costs beyond its key and value, a rough upper bound of FoundationDB's
#: own accounting per mutation.
MUTATION_OVERHEAD = 64
#: Largest idempotency id, in bytes.
MAX_ID_BYTES = 1_000
#: Items one call takes (pops, claims, acks) at most in a caller's transaction.
MAX_TAKE = 10_000
#: Items a call given a Database takes per transaction.
TAKE_BATCH = 1_000
#: Value bytes one transaction rewrites at most when it moves items under holds.
BATCH_BYTES = 4_000_000
#: Largest ``spread``.
MAX_SPREAD = 10_000
#: Longest delay, in seconds (about 31 years).
MAX_DELAY = 1e9

# -- arguments ----------------------------------------------------------------------


def check_subspace(subspace: Any) -> Subspace:
    """Return ``subspace`` if it is an ``fdb.Subspace`` (or DirectorySubspace)."""
    if not isinstance(subspace, Subspace):
        raise TypeError(
            "subspace must be an fdb.Subspace (or a DirectorySubspace), not "
            f"{type(subspace).__name__}"
        )
    return subspace


def check_bool(value: Any, name: str) -> bool:
    """Return ``value`` if it is a bool."""
    if type(value) is not bool:
        raise TypeError(f"{name} must be a bool, not {type(value).__name__}")
    return value


def check_matching(value: Any, name: str, pattern: re.Pattern[str], what: str) -> str:
    """Return ``value`` if it is a str that ``pattern`` matches (``what`` says what it
    must be, in the messages: ``"a storage engine name such as 'memory'"``)."""
    if not isinstance(value, str):
        raise TypeError(f"{name} must be a str ({what}), not {type(value).__name__}")
    if not pattern.match(value):
        raise ValueError(f"{name} must be {what}, got {value!r}")
    return value


def check_int(
    value: Any,
    name: str,
    *,
    low: Optional[int] = None,
    high: Optional[int] = None,
) -> int:
    """Return ``value`` if it is an int (not a bool) within [low, high]."""
    if type(value) is not int:
        raise TypeError(f"{name} must be an int, not {type(value).__name__}")
    if low is not None and value < low:
        raise ValueError(f"{name} must be >= {low}, got {value}")
    if high is not None and value > high:
        raise ValueError(f"{name} must be <= {high}, got {value}")
    return value


def check_limit(value: Any) -> Optional[int]:
    """Return a ``limit`` argument: None (no limit) or an int >= 0."""
    return None if value is None else check_int(value, "limit", low=0)


def check_seconds(value: Any, name: str) -> float:
    """Return ``value`` as float seconds if it is a positive finite real number."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"{name} must be a number of seconds, not {type(value).__name__}")
    seconds = float(value)
    if not (0 < seconds < MAX_DELAY):
        raise ValueError(f"{name} must be more than 0 and less than {MAX_DELAY:.0e} seconds "
                         f"(about 31 years), got {value!r}")
    return seconds


def check_delay(value: Any, name: str = "delay") -> int:
    """Return a delay in clock units (read versions): None or 0 mean none (0)."""
    if value is None:
        return 0
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"{name} must be None or seconds, not {type(value).__name__}")
    if not (0 <= float(value) < MAX_DELAY):
        raise ValueError(f"{name} must be >= 0 and finite, got {value!r}")
    return int(float(value) * VERSIONS_PER_SECOND)


#: Longest reason a dead letter keeps, in characters.
MAX_REASON = 1_000


def check_reason(value: Any) -> Optional[str]:
    """Return a dead letter's ``reason``: None, or a str of at most :data:`MAX_REASON`
    that the tuple layer can encode (no lone surrogate)."""
    if value is None:
        return None
    if type(value) is not str:
        raise TypeError(f"reason must be None or a str, not {type(value).__name__}")
    if len(value) > MAX_REASON:
        raise ValueError(f"reason must be at most {MAX_REASON:,} characters, got {len(value):,}")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as e:
        raise ValueError(f"reason cannot be tuple-encoded: {e}") from None
    return value


def storable(text: str) -> str:
    """``text`` as the tuple layer can encode it: a lone surrogate (text decoded with
    ``surrogateescape``, say) written as its escape, ``\\udc80``; any other text as
    it is."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return text.encode("utf-8", "backslashreplace").decode("utf-8")
    return text


def check_shards(value: Any, most: int) -> int:
    """Return ``shards``: an int from 1 (unsharded) to ``most``."""
    return check_int(value, "shards", low=1, high=most)


def check_spread(value: Any) -> int:
    """Return ``spread``: an int from 1 (strict order) to :data:`MAX_SPREAD`."""
    return check_int(value, "spread", low=1, high=MAX_SPREAD)


def check_timeout(value: Any) -> Optional[float]:
    """Return a timeout in seconds (None = wait forever); 0 is allowed."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"timeout must be None or seconds, not {type(value).__name__}")
    if not (0 <= float(value) < 1e9):
        raise ValueError(f"timeout must be >= 0 and finite, got {value!r}")
    return float(value)


def check_id(value: Any) -> Optional[bytes]:
    """Return an idempotency id: None, or 1 to 1,000 bytes."""
    if value is None:
        return None
    if type(value) is not bytes:
        raise TypeError(f"id must be bytes, not {type(value).__name__}")
    if not 0 < len(value) <= MAX_ID_BYTES:
        raise ValueError(f"id must be 1 to {MAX_ID_BYTES} bytes, got {len(value)}")
    return value


def check_clock(clock: Any) -> Any:
    """Return ``clock`` if it is None or callable (a function of a transaction)."""
    if clock is not None and not callable(clock):
        raise TypeError("clock must be a callable taking a transaction")
    return clock


def materialize(values: Iterable[Any], name: str) -> List[Any]:
    """Turn an iterable argument into a list (a TypeError names it otherwise)."""
    if isinstance(values, (bytes, str)) or not isinstance(values, Iterable):
        raise TypeError(f"{name} must be an iterable of items, not {type(values).__name__}")
    return list(values)


def check_pairs(items: Iterable[Any], second: str, check: Callable[[Any, str], Any],
                encode: Optional[Callable[[Any, str], bytes]] = None
                ) -> List[Tuple[bytes, Any]]:
    """``items``, an iterable of ``(value, second)`` tuples, checked: each value
    encoded (by ``encode(value, its name)``, default :func:`encode_value`), each second
    element passed through ``check(it, its name)`` (the messages name the index:
    ``items[3] priority``).

    Raises:
        TypeError or ValueError: the first item that is not such a tuple, or whose
            value or second element is refused.
    """
    out = []
    for i, pair in enumerate(materialize(items, "items")):
        if type(pair) is not tuple or len(pair) != 2:
            raise TypeError(f"items[{i}] must be a (value, {second}) tuple")
        out.append(((encode or encode_value)(pair[0], f"items[{i}] value"),
                    check(pair[1], f"items[{i}] {second}")))
    return out


def check_batch_bytes(total: int, count: int, name: str) -> None:
    """Refuse a batch whose writes would not fit in one transaction."""
    if total > MAX_BATCH_BYTES:
        raise ValueError(
            f"{name}: {count:,} items need about {total:,} bytes of writes, over the "
            f"{MAX_BATCH_BYTES:,}-byte budget for one transaction (FoundationDB "
            f"refuses transactions over 10,000,000 bytes); split the batch"
        )


def push_bytes(prefix: int, group: Tuple[Any, ...], value: bytes, id_: Optional[bytes]) -> int:
    """About how many bytes of writes one pushed item costs: its key (subspace prefix,
    group, sequence number, random bytes, metadata, id) and value, plus overhead."""
    return (prefix + (len(fdb.tuple.pack(group)) if group else 0) + 60 + len(id_ or b"")
            + len(value) + MUTATION_OVERHEAD)


def unpack_token(value: Any, name: str, what: str) -> Optional[Tuple[Any, ...]]:
    """The tuple a token made by the library (``value``, bytes) encodes, or None if it
    encodes none.

    Raises:
        TypeError: ``value`` is not bytes (the message names ``name`` and ``what`` it
            must be).
    """
    if type(value) is not bytes:
        raise TypeError(f"{name} must be {what}, not {type(value).__name__}")
    try:
        parts = fdb.tuple.unpack(value)
    except Exception:
        return None
    return parts if type(parts) is tuple else None


def check_key(key: bytes, name: str) -> bytes:
    """Refuse a key FoundationDB would refuse (over 10,000 bytes)."""
    if len(key) > MAX_KEY_BYTES:
        raise ValueError(
            f"{name} makes a key of {len(key):,} bytes; FoundationDB keys are at "
            f"most {MAX_KEY_BYTES:,} bytes"
        )
    return key


# -- values -------------------------------------------------------------------------

_SCALARS = (bytes, str, int, float, bool, uuid.UUID)


def _check_encodable(value: Any, name: str) -> None:
    """Refuse a value the tuple layer would not give back exactly (a loop over a stack,
    not a recursion: a value nested deeper than Python's recursion limit is checked
    whole, then refused by :func:`encode_value` with a ValueError)."""
    if value is None:
        raise ValueError(
            f"{name} must not be None (pop returns None to mean 'empty')"
        )
    stack = [value]
    while stack:
        element = stack.pop()
        kind = type(element)
        if kind is tuple:
            stack.extend(element)
        elif kind not in _SCALARS and element is not None:
            raise TypeError(
                f"{name} must be bytes, str, int, float, bool, uuid.UUID or a tuple of "
                f"these, not {kind.__name__}"
            )


def encode_value(value: Any, name: str = "value", limit: int = MAX_VALUE_BYTES) -> bytes:
    """Tuple-pack one value; raise TypeError/ValueError naming ``name`` if impossible,
    or if it encodes to more than ``limit`` bytes (a value FoundationDB stores under
    one key, unless said otherwise).

    Only types that round-trip exactly are accepted (subclasses such as IntEnum,
    lists and the tuple layer's Versionstamp are refused).  ``None`` is refused at top
    level (it means "empty" to pop) but allowed inside a tuple.
    """
    _check_encodable(value, name)
    try:
        packed: bytes = fdb.tuple.pack((value,))
    except RecursionError:  # tuples nested deeper than the interpreter's stack allows
        raise ValueError(f"{name} is nested too deeply to be tuple-encoded") from None
    except Exception as e:  # UnicodeEncodeError, struct.error for ints beyond 2**2040
        raise ValueError(f"{name} cannot be tuple-encoded: {e}") from None
    if len(packed) > limit:
        what = "FoundationDB stores" if limit == MAX_VALUE_BYTES else "the limit is"
        raise ValueError(f"{name} encodes to {len(packed):,} bytes; {what} at most "
                         f"{limit:,} bytes per value")
    return packed


def decode_value(data: bytes) -> Value:
    """Inverse of :func:`encode_value`."""
    value: Value = fdb.tuple.unpack(data)[0]
    return value


def random_suffix() -> bytes:
    """20 random bytes: two writers that chose the same position still write distinct keys."""
    return os.urandom(20)


def made_random(id_: bytes) -> Optional[bytes]:
    """The 20 random bytes of the place of an item pushed with an id made for it, when
    the id is of 32 hex characters (``_records.history.new_id``'s): the id's 16
    bytes, then 4 more, so that the item need not carry the id besides (see
    ``OrderedLayout.new_item``); None for any other id (a workflow's node's)."""
    made = made_bytes(id_)
    return None if made is None else made + os.urandom(4)


def made_bytes(id_: bytes) -> Optional[bytes]:
    """The 16 bytes an id of 32 lowercase hex characters stands for (an id that a
    push may have made: see :func:`made_random`); None for any other id."""
    if len(id_) == 32 and id_ == id_.lower():
        try:
            return bytes.fromhex(id_.decode("ascii"))
        except ValueError:  # UnicodeDecodeError included
            pass
    return None


def random_id() -> bytes:
    """16 random bytes naming a lease, a hold or a pop request."""
    return os.urandom(16)


#: Bytes of a lease id made by :func:`batch_ids`: a 16-byte prefix shared by the batch
#: (the claim's clock reading, 8 bytes big-endian, then 8 random bytes), then the
#: lease's index in it (4 bytes, big-endian).
BATCH_ID_LEN = 20


def batch_ids(n: int, claimed_at: int, shard: Optional[int] = None) -> List[bytes]:
    """Ids for ``n`` leases taken together at ``claimed_at`` (a clock reading): one
    prefix, then each lease's index, so the held keys of a batch are one key range,
    sorted by claim time, and an id tells when its lease was taken.  In shard
    ``shard`` of a sharded structure the prefix's first random byte is the shard's
    number, so an id tells where its lease is (:func:`lease_shard`)."""
    mark = b"" if shard is None else bytes((shard,))
    prefix = max(0, claimed_at).to_bytes(8, "big") + mark + os.urandom(8 - len(mark))
    return [prefix + i.to_bytes(4, "big") for i in range(n)]


def id_spans(ids: Iterable[bytes]) -> List[Tuple[bytes, bytes]]:
    """The lease ids ``ids`` (distinct) as spans to read keys named by them: for the ids
    of one claim (:func:`batch_ids`: one prefix, then numbered), (lowest, highest)
    when at most half the ids in that span are left out; every other id alone, as
    (id, id).  A read of a span's keys is one range read instead of one read a lease."""
    claims: Dict[bytes, List[bytes]] = {}
    for hold_id in ids:
        prefix = hold_id[:16] if len(hold_id) == BATCH_ID_LEN else hold_id
        claims.setdefault(prefix, []).append(hold_id)
    spans: List[Tuple[bytes, bytes]] = []
    for members in claims.values():
        distinct = sorted(set(members))
        low, high = distinct[0], distinct[-1]
        gap = int.from_bytes(high[16:], "big") - int.from_bytes(low[16:], "big")
        if len(distinct) > 1 and gap < 2 * len(distinct):
            spans.append((low, high))
        else:
            spans.extend((hold_id, hold_id) for hold_id in distinct)
    return spans


def lease_shard(hold_id: bytes) -> int:
    """The shard a sharded structure's lease ``hold_id`` is in (see :func:`batch_ids`);
    0 for an id that does not tell (made otherwise)."""
    return hold_id[8] if len(hold_id) == BATCH_ID_LEN else 0


def claimed_at(hold_id: bytes) -> Optional[int]:
    """When the lease named ``hold_id`` was taken (a clock reading), or None for an
    id that does not tell (made before lease ids did)."""
    return int.from_bytes(hold_id[:8], "big") if len(hold_id) == BATCH_ID_LEN else None
