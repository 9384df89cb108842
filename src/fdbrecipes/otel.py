"""OpenTelemetry spans for job queues (extra ``otel``: ``opentelemetry-api`` only).

Spans follow OpenTelemetry's messaging semantic conventions: ``send`` around a push
(:meth:`Tracing.sending`), and, fed by a worker's events (``Worker(...,
on_event=tracing)``), a ``receive`` span when a job is handed to its handler, a
``process`` span for the handler's run and a ``settle`` span for what became of it.
The application configures the SDK and exporter; this module only uses the API, which
does nothing until an SDK is installed.  ``opentelemetry`` is imported when a
:class:`Tracing` is made.
"""

from __future__ import annotations

import contextlib
from typing import Any, Dict, Iterator, Optional

from .jobs import Event, JobFinished, JobStarted

__all__ = ["Tracing"]

SYSTEM = "foundationdb"


class Tracing:
    """Messaging spans for one queue (its name is the spans' destination).

    Args:
        queue: the destination name the spans carry.
        tracer: an OpenTelemetry tracer (default ``trace.get_tracer("fdbrecipes")``).
    """

    def __init__(self, queue: str, tracer: Optional[Any] = None) -> None:
        try:
            from opentelemetry import trace
        except ImportError as e:  # pragma: no cover - depends on the environment
            raise ImportError("fdbrecipes' tracing needs opentelemetry-api: "
                              "pip install 'fdbrecipes[otel]'") from e
        self._trace = trace
        self.queue = queue
        self.tracer = tracer if tracer is not None else trace.get_tracer("fdbrecipes")
        self._open: Dict[bytes, Any] = {}  # lease token -> its process span

    def _attributes(self, operation: str) -> Dict[str, Any]:
        return {"messaging.system": SYSTEM, "messaging.operation.type": operation,
                "messaging.operation.name": operation,
                "messaging.destination.name": self.queue}

    @contextlib.contextmanager
    def sending(self) -> Iterator[Any]:
        """A ``send`` span around the pushes made in the block."""
        with self.tracer.start_as_current_span(
                f"send {self.queue}", kind=self._trace.SpanKind.PRODUCER,
                attributes=self._attributes("send")) as span:
            yield span

    def __call__(self, event: Event) -> None:
        """A worker's ``on_event``: receive and process spans as a job starts, settle
        as it finishes."""
        if isinstance(event, JobStarted):
            job = event.job
            with self.tracer.start_as_current_span(
                    f"receive {self.queue}", kind=self._trace.SpanKind.CONSUMER,
                    attributes={**self._attributes("receive"),
                                "fdbrecipes.wait_seconds": job.wait_seconds}):
                pass
            self._open[job.lease.token] = self.tracer.start_span(
                f"process {self.queue}", kind=self._trace.SpanKind.CONSUMER,
                attributes={**self._attributes("process"),
                            "fdbrecipes.deliveries": job.deliveries})
        elif isinstance(event, JobFinished):
            span = self._open.pop(event.job.lease.token, None)
            if span is None:
                return
            context = self._trace.set_span_in_context(span)
            with self.tracer.start_as_current_span(
                    f"settle {self.queue}", context=context,
                    attributes={**self._attributes("settle"),
                                "fdbrecipes.outcome": event.outcome}):
                pass
            if event.error is not None:
                span.record_exception(event.error)
                span.set_status(self._trace.Status(self._trace.StatusCode.ERROR))
            span.set_attribute("fdbrecipes.outcome", event.outcome)
            span.end()
