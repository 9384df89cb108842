"""Where a CLI worker's log goes: stderr, as text lines or one JSON object per line.

The library logs under ``fdbrecipes`` and adds only a ``NullHandler`` (applications
decide); the ``fdbrecipes worker`` command is an application, so it sends the
``fdbrecipes`` loggers to stderr (:func:`log_to_stderr`).  A JSON line holds ``time``
(ISO 8601, UTC), ``level``, ``logger``, ``pid``, ``message`` and, for a failure,
``traceback``.  A text record is one line (time, level, logger, pid, message), then,
for a failure, its traceback's lines, each indented by two spaces: what a job's
exception or a dead letter's reason holds (a newline, a carriage return, an escape
sequence) is escaped (:func:`.output.printable`), so no line that starts a record can come
from a job.
"""

from __future__ import annotations

import json
import logging
import sys
from datetime import datetime, timezone
from typing import List

from .output import printable

__all__ = ["LOG_FORMATS", "LOG_LEVELS", "JsonFormatter", "TextFormatter",
           "log_to_stderr"]

LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR")
LOG_FORMATS = ("text", "json")
#: A text line.
TEXT = "%(asctime)s %(levelname)s %(name)s[%(process)d]: %(message)s"
#: What begins each line of a traceback in a text log.
INDENT = "  "


class TextFormatter(logging.Formatter):
    """A text log: one line per record, its traceback (if any) on the lines after
    it, indented (see the module docstring)."""

    def __init__(self) -> None:
        super().__init__(TEXT)

    def format(self, record: logging.LogRecord) -> str:
        record.message = record.getMessage()
        record.asctime = self.formatTime(record, self.datefmt)
        lines: List[str] = [printable(self.formatMessage(record))]
        if record.exc_info:
            lines.extend(indented(self.formatException(record.exc_info)))
        elif record.exc_text:
            lines.extend(indented(record.exc_text))
        if record.stack_info:
            lines.extend(indented(self.formatStack(record.stack_info)))
        return "\n".join(lines)


def indented(text: str) -> List[str]:
    """The lines of ``text`` (a traceback), each escaped and indented."""
    return [INDENT + printable(line) for line in text.split("\n")]


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
    handler.setFormatter(JsonFormatter() if form == "json" else TextFormatter())
    handler.fdbrecipes_cli = True  # type: ignore[attr-defined]
    logger.addHandler(handler)
    logger.setLevel(level)
