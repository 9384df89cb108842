"""What a worker adds for a job that is a workflow's node: the workflow's step, in
the transaction that acks the job (:class:`Step`, one of the ack's follow-ups).  The
transaction that makes it a dead letter, whatever its path, runs the step itself (see
:meth:`.ops.WorkflowOps.buried`)."""

from __future__ import annotations

from typing import Any, NamedTuple, Optional, Sequence

from .._fdb import Gen
from .._records.history import Then
from .._records.records import CANCELLED, SUCCEEDED
from .advancing import Ended
from .engine import Store
from .graph import parse_node_id
from .ops import WorkflowOps, stores_of
from .reading import FAILED

__all__ = ["Expand", "Step", "is_expander", "node_store", "step_of"]


class Step(NamedTuple):
    """Node ``i`` of workflow ``w`` in ``store`` ended (``outcome``, its encoded
    ``result``, what it failed with): pushed with the job's ack like a follow-up."""

    store: Store
    w: bytes
    i: int
    outcome: str
    result: Optional[bytes]
    error: Optional[str]

    def push(self, tr: Any) -> Gen[None]:
        """The step, in the ack's transaction ``tr`` (see :meth:`.engine.Store.advance`)."""
        return self.store.advance(tr, self.w, self.i, self.outcome, self.result, self.error)

    def together(self) -> Store:
        """What the steps pushed together share (see ``_records.history.push_all``):
        their store."""
        return self.store

    def push_many(self, tr: Any, steps: Sequence[Step]) -> Gen[None]:
        """``steps`` (of this step's store, this one among them), in the acks'
        transaction ``tr``, side by side (see :meth:`.engine.Store.advance_many`)."""
        return self.store.advance_many(tr, [Ended(s.w, s.i, s.outcome, s.result, s.error)
                                            for s in steps])


class Expand(NamedTuple):
    """The ack of an expander: chunk ``chunk`` of the nodes node ``source`` of
    workflow ``w`` freed is pushed (see :meth:`.engine.Store.expand`)."""

    store: Store
    w: bytes
    source: int
    chunk: int

    def push(self, tr: Any) -> Gen[None]:
        """The pushes, in the ack's transaction ``tr``."""
        return self.store.expand(tr, self.w, self.source, self.chunk)


def is_expander(id_: Optional[bytes]) -> bool:
    """Whether job ``id_`` is a workflow's expander (a worker acks it without calling
    its handler: its ack pushes the nodes it stands for)."""
    parsed = parse_node_id(id_)
    return parsed is not None and parsed.chunk is not None


def node_store(ops: Any, id_: Optional[bytes]) -> Optional[WorkflowOps]:
    """The workflow store of job ``id_`` (a node's, or an expander's) of the structure
    whose operations are ``ops``; None if the job is no workflow's.

    Raises:
        LookupError: it is a workflow's, of a store this process did not make with the
            structure (the job is not acked: it runs again, in a worker that knows).
    """
    parsed = parse_node_id(id_)
    if parsed is None:
        return None
    store = stores_of(ops).get(parsed.tag)
    if store is None:
        raise LookupError(f"job {id_!r} is a workflow's, of a store this process did "
                          f"not make with {ops!r}: make the Workflows store with it")
    return store


def step_of(ops: Any, id_: Optional[bytes], state: str,
            result: Optional[bytes]) -> Optional[Then]:
    """The step to push with the ack of job ``id_`` ending as ``state`` (succeeded, or
    cancelled), or None if it is no workflow's job.

    Raises:
        LookupError: see :func:`node_store`.
    """
    store = node_store(ops, id_)
    if store is None:
        return None
    parsed = parse_node_id(id_)
    assert parsed is not None
    if parsed.chunk is not None:
        return Expand(store.store, parsed.w, parsed.i, parsed.chunk)
    outcome = SUCCEEDED if state == SUCCEEDED else (CANCELLED if state == CANCELLED
                                                    else FAILED)
    return Step(store.store, parsed.w, parsed.i, outcome, result, None)
