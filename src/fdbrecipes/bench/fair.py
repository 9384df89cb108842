"""The fair queue's measurements run in the parent process: claim latency by the number
of groups, and the noisy neighbour (how much of the first claims a loud group gets while
quiet groups are served)."""

from __future__ import annotations

import time
from typing import Any, List

from .. import FairQueue
from .clients import BenchError
from .fill import fill_fair_groups
from .recipe import QUEUE_FILL_BATCH, VALUE, chunks
from .results import NoisyNeighbour
from .settings import LEASE_SECONDS, NOISY_ITEMS, QUIET_GROUPS, QUIET_ITEMS

#: The noisy neighbour's loud group.
LOUD = "loud"


def time_claims(db: Any, queue: FairQueue, samples: int) -> List[float]:
    """Seconds taken by each of ``samples`` claims; each claimed item is acked and an
    item pushed to its group again (not timed), so the groups with work stay the
    same."""
    seconds = []
    for _ in range(samples):
        start = time.perf_counter()
        lease = queue.claim(db, LEASE_SECONDS)
        seconds.append(time.perf_counter() - start)
        if lease is None:
            raise BenchError("the FairQueue was empty during the latency measurement")
        queue.ack(db, lease)
        queue.push(db, VALUE, group=lease.group)
    return seconds


def noisy_neighbour(db: Any, queue: FairQueue) -> NoisyNeighbour:
    """Fill ``queue`` (empty) with 20,000 items of one loud group and 20 items of each
    of 10 quiet groups, all of share 1; claim and ack one item at a time until every
    quiet item is served, counting the claims and those the loud group got."""
    for chunk in chunks(0, NOISY_ITEMS, QUEUE_FILL_BATCH):
        queue.push_many(db, [VALUE] * len(chunk), group=LOUD)
    fill_fair_groups(db, queue, [f"quiet-{g}" for g in range(QUIET_GROUPS)
                                 for _ in range(QUIET_ITEMS)])
    quiet_left, claims, loud = QUIET_GROUPS * QUIET_ITEMS, 0, 0
    while quiet_left:
        lease = queue.claim(db, LEASE_SECONDS)
        if lease is None:
            raise BenchError("the FairQueue was empty during the noisy-neighbour run")
        queue.ack(db, lease)
        claims += 1
        if lease.group == LOUD:
            loud += 1
        else:
            quiet_left -= 1
    return NoisyNeighbour(claims, loud)
