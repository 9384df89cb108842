"""The benchmark's own baselines, which the library's figures are divided by, do what
their rows say: the recipe's pop takes the oldest item, the bare probe pop one of the 16
oldest, each item once; on a real server."""

from __future__ import annotations

from typing import Any, List, Optional

import pytest
from fdb.subspace_impl import Subspace

from fdbrecipes.bench.recipe import PROBE_WINDOW, RecipeQueue

pytestmark = pytest.mark.integration


def indexes(recipe: RecipeQueue, db: Any) -> List[int]:
    """The indexes of the items left, in key order."""
    r = recipe.subspace.range()
    return [recipe.subspace.unpack(kv.key)[0] for kv in db.get_range(r.start, r.stop)]


def test_the_recipe_pop_takes_the_oldest(db: Any, fdb_subspace: Subspace) -> None:
    recipe = RecipeQueue(fdb_subspace)
    recipe.fill(db, 5)
    assert [recipe.pop(db) for _ in range(6)] == [b"x"] * 5 + [None]
    assert recipe.stats.retries == 0


def test_the_probe_pop_takes_one_of_the_16_oldest_once(db: Any,
                                                         fdb_subspace: Subspace) -> None:
    recipe = RecipeQueue(fdb_subspace)
    recipe.fill(db, 40)
    taken: List[int] = []
    while True:
        left = indexes(recipe, db)
        value: Optional[bytes] = recipe.probe_pop(db)
        if value is None:
            assert left == []
            break
        assert value == b"x"
        (gone,) = set(left) - set(indexes(recipe, db))
        assert left.index(gone) < PROBE_WINDOW == 16
        taken.append(gone)
    assert sorted(taken) == list(range(40)) and taken != list(range(40))
    assert recipe.stats.retries == 0
