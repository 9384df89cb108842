"""A web dashboard for the structures of a cluster (extra ``fdbrecipes[web]``).

:func:`create_app` makes an ASGI app (Starlette and Jinja2) that shows every structure
it is given, one queue's rows, a job's record, the live workers, the schedules, limits
and workflows of the stores given (a workflow's graph drawn), and offers the
operator's actions (requeue and purge dead letters, remove a pending job, cancel a
job, quiet or stop a worker, set or delete a limit, cancel a workflow, ...) to the
requests its ``access`` allows.  Mount it under
any path of a FastAPI or Starlette application, or serve it with ``fdbrecipes web``.
See docs/web.md.

The parts: :mod:`.access` (who may do what), :mod:`.guard` (the security headers, the
Host check, cross-site refusal, the token) with :mod:`.logins` (wrong tokens slowed
down), :mod:`.audit` (the audit log), :mod:`.reads` (each request's reads, within a
deadline), :mod:`.views` and :mod:`.listings` (what each page reads), :mod:`.forms`
and :mod:`.checks` (a request's fields, an action's form checked whole),
:mod:`.flows` (what the limits and workflows pages read), :mod:`.dag` (a workflow's
graph as SVG), :mod:`.actions` (what each button does), :mod:`.show` (how values are
shown),
:mod:`.app` (the routes and pages) and :mod:`.command` (``fdbrecipes web``).
Importing this package needs neither Starlette nor ``libfdb_c``; :func:`create_app`
needs the extra.
"""

from __future__ import annotations

from typing import Any, Iterable, Mapping, Optional, Sequence

from .access import ACTIONS, FULL, READ_ONLY, Access, AccessRule
from .reads import DEADLINE

__all__ = ["ACTIONS", "FULL", "INSTALL_HINT", "READ_ONLY", "Access", "AccessRule",
           "create_app"]

#: What a missing Starlette or Jinja2 says.
INSTALL_HINT = "the dashboard needs its extra: pip install 'fdbrecipes[web]'"


def create_app(db: Any, structures: Mapping[str, Any], *, access: AccessRule = READ_ONLY,
               schedules: Sequence[Any] = (), trusted_origins: Iterable[str] = (),
               token: Optional[str] = None, allowed_hosts: Iterable[str] = (),
               timeout: Optional[float] = DEADLINE, debug: bool = False,
               limits: Sequence[Any] = (), workflows: Sequence[Any] = ()) -> Any:
    """The dashboard as an ASGI app: see :func:`fdbrecipes.web.app.create_app`.

    Raises:
        ImportError: Starlette or Jinja2 is missing (the message says how to install
            them).
    """
    try:
        from .app import create_app as make
    except ImportError as e:
        raise ImportError(f"{INSTALL_HINT} ({e})") from e
    return make(db, structures, access=access, schedules=schedules,
                trusted_origins=trusted_origins, token=token, allowed_hosts=allowed_hosts,
                timeout=timeout, debug=debug, limits=limits, workflows=workflows)
