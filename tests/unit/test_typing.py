"""Queue, PriorityQueue and their asyncio twins are generic in the type of their
values: ``Queue[bytes]`` types what ``pop`` returns and ``Lease.value``; a plain
``Queue`` holds any value.  Checked at runtime and, where mypy is installed (the
``dev`` dependency group), by mypy itself."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from fdbrecipes import Lease, PriorityQueue, Queue, aio

CHECKED = textwrap.dedent(
    """
    from typing import List, Optional
    from typing_extensions import assert_type
    import fdb
    from fdbrecipes import Lease, PriorityQueue, Queue, Value, aio

    async def check(db: fdb.Database) -> None:
        q: Queue[bytes] = Queue(fdb.Subspace(("q",)))
        assert_type(q.pop(db), Optional[bytes])
        assert_type(q.pop_many(db, 2), List[bytes])
        lease = q.claim(db, 30)
        if lease is not None:
            assert_type(lease.value, bytes)
        q.push(db, "text")  # E: not bytes

        any_q = Queue(fdb.Subspace(("any",)))  # no annotation needed
        assert_type(any_q.pop(db), Optional[Value])

        p: PriorityQueue[str] = PriorityQueue(fdb.Subspace(("p",)))
        assert_type(p.pop_max(db), Optional[str])
        assert_type(p.claim_min(db, 30), Optional[Lease[str]])

        a: aio.AsyncQueue[int] = aio.AsyncQueue(fdb.Subspace(("a",)))
        assert_type(await a.pop(db), Optional[int])
        async with a.claimed(db, lease_seconds=30) as held:
            if held is not None:
                assert_type(held.value, int)
    """
)


def test_the_structures_are_subscriptable_at_runtime() -> None:
    for cls in (Queue, PriorityQueue, aio.AsyncQueue, aio.AsyncPriorityQueue, Lease):
        assert cls[bytes] is not None  # type: ignore[index]


def test_mypy_types_values_from_the_type_argument(tmp_path: Path) -> None:
    api = pytest.importorskip("mypy.api", reason="mypy is in the dev dependency group")
    source = tmp_path / "typed_use.py"
    source.write_text(CHECKED)
    out, err, status = api.run([str(source), "--strict", "--no-incremental",
                                "--ignore-missing-imports",  # fdb ships no types
                                "--cache-dir", str(tmp_path / "cache")])
    errors = [line for line in out.splitlines() if ": error:" in line]
    # exactly one error: the push of a str to a Queue[bytes]
    assert len(errors) == 1, out + err
    line = CHECKED.splitlines().index('    q.push(db, "text")  # E: not bytes') + 1
    assert f"typed_use.py:{line}: error: Argument 2" in errors[0], out
    assert status == 1
