"""Prometheus metrics (extra ``prometheus``: ``pip install fdbrecipes[prometheus]``).

* :class:`QueueCollector`: the gauges of :func:`fdbrecipes.metrics.collect`
  (``fdbrecipes_queue_items{queue,state}``, ``fdbrecipes_queue_backlog{queue}``,
  ``fdbrecipes_queue_oldest_item_age_seconds{queue}``, and for schedule stores
  ``fdbrecipes_schedule_lag_seconds{schedule,store}`` and
  ``fdbrecipes_schedule_paused{schedule,store}``), read from the cluster at each
  scrape.  They describe the whole database: one exporter per cluster
  (``fdbrecipes metrics``), never summed across worker processes.
* :class:`JobMetrics`: a worker's ``on_event`` sink feeding
  ``fdbrecipes_jobs_total{queue,outcome}`` and the histograms
  ``fdbrecipes_job_duration_seconds{queue}`` and ``fdbrecipes_job_wait_seconds{queue}``
  of the process it runs in.

* :func:`serve`: an HTTP server of the gauges (``/metrics``, as Prometheus reads them)
  and of the same numbers as JSON per structure (``/backlog``, as an autoscaler such
  as KEDA's ``metrics-api`` scaler reads them): ``fdbrecipes metrics``.

``prometheus_client`` is imported when one of these is made, not with this module.
"""

from __future__ import annotations

import json
import socket
import socketserver
import threading
import wsgiref.simple_server
from typing import Any, Callable, Iterable, Iterator, List, Mapping, Optional, Tuple

from .jobs import Event, JobFinished
from .metrics import (
    BACKLOG,
    ITEMS,
    LIMIT_N,
    LIMIT_PARKED,
    LIMIT_RUNNING,
    OLDEST_AGE,
    SCHEDULE_LAG,
    SCHEDULE_PAUSED,
    by_structure,
    collect,
)

__all__ = ["BACKLOG_PATH", "DURATION", "GAUGES", "JOBS", "WAIT", "JobMetrics",
           "QueueCollector", "serve"]

JOBS = "fdbrecipes_jobs_total"
DURATION = "fdbrecipes_job_duration_seconds"
WAIT = "fdbrecipes_job_wait_seconds"
#: Where :func:`serve` answers with the numbers per structure as JSON.
BACKLOG_PATH = "/backlog"
#: Each gauge: its help line and its labels, in the order of a sample's (sorted) labels.
GAUGES = {ITEMS: ("Items of a structure, by state", ["queue", "state"]),
          BACKLOG: ("Items visible or in flight", ["queue"]),
          OLDEST_AGE: ("Seconds the front item has waited", ["queue"]),
          SCHEDULE_LAG: ("Seconds a stored schedule's next slot is overdue",
                         ["schedule", "store"]),
          SCHEDULE_PAUSED: ("1 while a stored schedule is paused", ["schedule", "store"]),
          LIMIT_N: ("A limit's n", ["kind", "limit", "store"]),
          LIMIT_RUNNING: ("Jobs running under a concurrency limit, all keys",
                          ["limit", "store"]),
          LIMIT_PARKED: ("Jobs parked until a slot of their key frees, all keys",
                         ["limit", "store"])}
#: Histogram buckets, in seconds, from a millisecond to an hour.
BUCKETS = (0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1.0, 5.0, 10.0, 30.0, 60.0, 300.0, 3600.0)


def _client() -> Any:
    try:
        import prometheus_client
        import prometheus_client.core  # the metric families, not imported by the package
    except ImportError as e:  # pragma: no cover - depends on the environment
        raise ImportError("fdbrecipes' Prometheus metrics need prometheus_client: "
                          "pip install 'fdbrecipes[prometheus]'") from e
    return prometheus_client


