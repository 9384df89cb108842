"""One trace from the call that defers a task to its run, and on to its follow-ups.

With OpenTelemetry active (``opentelemetry-api`` installed and an SDK configured by
the application), :func:`sending` wraps a push in a ``send <task>`` span (kind
PRODUCER, a child of the caller's current span) and gives the W3C trace context
headers of that span (``traceparent``, ``tracestate``), which the item keeps (see
:mod:`.envelope`); :func:`running` wraps the task's run in a ``process <task>`` span
(kind CONSUMER) whose parent is that context, and makes it current, so the run's own
spans and its follow-ups' ``send`` spans are its children.  Without OpenTelemetry
(or with the API alone, which records nothing), no header is kept and nothing is
done.  Spans follow the messaging semantic conventions (``messaging.system``
``foundationdb``).  In memory only: no FoundationDB.
"""

from __future__ import annotations

import contextlib
import functools
from typing import Any, Dict, Iterator, Optional, Tuple

from .envelope import Trace

__all__ = ["running", "sending"]

SYSTEM = "foundationdb"


@functools.cache
def _imported() -> Optional[Tuple[Any, Any]]:
    """The OpenTelemetry API's modules (``trace``, ``propagate``), imported once; None
    when it is not installed."""
    try:
        from opentelemetry import propagate, trace
    except ImportError:
        return None
    return trace, propagate


def _api() -> Optional[Tuple[Any, Any]]:
    """The OpenTelemetry API's modules when an SDK may record spans: None when the
    API is not installed, or while the global tracer provider is still the API's
    proxy (no SDK set: every span would be a non-recording one, so none is made).
    Asked at each call: an SDK set later is seen at once."""
    modules = _imported()
    if modules is None or isinstance(modules[0].get_tracer_provider(),
                                     modules[0].ProxyTracerProvider):
        return None
    return modules


def _attributes(operation: str, task: str) -> Dict[str, Any]:
    return {"messaging.system": SYSTEM, "messaging.operation.type": operation,
            "messaging.operation.name": operation, "messaging.destination.name": task}


@contextlib.contextmanager
def sending(task: str) -> Iterator[Optional[Trace]]:
    """A ``send <task>`` span around the block, which gets the span's trace context
    headers to store with the item (None: no OpenTelemetry SDK records spans)."""
    api = _api()
    if api is None:
        yield None
        return
    trace, propagate = api
    tracer = trace.get_tracer("fdbrecipes.tasks")
    with tracer.start_as_current_span(f"send {task}", kind=trace.SpanKind.PRODUCER,
                                      attributes=_attributes("send", task)) as span:
        if not span.get_span_context().is_valid:
            yield None
            return
        carrier: Dict[str, str] = {}
        propagate.inject(carrier)
        yield tuple(sorted(carrier.items())) or None


@contextlib.contextmanager
def running(task: str, trace_context: Optional[Trace], attributes: Dict[str, Any]
            ) -> Iterator[None]:
    """A ``process <task>`` span around the block, a child of the context
    ``trace_context`` (the item's), made current."""
    api = _api()
    if api is None:
        yield
        return
    trace, propagate = api
    parent = propagate.extract(dict(trace_context)) if trace_context else None
    tracer = trace.get_tracer("fdbrecipes.tasks")
    with tracer.start_as_current_span(f"process {task}", context=parent,
                                      kind=trace.SpanKind.CONSUMER,
                                      attributes={**_attributes("process", task),
                                                  **attributes}):
        yield
