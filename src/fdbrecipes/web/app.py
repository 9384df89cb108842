"""The dashboard as an ASGI app: :func:`create_app` (Starlette and Jinja2, extra
``fdbrecipes[web]``).

Pages (GET only; each reads in one transaction, see :mod:`.views`):

* ``/``: every structure's counts;
* ``/structure?s=NAME&tab=pending|delayed|in-flight|dead``: one queue's rows (a
  FairQueue: its groups, then ``&g=GROUP`` one group's queue), ``&q=TEXT`` searches the
  first rows' values, ``&limit=N``;
* ``/job?s=NAME&id=HEX`` (or ``&text=ID``): one job's record;
* ``/workers?s=NAME``: the live workers, with quiet and stop;
* ``/schedules``: the schedules given, their next and last slots and their jobs.

A structure's page also pauses and resumes it.

Actions are forms posted to ``/act`` (see :mod:`.actions`); the answer redirects (303)
to the page the action concerns, which says what was done.  Links and forms are
relative to the app's ``root_path``, so it works mounted under any path and behind a
proxy that sets it.  Every response goes through :class:`.guard.Guard`.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
from typing import Any, Callable, Dict, Iterable, List, Mapping, Optional, Sequence, Tuple
from urllib.parse import parse_qs, urlencode

from jinja2 import Environment, PackageLoader
from markupsafe import Markup
from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import HTMLResponse, RedirectResponse, Response
from starlette.routing import Route

from .. import FairQueue, Schedule, WeightTree
from ..admin.commands import read_only
from ..admin.places import UsageError
from . import actions, views
from .access import READ_ONLY, Access, AccessRule, access_of
from .guard import Guard
from .show import (
    PAGE_CAP,
    ago,
    cut_text,
    group_from_hex,
    group_hex,
    id_from_hex,
    shown,
    shown_pretty,
    sparkline,
    when,
)

__all__ = ["FORM_CAP", "create_app"]

#: Bytes of a posted form read at most.
FORM_CAP = 262_144
#: What an action needs besides the structure: "id" (a job id), "worker", "yes" (the
#: confirmation box).
NEEDS = {"requeue": ("yes",), "purge": ("yes",), "remove": ("id", "yes"),
         "cancel": ("id", "yes"), "quiet": ("worker",), "stop": ("worker", "yes"),
         "pause": ("yes",), "resume": (), "policy": (), "release": ("token", "yes"),
         "ack": ("token", "yes")}


class BadRequest(Exception):
    """A page or action was asked with wrong parameters (400), or of something that is
    not there (404)."""

    def __init__(self, message: str, status: int = 400) -> None:
        super().__init__(message)
        self.status = status


class Dashboard:
    """The pages and actions of one app (see the module docstring)."""

    def __init__(self, db: Any, structures: Mapping[str, Any], access: AccessRule,
                 schedules: Sequence[Any] = ()) -> None:
        self.db = db
        self.structures = dict(structures)
        self.schedules = list(schedules)
        self.key = secrets.token_bytes(16)  # signs what a redirect says (see said())
        self.access = access
        self.env = Environment(loader=PackageLoader("fdbrecipes.web", "templates"),
                               autoescape=True)
        self.env.filters.update(ago=ago, when=when, shown=shown, pretty=shown_pretty,
                                tail=cut_text, hexgroup=group_hex, spark=_spark)
        self.env.globals.update(PAGE_CAP=PAGE_CAP)

    # -- helpers ---------------------------------------------------------------------

    def render(self, request: Request, template: str, status: int = 200,
               **context: Any) -> HTMLResponse:
        """The page ``template`` with ``context``, and what every page needs."""
        root: str = request.scope.get("root_path", "")

        def url(path: str, **query: Any) -> str:
            kept = {k: v for k, v in query.items() if v is not None and v != ""}
            return root + path + ("?" + urlencode(kept) if kept else "")

        access = access_of(self.access, request)
        page = self.env.get_template(template).render(
            url=url, nonce=request.state.csp_nonce, access=access,
            said=self.said(request), names=list(self.structures),
            has_schedules=bool(self.schedules),
            **context)
        return HTMLResponse(page, status_code=status)

    def sign(self, text: str) -> str:
        """The signature of ``text``, a message this app made."""
        return hmac.new(self.key, text.encode(), hashlib.sha256).hexdigest()[:32]

    def said(self, request: Request) -> str:
        """What the last action said (``said=``), shown only when this app signed it
        (``sig=``): a link from elsewhere cannot put words on the page."""
        text = request.query_params.get("said", "")
        sig = request.query_params.get("sig", "")
        return text if text and hmac.compare_digest(sig, self.sign(text)) else ""

    def structure(self, name: Optional[str]) -> Any:
        """The structure named ``name``.

        Raises:
            BadRequest: none has that name (404).
        """
        if name is None or name not in self.structures:
            raise BadRequest("no structure has that name", 404)
        return self.structures[name]

    @staticmethod
    def group(structure: Any, given: Optional[str], text: Optional[str] = None) -> Any:
        """The group ``g`` names (hex), or ``group`` (its text, a str), or None; a
        FairQueue's only."""
        if not given and not text:
            return None
        if not isinstance(structure, FairQueue):
            raise BadRequest("g: only a fair-queue has groups")
        if not given:
            return text
        try:
            return group_from_hex(given)
        except ValueError as e:
            raise BadRequest(str(e)) from None

    def failing(self, request: Request, page: Callable[[Request], Response]) -> Response:
        """``page(request)``, or the error page of a BadRequest or ValueError."""
        try:
            return page(request)
        except BadRequest as e:
            return self.error(request, str(e), e.status)
        except (TypeError, ValueError, UsageError) as e:
            return self.error(request, str(e), 400)

    def error(self, request: Request, message: str, status: int) -> HTMLResponse:
        """The error page."""
        return self.render(request, "error.html", status, title=f"{status}",
                           message=message, code=status)

    # -- pages -----------------------------------------------------------------------

    def overview(self, request: Request) -> Response:
        """``/``."""
        return self.render(request, "overview.html", title="Overview",
                           rows=views.overview(self.db, self.structures))

    def structure_page(self, request: Request) -> Response:
        """``/structure``."""
        q = request.query_params
        name = q.get("s")
        structure = self.structure(name)
        group = self.group(structure, q.get("g"), q.get("group"))
        g = None if group is None else group_hex(group)
        policy = None
        if isinstance(structure, FairQueue) and group is not None:
            policy = read_only(self.db, structure.group_policy, group)
        common = dict(title=name, name=name, kind=views.kind_of(structure), group=group,
                      g=g, policy=policy, paused=read_only(self.db, views.paused, structure))
        if isinstance(structure, WeightTree):
            return self.render(request, "structure.html", **common, tab=None, found=None,
                               groups=None)
        if isinstance(structure, FairQueue) and group is None:
            rows, more = views.group_rows(self.db, structure, _limit(q.get("limit")))
            return self.render(request, "structure.html", **common, tab=None, found=None,
                               groups=rows, more=more)
        tab = q.get("tab") or "pending"
        end = q.get("end") or "min"
        if end not in ("min", "max"):
            raise BadRequest("end: min or max")
        found = views.tab(self.db, structure, tab, group=group, limit=_limit(q.get("limit")),
                          search=q.get("q") or "", end=end)
        return self.render(request, "structure.html", **common, tab=tab, tabs=views.TABS,
                           found=found, groups=None, search=q.get("q") or "", end=end)

    def job_page(self, request: Request) -> Response:
        """``/job``."""
        q = request.query_params
        name = q.get("s")
        structure = self.structure(name)
        group = self.group(structure, q.get("g"))
        id_ = _job_id(q.get("id"), q.get("text"))
        if isinstance(structure, WeightTree):
            raise BadRequest("a weight-tree has no jobs")
        if isinstance(structure, FairQueue) and group is None:
            raise BadRequest("g: a fair-queue's jobs need their group")
        record = views.job(self.db, structure, id_, group)
        return self.render(request, "job.html", 200 if record else 404, title="Job",
                           name=name, record=record, id_hex=id_.hex(), shown_id=shown(id_),
                           g=q.get("g"), group=group)

    def schedules_page(self, request: Request) -> Response:
        """``/schedules``."""
        return self.render(request, "schedules.html", title="Schedules",
                           rows=views.schedules(self.db, self.schedules, self.structures))

    def workers_page(self, request: Request) -> Response:
        """``/workers``."""
        name = request.query_params.get("s")
        structure = self.structure(name)
        return self.render(request, "workers.html", title="Workers", name=name,
                           workers=views.workers(self.db, structure),
                           has_jobs=not isinstance(structure, WeightTree))

    # -- actions ---------------------------------------------------------------------

    async def act(self, request: Request) -> Response:
        """``POST /act``: one action, then a redirect to the page it concerns."""
        try:
            form = await _form(request)
            access = access_of(self.access, request)
            return await run_in_threadpool(self.do, request, form, access)
        except BadRequest as e:
            return self.error(request, str(e), e.status)
        except (TypeError, ValueError, UsageError) as e:
            return self.error(request, str(e), 400)

    def do(self, request: Request, form: Dict[str, str], access: Access) -> Response:
        """Check and run one action (see :data:`NEEDS`), audit it, redirect."""
        action = form.get("action", "")
        if action not in NEEDS:
            raise BadRequest("action: unknown")
        if not access.allows(action):
            raise BadRequest(f"{access.who} may not {action} here", 403)
        name = form.get("s")
        structure = self.structure(name)
        group = self.group(structure, form.get("g"))
        if "yes" in NEEDS[action] and form.get("yes") != "1":
            raise BadRequest("tick the confirmation box to do this")
        id_ = _job_id(form.get("id"), form.get("text")) if "id" in NEEDS[action] else None
        worker = form.get("worker", "")
        if "worker" in NEEDS[action] and not worker:
            raise BadRequest("worker: give its id")
        if "token" in NEEDS[action] and not form.get("token"):
            raise BadRequest("select at least one item")
        assert name is not None
        if isinstance(structure, FairQueue) and group is None and action in (
                "requeue", "purge", "remove", "cancel", "policy", "release", "ack"):
            raise BadRequest("g: a fair-queue's group is needed")
        cap = _limit(form.get("limit"), actions.REQUEST_CAP, actions.REQUEST_CAP)
        done, page, query = self.run(action, structure, group, id_, worker, cap, form)
        actions.audit(access.who, action, name, done.changed, group,
                      worker or (id_.hex() if id_ else None))
        root: str = request.scope.get("root_path", "")
        query = {"s": name, "g": form.get("g") or None, **query, "said": done.said,
                 "sig": self.sign(done.said)}
        kept = {k: v for k, v in query.items() if v is not None}
        return RedirectResponse(f"{root}{page}?{urlencode(kept)}", status_code=303)

    def run(self, action: str, structure: Any, group: Any, id_: Optional[bytes],
            worker: str, cap: int, form: Dict[str, str]) -> Tuple[actions.Done, str,
                                                                   Dict[str, Any]]:
        """Run one checked action (a requeue moves at most ``cap``; a policy is read from
        the ``form``); what it did, and the page (path, query) to show."""
        if action == "requeue":
            return (actions.requeue_dead(self.db, structure, group, cap), "/structure",
                    {"tab": "dead"})
        if action == "purge":
            return actions.purge_dead(self.db, structure, group), "/structure", {"tab": "dead"}
        if action in ("pause", "resume"):
            return actions.pause(self.db, structure, action == "pause"), "/structure", {}
        if action in ("release", "ack"):
            tokens = _tokens(form.get("token", ""))
            return (actions.settle(self.db, structure, tokens, action == "release"),
                    "/structure", {"tab": "in-flight"})
        if action == "policy":
            if not isinstance(structure, FairQueue):
                raise BadRequest("only a fair-queue's groups have a policy")
            return actions.set_policy(self.db, structure, group, _policy(form)), "/structure", {}
        assert action in ("quiet", "stop") or id_ is not None
        if action == "remove":
            assert id_ is not None
            return actions.remove(self.db, structure, id_, group), "/structure", {}
        if action == "cancel":
            assert id_ is not None
            return actions.cancel(self.db, structure, id_, group), "/job", {"id": id_.hex()}
        return actions.command(self.db, structure, worker, action), "/workers", {}

    def routes(self) -> List[Route]:
        """The app's routes."""
        def page(view: Callable[[Request], Response]) -> Callable[[Request], Response]:
            def endpoint(request: Request) -> Response:
                return self.failing(request, view)
            return endpoint
        return [Route("/", page(self.overview), methods=["GET"]),
                Route("/structure", page(self.structure_page), methods=["GET"]),
                Route("/job", page(self.job_page), methods=["GET"]),
                Route("/workers", page(self.workers_page), methods=["GET"]),
                Route("/schedules", page(self.schedules_page), methods=["GET"]),
                Route("/act", self.act, methods=["POST"])]


