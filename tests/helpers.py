"""Helpers shared by the tests."""

from __future__ import annotations

import asyncio
import contextlib
import random
import signal
import subprocess
import threading
import time
from typing import Any, Callable, Dict, Iterator, List, Optional, Sequence


class TestClock:
    """A lease clock for tests: the read version plus an offset the test advances.

    Every structure built with the same TestClock sees the same time, so a test can
    expire leases without waiting.
    """

    __test__ = False  # not a test class

    def __init__(self) -> None:
        self.offset = 0

    def __call__(self, tr: Any) -> int:
        return int(tr.get_read_version().wait()) + self.offset

    def advance(self, seconds: float) -> None:
        self.offset += int(seconds * 1_000_000)


def dump(db: Any, subspace: Any) -> Dict[bytes, bytes]:
    """Every key/value under ``subspace``, read in one transaction."""
    r = subspace.range()
    return {bytes(kv.key): bytes(kv.value) for kv in db.get_range(r.start, r.stop)}


def everything(db: Any) -> Dict[bytes, bytes]:
    """Every key/value in the normal keyspace (below \\xff)."""
    return {bytes(kv.key): bytes(kv.value) for kv in db.get_range(b"", b"\xff")}


def run_threads(
    threads: Sequence[threading.Thread], errors: List[BaseException], timeout: float
) -> None:
    """Start ``threads``, join them, and fail on any error they recorded or on a
    thread still running ``timeout`` seconds after the start."""
    deadline = time.monotonic() + timeout
    for t in threads:
        t.daemon = True  # a thread that hangs must not keep the test run alive
        t.start()
    for t in threads:
        t.join(timeout=max(0.0, deadline - time.monotonic()))
    assert not errors, errors
    assert not any(t.is_alive() for t in threads), "a thread did not finish"


class _Reported:
    """What a faulty commit returns: a future whose wait() raises ``FDBError(code)``,
    or KeyboardInterrupt (code None), as Ctrl-C during the wait would."""

    def __init__(self, code: Optional[int]) -> None:
        self.code = code

    def is_ready(self) -> bool:
        return True

    def block_until_ready(self) -> None:
        pass

    def wait(self) -> None:
        import fdb

        if self.code is None:
            raise KeyboardInterrupt
        raise fdb.FDBError(self.code)


class _Hanging(_Reported):
    """What a faulty commit returns for ``":hang"``: a commit still in flight, for an
    awaiting caller to cancel (it never becomes ready; ``commit_unknown_result`` if
    read)."""

    def __init__(self) -> None:
        super().__init__(1021)

    def is_ready(self) -> bool:
        return False

    def on_ready(self, callback: Callable[[Any], None]) -> None:
        self.callback = callback  # never called


def unknown_results(
    cluster_file: str,
    plan: Callable[[], Optional[str]],
    between: Optional[Callable[[], Any]] = None,
) -> Any:
    """A real ``fdb.Database`` whose commits may report ``commit_unknown_result``.

    A FoundationDB client raises 1021 when it cannot tell whether a commit happened
    (a proxy failed mid-commit, say).  Before each commit ``plan()`` picks what
    happens: None, a normal commit; ``"applied"``, the commit happens, then 1021 is
    reported; ``"dropped"``, the transaction is reset without committing and 1021 is
    reported.  A suffix reports something else: ``"applied:1031"`` reports
    ``transaction_timed_out`` (which a commit already sent can also end in, and which
    is not retryable), ``"dropped:interrupt"`` raises KeyboardInterrupt (Ctrl-C
    while the commit was in flight), ``"applied:hang"`` never reports (a commit in
    flight, for an awaiting caller to cancel).  ``between()`` runs after a faulty commit,
    before the error is reported: another client working in that window.
    Everything else is the real database.
    """
    import fdb.impl

    class FaultyTransaction(fdb.impl.Transaction):  # type: ignore[misc]
        def commit(self) -> Any:
            fault = plan()
            if fault is None:
                return super().commit()
            outcome, _, report = fault.partition(":")
            assert outcome in ("applied", "dropped"), fault
            if outcome == "applied":
                super().commit().wait()
            self.reset()  # as the client leaves it: nothing pending, ready for on_error
            if between is not None:
                between()
            if report == "hang":
                return _Hanging()
            return _Reported(None if report == "interrupt" else int(report or 1021))

    class FaultyDatabase(fdb.impl.Database):  # type: ignore[misc]
        def create_transaction(self) -> Any:
            tr = super().create_transaction()
            tr.__class__ = FaultyTransaction
            return tr

    db = fdb.impl.create_database(cluster_file)
    warm_up(db)
    db.__class__ = FaultyDatabase
    return db


