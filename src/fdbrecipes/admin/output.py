"""How the operator commands show values: tables for people, JSON for programs.

The JSON encoding of a value is described in :mod:`fdbrecipes.admin`.  Text from the
cluster (a dead letter's reason, a job's error and traceback, a worker's name) is
whatever an application or a handler wrote: before it reaches a terminal,
:func:`printable` escapes what a terminal would act on instead of showing (escape
sequences, carriage returns, bidirectional overrides).  JSON needs no such care:
``json.dumps`` escapes every control character and everything beyond ASCII.
"""

from __future__ import annotations

import base64
import math
import re
import uuid
from datetime import datetime, timezone
from typing import Any, Optional, Sequence

__all__ = ["VALUE_WIDTH", "cut", "id_json", "id_text", "iso_time", "json_value", "listing",
           "printable", "table"]

#: Characters of a value's repr a table shows.
VALUE_WIDTH = 80

#: What a terminal acts on rather than shows: the C0 controls, DEL and the C1 controls
#: (escape sequences, carriage return, backspace, NUL...), the Arabic letter mark, the
#: left-to-right and right-to-left marks, the line and paragraph separators, the
#: bidirectional embeddings, overrides and isolates (which reorder what follows them),
#: and lone surrogates (what a command line that is not UTF-8 decodes to: no terminal
#: can be sent them).
_OTHERS = r"\x7f-\x9f\u061c\u200e\u200f\u2028-\u202e\u2066-\u2069\ud800-\udfff"
_ESCAPED = re.compile(rf"[\x00-\x1f{_OTHERS}]")
_ESCAPED_BUT_LINE_FEEDS = re.compile(rf"[\x00-\x09\x0b-\x1f{_OTHERS}]")


def _escape(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def printable(text: str, *, newlines: bool = False) -> str:
    """``text`` with every character a terminal would act on written as an escape
    (``\\x1b``, ``\\x0d``, ``\\u202e``, ``\\udcff``...); line feeds kept when
    ``newlines`` (a traceback's lines), escaped otherwise (a table's cell).  Other
    characters, backslashes included, are left as they are: what is shown is for
    people (``--json`` gives the exact text)."""
    return (_ESCAPED_BUT_LINE_FEEDS if newlines else _ESCAPED).sub(_escape, text)


def json_value(value: Any) -> Any:
    """A stored value as JSON: scalars as themselves, the rest as a one-key object."""
    kind = type(value)
    if value is None or kind in (str, int, bool):
        return value
    if kind is float:
        return value if math.isfinite(value) else {"float": repr(value)}
    if kind is bytes:
        return {"bytes": base64.b64encode(value).decode("ascii")}
    if kind is uuid.UUID:
        return {"uuid": str(value)}
    if kind in (tuple, list):
        return {"tuple": [json_value(v) for v in value]}
    return {"repr": repr(value)}


def id_text(id_: Optional[bytes]) -> str:
    """A job's (an item's) id as people gave it: its text when it is UTF-8 (the ids
    ``push`` makes are hex text), else its ``repr()``; "-" for none."""
    if id_ is None:
        return "-"
    try:
        return id_.decode()
    except UnicodeDecodeError:
        return repr(id_)


def id_json(id_: Optional[bytes]) -> Any:
    """An id in JSON: its text when it is UTF-8, else ``{"bytes": "<base64>"}`` (as a
    value's bytes); None for none."""
    if id_ is None:
        return None
    try:
        return id_.decode()
    except UnicodeDecodeError:
        return json_value(id_)


def cut(text: str, width: int = VALUE_WIDTH) -> str:
    """``text``, made :func:`printable`, cut to ``width`` characters ending in "..."
    when longer."""
    text = printable(text)
    return text if len(text) <= width else text[: width - 3] + "..."


def iso_time(epoch: float) -> str:
    """Seconds since the epoch as ISO 8601 in UTC, to the second."""
    return datetime.fromtimestamp(epoch, timezone.utc).isoformat(timespec="seconds")


def table(rows: Sequence[Sequence[str]], headers: Optional[Sequence[str]] = None) -> str:
    """``rows`` as left-aligned columns two spaces apart, under ``headers`` if given;
    every cell :func:`printable` (a line feed in a cell cannot start a line)."""
    lines = [[printable(cell) for cell in line]
             for line in ([list(headers)] if headers else []) + [list(r) for r in rows]]
    if not lines:
        return ""
    widths = [max(len(line[i]) for line in lines) for i in range(len(lines[0]))]
    return "\n".join("  ".join(cell.ljust(w) for cell, w in zip(line, widths)).rstrip()
                     for line in lines)


def listing(title: str, rows: Sequence[Sequence[str]], headers: Sequence[str], none: str,
            limit: Optional[int]) -> str:
    """A titled :func:`table`, or ``none`` when empty; says so when ``limit`` was
    reached."""
    lines = [title, table(rows, headers) if rows else none]
    if limit is not None and len(rows) >= limit:
        lines.append(f"(--limit {limit} reached: there may be more)")
    return "\n".join(lines)