def _limit(text: Optional[str], default: int = 50, most: int = views.ROW_LIMIT) -> int:
    """A ``limit`` field: ``default`` when empty, else a number from 1 to ``most``."""
    if not text:
        return default
    try:
        value = int(text)
    except ValueError:
        raise BadRequest("limit: a number") from None
    if not 1 <= value <= most:
        raise BadRequest(f"limit: 1 to {most:,}")
    return value


def _spark(values: Any) -> Markup:
    """The sparkline of ``values`` (numbers only: see :func:`.show.sparkline`)."""
    return Markup(sparkline(values))


def _tokens(text: str) -> List[bytes]:
    """The lease tokens a form selected (hex, joined by ","), at most ROW_LIMIT."""
    try:
        tokens = [bytes.fromhex(t) for t in text.split(",") if t]
    except ValueError:
        raise BadRequest("token: not hex") from None
    if not tokens:
        raise BadRequest("select at least one item")
    if len(tokens) > views.ROW_LIMIT:
        raise BadRequest(f"token: at most {views.ROW_LIMIT} at once")
    return tokens


def _number(form: Dict[str, str], name: str, kind: Callable[[str], Any]) -> Any:
    """Field ``name`` of ``form`` as ``kind`` (int or float), or None when empty."""
    text = form.get(name, "").strip()
    if not text:
        return None
    try:
        return kind(text)
    except ValueError:
        raise BadRequest(f"{name}: a number") from None


