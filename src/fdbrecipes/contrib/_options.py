"""Checks of the integrations' options: a wrong type or value raises ``TypeError`` or
``ValueError`` naming the option, before anything is written."""

from __future__ import annotations

from typing import Any, Optional

__all__ = ["check_cluster_file", "check_count", "check_seconds"]


def check_seconds(value: Any, name: str) -> float:
    """``value`` as seconds > 0.

    Raises:
        TypeError or ValueError: not a number, or not > 0.
    """
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"{name} must be seconds (a number), not {type(value).__name__}")
    if not value > 0:
        raise ValueError(f"{name} must be > 0 seconds, got {value!r}")
    return float(value)


def check_count(value: Any, name: str, *, optional: bool = False) -> Optional[int]:
    """``value`` as an int >= 1 (or None, when ``optional``).

    Raises:
        TypeError or ValueError: not an int (bools refused), or below 1.
    """
    if value is None and optional:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{name} must be an int, not {type(value).__name__}")
    if value < 1:
        raise ValueError(f"{name} must be >= 1, got {value!r}")
    return int(value)


def check_cluster_file(value: Any, name: str = "cluster_file") -> Optional[str]:
    """``value`` as a cluster file path, or None (``FDB_CLUSTER_FILE`` or the default).

    Raises:
        TypeError: not a str or None.
    """
    if value is not None and not isinstance(value, str):
        raise TypeError(f"{name} must be a path (str), not {type(value).__name__}")
    return None if value is None else str(value)
