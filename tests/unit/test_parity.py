"""Every sync class and its async twin offer the same calls: names, parameters,
defaults, parameter types and docstrings (needs no server).

The async methods are written by ``tools/unasync.py`` from the sync ones (signature,
docstring, code; ``test_unasync.py`` checks the files are up to date); this test
checks what that gives, as the classes are imported: the same names, parameters and
types, and each twin saying what that script makes of its sync method's docstring
(see ``fdbrecipes._face``).
"""

from __future__ import annotations

import inspect
from typing import Any, List, Tuple

import pytest

from fdbrecipes import (
    FairQueue,
    Limits,
    PriorityQueue,
    Queue,
    Schedules,
    WeightTree,
    Worker,
)
from fdbrecipes.aio import (
    AsyncFairQueue,
    AsyncLimits,
    AsyncPriorityQueue,
    AsyncQueue,
    AsyncSchedules,
    AsyncWeightTree,
    AsyncWorker,
)
from fdbrecipes.aio.workflow import AsyncWorkflows
from fdbrecipes.workflow import Workflows
from tools import unasync

PAIRS = [(Queue, AsyncQueue), (PriorityQueue, AsyncPriorityQueue),
         (WeightTree, AsyncWeightTree), (FairQueue, AsyncFairQueue), (Worker, AsyncWorker),
         (Schedules, AsyncSchedules), (Limits, AsyncLimits), (Workflows, AsyncWorkflows)]
IDS = [sync.__name__ for sync, _ in PAIRS]
#: Parameters whose types differ by design: a worker's handler is sync or async.
TYPED_APART = {("Worker", "__init__", "handler")}


def public(cls: type) -> List[str]:
    """The public methods and properties of ``cls`` (its constructor included)."""
    names = [name for name, _ in inspect.getmembers(cls) if not name.startswith("_")]
    return sorted(names + ["__init__"])


def members(cls: type) -> List[Tuple[str, Any]]:
    return [(name, inspect.getattr_static(cls, name)) for name in public(cls)]


@pytest.mark.parametrize(("sync", "twin"), PAIRS, ids=IDS)
def test_the_same_public_names(sync: type, twin: type) -> None:
    assert public(twin) == public(sync)


@pytest.mark.parametrize(("sync", "twin"), PAIRS, ids=IDS)
def test_methods_are_async_where_they_wait(sync: type, twin: type) -> None:
    for name, found in members(twin):
        if isinstance(found, property) or name == "__init__":
            continue
        method = getattr(twin, name)
        if method is getattr(sync, name):  # one base's, for both: it waits for nothing
            continue
        if name.startswith("claimed") or name == "stop":  # a context manager; a signal
            assert not inspect.iscoroutinefunction(method), name
        else:
            assert inspect.iscoroutinefunction(method), name
        assert not inspect.iscoroutinefunction(getattr(sync, name)), name


@pytest.mark.parametrize(("sync", "twin"), PAIRS, ids=IDS)
def test_the_same_parameters_defaults_and_types(sync: type, twin: type) -> None:
    for name, found in members(sync):
        if isinstance(found, property):
            continue
        ours = inspect.signature(getattr(sync, name)).parameters
        theirs = inspect.signature(getattr(twin, name)).parameters
        assert list(theirs) == list(ours), f"{sync.__name__}.{name}"
        for param, mine in ours.items():
            other = theirs[param]
            assert (other.kind, other.default) == (mine.kind, mine.default), param
            if (sync.__name__, name, param) not in TYPED_APART:
                assert other.annotation == mine.annotation, f"{sync.__name__}.{name}: {param}"


@pytest.mark.parametrize(("sync", "twin"), PAIRS, ids=IDS)
def test_the_same_docstrings(sync: type, twin: type) -> None:
    """Each twin's docstring is its sync method's, as ``tools/unasync.py`` adapts it:
    a first line naming the sync method, its wording about blocking and threads, and
    the edits where the async method differs (which that script lists)."""
    for name, found in members(sync):
        if name == "__init__":
            continue
        mine = inspect.getdoc(found if isinstance(found, property) else getattr(sync, name))
        theirs = inspect.getdoc(inspect.getattr_static(twin, name)
                                if isinstance(found, property) else getattr(twin, name))
        assert mine, f"{sync.__name__}.{name} has no docstring"
        if isinstance(found, property) or getattr(twin, name) is getattr(sync, name):
            assert theirs == mine, name  # a property, or one base's method for both
            continue
        # a method shared with Queue is documented on Queue
        shared = sync is not Queue and getattr(Queue, name, None) is getattr(sync, name)
        owner = "Queue" if shared else sync.__name__
        method = getattr(twin, name)
        kind = (unasync.COROUTINE if inspect.iscoroutinefunction(method) else
                unasync.CONTEXT if name.startswith("claimed") else unasync.PLAIN)
        defined_on = method.__qualname__.split(".")[0]
        assert theirs == unasync.adapt(defined_on, name, owner, mine, kind), name
        assert theirs.startswith(f"The async twin of :meth:`fdbrecipes.{owner}.{name}`"
                                 if kind != unasync.PLAIN else
                                 f"The twin of :meth:`fdbrecipes.{owner}.{name}`"), name