class QueueCollector:
    """A Prometheus collector reading the structures' gauges at each scrape.

    Args:
        db: the database the structures live in.
        structures: each structure by the name its ``queue`` label gets (a schedule
            or limit store: its ``store`` label).
    """

    def __init__(self, db: Any, structures: Mapping[str, Any]) -> None:
        self._core = _client().core
        self.db = db
        self.structures = dict(structures)

    def collect(self) -> Iterator[Any]:
        """The gauges, read now (called by the registry at each scrape)."""
        families = {name: self._core.GaugeMetricFamily(name, text, labels=labels)
                    for name, (text, labels) in GAUGES.items()}
        for sample in collect(self.db, self.structures):
            families[sample.name].add_metric([value for _, value in sample.labels],
                                             sample.value)
        yield from families.values()

    def describe(self) -> Iterator[Any]:
        """Nothing: the registry must not scrape the cluster when this is registered."""
        return iter(())


class JobMetrics:
    """A worker's ``on_event`` sink counting its jobs and timing them.

    Args:
        queue: the name the ``queue`` label gets.
        registry: where the metrics are registered (default the global one).
    """

    def __init__(self, queue: str, registry: Optional[Any] = None) -> None:
        client = _client()
        registry = client.REGISTRY if registry is None else registry
        self.queue = queue
        self.jobs = client.Counter(JOBS, "Jobs finished, by outcome", ["queue", "outcome"],
                                   registry=registry)
        self.duration = client.Histogram(DURATION, "Seconds a job's handler ran", ["queue"],
                                         buckets=BUCKETS, registry=registry)
        self.wait = client.Histogram(WAIT, "Seconds a job waited for a consumer", ["queue"],
                                     buckets=BUCKETS, registry=registry)

    def __call__(self, event: Event) -> None:
        if isinstance(event, JobFinished):
            self.jobs.labels(self.queue, event.outcome).inc()
            self.duration.labels(self.queue).observe(event.duration)
            self.wait.labels(self.queue).observe(event.job.wait_seconds)


class _Server(socketserver.ThreadingMixIn, wsgiref.simple_server.WSGIServer):
    """A threaded WSGI server (one scrape does not wait for another)."""

    daemon_threads = True


class _Server6(_Server):
    """The same on an IPv6 address."""

    address_family = socket.AF_INET6


class _Quiet(wsgiref.simple_server.WSGIRequestHandler):
    """No line on stderr per request."""

    def log_message(self, format: str, *args: Any) -> None:
        pass


def serve(db: Any, structures: Mapping[str, Any], port: int,
          addr: str = "127.0.0.1") -> Tuple[Any, threading.Thread]:
    """Serve the structures' gauges over HTTP on ``port`` of ``addr`` (this machine
    only by default; ``"0.0.0.0"``: every address), in a thread: ``/backlog``
    answers with :func:`fdbrecipes.metrics.by_structure` as JSON, any other path with
    the gauges for Prometheus (a registry of their own).  Each request reads the
    cluster (a few round trips; no conflicts).  Returns the server (``shutdown()`` stops
    it) and its thread."""
    client = _client()
    registry = client.CollectorRegistry()
    registry.register(QueueCollector(db, structures))
    metrics = client.make_wsgi_app(registry)

    def app(environ: Any, start_response: Callable[..., Any]) -> Iterable[bytes]:
        if environ.get("PATH_INFO") != BACKLOG_PATH:
            answer: Iterable[bytes] = metrics(environ, start_response)
            return answer
        status = "200 OK"
        try:
            body = json.dumps(by_structure(collect(db, structures)))
        except Exception as e:  # the cluster did not answer: say so, do not die
            status, body = "503 Service Unavailable", json.dumps({"error": str(e)})
        data = body.encode()
        headers: List[Tuple[str, str]] = [("Content-Type", "application/json"),
                                          ("Content-Length", str(len(data)))]
        start_response(status, headers)
        return [data]

    server_class = _Server6 if ":" in addr else _Server
    server: _Server = wsgiref.simple_server.make_server(addr, port, app, server_class, _Quiet)
    thread = threading.Thread(target=server.serve_forever, name="fdbrecipes-metrics",
                              daemon=True)
    thread.start()
    return server, thread
