"""What a posted action asks for, checked whole before anything is done.

:func:`check` reads every field of the form the action will use (its name and the
rights of the request, the structure and group, or the store (of schedules, limits
or workflows) and what it names there (a schedule, a limit and its definition, a
workflow), the scope, the confirmation, the tab,
the rows chosen, the job's id, the worker, the filter and cursor, the cap, a group's
policy, and the job's page to come back to) and returns them parsed, as a
:class:`Checked`; a field that is missing or wrong is a :class:`.forms.BadRequest`
(400; 403 for an action the request may not do, 404 for an unknown structure) raised
before anything is read or written.  The action then uses nothing but what it holds.
Pure Python, no I/O.
"""

from __future__ import annotations

from typing import Any, Dict, List, Mapping, NamedTuple, Optional, Sequence

from .. import _kinds
from .._schedules.ops import check_name
from . import actions, forms
from .access import Access
from .forms import BadRequest

__all__ = ["IN_A_GROUP", "NEEDS", "ON_LIMITS", "ON_SCHEDULES", "ON_WORKFLOWS", "SCOPES",
           "Checked", "check"]

#: What an action needs besides the structure: "id" (a job id), "worker", "token" (the
#: rows chosen), "yes" (the confirmation box).
NEEDS = {"requeue": ("yes",), "purge": ("yes",), "remove": ("yes",),
         "cancel": ("id", "yes"), "quiet": ("worker",), "stop": ("worker", "yes"),
         "pause": ("yes",), "resume": (), "policy": (), "release": ("token", "yes"),
         "ack": ("token", "yes"), "pause-schedule": ("yes",), "resume-schedule": (),
         "run-now": ("yes",), "set-limit": (), "delete-limit": ("yes",),
         "cancel-workflow": ("yes",)}
#: The actions on a stored schedule (named by ``store``, its store's index among the
#: stores given, and ``name``), not on a structure.
ON_SCHEDULES = ("pause-schedule", "resume-schedule", "run-now")
#: The actions on a limit store (``store``, its index among the limit stores given;
#: ``name``, and to set one ``kind``, ``n`` and ``per``).
ON_LIMITS = ("set-limit", "delete-limit")
#: The actions on a workflow store (``store``, its index among the workflow stores
#: given; ``id``, the workflow's, as hex).
ON_WORKFLOWS = ("cancel-workflow",)
#: What the actions on rows act on (``scope``; the first is the default): every row
#: (of the dead letters; of a tab, filtered by ``q``), the rows chosen (``token``),
#: those matching a filter, or the pending item with an id.
SCOPES = {"requeue": ("all", "chosen", "matching"), "purge": ("all", "chosen", "matching"),
          "remove": ("id", "chosen", "matching")}
#: The actions that need a FairQueue's group.
IN_A_GROUP = ("requeue", "purge", "remove", "cancel", "policy", "release", "ack")


class Checked(NamedTuple):
    """An action, its form checked and parsed (see the module docstring).

    Attributes:
        action: its name (one of :data:`NEEDS`).
        scope: what it acts on: "one", or one of :data:`SCOPES`.
        name: the structure's name; ``structure`` the structure; ``group`` a
            FairQueue's group (None: none).  For an action on a stored schedule:
            ``schedules N`` and the store (a :class:`fdbrecipes.Schedules`).
        tab: the tab an action on rows works in (dead letters; pending or delayed
            items for remove), else None.
        tokens: the rows chosen (scope "chosen", release, ack), else None.
        id: the job's id (cancel, remove by id, or the job's page to come back to).
        search: the filter (``q``); ``after`` the cursor to start from.
        cap: how many dead letters "requeue every one" moves at most.
        policy: a group's policy (action "policy").
        worker: the worker a quiet or stop is for.
        back_to_job: the answer shows the job's page (``back=job``) again.
        schedule: the stored schedule's name (an action of :data:`ON_SCHEDULES`).
        store: the store's index among those of its kind (an action on a store),
            else None.
        change: the limit to set or delete (an action of :data:`ON_LIMITS`).
        workflow: the workflow's id (an action of :data:`ON_WORKFLOWS`).
    """

    action: str
    scope: str
    name: str
    structure: Any
    group: Any
    tab: Optional[str]
    tokens: Optional[List[bytes]]
    id: Optional[bytes]
    search: str
    after: Optional[bytes]
    cap: int
    policy: Optional[actions.Policy]
    worker: Optional[str]
    back_to_job: bool
    schedule: Optional[str]
    store: Optional[int] = None
    change: Optional[actions.LimitChange] = None
    workflow: Optional[bytes] = None

    def target(self) -> Optional[str]:
        """What the audit line names: a stored schedule, a limit, a workflow, a
        worker, the rows chosen, a filter, a job id."""
        if self.schedule is not None:
            return self.schedule
        if self.change is not None:
            return self.change.name
        if self.workflow is not None:
            return self.workflow.hex()
        if self.worker is not None:
            return self.worker
        if self.tokens is not None:
            return f"{len(self.tokens)} chosen"
        if self.scope in ("matching", "all"):
            return f"q={self.search!r} after={'' if self.after is None else self.after.hex()!r}"
        return None if self.id is None else self.id.hex()