def _policy(form: Dict[str, str]) -> actions.Policy:
    """A group's policy from the form: share, limit (empty: the queue's defaults), and
    a rate (count per seconds; both empty: none)."""
    count, seconds = _number(form, "rate_count", int), _number(form, "rate_seconds", float)
    if (count is None) != (seconds is None):
        raise BadRequest("rate: give both the count and the seconds, or neither")
    rate = None if count is None else (count, seconds)
    return actions.Policy(_number(form, "share", int), _number(form, "limit", int), rate)


def _job_id(hexed: Optional[str], text: Optional[str]) -> bytes:
    """A job id given as hex (``id``) or as text (``text``, its UTF-8 bytes)."""
    if hexed:
        return id_from_hex(hexed)
    if text:
        id_ = text.encode()
        if len(id_) > 1000:
            raise BadRequest("text: at most 1,000 bytes")
        return id_
    raise BadRequest("id: give the job's id")


async def _form(request: Request) -> Dict[str, str]:
    """The posted form (urlencoded, at most :data:`FORM_CAP` bytes): a field's first
    value, but the ``token`` fields' joined by ","."""
    kind = request.headers.get("content-type", "").split(";")[0].strip().lower()
    if kind != "application/x-www-form-urlencoded":
        raise BadRequest("post a form (application/x-www-form-urlencoded)", 415)
    body = b""
    async for chunk in request.stream():
        body += chunk
        if len(body) > FORM_CAP:
            raise BadRequest("form too large", 413)
    try:
        fields = parse_qs(body.decode("utf-8"), keep_blank_values=True, strict_parsing=False)
    except UnicodeDecodeError:
        raise BadRequest("form: not UTF-8") from None
    return {k: ",".join(v) if k == "token" else v[0] for k, v in fields.items()}


