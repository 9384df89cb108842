"""Where Python teams already are: fdbrecipes under Celery and Dramatiq.

* :mod:`fdbrecipes.contrib.celery`: a kombu transport (``broker_transport =
  "fdbrecipes.contrib.celery:Transport"``) whose queues are :class:`fdbrecipes.Queue` and
  :class:`fdbrecipes.PriorityQueue` structures, and a Celery result backend
  (``result_backend = "fdbrecipes://"``, registered through the
  ``celery.result_backends`` entry point).  Extra: ``fdbrecipes[celery]``.
* :mod:`fdbrecipes.contrib.dramatiq`: :class:`~fdbrecipes.contrib.dramatiq.FdbBroker`,
  a Dramatiq broker on the same structures.  Extra: ``fdbrecipes[dramatiq]``.

They use the library's public API only (claims under leases, heartbeats with
``extend_many``, delayed pushes, dead letters, watches), plus plain keys in a directory
of their own where no structure fits (exchange bindings, results).  Like the library,
they never select an API version: the application calls ``fdb.api_version(730)`` in
the module that defines its Celery app or Dramatiq actors.  See docs/celery-dramatiq.md.
"""
