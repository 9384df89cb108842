"""``fdbrecipes workflow``: the workflows kept in a store
(:class:`fdbrecipes.workflow.Workflows`).

Usage::

    fdbrecipes workflow list   --directory app/flows --limit 20   # in the order of their ids
    fdbrecipes workflow status --directory app/flows 3f2a...e1    # counts, who waits on what
    fdbrecipes workflow result --directory app/flows 3f2a...e1 --wait 60
    fdbrecipes workflow cancel --directory app/flows 3f2a...e1 --yes

The store is named as ``fdbrecipes limits`` names one (``--directory`` or ``--tuple``,
``--cluster-file``, ``--timeout``, ``--json``); the place must hold a workflow store or
nothing.  A workflow is named by its id in hex (what ``list`` shows, in the order
of the ids, as :meth:`fdbrecipes.workflow.Workflows.list` gives them; ``create``
returns the bytes: ``workflow_id.hex()``).  ``--timeout`` bounds every transaction, as
for every command; ``result --wait SECONDS`` waits (on a watch) that long for the
workflow to be over, as ``job --wait`` does for a job.

The command knows the application's structures only by their keys: ``result`` shows
the results as the store keeps them (a structure's codec is not applied: a task's
result is its codec's bytes); ``cancel`` opens the structures the workflow's nodes go
to (:meth:`fdbrecipes.workflow.Workflows.targets`) to take its queued nodes out and
tell the workers of its running ones.  Exit status as the operator commands;
``result`` exits 1 when the workflow failed, was cancelled or is still running.
"""

from __future__ import annotations

import argparse
from typing import Any, Dict, List

from fdb.subspace_impl import Subspace

from ..errors import UnknownWorkflowError, WorkflowFailedError
from ..workflow import LIST_LIMIT, Workflows, WorkflowStatus
from .arguments import positive_int, seconds
from .commands import Report, read_only
from .output import cut, iso_time, json_value, listing, table
from .places import (
    ANY_QUEUE,
    WORKFLOW_STORE,
    Place,
    UsageError,
    make_structure,
    shards_of,
    stored,
)
from .stores import At, StoreCommand, place_options

__all__ = ["WORKFLOWS", "WorkflowCommand", "parse_workflow_id"]

#: What each action does, for ``--help``.
ACTIONS = {"list": "list the workflows in the order of their ids, with their state and "
                   "counts (--after ID: the next page)",
           "status": "a workflow's state, its nodes by state, and what each waiting node "
                     "waits on",
           "result": "a workflow's results (its last nodes'), once it is over",
           "cancel": "cancel a workflow: nothing not started runs (needs --yes)"}
#: Workflows ``list`` shows, unless ``--limit`` says.
LIST_SHOWN = 20
#: Nodes ``status`` shows, unless ``--limit`` says.
NODE_LIMIT = 100
#: The states of a workflow's nodes, in the order the counts are shown.
NODE_STATES = ("waiting", "queued", "succeeded", "failed", "cancelled", "skipped")


def parse_workflow_id(text: str) -> bytes:
    """A workflow's id, given in hex.

    Raises:
        UsageError: not 1 to 100 bytes of hex.
    """
    try:
        id_ = bytes.fromhex(text)
    except ValueError:
        raise UsageError(f"ID {cut(repr(text), 60)} is not a workflow id in hex (as "
                         "'fdbrecipes workflow list' shows it)") from None
    if not 0 < len(id_) <= 100:
        raise UsageError("ID must be 1 to 100 bytes of hex")
    return id_


def arguments(parser: argparse.ArgumentParser) -> None:
    """``workflow``'s actions and their options."""
    parser.description = ("The workflows kept in a store: list them, read one's status "
                          "or results, cancel one.")
    actions = parser.add_subparsers(dest="action", required=True, metavar="ACTION")
    for action, what in ACTIONS.items():
        sub = actions.add_parser(action, help=what, description=what[0].upper() + what[1:])
        place_options(sub)
        if action == "list":
            sub.add_argument("--limit", type=positive_int, default=LIST_SHOWN, metavar="N",
                             help=f"at most N (default {LIST_SHOWN}, at most {LIST_LIMIT:,})")
            sub.add_argument("--after", metavar="ID",
                             help="start after this workflow id (the last of a page)")
            continue
        sub.add_argument("id", metavar="ID", help="the workflow's id, in hex")
        if action == "status":
            sub.add_argument("--limit", type=positive_int, default=NODE_LIMIT, metavar="N",
                             help=f"show the first N nodes (default {NODE_LIMIT})")
        elif action == "result":
            sub.add_argument("--wait", type=seconds, metavar="SECONDS",
                             help="first wait until the workflow is over, at most SECONDS "
                             "(on a watch)")
        else:
            sub.add_argument("--yes", action="store_true", help="really cancel it")


def _when(epoch: Any) -> str:
    return "-" if epoch is None else iso_time(epoch)


def status_json(status: WorkflowStatus) -> Dict[str, Any]:
    """A workflow's status as JSON."""
    return {"id": status.id.hex(), "state": status.state, "total": status.total,
            "counts": dict(status.counts), "created_at": status.created_at,
            "ended_at": status.ended_at, "why": status.why,
            "nodes": [{"name": n.name, "state": n.state, "waiting_on": list(n.waiting_on)}
                      for n in status.nodes]}


def status_row(status: WorkflowStatus) -> List[str]:
    """A workflow's row in ``list``."""
    return [status.id.hex(), status.state, str(status.total),
            *(str(status.counts.get(state, 0)) for state in NODE_STATES),
            _when(status.created_at)]


