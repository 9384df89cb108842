"""Celery on FoundationDB: a kombu transport and a result backend.

::

    import fdb
    fdb.api_version(730)
    from celery import Celery

    app = Celery("app", broker="fdbrecipes://", backend="fdbrecipes://")
    app.conf.broker_transport = "fdbrecipes.contrib.celery:Transport"

The transport (:class:`Transport`, options :class:`TransportSettings`) keeps each
queue in a :class:`fdbrecipes.Queue` or :class:`fdbrecipes.PriorityQueue`; the result
backend (:class:`FdbBackend`) keeps results in an expiring key-value store.  See
docs/celery-dramatiq.md.  Needs the ``celery`` extra: ``pip install
'fdbrecipes[celery]'``.
"""

try:
    import celery as _celery  # noqa: F401
    import kombu as _kombu  # noqa: F401
except ImportError as e:  # pragma: no cover (the extra is installed for the tests)
    raise ImportError("fdbrecipes.contrib.celery needs Celery: pip install "
                      "'fdbrecipes[celery]'") from e

from ._settings import rate_limits
from .backend import FdbBackend
from .transport import Transport, TransportSettings, eta_delay

__all__ = ["FdbBackend", "Transport", "TransportSettings", "eta_delay", "rate_limits"]
