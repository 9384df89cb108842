"""fdbrecipes.types names the public value types, and they are the very objects the
package and the structures' modules export (needs no server)."""

from __future__ import annotations

import fdbrecipes
import fdbrecipes.fair_queue
import fdbrecipes.limits
import fdbrecipes.schedules
import fdbrecipes.types


def test_every_name_is_there() -> None:
    missing = [name for name in fdbrecipes.types.__all__ if not hasattr(fdbrecipes.types, name)]
    assert not missing


def test_the_package_exports_the_same_objects() -> None:
    shared = [name for name in fdbrecipes.types.__all__ if name in fdbrecipes.__all__]
    assert shared, "the package exports none of the value types"
    different = [name for name in shared
                 if getattr(fdbrecipes, name) is not getattr(fdbrecipes.types, name)]
    assert not different


def test_the_structures_modules_export_the_same_objects() -> None:
    for module in (fdbrecipes.fair_queue, fdbrecipes.schedules, fdbrecipes.limits):
        for name in module.__all__:
            if name in fdbrecipes.types.__all__:
                assert getattr(module, name) is getattr(fdbrecipes.types, name), name


def test_the_package_value_types_are_all_there() -> None:
    """Every value type the package exports is in types (a new one added to the package
    alone fails here)."""
    values = {"CatchUp", "DeadLetter", "DelayedItem", "FairLease", "FairStats", "FinishedJob",
              "JobError", "JobRecord", "Lease", "LeaseInfo", "Limit", "LimitState", "LimitUse",
              "Minute", "Outcome", "PendingItem",
              "Progress", "QueueStats", "RetryStats", "RunningJob", "ScheduleFire",
              "ScheduleInfo", "Transactor", "Value", "WorkerInfo"}
    assert values <= set(fdbrecipes.types.__all__)
    assert values <= set(fdbrecipes.__all__)