def warm_up(db: Any) -> None:
    """Commit once through a new Database: its first commits may otherwise end in a
    real ``commit_unknown_result`` (the client learning the proxies while one is in
    flight), which would come before a test's planned fault.  The commit carries only
    a write conflict range: it changes nothing."""
    import fdb.impl as fdb_impl

    tr = db.create_transaction()
    while True:
        try:
            tr.add_write_conflict_key(b"fdbrecipes-test/warm-up")
            tr.commit().wait()
            return
        except fdb_impl.FDBError as e:
            tr.on_error(e).wait()


class RandomFaults:
    """A plan for :func:`unknown_results`: each commit, from a seeded generator, is
    faulty with probability ``rate``, half of those applied and half dropped
    (thread-safe)."""

    def __init__(self, seed: int, rate: float = 0.2) -> None:
        self.rng = random.Random(seed)
        self.rate = rate
        self.lock = threading.Lock()

    def __call__(self) -> Optional[str]:
        with self.lock:
            roll = self.rng.random()
        if roll < self.rate / 2:
            return "applied"
        return "dropped" if roll < self.rate else None


class Faulty:
    """:func:`unknown_results` with a plan a test sets call by call.

    ``faulty.once("applied", lambda db: q.pop(db))`` runs the call with its first
    commit faulty and the following ones normal, and returns what it returns.
    """

    def __init__(self, cluster_file: str, between: Optional[Callable[[], Any]] = None) -> None:
        self.pending: List[Optional[str]] = []
        self.db = unknown_results(cluster_file, self._next, between)

    def _next(self) -> Optional[str]:
        return self.pending.pop(0) if self.pending else None

    def once(self, fault: str, call: Callable[[Any], Any]) -> Any:
        return self.each([fault], call)

    def each(self, faults: List[Optional[str]], call: Callable[[Any], Any]) -> Any:
        """Run the call with its first commits faulty, one fault each, in order
        (None: that commit is normal; the call's own retries and settling
        transactions included)."""
        self.pending[:] = faults
        return call(self.db)


def watch_limited(cluster_file: str, watches: int) -> Any:
    """A Database of its own on ``cluster_file`` (its options are not the shared one's)
    that allows ``watches`` watches at once: past them a watch fails with
    ``too_many_watches`` (a real limit of the real client)."""
    import fdb.impl as fdb_impl

    db = fdb_impl.create_database(cluster_file)
    db.options.set_max_watches(watches)
    return db


class Blocks:
    """How many times the waits on ``structure`` blocked (the documented testing hook
    ``on_block``), and the times they did."""

    def __init__(self, structure: Any) -> None:
        from fdbrecipes.testing.hooks import hooks

        self.at: List[float] = []
        hooks(structure).on_block = self.blocked

    def blocked(self, _timeout: Optional[float]) -> None:
        self.at.append(time.monotonic())

    @property
    def count(self) -> int:
        return len(self.at)


class Blocking:
    """An async structure (``fdbrecipes.aio``) called from sync code: each coroutine
    method runs to its end on the adapter's own event loop, in asyncio's debug mode,
    so a test written for the sync API drives the async one.  ``close()`` the loop
    after use."""

    def __init__(self, structure: Any) -> None:
        import asyncio

        self._structure = structure
        self._loop = asyncio.new_event_loop()
        self._loop.set_debug(True)

    def __getattr__(self, name: str) -> Any:
        import asyncio

        found = getattr(self._structure, name)
        if not asyncio.iscoroutinefunction(found):
            return found

        def call(*args: Any, **kwargs: Any) -> Any:
            return self._loop.run_until_complete(found(*args, **kwargs))

        return call

    def close(self) -> None:
        self._loop.close()