def create_app(db: Any, structures: Mapping[str, Any], *, access: AccessRule = READ_ONLY,
               schedules: Sequence[Any] = (), trusted_origins: Iterable[str] = (),
               token: Optional[str] = None, debug: bool = False) -> Any:
    """The dashboard of ``structures`` (names to Queue, PriorityQueue, FairQueue or
    WeightTree objects, the sync ones) on ``db``, as an ASGI app to mount anywhere::

        app.mount("/jobs", create_app(db, {"images": images}, access=FULL))

    Args:
        db: the ``fdb.Database`` every page reads with (pages read in transactions that
            are never committed; actions write through the structures' methods).
        structures: what the dashboard shows, by name (names appear in URLs and pages).
        access: an :class:`~fdbrecipes.web.Access` for every request, or a function of
            the request returning one (default :data:`~fdbrecipes.web.READ_ONLY`: look
            only).  See :mod:`fdbrecipes.web.access`.
        schedules: the application's :class:`fdbrecipes.Schedule` objects, shown with
            their next and last slots on ``/schedules``.
        trusted_origins: origins besides the request's own whose posts are accepted
            (see :func:`fdbrecipes.web.guard.cross_site`).
        token: a password every request must give (HTTP Basic), or None.
        debug: Starlette's debug pages (never in production).

    Reads nothing when made.  Costs per page: see :mod:`fdbrecipes.web.views`.

    Raises:
        TypeError or ValueError: a structure is not one of those kinds, a name is not a
            non-empty str, or ``access`` is neither an Access nor callable.
    """
    for name, structure in structures.items():
        if not isinstance(name, str) or not name:
            raise ValueError(f"structures: a name must be a non-empty str, not {name!r}")
        views.kind_of(structure)
    if not isinstance(access, Access) and not callable(access):
        raise TypeError("access must be an Access or a function of the request")
    for schedule in schedules:
        if not isinstance(schedule, Schedule):
            raise TypeError(f"schedules: a Schedule, not {type(schedule).__name__}")
    dashboard = Dashboard(db, structures, access, schedules)
    app = Starlette(debug=debug, routes=dashboard.routes())
    app.state.dashboard = dashboard
    return Guard(app, trusted_origins, token)
