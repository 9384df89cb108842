"""Unique keys without a server: the checks of :class:`fdbrecipes.Unique` (each
refusal names its argument) and the mark a unique job's id carries."""

from __future__ import annotations

from typing import Any

import pytest

from fdbrecipes import Queue, Unique
from fdbrecipes._ordered.unique import check_unique, mark_of


@pytest.mark.parametrize("args, kwargs, error, name", [
    ((3,), {}, TypeError, "unique key"),
    (("",), {}, ValueError, "unique key"),
    ((b"x" * 201,), {}, ValueError, "unique key"),
    (("k",), {"covers": "done"}, ValueError, "covers"),
    (("k",), {"covers": "finished"}, ValueError, "window"),
    (("k",), {"covers": "finished", "window": 0}, ValueError, "window"),
    (("k",), {"covers": "finished", "window": "1"}, TypeError, "window"),
    (("k",), {"window": 5}, ValueError, "window"),
    (("k",), {"on_conflict": "ignore"}, ValueError, "on_conflict"),
])
def test_bad_arguments_are_named(args: Any, kwargs: Any, error: Any, name: str) -> None:
    with pytest.raises(error, match=name):
        Unique(*args, **kwargs)


def test_check_unique_takes_a_key_alone() -> None:
    assert check_unique(None) is None
    assert check_unique("k") == Unique("k")
    assert check_unique(b"k") != Unique("k")
    with pytest.raises(TypeError, match="unique must be"):
        check_unique(("k", "running"))


@pytest.mark.parametrize("unique", [
    Unique("k"), Unique(b"a:b:c\x00\xff"), Unique("ключ", covers="queued"),
    Unique("k", covers="finished", window=1.5, on_conflict="replace"),
])
def test_an_id_says_what_its_job_holds(unique: Unique) -> None:
    made = unique.made_id()
    assert made.startswith(b"unique:") and made != unique.made_id()
    mark = mark_of(made)
    assert mark is not None
    assert (mark.token, mark.covers) == (unique.token, unique.covers)
    assert mark.window == (0 if unique.window is None else int(unique.window * 1_000_000))


@pytest.mark.parametrize("id_", [None, b"order-17", b"unique:", b"unique:ab:x1:sk",
                                 b"unique:ab:r:sk", b"unique:ab"])
def test_other_ids_carry_no_mark(id_: Any) -> None:
    assert mark_of(id_) is None


def test_a_push_refuses_before_it_touches_anything() -> None:
    from fdb.subspace_impl import Subspace

    q: Queue[int] = Queue(Subspace(("u",)))
    for bad, error in ((3, TypeError), (Unique("k"), ValueError)):
        with pytest.raises(error):
            q.push(None, 1, unique=bad, id=b"x")  # type: ignore[arg-type]