def chi_square_p(observed: Sequence[float], expected: Sequence[float]) -> float:
    """The p-value of Pearson's chi-square test of ``observed`` counts against
    ``expected`` ones (``len - 1`` degrees of freedom): the chance that counts drawn
    from the expected distribution are at least this far from it.  The regularized
    upper incomplete gamma function Q(df / 2, statistic / 2), computed by its series
    or its continued fraction (Numerical Recipes, 6.2), with no dependency."""
    import math

    statistic = sum((o - e) ** 2 / e for o, e in zip(observed, expected))
    a, x = (len(observed) - 1) / 2, statistic / 2
    if x <= 0:
        return 1.0
    log_front = a * math.log(x) - x - math.lgamma(a)
    if x < a + 1:  # the series for P(a, x); Q = 1 - P
        term = total = 1.0 / a
        n = a
        while abs(term) > abs(total) * 1e-15:
            n += 1
            term *= x / n
            total += term
        return max(0.0, 1.0 - total * math.exp(log_front))
    tiny = 1e-300  # the continued fraction for Q(a, x), by Lentz's method
    b = x + 1 - a
    c, d = 1 / tiny, 1 / b
    h = d
    i = 1
    while True:
        an = -i * (i - a)
        b += 2
        d = an * d + b
        d = tiny if abs(d) < tiny else d
        c = b + an / c
        c = tiny if abs(c) < tiny else c
        d = 1 / d
        delta = d * c
        h *= delta
        if abs(delta - 1) < 1e-15:
            return h * math.exp(log_front)
        i += 1


class Span:
    """What the OpenTelemetry adapter does to a span, recorded (see :class:`Tracer`)."""

    def __init__(self, name: str, kind: Any, attributes: Dict[str, Any]) -> None:
        self.name, self.kind, self.attributes = name, kind, dict(attributes)
        self.ended = False
        self.status: Optional[Any] = None
        self.exceptions: List[BaseException] = []

    def set_attribute(self, key: str, value: Any) -> None:
        self.attributes[key] = value

    def record_exception(self, error: BaseException) -> None:
        self.exceptions.append(error)

    def set_status(self, status: Any) -> None:
        self.status = status

    def end(self) -> None:
        self.ended = True


class Tracer:
    """A tracer that keeps every span it starts, in order: what the tests pass to
    ``fdbrecipes.otel.Tracing`` (the OpenTelemetry API does nothing without an SDK)."""

    def __init__(self) -> None:
        self.spans: List[Span] = []

    def start_span(self, name: str, kind: Any = None, attributes: Any = None,
                   context: Any = None) -> Span:
        span = Span(name, kind, attributes or {})
        self.spans.append(span)
        return span

    @contextlib.contextmanager
    def start_as_current_span(self, name: str, kind: Any = None, attributes: Any = None,
                              context: Any = None) -> Iterator[Span]:
        span = self.start_span(name, kind, attributes, context)
        yield span
        span.end()


def eventually(check: Callable[[], Any], timeout: float, what: str,
               every: float = 0.05) -> Any:
    """``check()``'s first truthy answer, asked again every ``every`` seconds (50 ms;
    more for a check that reads much): for a state another process reaches (a worker's
    record, a job's end, the data distributor's moves) that no watch of the test's own
    announces.  Fails, naming ``what``, after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while not (found := look(check, deadline, f"{what}: not within {timeout} s")):
        time.sleep(every)  # the interval between two looks, not a wait for an event
    return found


async def eventually_async(check: Callable[[], Any], timeout: float, what: str,
                           every: float = 0.05) -> Any:
    """:func:`eventually` in a coroutine: ``check()``'s first truthy answer, asked
    again every ``every`` seconds while the event loop runs the other tasks (the one
    under test among them).  Fails, naming ``what``, after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while not (found := look(check, deadline, f"{what}: not within {timeout} s")):
        await asyncio.sleep(every)  # the interval between two looks
    return found


def look(check: Callable[[], Any], deadline: float, failure: str) -> Any:
    """``check()``'s answer; a falsy one past ``deadline`` fails the test with
    ``failure``."""
    found = check()
    assert found or time.monotonic() < deadline, failure
    return found


def stop(process: Any, timeout: float = 60) -> str:
    """SIGTERM ``process`` (a ``subprocess.Popen`` with its stderr piped); its stderr
    once it exited (killed after ``timeout``, and the test fails)."""
    if process.poll() is None:
        process.send_signal(signal.SIGTERM)
    try:
        _, err = process.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        process.kill()
        _, err = process.communicate()
        raise AssertionError(f"the process did not stop within {timeout} s:\n{err}") from None
    text: str = err
    return text
