"""The dashboard as an ASGI app: :func:`create_app` (Starlette and Jinja2, extra
``fdbrecipes[web]``).

Pages (GET only; each reads in one transaction, see :mod:`.views` and
:mod:`.listings`):

* ``/``: every structure's counts;
* ``/structure?s=NAME&tab=pending|delayed|in-flight|dead|finished``: one page of a
  queue's rows (a FairQueue: its groups or its finished jobs, then ``&g=GROUP`` one
  group's queue), ``&after=CURSOR`` the page after the row the cursor names (paging by
  key), ``&q=TEXT`` searches the next rows' values, ``&limit=N``;
* ``/job?s=NAME&id=HEX`` (or ``&text=ID``): one job's record and its item (its payload,
  its lease);
* ``/workers?s=NAME``: the live workers, with quiet and stop;
* ``/schedules``: the schedules given, their next and last slots and their jobs, and
  the schedules of the stores given (next slot, lag, latest fires), with pause,
  resume and run now.

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
from typing import (
    Any,
    Callable,
    Dict,
    Iterable,
    List,
    Mapping,
    NamedTuple,
    Optional,
    Sequence,
    Tuple,
)
from urllib.parse import urlencode

from jinja2 import Environment, PackageLoader
from markupsafe import Markup
from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import HTMLResponse, RedirectResponse, Response
from starlette.routing import Route

from .. import FairQueue, Schedule, Schedules, UnknownScheduleError, WeightTree
from ..admin.commands import read_only
from ..admin.places import UsageError
from . import actions, forms, listings, views
from .access import READ_ONLY, Access, AccessRule, access_of
from .forms import BadRequest
from .guard import Guard
from .show import (
    PAGE_CAP,
    ago,
    cut_text,
    group_from_hex,
    group_hex,
    shown,
    shown_id,
    shown_pretty,
    sparkline,
    when,
)

__all__ = ["create_app"]

#: What an action needs besides the structure: "id" (a job id), "worker", "token" (the
#: rows chosen), "yes" (the confirmation box).
NEEDS = {"requeue": ("yes",), "purge": ("yes",), "remove": ("yes",),
         "cancel": ("id", "yes"), "quiet": ("worker",), "stop": ("worker", "yes"),
         "pause": ("yes",), "resume": (), "policy": (), "release": ("token", "yes"),
         "ack": ("token", "yes"), "pause-schedule": ("yes",), "resume-schedule": (),
         "run-now": ("yes",)}
#: The actions on a stored schedule (named by ``store``, its store's index, and
#: ``name``), not on a structure.
ON_SCHEDULES = ("pause-schedule", "resume-schedule", "run-now")
#: What the actions on rows act on (``scope``; the first is the default): every row
#: (of the dead letters; of a tab, filtered by ``q``), the rows chosen (``token``),
#: those matching a filter, or the pending item with an id.
SCOPES = {"requeue": ("all", "chosen", "matching"), "purge": ("all", "chosen", "matching"),
          "remove": ("id", "chosen", "matching")}
#: The actions that need a FairQueue's group.
IN_A_GROUP = ("requeue", "purge", "remove", "cancel", "policy", "release", "ack")


class Said(NamedTuple):
    """What the page says after an action, and, for a bulk action that stopped at its
    cap, how to go on (``more``: action, scope, filter, tab and cursor)."""

    text: str
    more: Optional[Dict[str, str]]


class Dashboard:
    """The pages and actions of one app (see the module docstring)."""

    def __init__(self, db: Any, structures: Mapping[str, Any], access: AccessRule,
                 schedules: Sequence[Any] = ()) -> None:
        self.db = db
        self.structures = dict(structures)
        self.schedules = [s for s in schedules if isinstance(s, Schedule)]
        self.stores = [s for s in schedules if isinstance(s, Schedules)]
        self.key = secrets.token_bytes(16)  # signs what a redirect says (see said())
        self.access = access
        self.env = Environment(loader=PackageLoader("fdbrecipes.web", "templates"),
                               autoescape=True)
        self.env.filters.update(ago=ago, when=when, shown=shown, pretty=shown_pretty,
                                tail=cut_text, hexgroup=group_hex, spark=_spark)
        self.env.globals.update(PAGE_CAP=PAGE_CAP, REQUEST_CAP=actions.REQUEST_CAP,
                                SCAN_CAP=actions.SCAN_CAP,
                                OVERVIEW_GROUPS=views.OVERVIEW_GROUPS)

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
            has_schedules=bool(self.schedules or self.stores),
            **context)
        return HTMLResponse(page, status_code=status)

    def sign(self, *parts: str) -> str:
        """The signature of ``parts``, what this app said."""
        text = "\n".join(parts)
        return hmac.new(self.key, text.encode(), hashlib.sha256).hexdigest()[:32]

    def said(self, request: Request) -> Said:
        """What the last action said (``said=``, and ``more_*`` to go on), shown only
        when this app signed it (``sig=``): a link from elsewhere cannot put words, or
        a button, on the page."""
        q = request.query_params
        text = q.get("said", "")
        more = {k: q.get("more_" + k, "") for k in MORE}
        sig = q.get("sig", "")
        if not text or not hmac.compare_digest(sig, self.sign(text, *more.values())):
            return Said("", None)
        return Said(text, more if more["after"] else None)

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
        limit = forms.limit(q.get("limit"))
        policy = None
        if isinstance(structure, FairQueue) and group is not None:
            policy = read_only(self.db, structure.group_policy, group)
        common = dict(title=name, name=name, kind=views.kind_of(structure), group=group,
                      g=g, policy=policy, paused=read_only(self.db, views.paused, structure),
                      limit=q.get("limit"), tabs=_tabs(structure, group),
                      counts=views.tab_counts(self.db, structure, group))
        if isinstance(structure, WeightTree):
            return self.render(request, "structure.html", **common, tab=None, found=None,
                               groups=None)
        tab = q.get("tab") or ("groups" if isinstance(structure, FairQueue) and group is None
                               else "pending")
        if tab not in common["tabs"]:
            raise BadRequest(f"tab: one of {', '.join(common['tabs'])}")
        if tab == "groups":
            after = q.get("after")
            rows = listings.group_rows(self.db, structure, limit,
                                       group_from_hex(after, "after") if after else None)
            return self.render(request, "structure.html", **common, tab=tab, found=None,
                               groups=rows, after=after)
        end = q.get("end") or "min"
        if end not in ("min", "max"):
            raise BadRequest("end: min or max")
        search = q.get("q") or ""
        if len(search) > 1_000:
            raise BadRequest("q: at most 1,000 characters")
        found = listings.tab(self.db, structure, tab, group=group, limit=limit,
                             search=search, end=end, after=forms.cursor(q.get("after")))
        return self.render(request, "structure.html", **common, tab=tab, found=found,
                           groups=None, search=search, end=end, after=q.get("after"))

    def job_page(self, request: Request) -> Response:
        """``/job``."""
        q = request.query_params
        name = q.get("s")
        structure = self.structure(name)
        group = self.group(structure, q.get("g"))
        id_ = forms.job_id(q.get("id"), q.get("text"))
        if isinstance(structure, WeightTree):
            raise BadRequest("a weight-tree has no jobs")
        if isinstance(structure, FairQueue) and group is None:
            raise BadRequest("g: a fair-queue's jobs need their group")
        view = views.job(self.db, structure, id_, group)
        return self.render(request, "job.html", 200 if view else 404, title="Job",
                           name=name, view=view, id_hex=id_.hex(), shown_id=shown_id(id_),
                           g=q.get("g"), group=group)

    def schedules_page(self, request: Request) -> Response:
        """``/schedules``."""
        return self.render(request, "schedules.html", title="Schedules",
                           rows=views.schedules(self.db, self.schedules, self.structures),
                           stored=views.stored(self.db, self.stores, self.structures),
                           has_stores=bool(self.stores), STORED_ROWS=views.STORED_ROWS)

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
            form = await forms.read_form(request)
            access = access_of(self.access, request)
            return await run_in_threadpool(self.do, request, form, access)
        except BadRequest as e:
            return self.error(request, str(e), e.status)
        except (TypeError, ValueError, UsageError) as e:
            return self.error(request, str(e), 400)

    def do(self, request: Request, form: Dict[str, str], access: Access) -> Response:
        """Check and run one action (see :data:`NEEDS` and :data:`SCOPES`), audit it,
        redirect."""
        action = form.get("action", "")
        if action not in NEEDS:
            raise BadRequest("action: unknown")
        if not access.allows(action):
            raise BadRequest(f"{access.who} may not {action} here", 403)
        if action in ON_SCHEDULES:
            return self.on_schedule(request, form, access, action)
        name = form.get("s")
        structure = self.structure(name)
        group = self.group(structure, form.get("g"))
        scope = form.get("scope") or SCOPES.get(action, ("one",))[0]
        if scope not in SCOPES.get(action, ("one",)):
            raise BadRequest(f"scope: one of {', '.join(SCOPES.get(action, ('one',)))}")
        needs = NEEDS[action] + (("id",) if scope == "id" else ("token",) if scope == "chosen"
                                 else ())
        if "yes" in needs and form.get("yes") != "1":
            raise BadRequest("tick the confirmation box to do this")
        if "worker" in needs and not form.get("worker"):
            raise BadRequest("worker: give its id")
        if "token" in needs and not form.get("token"):
            raise BadRequest("choose at least one item")
        if isinstance(structure, FairQueue) and group is None and action in IN_A_GROUP:
            raise BadRequest("g: a fair-queue's group is needed")
        assert name is not None
        check = Checked(action, scope, structure, group, form)
        done, page, query = self.run(check)
        if form.get("back") == "job":  # an action on a job's page shows that page again
            page, query = "/job", {"id": check.id().hex()}
        actions.audit(access.who, action, name, done.changed, group, check.target(), scope)
        return self.redirect(request, name, form, done, page, query, check)

    def on_schedule(self, request: Request, form: Dict[str, str], access: Access,
                    action: str) -> Response:
        """An action on a stored schedule (see :data:`ON_SCHEDULES`), audited, then the
        schedules page saying what it did."""
        try:
            store = self.stores[int(form.get("store", ""))]
        except (ValueError, IndexError):
            raise BadRequest("store: no such schedule store", 404) from None
        name = form.get("name", "")
        if not name:
            raise BadRequest("name: give the schedule's name")
        if "yes" in NEEDS[action] and form.get("yes") != "1":
            raise BadRequest("tick the confirmation box to do this")
        try:
            done = actions.schedule(self.db, store, name, action)
        except UnknownScheduleError as e:
            raise BadRequest(str(e), 404) from None
        actions.audit(access.who, action, f"schedules {form['store']}", done.changed,
                      target=name)
        root: str = request.scope.get("root_path", "")
        query = {"said": done.said, "sig": self.sign(done.said, *([""] * len(MORE)))}
        return RedirectResponse(f"{root}/schedules?{urlencode(query)}", status_code=303)

    def redirect(self, request: Request, name: str, form: Dict[str, str], done: actions.Done,
                 page: str, query: Dict[str, Any], check: Checked) -> Response:
        """The redirect (303) to the page an action concerns, saying what it did (and
        how to go on, signed with it)."""
        more = dict.fromkeys(MORE, "")
        if done.more is not None:
            more = {"action": check.action, "scope": check.scope, "q": form.get("q", ""),
                    "tab": query.get("tab", ""), "after": done.more.hex()}
        root: str = request.scope.get("root_path", "")
        query = {"s": name, "g": form.get("g") or None, **query, "said": done.said,
                 **{"more_" + k: v or None for k, v in more.items()},
                 "sig": self.sign(done.said, *more.values())}
        kept = {k: v for k, v in query.items() if v is not None}
        return RedirectResponse(f"{root}{page}?{urlencode(kept)}", status_code=303)

    def run(self, check: Checked) -> Tuple[actions.Done, str, Dict[str, Any]]:
        """Run one checked action; what it did, and the page (path, query) to show."""
        action, structure, group, form = check.action, check.structure, check.group, check.form
        db = self.db
        if action in SCOPES:
            tab = check.tab()
            if check.scope == "chosen":
                done = actions.chosen(db, structure, group, action, forms.tokens(form["token"]))
            elif check.scope == "id":
                done = actions.remove(db, structure, check.id(), group)
            elif action == "requeue" and check.scope == "all" and not form.get("q"):
                cap = forms.limit(form.get("limit"), actions.REQUEST_CAP, actions.REQUEST_CAP)
                done = actions.requeue_dead(db, structure, group, cap)
            else:
                done = actions.matching(db, structure, group, tab, action, form.get("q", ""),
                                        forms.cursor(form.get("after")))
            return done, "/structure", {"tab": tab}
        if action in ("pause", "resume"):
            return actions.pause(db, structure, action == "pause"), "/structure", {}
        if action in ("release", "ack"):
            tokens = forms.tokens(form["token"])
            return (actions.settle(db, structure, tokens, action == "release"),
                    "/structure", {"tab": "in-flight"})
        if action == "policy":
            if not isinstance(structure, FairQueue):
                raise BadRequest("only a fair-queue's groups have a policy")
            return actions.set_policy(db, structure, group, forms.policy(form)), "/structure", {}
        if action == "cancel":
            id_ = check.id()
            return actions.cancel(db, structure, id_, group), "/job", {"id": id_.hex()}
        return actions.command(db, structure, form["worker"], action), "/workers", {}

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


#: The fields of how to go on with a bulk action that stopped at its cap.
MORE = ("action", "scope", "q", "tab", "after")


class Checked(NamedTuple):
    """An action whose name, rights, structure, scope and confirmation were checked,
    with its form."""

    action: str
    scope: str
    structure: Any
    group: Any
    form: Dict[str, str]

    def tab(self) -> str:
        """The tab an action on rows works in: the dead letters, or (remove) the pending
        or delayed items."""
        if self.action != "remove":
            return "dead"
        tab = self.form.get("tab") or "pending"
        if tab not in ("pending", "delayed"):
            raise BadRequest("tab: remove works on pending or delayed items")
        return tab

    def id(self) -> bytes:
        """The job id the form gives (``id`` as hex, or ``text``)."""
        return forms.job_id(self.form.get("id"), self.form.get("text"))

    def target(self) -> Optional[str]:
        """What the audit line names: a worker, a job id, the rows chosen, a filter."""
        form = self.form
        if form.get("worker"):
            return form["worker"]
        if self.scope == "chosen":
            return f"{len(form.get('token', '').split(','))} chosen"
        if self.scope in ("matching", "all") and self.action in SCOPES:
            return f"q={form.get('q', '')!r} after={form.get('after', '')!r}"
        if form.get("id") or form.get("text"):
            return self.id().hex()
        return None


def _tabs(structure: Any, group: Any) -> Tuple[str, ...]:
    """The tabs of a structure's page: a queue's (a FairQueue group's have no finished
    jobs: the FairQueue's own page lists every group's), a FairQueue's groups and
    finished jobs."""
    if isinstance(structure, WeightTree):
        return ()
    if isinstance(structure, FairQueue):
        return listings.TABS[:-1] if group is not None else ("groups", "finished")
    return listings.TABS


def _spark(values: Any) -> Markup:
    """The sparkline of ``values`` (numbers only: see :func:`.show.sparkline`)."""
    return Markup(sparkline(values))


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
            their next and last slots on ``/schedules``, and its schedule stores
            (:class:`fdbrecipes.Schedules`), whose schedules are shown there with
            pause, resume and run now (the actions ``pause-schedule``,
            ``resume-schedule`` and ``run-now``).
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
        if not isinstance(schedule, (Schedule, Schedules)):
            raise TypeError(f"schedules: a Schedule or a Schedules store, not "
                            f"{type(schedule).__name__}")
    dashboard = Dashboard(db, structures, access, schedules)
    app = Starlette(debug=debug, routes=dashboard.routes())
    app.state.dashboard = dashboard
    return Guard(app, trusted_origins, token)
