"""Wrong tokens, counted per client address: a token bucket each.

Each address may give :data:`BURST` wrong tokens at once, then one more every
:data:`REFILL` seconds.  While its bucket is empty, every request of that address is
answered 429 without its token being looked at, so guessing goes no faster than one
try every :data:`REFILL` seconds per address, and a right guess made meanwhile tells
nothing.  At most :data:`MOST` addresses are remembered (full buckets are forgotten
first, then the oldest).  Pure Python, no I/O; one object per app, used from the
event loop's thread.
"""

from __future__ import annotations

import time
from typing import Callable, Dict, Optional

__all__ = ["BURST", "MOST", "REFILL", "Logins"]

#: Wrong tokens an address may give before it must wait.
BURST = 10
#: Seconds after which an address may give one more wrong token.
REFILL = 1.0
#: Addresses remembered at most.
MOST = 10_000


class Bucket:
    """One address's bucket: the wrong tokens it may still give (``left``, refilled
    from ``at`` on), and whether its being limited was logged since it last had one."""

    __slots__ = ("at", "left", "said")

    def __init__(self, left: float, at: float) -> None:
        self.left = left
        self.at = at
        self.said = False


class Logins:
    """The buckets of the addresses that gave wrong tokens (see the module docstring).

    Args:
        burst: wrong tokens an address may give at once.
        refill: seconds after which it may give one more.
        most: addresses remembered at most.
        clock: where the time comes from (seconds; ``time.monotonic``).
    """

    def __init__(self, burst: int = BURST, refill: float = REFILL, most: int = MOST,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.burst = burst
        self.refill = refill
        self.most = most
        self.clock = clock
        self.buckets: Dict[str, Bucket] = {}

    def _bucket(self, address: str) -> Optional[Bucket]:
        """``address``'s bucket, refilled to now; None when it is full (forgotten)."""
        bucket = self.buckets.get(address)
        if bucket is None:
            return None
        now = self.clock()
        left = min(float(self.burst), bucket.left + (now - bucket.at) / self.refill)
        if left >= self.burst:
            del self.buckets[address]
            return None
        if int(left) > int(bucket.left):
            bucket.said = False
        bucket.left, bucket.at = left, now
        return bucket

    def wait(self, address: str) -> Optional[float]:
        """Seconds ``address`` must wait before its token is looked at again; None
        when it may try now."""
        bucket = self._bucket(address)
        if bucket is None or bucket.left >= 1:
            return None
        return (1 - bucket.left) * self.refill

    def first_refusal(self, address: str) -> bool:
        """Whether a refusal (429) of ``address`` is the first since it last had a
        try left (so that it is logged once, not at every request)."""
        bucket = self.buckets.get(address)
        if bucket is None or bucket.said:
            return False
        bucket.said = True
        return True

    def failed(self, address: str) -> None:
        """Count one wrong token of ``address``."""
        bucket = self._bucket(address)
        if bucket is None:
            if len(self.buckets) >= self.most:
                self._forget()
            bucket = self.buckets[address] = Bucket(float(self.burst), self.clock())
        bucket.left = max(0.0, bucket.left - 1)

    def _forget(self) -> None:
        """Make room: forget the full buckets, then the oldest half if still full."""
        for address in list(self.buckets):
            self._bucket(address)
        if len(self.buckets) >= self.most:
            for address in list(self.buckets)[:len(self.buckets) // 2 + 1]:
                del self.buckets[address]
