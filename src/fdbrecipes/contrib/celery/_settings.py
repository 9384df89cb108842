"""The kombu transport's options (``broker_transport_options``), checked.

Every option has a default; a wrong type or value raises ``TypeError`` or
``ValueError`` naming the option before anything is written.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Dict, Mapping, Optional, Tuple

from .._database import directory_path
from .._flow import FlowSettings
from .._options import check_cluster_file, check_count, check_seconds
from .._queues import MAX_DELIVERIES

__all__ = ["TransportSettings", "rate_limits"]


def _seconds(options: Mapping[str, Any], name: str, default: float) -> float:
    return check_seconds(options.get(name, default), name)


def _count(options: Mapping[str, Any], name: str, default: int) -> int:
    return check_count(options.get(name, default), name) or default


@dataclass(frozen=True)
class TransportSettings:
    """What ``broker_transport_options`` may set.

    Attributes:
        cluster_file: the cluster file (None: ``FDB_CLUSTER_FILE`` or the default).
        directory: the directory the transport keeps its keys in (``"celery"``).
        lease_seconds: a claimed message's lease; a worker's heartbeat extends the
            leases it holds about every third of it, so this is how long a dead
            worker's messages wait before they are delivered again (30).
        spread: a claim of ``n`` messages from a plain queue takes a block of ``n``
            among the ``n * spread`` oldest (one of the ``spread`` oldest for one:
            workers rarely collide); priority queues claim in strict order (8).
        batch: most messages one claim takes for a consumer, within its prefetch (32).
        max_deliveries: deliveries after which a message whose lease ends without
            ack (its worker died each time, or ``basic_reject(requeue=True)``)
            becomes a dead letter (20; None: never, so a message that kills its
            worker is delivered again forever).  Celery's retries are new messages:
            they do not count.
        auto_delete_expires: seconds an ``auto_delete`` queue declared without
            ``x-expires`` outlives its last consumer's heartbeat (600).
        expiry_grace: seconds past its expiry before an expiring queue nobody
            consumes is deleted by the next publish to it (30).
        flow: the shared limits: options ``limits`` (the directory of the
            :class:`fdbrecipes.Limits` store; default ``directory`` plus
            ``"limits"``), ``queue_limits`` (``{queue: {"concurrency": n, "rate":
            "10/s"}}``) and ``task_limits`` (``{task name: {...}}``, keyed by the
            task's name), checked in each claim's transaction (see
            docs/celery-dramatiq.md).
    """

    cluster_file: Optional[str] = None
    directory: Tuple[str, ...] = ("celery",)
    lease_seconds: float = 30.0
    spread: int = 8
    batch: int = 32
    max_deliveries: Optional[int] = MAX_DELIVERIES
    auto_delete_expires: float = 600.0
    expiry_grace: float = 30.0
    flow: FlowSettings = field(default_factory=FlowSettings)

    @classmethod
    def from_options(cls, options: Mapping[str, Any]) -> TransportSettings:
        """The settings in ``options`` (kombu's ``transport_options``); other keys
        (kombu's own, such as ``polling_interval``) are left alone.

        Raises:
            TypeError or ValueError: an option's value is wrong (named).
        """
        return cls(
            cluster_file=check_cluster_file(options.get("cluster_file")),
            directory=directory_path(options.get("directory", cls.directory), "directory"),
            lease_seconds=_seconds(options, "lease_seconds", cls.lease_seconds),
            spread=_count(options, "spread", cls.spread),
            batch=_count(options, "batch", cls.batch),
            max_deliveries=check_count(options.get("max_deliveries", cls.max_deliveries),
                                       "max_deliveries", optional=True),
            auto_delete_expires=_seconds(options, "auto_delete_expires",
                                         cls.auto_delete_expires),
            expiry_grace=_seconds(options, "expiry_grace", cls.expiry_grace),
            flow=FlowSettings.from_options(options.get("limits"), options.get("queue_limits"),
                                           options.get("task_limits"), "task", "task_limits"),
        )


def rate_limits(app: Any) -> Dict[str, Dict[str, Any]]:
    """The ``task_limits`` option that makes each task's ``rate_limit`` of Celery app
    ``app`` a limit shared by every worker: ``{task name: {"rate": rate_limit}}`` for
    each registered task that has one (reading ``app.tasks`` finalizes the app: call
    it once every task is defined)::

        app.conf.broker_transport_options["task_limits"] = rate_limits(app)

    Set ``worker_disable_rate_limits=True`` too, or each worker applies its own bucket
    on top of the shared limit.  Reads and writes nothing in the cluster.
    """
    return {name: {"rate": task.rate_limit} for name, task in sorted(app.tasks.items())
            if getattr(task, "rate_limit", None)}
