"""The dashboard's audit log: the ``fdbrecipes.web.audit`` logger.

* :func:`audit`: one line (INFO) per action that may change state, written whatever
  became of it: ``who=... action=... scope=... structure=... group=... target=...
  count=... outcome=...`` (``count``: how many it changed, None when it failed midway;
  ``outcome``: ``'done'``, or the error that stopped it).
* :func:`refused`: one line (WARNING) per refused request: a wrong token, too many
  wrong tokens, a foreign Host, a cross-site request, a denied user, an action refused
  (its rights, its form): ``refused status=... why=... who=... client=... method=...
  path=...``.

Every field is ``repr``-quoted, so a hostile name or form cannot forge a line.
Importing this module needs neither Starlette nor ``libfdb_c``.
"""

from __future__ import annotations

import logging
from typing import Any, Mapping, Optional

__all__ = ["LOGGER", "audit", "refused"]

#: The audit logger's name.
LOGGER = "fdbrecipes.web.audit"

log = logging.getLogger(LOGGER)


def audit(who: str, action: str, structure: str, count: Optional[int], group: Any = None,
          target: Any = None, scope: str = "one", outcome: str = "done") -> None:
    """Write the audit line of one action (see the module docstring)."""
    log.info("who=%r action=%r scope=%r structure=%r group=%r target=%r count=%r "
             "outcome=%r", who, action, scope, structure, group, target, count, outcome)


def refused(scope: Mapping[str, Any], status: int, why: str, who: Optional[str] = None) -> None:
    """Write the line of a request refused with ``status`` because ``why`` (``scope``:
    the request's ASGI scope, which names its client, method and path)."""
    client = scope.get("client")
    log.warning("refused status=%d why=%r who=%r client=%r method=%r path=%r", status, why,
                who, None if not client else client[0], scope.get("method"),
                scope.get("path"))
