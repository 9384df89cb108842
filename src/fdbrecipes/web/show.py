"""How the dashboard shows values and names them in URLs: pure functions, no I/O.

Every value is shown as its ``repr()`` (so bytes that are not UTF-8 show as escapes),
bytes sealed by an encrypting codec (``fdbrecipes.tasks.Encrypted``) as ``<encrypted,
key id '...'>`` in place of their ciphertext (the dashboard holds no key), cut to a size
cap; the templates escape what these return.  A FairQueue's group (a
``str`` or ``bytes``) and a job's id (``bytes``) travel in URLs as hex, so any value
round-trips exactly.
"""

from __future__ import annotations

import pprint
from datetime import datetime, timezone
from typing import Any, Optional, Sequence

import fdb.tuple

from .._codec import sealed_key_id
from .._records.tokens import MAX_TOKEN_BYTES

__all__ = ["LIST_CAP", "PAGE_CAP", "TOO_DEEP", "ago", "cursor_from_hex", "cut", "cut_text",
           "group_from_hex", "group_hex", "id_from_hex", "shown", "shown_id", "shown_pretty",
           "sparkline", "when"]

#: Characters of a value a list row shows.
LIST_CAP = 200
#: Characters of a value or traceback one job page shows.
PAGE_CAP = 20_000


#: What a value nested too deep for Python's ``repr()`` shows.
TOO_DEEP = "<a value nested too deep to show>"


class Sealed:
    """What sealed bytes show as: the key id they are encrypted under."""

    def __init__(self, key_id: str) -> None:
        self.key_id = key_id

    def __repr__(self) -> str:
        return f"<encrypted, key id {self.key_id!r}>"


def masked(value: Any, depth: int = 0) -> Any:
    """``value`` with every sealed bytes in it (a task's payload inside its tuple too)
    shown as :class:`Sealed`; tuples nested past 64 levels are left as they are."""
    if type(value) is bytes:
        sealed = sealed_key_id(value)
        return value if sealed is None else Sealed(sealed[0])
    if type(value) is tuple and depth < 64:
        return tuple(masked(element, depth + 1) for element in value)
    return value


def _repr(value: Any) -> str:
    """``repr(value)`` (sealed bytes masked), or :data:`TOO_DEEP` (a tuple nested past
    Python's stack)."""
    try:
        return repr(masked(value))
    except RecursionError:
        return TOO_DEEP


def shown(value: Any, cap: int = LIST_CAP) -> str:
    """``repr(value)``, cut to ``cap`` characters (saying how many more there were)."""
    text = _repr(value)
    if len(text) <= cap:
        return text
    return f"{text[:cap]}... ({len(text) - cap:,} more characters)"


def shown_pretty(value: Any, cap: int = PAGE_CAP) -> str:
    """``value`` pretty-printed (tuples broken over lines), cut to ``cap`` characters;
    a value nested too deep for the pretty-printer (whose recursion is Python's) as its
    plain ``repr()``."""
    try:
        text = pprint.pformat(masked(value), width=100)
    except RecursionError:
        text = _repr(value)
    if len(text) <= cap:
        return text
    return f"{text[:cap]}\n... ({len(text) - cap:,} more characters)"


def cut(text: str, cap: int = LIST_CAP) -> str:
    """``text`` (a reason, an error message: text already) cut to ``cap`` characters,
    saying how many more there were."""
    if len(text) <= cap:
        return text
    return f"{text[:cap]}... ({len(text) - cap:,} more characters)"


def shown_id(id_: bytes) -> str:
    """A job's id as people gave it: its text when it is printable UTF-8 (the ids
    ``push`` makes are hex text), else its ``repr()``."""
    try:
        text = id_.decode()
    except UnicodeDecodeError:
        return shown(id_)
    return text if text.isprintable() else shown(id_)


def cut_text(text: Optional[str], cap: int = PAGE_CAP) -> str:
    """``text`` (None: "") cut to ``cap`` characters, keeping its end (a traceback's
    last lines say most)."""
    if not text:
        return ""
    return text if len(text) <= cap else f"... ({len(text) - cap:,} characters before)\n" + \
        text[-cap:]


def sparkline(values: Sequence[Optional[float]], width: int = 120, height: int = 24) -> str:
    """An inline SVG line of ``values`` (None: a gap counted as 0), scaled to its
    maximum; made of numbers only, so it needs no escaping.  Empty for no values."""
    if not values:
        return ""
    top = max((v or 0 for v in values), default=0) or 1
    step = width / max(1, len(values) - 1)
    points = " ".join(f"{i * step:.1f},{height - 1 - (v or 0) / top * (height - 2):.1f}"
                      for i, v in enumerate(values))
    return (f'<svg width="{width}" height="{height}" viewBox="0 0 {width} {height}" '
            f'role="img" aria-label="last {len(values)} minutes">'
            f'<polyline fill="none" stroke="#0969da" stroke-width="1.5" points="{points}"/>'
            "</svg>")


def when(epoch: Optional[float]) -> str:
    """Seconds since the epoch as ``YYYY-MM-DD HH:MM:SS`` UTC; "-" for None."""
    if epoch is None:
        return "-"
    return datetime.fromtimestamp(epoch, timezone.utc).strftime("%Y-%m-%d %H:%M:%S")


def ago(seconds: Optional[float]) -> str:
    """A duration for people: ``42 s``, ``3.5 min``, ``2.0 h``, ``1.5 d``; "-" for None."""
    if seconds is None:
        return "-"
    if abs(seconds) < 120:
        return f"{seconds:.0f} s"
    if abs(seconds) < 7200:
        return f"{seconds / 60:.1f} min"
    if abs(seconds) < 172_800:
        return f"{seconds / 3600:.1f} h"
    return f"{seconds / 86400:.1f} d"


def group_hex(group: Any) -> str:
    """A FairQueue group (str or bytes) as hex, for a URL."""
    packed: bytes = fdb.tuple.pack((group,))
    return packed.hex()


def group_from_hex(text: str, name: str = "g") -> Any:
    """The group :func:`group_hex` made.

    Raises:
        ValueError: ``text`` is not the hex of one packed str or bytes (of at most
            2,500 bytes).
    """
    if len(text) > 2 * MAX_TOKEN_BYTES:
        raise ValueError(f"{name}: too long")
    try:
        unpacked = fdb.tuple.unpack(bytes.fromhex(text))
    except Exception:
        raise ValueError(f"{name}: not a group") from None
    if len(unpacked) != 1 or not isinstance(unpacked[0], (str, bytes)):
        raise ValueError(f"{name}: not a group")
    return unpacked[0]


def cursor_from_hex(text: str, name: str = "after") -> bytes:
    """A row's token given as hex in a URL or a form (a cursor, a chosen row); what it
    names is checked by the library call it is given to.

    Raises:
        ValueError: not hex, or longer than a token can be (2,500 bytes).
    """
    if len(text) > 2 * MAX_TOKEN_BYTES:
        raise ValueError(f"{name}: too long")
    try:
        token = bytes.fromhex(text)
    except ValueError:
        raise ValueError(f"{name}: not hex") from None
    if not token:
        raise ValueError(f"{name}: empty")
    return token


def id_from_hex(text: str) -> bytes:
    """A job id given as hex in a URL.

    Raises:
        ValueError: not hex, or not 1 to 1,000 bytes.
    """
    try:
        id_ = bytes.fromhex(text)
    except ValueError:
        raise ValueError("id: not hex") from None
    if not 1 <= len(id_) <= 1000:
        raise ValueError("id: not 1 to 1,000 bytes")
    return id_
