"""Prometheus metrics (extra ``prometheus``: ``pip install fdbrecipes[prometheus]``).

* :class:`QueueCollector`: the gauges of :func:`fdbrecipes.metrics.collect`
  (``fdbrecipes_queue_items{queue,state}``,
  ``fdbrecipes_queue_oldest_item_age_seconds{queue}``), read from the cluster at each
  scrape.  They describe the whole database: one exporter per cluster
  (``fdbrecipes metrics``), never summed across worker processes.
* :class:`JobMetrics`: a worker's ``on_event`` sink feeding
  ``fdbrecipes_jobs_total{queue,outcome}`` and the histograms
  ``fdbrecipes_job_duration_seconds{queue}`` and ``fdbrecipes_job_wait_seconds{queue}``
  of the process it runs in.

``prometheus_client`` is imported when one of these is made, not with this module.
"""

from __future__ import annotations

from typing import Any, Iterator, Mapping, Optional

from .jobs import Event, JobFinished
from .metrics import ITEMS, OLDEST_AGE, collect

__all__ = ["DURATION", "JOBS", "WAIT", "JobMetrics", "QueueCollector", "serve"]

JOBS = "fdbrecipes_jobs_total"
DURATION = "fdbrecipes_job_duration_seconds"
WAIT = "fdbrecipes_job_wait_seconds"
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
        structures: each structure by the name its ``queue`` label gets.
    """

    def __init__(self, db: Any, structures: Mapping[str, Any]) -> None:
        self._core = _client().core
        self.db = db
        self.structures = dict(structures)

    def collect(self) -> Iterator[Any]:
        """The gauges, read now (called by the registry at each scrape)."""
        items = self._core.GaugeMetricFamily(ITEMS, "Items of a structure, by state",
                                             labels=["queue", "state"])
        age = self._core.GaugeMetricFamily(OLDEST_AGE, "Seconds the front item has waited",
                                           labels=["queue"])
        for sample in collect(self.db, self.structures):
            labels = sample.label_dict
            if sample.name == ITEMS:
                items.add_metric([labels["queue"], labels["state"]], sample.value)
            else:
                age.add_metric([labels["queue"]], sample.value)
        yield items
        yield age

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


def serve(db: Any, structures: Mapping[str, Any], port: int, addr: str = "127.0.0.1") -> Any:
    """Serve the structures' gauges over HTTP on ``port`` of ``addr`` (this machine
    only by default; ``"0.0.0.0"``: every address) with a registry of their own;
    returns what ``prometheus_client.start_http_server`` returns (the server and its
    thread, in recent versions)."""
    client = _client()
    registry = client.CollectorRegistry()
    registry.register(QueueCollector(db, structures))
    return client.start_http_server(port, addr=addr, registry=registry)
