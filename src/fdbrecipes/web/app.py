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
  its lease); ``/job?s=NAME&token=HEX``: the item a row's token names (and its job's
  record, if it has one);
* ``/workers?s=NAME``: the live workers, with quiet and stop;
* ``/schedules``: the schedules given, their next and last slots and their jobs, and
  the schedules of the stores given (next slot, lag, latest fires), with pause,
  resume and run now;
* ``/limits?store=N``: the limits of a limit store given (definition, jobs running
  and parked), one key's state (``&name=NAME&key=LITERAL``), with set and delete;
* ``/workflows?store=N``: the workflows of a workflow store given (state, counts;
  ``&after=HEX`` the page after that id); ``/workflow?store=N&id=HEX``: one
  workflow's counts, nodes by state and graph (SVG, :mod:`.dag`), with cancel.

A structure's page also pauses and resumes it.

Actions are forms posted to ``/act`` (see :mod:`.actions`), checked whole first (see
:mod:`.checks`); the answer redirects (303) to the page the action concerns, which
says what was done.  Links and forms are relative to the app's ``root_path``, so it
works mounted under any path and behind a proxy that sets it.  Every response goes
through :class:`.guard.Guard`.

Each request asks the ``access`` rule once (None: it is denied, 403), and reads within
its deadline (:class:`.reads.Reads`): a page whose reads could not finish in time, or
that the cluster refused, answers 503.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
from dataclasses import replace
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

