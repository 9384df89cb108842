"""The OpenTelemetry adapter: spans named and attributed per the messaging semantic
conventions (send, receive, process, settle), recorded by a tracer the test passes
in (the API alone does nothing until an SDK is installed)."""

from __future__ import annotations

import pytest

from fdbrecipes import JobFinished, JobStarted, Lease
from fdbrecipes.jobs import Job
from tests.helpers import Tracer

trace = pytest.importorskip("opentelemetry.trace", reason="opentelemetry-api is the otel extra")
from fdbrecipes.otel import Tracing  # noqa: E402  (after the skip)


def job(token: bytes) -> Job:
    return Job.of(Lease(b"payload", 2, 0, token, visible_since=1_000_000,
                        claimed_at=3_500_000))


def test_spans_follow_the_messaging_conventions() -> None:
    tracer = Tracer()
    tracing = Tracing("jobs", tracer)
    with tracing.sending():
        pass
    ok, failed = job(b"a"), job(b"b")
    tracing(JobStarted(ok))
    tracing(JobStarted(failed))
    tracing(JobFinished(ok, "ok", 0.1))
    error = RuntimeError("boom")
    tracing(JobFinished(failed, "retry", 0.2, error))
    names = [s.name for s in tracer.spans]
    assert names == ["send jobs", "receive jobs", "process jobs", "receive jobs",
                     "process jobs", "settle jobs", "settle jobs"]
    kinds = {s.name: s.kind for s in tracer.spans}
    assert kinds["send jobs"] == trace.SpanKind.PRODUCER
    assert kinds["receive jobs"] == kinds["process jobs"] == trace.SpanKind.CONSUMER
    for span in tracer.spans:
        operation = span.name.split()[0]
        assert span.attributes["messaging.system"] == "foundationdb"
        assert span.attributes["messaging.operation.name"] == operation
        assert span.attributes["messaging.destination.name"] == "jobs"
        assert span.ended
    receive = tracer.spans[1]
    assert receive.attributes["fdbrecipes.wait_seconds"] == pytest.approx(2.5)
    process_ok, process_failed = tracer.spans[2], tracer.spans[4]
    assert process_ok.attributes["fdbrecipes.deliveries"] == 2
    assert process_ok.attributes["fdbrecipes.outcome"] == "ok" and process_ok.status is None
    assert process_failed.attributes["fdbrecipes.outcome"] == "retry"
    assert process_failed.exceptions == [error]
    assert process_failed.status.status_code == trace.StatusCode.ERROR
    assert [s.attributes["fdbrecipes.outcome"] for s in tracer.spans[5:]] == ["ok", "retry"]


def test_a_finish_without_a_start_is_ignored() -> None:
    tracer = Tracer()
    Tracing("jobs", tracer)(JobFinished(job(b"c"), "ok", 0.0))
    assert tracer.spans == []
