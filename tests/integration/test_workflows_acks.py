"""Workflows against a real server: the steps of nodes acked together, in one
transaction (a worker's acks), go side by side (``_workflow/advancing.py``) and do
what one step after another did: a counter several of them count down reaches 0 in
one transaction only, tallies count each node once, a node that stops its workflow
keeps its siblings acked with it from pushing anything."""

from __future__ import annotations

import random
from typing import Any, List

import pytest

from fdbrecipes import Queue
from fdbrecipes._drivers.blocking import drive
from fdbrecipes._records.history import Finished
from fdbrecipes._workflow.steps import step_of
from fdbrecipes.workflow import Workflows

pytestmark = pytest.mark.integration


def ack_together(db: Any, q: Queue[Any], leases: List[Any], states: List[str]) -> None:
    """Ack ``leases`` in one transaction, each ending as its state (succeeded, or
    cancelled), with its workflow step, as a worker's acks are."""
    finished = [Finished(lease, followups=(step_of(q.ops, lease.id, state, None),),
                         state=state) for lease, state in zip(leases, states)]
    assert drive(q.ops.finish_many(db, finished)) == [True] * len(leases)


def first_leaf(leaves: List[Any]) -> Any:
    """The leaf an ack counts down in, of those that have enough: the first."""
    return leaves[0]


def in_order(_leaves: List[Any]) -> None:
    """The leaves an ack takes from, when none has enough: in order."""


@pytest.mark.parametrize("per_ack", [300, 100, 7])
@pytest.mark.parametrize("pick", ["random", "first"])
def test_children_acked_together_push_the_callback_once(
        db: Any, fdb_subspace: Any, monkeypatch: pytest.MonkeyPatch, per_ack: int,
        pick: str) -> None:
    """A fan-in of 300 children (three leaves of counters and a root), acked
    ``per_ack`` at a time: the callback is pushed once, by the ack of the last, and
    the tallies count every child once.  Each ack counts its children down in a leaf
    that has enough, picked at random, or (``first``) in the first that has: the
    leaves run dry in order, and an ack takes from two when none has enough."""
    if pick == "first":
        monkeypatch.setattr(random, "choice", first_leaf)
        monkeypatch.setattr(random, "shuffle", in_order)
    q: Queue[Any] = Queue(fdb_subspace["q"])
    flows = Workflows(fdb_subspace["flows"], structures=[q])
    flow = flows.new()
    kids = flow.add_many(q, range(300))
    flow.add(q, "callback", deps=kids, name="callback")
    w = flows.create(db, flow)
    seen: List[Any] = []
    while True:
        leases = q.claim_many(db, per_ack, 30)
        if not leases:
            break
        seen.extend(lease.value for lease in leases)
        ack_together(db, q, leases, ["succeeded"] * len(leases))
        if "callback" in seen:
            break
    assert sorted(v for v in seen if v != "callback") == list(range(300))
    assert seen.count("callback") == 1 and seen[-1] == "callback"
    status = flows.status(db, w, 0)
    assert status.state == "succeeded"
    assert status.counts["succeeded"] == 301 and status.counts["queued"] == 0


@pytest.mark.parametrize("first", ["failing", "succeeding"])
def test_a_stop_among_acks_taken_together_pushes_nothing(db: Any, fdb_subspace: Any,
                                                         first: str) -> None:
    """Two nodes acked in one transaction: one ends cancelled under ``fail`` (the
    workflow fails), the other succeeds and frees its dependent.  Whichever comes
    first, the dependent is not pushed (the stop cancelled it), the one under
    ``fail`` ends cancelled, and the tallies count each node once."""
    q: Queue[Any] = Queue(fdb_subspace["q"])
    flows = Workflows(fdb_subspace["flows"], structures=[q])
    flow = flows.new()
    bad = flow.add(q, "bad", name="bad")
    good = flow.add(q, "good", name="good")
    flow.add(q, "after bad", deps=[bad], name="after bad")
    flow.add(q, "after good", deps=[good], name="after good")
    w = flows.create(db, flow)
    leases = sorted(q.claim_many(db, 2, 30), key=lambda lease: lease.value != "bad")
    states = ["cancelled", "succeeded"]
    if first == "succeeding":
        leases.reverse()
        states.reverse()
    ack_together(db, q, leases, states)
    assert q.claim_many(db, 10, 30) == []
    status = flows.status(db, w)
    assert status.state == "failed"
    by_name = {node.name: node.state for node in status.nodes}
    assert by_name == {"bad": "cancelled", "good": "succeeded", "after bad": "cancelled",
                       "after good": "cancelled"}
    assert status.counts["cancelled"] == 3 and status.counts["succeeded"] == 1
    assert status.counts["queued"] == 0 and status.counts["waiting"] == 0