from .. import Limits, Schedule, Schedules, UnknownScheduleError, UnknownWorkflowError, _kinds
from ..admin.places import UsageError
from ..workflow import Workflows
from . import actions, checks, dag, flows, forms, listings, views
from .access import READ_ONLY, Access, AccessRule, access_of
from .audit import audit, refused
from .checks import Checked
from .forms import BadRequest
from .guard import Guard
from .reads import DEADLINE, Reads, TooSlow, fdb_error_code
from .show import (
    PAGE_CAP,
    ago,
    cut,
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

#: What a request's own reads are (a page, or an action) and what may go wrong.
View = Callable[..., Response]


class Said(NamedTuple):
    """What the page says after an action, and, for a bulk action that stopped at its
    cap, how to go on (``more``: action, scope, filter, tab and cursor)."""

    text: str
    more: Optional[Dict[str, str]]


class Dashboard:
    """The pages and actions of one app (see the module docstring)."""

    def __init__(self, db: Any, structures: Mapping[str, Any], access: AccessRule,
                 schedules: Sequence[Any] = (), timeout: Optional[float] = DEADLINE,
                 limits: Sequence[Any] = (), workflows: Sequence[Any] = ()) -> None:
        self.db = db
        self.structures = dict(structures)
        self.schedules = [s for s in schedules if isinstance(s, Schedule)]
        self.stores = [s for s in schedules if isinstance(s, Schedules)]
        self.limits = list(limits)
        self.workflows = list(workflows)
        self.key = secrets.token_bytes(16)  # signs what a redirect says (see said())
        self.access = access
        self.timeout = timeout
        self.env = Environment(loader=PackageLoader("fdbrecipes.web", "templates"),
                               autoescape=True)
        self.env.filters.update(ago=ago, when=when, shown=shown, pretty=shown_pretty,
                                tail=cut_text, hexgroup=group_hex, spark=_spark)
        self.env.globals.update(PAGE_CAP=PAGE_CAP, REQUEST_CAP=actions.REQUEST_CAP,
                                SCAN_CAP=actions.SCAN_CAP, PAGE_BYTES=listings.PAGE_BYTES,
                                SCAN_BYTES=actions.SCAN_BYTES,
                                OVERVIEW_GROUPS=views.OVERVIEW_GROUPS,
                                COLOURS=dag.COLOURS, GRAPH_NODES=flows.GRAPH_NODES,
                                offers=_kinds.kind_named)  # what a kind offers, by name

    # -- helpers ---------------------------------------------------------------------

    def render(self, request: Request, template: str, status: int = 200,
               headers: Optional[Dict[str, str]] = None, **context: Any) -> HTMLResponse:
        """The page ``template`` with ``context``, and what every page needs."""
        root: str = request.scope.get("root_path", "")

        def url(path: str, **query: Any) -> str:
            kept = {k: v for k, v in query.items() if v is not None and v != ""}
            return root + path + ("?" + urlencode(kept) if kept else "")

        page = self.env.get_template(template).render(
            url=url, nonce=request.state.csp_nonce, access=_access(request),
            said=self.said(request), names=list(self.structures),
            has_schedules=bool(self.schedules or self.stores),
            limit_stores=len(self.limits), workflow_stores=len(self.workflows), **context)
        return HTMLResponse(page, status_code=status, headers=headers)

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
        """The structure named ``name`` (404 when none is)."""
        return forms.structure_named(self.structures, name)

    def access_for(self, request: Request) -> Optional[Access]:
        """What the ``access`` rule gives ``request`` (None: nothing), its ``who`` the
        user name given with the token when the rule names nobody."""
        found = access_of(self.access, request)
        user = request.scope.get("state", {}).get("user")
        if found is not None and user and found.who == READ_ONLY.who:
            found = replace(found, who=user)
        return found

    def answer(self, request: Request, view: View, *args: Any) -> Response:
        """``view(request, *args)`` for a request the ``access`` rule lets in (else
        403), with its reads (within the deadline); a BadRequest, ValueError or
        TypeError is answered with the error page (400, or its status), reads that did
        not finish in time or a cluster's error with 503.  A refusal of an action, and
        every 403, is logged."""
        access = self.access_for(request)
        if access is None:
            return self.refuse(request, "you may not see this dashboard", 403)
        request.state.access = access
        request.state.reads = Reads(self.db, self.timeout)
        try:
            return view(request, *args)
        except BadRequest as e:
            return self.refuse(request, str(e), e.status, access.who)
        except (TypeError, ValueError, UsageError) as e:
            return self.refuse(request, str(e), 400, access.who)
        except TooSlow as e:
            return self.error(request, str(e), 503)
        except Exception as e:
            code = fdb_error_code(e)
            if code is None:
                raise
            return self.error(request, f"FoundationDB error {code}: {e}", 503)

    def refuse(self, request: Request, message: str, status: int,
               who: Optional[str] = None) -> HTMLResponse:
        """The error page of a request refused with ``status``; logged when it is an
        action's, or a 403."""
        if request.method == "POST" or status == 403:
            refused(request.scope, status, message, who)
        return self.error(request, message, status)

    def error(self, request: Request, message: str, status: int) -> HTMLResponse:
        """The error page (a 503 says when to try again)."""
        return self.render(request, "error.html", status,
                           {"retry-after": "1"} if status == 503 else None,
                           title=f"{status}", message=message, code=status)

    # -- pages -----------------------------------------------------------------------

    def overview(self, request: Request) -> Response:
        """``/``."""
        return self.render(request, "overview.html", title="Overview",
                           rows=views.overview(_reads(request), self.structures))

    def structure_page(self, request: Request) -> Response:
        """``/structure``."""
        q = request.query_params
        reads = _reads(request)
        name = q.get("s")
        structure = self.structure(name)
        group = forms.group(structure, q.get("g"), q.get("group"))
        g = None if group is None else group_hex(group)
        limit = forms.limit(q.get("limit"))
        policy = None
        kind = _kinds.of(structure)
        if kind.groups and group is not None:
            policy = reads(structure.group_policy, group)
        common = dict(title=name, name=name, kind=views.kind_of(structure), group=group,
                      g=g, policy=policy, paused=reads(views.paused, structure),
                      limit=q.get("limit"), tabs=_tabs(structure, group),
                      counts=views.tab_counts(reads, structure, group))
        if not kind.jobs:
            return self.render(request, "structure.html", **common, tab=None, found=None,
                               groups=None)
        tab = q.get("tab") or ("groups" if kind.groups and group is None else "pending")
        if tab not in common["tabs"]:
            raise BadRequest(f"tab: one of {', '.join(common['tabs'])}")
        if tab == "groups":
            after = q.get("after")
            rows = listings.group_rows(reads, structure, limit,
                                       group_from_hex(after, "after") if after else None)
            return self.render(request, "structure.html", **common, tab=tab, found=None,
                               groups=rows, after=after)
        end = q.get("end") or "min"
        if end not in ("min", "max"):
            raise BadRequest("end: min or max")
        search = q.get("q") or ""
        if len(search) > 1_000:
            raise BadRequest("q: at most 1,000 characters")
        found = listings.tab(reads, structure, tab, group=group, limit=limit,
                             search=search, end=end, after=forms.cursor(q.get("after")))
        return self.render(request, "structure.html", **common, tab=tab, found=found,
                           groups=None, search=search, end=end, after=q.get("after"))

    def job_page(self, request: Request) -> Response:
        """``/job``: a job's page by its id, or an item's by its row's token."""
        q = request.query_params
        name = q.get("s")
        structure = self.structure(name)
        group = forms.group(structure, q.get("g"))
        token = forms.cursor(q.get("token"), "token")
        id_ = forms.job_id(q.get("id"), q.get("text")) if token is None or q.get("id") \
            or q.get("text") else None
        kind = _kinds.of(structure)
        if not kind.jobs:
            raise BadRequest("a weight-tree has no jobs")
        if kind.groups and group is None:
            raise BadRequest("g: a fair-queue's jobs need their group")
        view = views.job(_reads(request), structure, id_, group, token)
        if id_ is None and view is not None and view.record is not None:
            id_ = view.record.id
        return self.render(request, "job.html", 200 if view else 404, title="Job",
                           name=name, view=view, id_hex=None if id_ is None else id_.hex(),
                           shown_id=None if id_ is None else shown_id(id_),
                           g=q.get("g"), group=group)

    def schedules_page(self, request: Request) -> Response:
        """``/schedules``."""
        reads = _reads(request)
        return self.render(request, "schedules.html", title="Schedules",
                           rows=views.schedules(reads, self.schedules, self.structures),
                           stored=views.stored(reads, self.stores, self.structures),
                           has_stores=bool(self.stores), STORED_ROWS=views.STORED_ROWS)

    def limits_page(self, request: Request) -> Response:
        """``/limits``: a limit store's limits, and one key's state."""
        q = request.query_params
        index = forms.store_index(q.get("store") or "0", self.limits, "limit")
        name = forms.limit_name(q["name"]) if q.get("name") else None
        key = flows.key_of(q["key"]) if q.get("key") else None
        view = flows.limits(_reads(request), self.limits[index], name, key)
        return self.render(request, "limits.html", title="Limits", store=index, view=view,
                           name=name, key=key, key_text=q.get("key") or "",
                           TOTALS_CAP=flows.TOTALS_CAP)

    def workflows_page(self, request: Request) -> Response:
        """``/workflows``: a page of a workflow store's workflows."""
        q = request.query_params
        index = forms.store_index(q.get("store") or "0", self.workflows, "workflow")
        after = forms.workflow_id(q["after"]) if q.get("after") else None
        rows = flows.workflows(_reads(request), self.workflows[index], after)
        return self.render(request, "workflows.html", title="Workflows", store=index,
                           rows=rows, after=after, WORKFLOW_ROWS=flows.WORKFLOW_ROWS)

    def workflow_page(self, request: Request) -> Response:
        """``/workflow``: one workflow's counts, nodes by state and graph."""
        q = request.query_params
        index = forms.store_index(q.get("store") or "0", self.workflows, "workflow")
        w = forms.workflow_id(q.get("id"))
        try:
            view = flows.workflow(_reads(request), self.workflows[index], w, self.structures,
                                  request.scope.get("root_path", ""))
        except UnknownWorkflowError as e:
            raise BadRequest(str(e), 404) from None
        return self.render(request, "workflow.html", title="Workflow", store=index,
                           view=view, w=w.hex())

    def workers_page(self, request: Request) -> Response:
        """``/workers``."""
        name = request.query_params.get("s")
        structure = self.structure(name)
        return self.render(request, "workers.html", title="Workers", name=name,
                           workers=views.workers(_reads(request), structure),
                           has_jobs=_kinds.of(structure).jobs)

    # -- actions ---------------------------------------------------------------------

    async def act(self, request: Request) -> Response:
        """``POST /act``: one action, then a redirect to the page it concerns."""
        try:
            form = await forms.read_form(request)
        except BadRequest as e:
            return self.refuse(request, str(e), e.status)
        answer: Response = await run_in_threadpool(self.answer, request, self.do, form)
        return answer

    def do(self, request: Request, form: Dict[str, str]) -> Response:
        """Check the whole form (:func:`.checks.check`: a refusal changes nothing), run
        the action, audit it whatever became of it, redirect."""
        access = _access(request)
        check = checks.check(form, access, self.structures, self.stores, self.limits,
                             self.workflows)
        done: Optional[actions.Done] = None
        outcome = "failed"
        try:
            done, page, query = self.run(check, _reads(request))
            outcome = "done"
        except Exception as e:
            outcome = f"failed: {type(e).__name__}: {cut(str(e))}"
            raise
        finally:
            audit(access.who, check.action, check.name, None if done is None else done.changed,
                  check.group, check.target(), check.scope, outcome)
        assert done is not None
        if check.back_to_job and check.id is not None:  # a job's page shows it again
            page, query = "/job", {"id": check.id.hex()}
        return self.redirect(request, form, done, page, query, check)

    def redirect(self, request: Request, form: Dict[str, str], done: actions.Done,
                 page: str, query: Dict[str, Any], check: Checked) -> Response:
        """The redirect (303) to the page an action concerns, saying what it did (and
        how to go on, signed with it)."""
        more = dict.fromkeys(MORE, "")
        if done.more is not None:
            more = {"action": check.action, "scope": check.scope, "q": check.search,
                    "tab": query.get("tab", ""), "after": done.more.hex()}
        root: str = request.scope.get("root_path", "")
        query = {"s": check.name, "g": form.get("g") or None, **query, "said": done.said,
                 **{"more_" + k: v or None for k, v in more.items()},
                 "sig": self.sign(done.said, *more.values())}
        kept = {k: v for k, v in query.items() if v is not None}
        return RedirectResponse(f"{root}{page}?{urlencode(kept)}", status_code=303)

    def run(self, check: Checked, reads: Reads) -> Tuple[actions.Done, str, Dict[str, Any]]:
        """Run one checked action; what it did, and the page (path, query) to show."""
        action, structure, group = check.action, check.structure, check.group
        db = self.db
        if action in checks.ON_SCHEDULES:
            assert check.schedule is not None
            try:
                done = actions.schedule(db, structure, check.schedule, action)
            except UnknownScheduleError as e:
                raise BadRequest(str(e), 404) from None
            return done, "/schedules", {"s": None}
        if action in checks.ON_LIMITS:
            assert check.change is not None
            if action == "set-limit":
                return (actions.set_limit(db, structure, check.change), "/limits",
                        {"s": None, "store": check.store})
            try:
                done = actions.delete_limit(db, structure, check.change.name)
            except ValueError as e:  # no limit has that name
                raise BadRequest(str(e), 404) from None
            return done, "/limits", {"s": None, "store": check.store}
        if action in checks.ON_WORKFLOWS:
            assert check.workflow is not None
            try:
                done = actions.cancel_workflow(db, structure, check.workflow)
            except UnknownWorkflowError as e:
                raise BadRequest(str(e), 404) from None
            return done, "/workflow", {"s": None, "store": check.store,
                                       "id": check.workflow.hex()}
        if action in checks.SCOPES:
            assert check.tab is not None
            if check.tokens is not None:
                done = actions.chosen(db, structure, group, action, check.tokens)
            elif check.scope == "id":
                assert check.id is not None
                done = actions.remove(db, structure, check.id, group)
            elif action == "requeue" and check.scope == "all" and not check.search:
                done = actions.requeue_dead(db, structure, group, check.cap)
            else:
                done = actions.matching(reads, structure, group, check.tab, action,
                                        check.search, check.after)
            return done, "/structure", {"tab": check.tab}
        if action in ("pause", "resume"):
            return actions.pause(db, structure, action == "pause"), "/structure", {}
        if action in ("release", "ack"):
            assert check.tokens is not None
            return (actions.settle(db, structure, check.tokens, action == "release"),
                    "/structure", {"tab": "in-flight"})
        if action == "policy":
            assert check.policy is not None
            return actions.set_policy(db, structure, group, check.policy), "/structure", {}
        if action == "cancel":
            assert check.id is not None
            return (actions.cancel(db, structure, check.id, group), "/job",
                    {"id": check.id.hex()})
        assert check.worker is not None
        return actions.command(db, structure, check.worker, action), "/workers", {}

    def routes(self) -> List[Route]:
        """The app's routes."""
        return [Route("/", Page(self, self.overview).endpoint, methods=["GET"]),
                Route("/structure", Page(self, self.structure_page).endpoint,
                      methods=["GET"]),
                Route("/job", Page(self, self.job_page).endpoint, methods=["GET"]),
                Route("/workers", Page(self, self.workers_page).endpoint, methods=["GET"]),
                Route("/schedules", Page(self, self.schedules_page).endpoint,
                      methods=["GET"]),
                Route("/limits", Page(self, self.limits_page).endpoint, methods=["GET"]),
                Route("/workflows", Page(self, self.workflows_page).endpoint,
                      methods=["GET"]),
                Route("/workflow", Page(self, self.workflow_page).endpoint, methods=["GET"]),
                Route("/act", self.act, methods=["POST"])]


class Page(NamedTuple):
    """A page's endpoint: its view, answered by the dashboard (see
    :meth:`Dashboard.answer`); Starlette runs it in its thread pool."""

    dashboard: Dashboard
    view: View

    def endpoint(self, request: Request) -> Response:
        return self.dashboard.answer(request, self.view)


#: The fields of how to go on with a bulk action that stopped at its cap.
MORE = ("action", "scope", "q", "tab", "after")


def _access(request: Request) -> Access:
    """The access the request was given (read-only before it was asked)."""
    found: Access = request.scope.get("state", {}).get("access", READ_ONLY)
    return found


def _reads(request: Request) -> Reads:
    """The request's reads (see :meth:`Dashboard.answer`)."""
    found: Reads = request.state.reads
    return found


def _tabs(structure: Any, group: Any) -> Tuple[str, ...]:
    """The tabs of a structure's page: a queue's (a FairQueue group's have no finished
    jobs: the FairQueue's own page lists every group's), a FairQueue's groups and
    finished jobs."""
    kind = _kinds.of(structure)
    if not kind.jobs:
        return ()
    if kind.groups:
        return listings.TABS[:-1] if group is not None else ("groups", "finished")
    return listings.TABS


def _spark(values: Any) -> Markup:
    """The sparkline of ``values`` (numbers only: see :func:`.show.sparkline`)."""
    return Markup(sparkline(values))


def create_app(db: Any, structures: Mapping[str, Any], *, access: AccessRule = READ_ONLY,
               schedules: Sequence[Any] = (), trusted_origins: Iterable[str] = (),
               token: Optional[str] = None, allowed_hosts: Iterable[str] = (),
               timeout: Optional[float] = DEADLINE, debug: bool = False,
               limits: Sequence[Any] = (), workflows: Sequence[Any] = ()) -> Any:
    """The dashboard of ``structures`` (names to Queue, PriorityQueue, FairQueue or
    WeightTree objects, the sync ones) on ``db``, as an ASGI app to mount anywhere::

        app.mount("/jobs", create_app(db, {"images": images}, access=FULL))

    Args:
        db: the ``fdb.Database`` every page reads with (pages read in transactions that
            are never committed; actions write through the structures' methods).
        structures: what the dashboard shows, by name (names appear in URLs and pages).
        access: an :class:`~fdbrecipes.web.Access` for every request, or a function of
            the request returning one, or None to deny it everything (403) (default
            :data:`~fdbrecipes.web.READ_ONLY`: look only).  See
            :mod:`fdbrecipes.web.access`.
        schedules: the application's :class:`fdbrecipes.Schedule` objects, shown with
            their next and last slots on ``/schedules``, and its schedule stores
            (:class:`fdbrecipes.Schedules`), whose schedules are shown there with
            pause, resume and run now (the actions ``pause-schedule``,
            ``resume-schedule`` and ``run-now``).
        trusted_origins: origins besides the request's own whose posts are accepted
            (see :func:`fdbrecipes.web.guard.cross_site`).
        token: a password every request must give (HTTP Basic; at least 16
            characters), or None.  The user name given with it names the person in the
            audit log when ``access`` names nobody.
        allowed_hosts: the names (``name`` or ``name:port``; ``*``: any) a request's
            ``Host`` may give besides ``localhost``, ``127.0.0.1``, ``[::1]`` and the
            address the server answered on (with its port); any other Host is refused
            with 421 (see :func:`fdbrecipes.web.guard.foreign_host`).
        timeout: seconds a request's reads may take in all (each read transaction is
            given what is left as its own timeout; the Database's options are not
            changed); a page that cannot finish answers 503.  None: no deadline of the
            dashboard's (the Database's transaction timeout, if any, bounds each read).
        debug: Starlette's debug pages (never in production).
        limits: the application's limit stores (:class:`fdbrecipes.Limits`), shown
            on ``/limits`` with each limit's jobs running and parked and one key's
            state, with set and delete (the actions ``set-limit`` and
            ``delete-limit``).
        workflows: the application's workflow stores
            (:class:`fdbrecipes.workflow.Workflows`), listed on ``/workflows``, each
            workflow's page drawing its graph, with cancel (the action
            ``cancel-workflow``).

    Reads nothing when made.  Costs per page: see :mod:`fdbrecipes.web.views`.

    Raises:
        TypeError or ValueError: a structure is not one of those kinds, a store is
            not a (sync) Schedule, Schedules, Limits or Workflows, a name is not a
            non-empty str, ``access`` is neither an Access nor callable, a token is
            shorter than 16 characters (an empty one included), ``allowed_hosts`` is
            a str rather than names, or ``timeout`` is not a positive number.
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
    for given, kind, what in ((limits, Limits, "limits"), (workflows, Workflows, "workflows")):
        for store in given:
            if not isinstance(store, kind):
                raise TypeError(f"{what}: a {kind.__name__} store, not {type(store).__name__}")
    if isinstance(allowed_hosts, str):
        raise TypeError("allowed_hosts: a list of names, not one str")
    hosts = list(allowed_hosts)
    if not all(isinstance(h, str) and h for h in hosts):
        raise TypeError("allowed_hosts: each a non-empty str")
    if timeout is not None:
        if isinstance(timeout, bool) or not isinstance(timeout, (int, float)):
            raise TypeError(f"timeout must be a number or None, not {type(timeout).__name__}")
        if not 0 < timeout < float("inf"):
            raise ValueError(f"timeout: a positive number of seconds, not {timeout!r}")
    dashboard = Dashboard(db, structures, access, schedules, timeout, limits, workflows)
    app = Starlette(debug=debug, routes=dashboard.routes())
    app.state.dashboard = dashboard
    return Guard(app, trusted_origins, token, hosts)