def structures_at(tr: Any, keys: List[bytes]) -> List[Any]:
    """The structures at ``keys`` (subspace prefixes), each as its keys say it is (a
    place whose keys do not tell: a queue; nothing of its nodes waits there then)."""
    out = []
    for key in keys:
        subspace = Subspace(rawPrefix=key)
        kind, wrong = stored(tr, subspace)
        if wrong is not None or kind in (None, ANY_QUEUE):
            kind = "queue"
        out.append(make_structure(kind, subspace, None, shards=shards_of(tr, subspace)))
    return out


class WorkflowCommand(StoreCommand[Workflows]):
    """``fdbrecipes workflow``: a row of the command line (see the module docstring)."""

    name = "workflow"
    help = "list the workflows kept in a store, read one's status or results, cancel one"
    what = WORKFLOW_STORE
    noun = "workflows"
    confirm = ("cancel", "cancel a workflow")
    refused = (UnknownWorkflowError,)

    def arguments(self, parser: argparse.ArgumentParser) -> None:
        arguments(parser)

    def check(self, args: argparse.Namespace) -> bytes:
        """The workflow's id (``list``: none, ``b""``; its ``--limit`` and ``--after``
        checked).

        Raises:
            UsageError: a bad id, a ``--limit`` over the store's.
        """
        id_ = parse_workflow_id(args.id) if args.action != "list" else b""
        if args.action == "list":
            if args.limit > LIST_LIMIT:
                raise UsageError(f"--limit: at most {LIST_LIMIT:,}")
            if args.after is not None:
                parse_workflow_id(args.after)
        return id_

    def opened(self, db: Any, subspace: Any, args: argparse.Namespace,
               id_: Any) -> Workflows:
        """The store; to ``cancel``, with the structures the workflow's nodes go to
        (:meth:`fdbrecipes.workflow.Workflows.targets`)."""
        structures: List[Any] = []
        if args.action == "cancel":
            keys = Workflows(subspace, structures=()).targets(db, id_)
            structures = read_only(db, structures_at, keys)
        return Workflows(subspace, structures=structures)

    def refusal(self, error: Exception, args: argparse.Namespace, place: Place) -> str:
        return f"no workflow {args.id} at {place} (never created, or pruned)"

    def acted(self, at: At, store: Workflows, args: argparse.Namespace,
              id_: Any) -> Report:
        """What the action does to ``store`` (``id_``: the workflow's): its report."""
        db, title, head = at.db, at.title, at.head
        if args.action == "list":
            after = None if args.after is None else parse_workflow_id(args.after)
            found = store.list(db, args.limit, after)
            text = listing(title, [status_row(s) for s in found],
                           ("id", "state", "nodes", *NODE_STATES, "created (UTC)"),
                           "(no workflows)", args.limit)
            return Report({**head, "workflows": [status_json(s) for s in found]}, text)
        if args.action == "status":
            status = store.status(db, id_, args.limit)
            return Report({**head, **status_json(status)}, status_text(title, status,
                                                                        args.limit))
        if args.action == "result":
            return result(db, store, id_, args, head, title)
        cancelled = store.cancel(db, id_)
        said = "cancelled" if cancelled else "was over already: nothing to cancel"
        return Report({**head, "id": id_.hex(), "cancelled": cancelled},
                      f"{title}: {id_.hex()}: {said}")


def status_text(title: str, status: WorkflowStatus, limit: int) -> str:
    """``status``' table."""
    counts = ", ".join(f"{status.counts.get(s, 0)} {s}" for s in NODE_STATES)
    lines = [f"{title}: {status.id.hex()}: {status.state}, {status.total} nodes ({counts})",
             f"created {_when(status.created_at)} UTC"
             + ("" if status.ended_at is None else f", ended {_when(status.ended_at)} UTC")
             + ("" if status.why is None else f": {status.why}")]
    rows = [[n.name, n.state, ", ".join(n.waiting_on) or "-"] for n in status.nodes]
    lines.append(table(rows, ("node", "state", "waiting on")) if rows else "(no nodes shown)")
    if status.total > len(status.nodes) >= limit:
        lines.append(f"(the first {limit} of {status.total} nodes: --limit N shows more)")
    return "\n".join(lines)


def result(db: Any, store: Workflows, id_: bytes, args: argparse.Namespace,
           head: Dict[str, Any], title: str) -> Report:
    """``result``: the results of a workflow that is over (with ``--wait``, once it is);
    exit status 1 when it failed, was cancelled or still runs."""
    try:
        if args.wait is None and store.status(db, id_, 0).state == "running":
            raise TimeoutError
        found = store.result(db, id_, timeout=args.wait)
    except TimeoutError:
        status = store.status(db, id_, 0)
        return Report({**head, "id": id_.hex(), "state": status.state, "results": None},
                      f"{title}: {id_.hex()}: still running", 1,
                      f"workflow {id_.hex()} is still running"
                      + ("" if args.wait is None else f" after {args.wait:g} s")
                      + " (--wait SECONDS waits for it)")
    except WorkflowFailedError as e:
        status = e.status
        return Report({**head, "id": id_.hex(), "state": status.state, "why": status.why,
                       "results": None}, f"{title}: {id_.hex()}: {status.state}", 1,
                      f"workflow {id_.hex()} {status.state}: {status.why}")
    rows = [[name, cut(repr(value))] for name, value in found.items()]
    state = store.status(db, id_, 0).state
    return Report({**head, "id": id_.hex(), "state": state,
                   "results": {name: json_value(v) for name, v in found.items()}},
                  f"{title}: {id_.hex()}: {state}; the results of its last nodes\n"
                  + table(rows, ("node", "result")))


#: The command's row.
WORKFLOWS = WorkflowCommand()
