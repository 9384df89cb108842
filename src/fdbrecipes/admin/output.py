"""How the operator commands show values: tables for people, JSON for programs.

The JSON encoding of a value is described in :mod:`fdbrecipes.admin`.
"""

from __future__ import annotations

import base64
import math
import uuid
from datetime import datetime, timezone
from typing import Any, Optional, Sequence

__all__ = ["VALUE_WIDTH", "cut", "iso_time", "json_value", "table"]

#: Characters of a value's repr a table shows.
VALUE_WIDTH = 80


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


def cut(text: str, width: int = VALUE_WIDTH) -> str:
    """``text``, cut to ``width`` characters ending in "..." when longer."""
    return text if len(text) <= width else text[: width - 3] + "..."


def iso_time(epoch: float) -> str:
    """Seconds since the epoch as ISO 8601 in UTC, to the second."""
    return datetime.fromtimestamp(epoch, timezone.utc).isoformat(timespec="seconds")


def table(rows: Sequence[Sequence[str]], headers: Optional[Sequence[str]] = None) -> str:
    """``rows`` as left-aligned columns two spaces apart, under ``headers`` if given."""
    lines = ([list(headers)] if headers else []) + [list(r) for r in rows]
    if not lines:
        return ""
    widths = [max(len(line[i]) for line in lines) for i in range(len(lines[0]))]
    return "\n".join("  ".join(cell.ljust(w) for cell, w in zip(line, widths)).rstrip()
                     for line in lines)