def _tab(action: str, form: Dict[str, str]) -> Optional[str]:
    """The tab an action on rows works in: the dead letters, or (remove) the pending
    or delayed items."""
    if action not in SCOPES:
        return None
    if action != "remove":
        return "dead"
    tab = form.get("tab") or "pending"
    if tab not in ("pending", "delayed"):
        raise BadRequest("tab: remove works on pending or delayed items")
    return tab


def check(form: Dict[str, str], access: Access, structures: Mapping[str, Any],
          stores: Sequence[Any] = (), limits: Sequence[Any] = (),
          workflows: Sequence[Any] = ()) -> Checked:
    """The action ``form`` asks for, every field it uses checked (see the module
    docstring); ``stores``: the schedule stores the actions of :data:`ON_SCHEDULES`
    may name; ``limits`` and ``workflows``: the limit and workflow stores those of
    :data:`ON_LIMITS` and :data:`ON_WORKFLOWS` may.

    Raises:
        .forms.BadRequest: a field is missing or wrong (a limit that the library
            would refuse too: 400), the action is not one ``access`` allows (403), or
            no structure, or no store, has that name (404).
        ValueError: a stored schedule's name is too long.
    """
    action = form.get("action", "")
    if action not in NEEDS:
        raise BadRequest("action: unknown")
    if not access.allows(action):
        raise BadRequest(f"{access.who} may not {action} here", 403)
    schedule: Optional[str] = None
    change: Optional[actions.LimitChange] = None
    workflow: Optional[bytes] = None
    store: Optional[int] = None
    group: Any = None
    if action in ON_SCHEDULES:
        store = forms.store_index(form.get("store"), stores, "schedule")
        name, structure = f"schedules {store}", stores[store]
        if not form.get("name"):
            raise BadRequest("name: give the schedule's name")
        schedule = check_name(form["name"])
    elif action in ON_LIMITS:
        store = forms.store_index(form.get("store"), limits, "limit")
        name, structure = f"limits {store}", limits[store]
        change = forms.limit_change(form, action == "delete-limit")
    elif action in ON_WORKFLOWS:
        store = forms.store_index(form.get("store"), workflows, "workflow")
        name, structure = f"workflows {store}", workflows[store]
        workflow = forms.workflow_id(form.get("id"))
    else:
        name = form.get("s") or ""
        structure = forms.structure_named(structures, name)
        group = forms.group(structure, form.get("g"))
    allowed = SCOPES.get(action, ("one",))
    scope = form.get("scope") or allowed[0]
    if scope not in allowed:
        raise BadRequest(f"scope: one of {', '.join(allowed)}")
    needs = NEEDS[action] + (("id",) if scope == "id" else ("token",) if scope == "chosen"
                             else ())
    if "yes" in needs and form.get("yes") != "1":
        raise BadRequest("tick the confirmation box to do this")
    if "worker" in needs and not form.get("worker"):
        raise BadRequest("worker: give its id")
    kind = _kinds.find(structure)  # None: a store
    groups = kind is not None and kind.groups
    if groups and group is None and action in IN_A_GROUP:
        raise BadRequest("g: a fair-queue's group is needed")
    if action == "policy" and not groups:
        raise BadRequest("only a fair-queue's groups have a policy")
    back_to_job = form.get("back") == "job" and store is None
    wants_id = store is None and ("id" in needs or back_to_job
                                  or bool(form.get("id") or form.get("text")))
    return Checked(
        action, scope, name, structure, group, _tab(action, form),
        forms.tokens(form.get("token", "")) if "token" in needs else None,
        forms.job_id(form.get("id"), form.get("text")) if wants_id else None,
        form.get("q", "") if scope in ("matching", "all") else "",
        forms.cursor(form.get("after")) if scope in ("matching", "all") else None,
        forms.limit(form.get("limit"), actions.REQUEST_CAP, actions.REQUEST_CAP)
        if (action, scope) == ("requeue", "all") else actions.REQUEST_CAP,
        forms.policy(form) if action == "policy" else None,
        form.get("worker") if "worker" in needs else None,
        back_to_job, schedule, store, change, workflow)
