"""Where a CLI worker's log goes: stderr, as text lines or one JSON object per line.

The library logs under ``fdbrecipes`` and adds only a ``NullHandler`` (applications
decide); the ``fdbrecipes worker`` command is an application, so it sends the
``fdbrecipes`` loggers to stderr (:func:`log_to_stderr`).  A JSON line holds ``time``
(ISO 8601, UTC), ``level``, ``logger``, ``pid``, ``message`` and, for a failure,
``traceback``.
"""

from __future__ import annotations

import json
import logging
import sys
from datetime import datetime, timezone

__all__ = ["LOG_FORMATS", "LOG_LEVELS", "JsonFormatter", "log_to_stderr"]

LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR")
LOG_FORMATS = ("text", "json")
#: A text line.
TEXT = "%(asctime)s %(levelname)s %(name)s[%(process)d]: %(message)s"


class JsonFormatter(logging.Formatter):
    """One JSON object per record (see the module docstring)."""

    def format(self, record: logging.LogRecord) -> str:
        line = {"time": datetime.fromtimestamp(record.created, timezone.utc).isoformat(),
                "level": record.levelname, "logger": record.name, "pid": record.process,
                "message": record.getMessage()}
        if record.exc_info:
            line["traceback"] = self.formatException(record.exc_info)
        return json.dumps(line, default=repr)


def log_to_stderr(level: str, form: str) -> None:
    """Send the ``fdbrecipes`` loggers' records of ``level`` and above to stderr, as
    ``form`` ("text" or "json") says (once: a second call changes nothing)."""
    logger = logging.getLogger("fdbrecipes")
    if any(getattr(h, "fdbrecipes_cli", False) for h in logger.handlers):
        return
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonFormatter() if form == "json" else logging.Formatter(TEXT))
    handler.fdbrecipes_cli = True  # type: ignore[attr-defined]
    logger.addHandler(handler)
    logger.setLevel(level)
