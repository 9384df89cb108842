"""The Celery and Dramatiq integrations without a server: options checked and named,
ETA headers read, the result backend found through Celery's entry point, the extras
declared with their Python versions, importing them selects no API version, and what
makes a claimed message undecodable (and its dead letter's reason)."""

from __future__ import annotations

import datetime
import inspect
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

celery = pytest.importorskip("celery", reason="the celery extra needs Python >= 3.10")
dramatiq = pytest.importorskip("dramatiq", reason="the dramatiq extra needs Python >= 3.10")

from kombu import Connection  # noqa: E402

from fdbrecipes.contrib._blobs import CHUNK, MAX_BYTES, Blobs  # noqa: E402
from fdbrecipes.contrib._database import directory_path  # noqa: E402
from fdbrecipes.contrib._queues import Undecodable, error_reason  # noqa: E402
from fdbrecipes.contrib.celery import FdbBackend, Transport, TransportSettings, eta_delay  # noqa: E402
from fdbrecipes.contrib.celery.transport import kombu_payload  # noqa: E402
from fdbrecipes.contrib.dramatiq import FdbBroker, _decode, _reason  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
UTC = datetime.timezone.utc
TRANSPORT = "fdbrecipes.contrib.celery:Transport"


def test_transport_settings_have_defaults_and_name_the_wrong_option() -> None:
    assert TransportSettings.from_options({}) == TransportSettings()
    s = TransportSettings.from_options({"directory": "app/broker", "lease_seconds": 5,
                                        "spread": 1, "max_deliveries": 3,
                                        "polling_interval": 1})  # kombu's own: left alone
    assert s.directory == ("app", "broker") and s.lease_seconds == 5.0
    assert s.spread == 1 and s.max_deliveries == 3
    assert TransportSettings().max_deliveries == 20               # not a crash loop forever
    assert TransportSettings.from_options({"max_deliveries": None}).max_deliveries is None
    for options, error, name in [
        ({"lease_seconds": "30"}, TypeError, "lease_seconds"),
        ({"lease_seconds": 0}, ValueError, "lease_seconds"),
        ({"spread": True}, TypeError, "spread"),
        ({"batch": 0}, ValueError, "batch"),
        ({"max_deliveries": 1.5}, TypeError, "max_deliveries"),
        ({"directory": ""}, ValueError, "directory"),
        ({"directory": 7}, TypeError, "directory"),
        ({"cluster_file": 7}, TypeError, "cluster_file"),
    ]:
        with pytest.raises(error, match=name):
            TransportSettings.from_options(options)


def test_a_connection_builds_the_transport_without_touching_a_cluster() -> None:
    """kombu makes the transport from the option; nothing connects until used, and
    a wrong option fails when the transport is made."""
    conn = Connection("fdbrecipes://", transport=TRANSPORT,
                      transport_options={"lease_seconds": 7})
    assert isinstance(conn.transport, Transport)
    assert conn.transport.settings.lease_seconds == 7.0
    bad = Connection("fdbrecipes://", transport=TRANSPORT,
                     transport_options={"lease_seconds": -1})
    with pytest.raises(ValueError, match="lease_seconds"):
        bad.transport  # noqa: B018


def test_the_result_backend_is_found_by_its_url_scheme() -> None:
    """The ``celery.result_backends`` entry point registers ``fdbrecipes://``."""
    app = celery.Celery("t", backend="fdbrecipes://",
                        result_backend_transport_options={"directory": ("t", "r")})
    assert isinstance(app.backend, FdbBackend)
    assert app.backend.as_uri() == "fdbrecipes://"
    assert app.backend.implements_incr and app.backend.supports_autoexpire


def test_eta_delay_reads_celery_eta_headers() -> None:
    now = datetime.datetime(2026, 1, 1, 12, 0, 0, tzinfo=UTC)
    later = (now + datetime.timedelta(seconds=90)).isoformat()
    assert eta_delay({"eta": later}, now) == 90.0
    assert eta_delay({"eta": (now - datetime.timedelta(seconds=1)).isoformat()}, now) is None
    assert eta_delay({"eta": None}, now) is None
    assert eta_delay({}, now) is None
    assert eta_delay(None, now) is None
    assert eta_delay({"eta": "not a time"}, now) is None
    assert eta_delay({"eta": "2999-01-01T00:00:00+00:00"}, now) == 10 * 365 * 24 * 3600
    naive_now = datetime.datetime(2026, 1, 1, 12, 0, 0)
    assert eta_delay({"eta": "2026-01-01T12:00:30"}, naive_now) == 30.0


def test_directory_paths() -> None:
    assert directory_path("a/b", "d") == ("a", "b")
    assert directory_path(("a", "b"), "d") == ("a", "b")
    with pytest.raises(ValueError, match="d must name"):
        directory_path("a//b", "d")
    with pytest.raises(TypeError, match="d must be"):
        directory_path(None, "d")


def test_blobs_refuse_what_one_transaction_cannot_write() -> None:
    assert CHUNK < 100_000
    Blobs.check(b"x" * MAX_BYTES, "a result")
    with pytest.raises(ValueError, match="a result is 8,000,001 bytes"):
        Blobs.check(b"x" * (MAX_BYTES + 1), "a result")


def test_the_dramatiq_broker_checks_its_options_before_connecting() -> None:
    broker = FdbBroker(directory=("t", "d"), lease_seconds=2, spread=4)
    broker.declare_queue("default")
    assert broker.get_declared_queues() == {"default"}
    assert broker.get_declared_delay_queues() == set()  # delays wait in the queue
    for kwargs, error, name in [
        ({"lease_seconds": 0}, ValueError, "lease_seconds"),
        ({"spread": "8"}, TypeError, "spread"),
        ({"max_deliveries": 0}, ValueError, "max_deliveries"),
        ({"directory": ()}, ValueError, "directory"),
        ({"cluster_file": b"/x"}, TypeError, "cluster_file"),
    ]:
        with pytest.raises(error, match=name):
            FdbBroker(**kwargs)


def test_the_dramatiq_broker_buries_after_20_deliveries_by_default() -> None:
    assert inspect.signature(FdbBroker).parameters["max_deliveries"].default == 20


def test_a_nacked_message_dies_with_its_error_as_the_reason() -> None:
    message: Any = dramatiq.MessageProxy(dramatiq.Message("q", "a", (), {}, {}))
    assert _reason(message) == "rejected by the worker (nack)"
    message.stuff_exception(ValueError("bad input " + "x" * 2000))
    assert _reason(message).startswith("ValueError: bad input x")
    assert len(_reason(message)) == 1_000


def test_importing_the_integrations_selects_no_api_version() -> None:
    code = ("import fdb, fdbrecipes.contrib.celery, fdbrecipes.contrib.dramatiq; "
            "print(fdb.is_api_version_selected())")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=120, check=True).stdout
    assert out.strip() == "False"


def test_using_them_without_an_api_version_says_what_to_do() -> None:
    code = ("from fdbrecipes.contrib._database import database\n"
            "try:\n    database(None)\nexcept Exception as e:\n    print(e)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=120, check=True).stdout
    assert "call fdb.api_version(730) in the module that defines your Celery app" in out


def test_the_extras_need_python_3_10_and_the_core_3_9() -> None:
    project = (ROOT / "pyproject.toml").read_text()
    assert 'requires-python = ">=3.9"' in project
    for extra in ("celery", "dramatiq"):
        line = next(x for x in project.splitlines() if x.startswith(f"{extra} = ["))
        assert "python_version >= '3.10'" in line, line
    test_extra = project.split("test = [", 1)[1].split("]", 1)[0]
    assert "celery>=5.7,<6; python_version >= '3.10'" in test_extra
    assert "dramatiq>=2,<3; python_version >= '3.10'" in test_extra
    assert '[project.entry-points."celery.result_backends"]' in project


def test_an_error_reason_is_a_storable_reason_whatever_the_error() -> None:
    class Unprintable(Exception):
        def __str__(self) -> str:
            raise RuntimeError("no")

    assert error_reason(ValueError("x")) == "ValueError: x"
    assert error_reason(Unprintable()) == "Unprintable: <str() failed>"
    assert error_reason(ValueError("a\ud800b")) == "ValueError: a\\ud800b"
    (error_reason(ValueError("a\ud800b"))).encode("utf-8")      # storable as UTF-8
    assert len(error_reason(ValueError("y" * 5000))) == 1_000


def dramatiq_bytes(**fields: Any) -> bytes:
    message = dramatiq.Message(queue_name="default", actor_name="work", args=(1,),
                               kwargs={}, options={})
    return json.dumps({**message.asdict(), **fields}).encode()


def test_a_dramatiq_message_decodes_only_as_a_message_of_its_queue() -> None:
    """What FdbBroker's consumer buries at once rather than let it stop Dramatiq's
    threads: bytes its encoder refuses, JSON that is not a message, fields of the
    wrong types (Dramatiq's threads would raise on them), another queue's message
    (its worker thread would settle it through another queue's consumer)."""
    good = _decode(dramatiq_bytes(), "default")
    assert (good.actor_name, good.args) == ("work", (1,))
    assert _decode(dramatiq_bytes(actor_name="nobody"), "default").actor_name == "nobody"
    for payload, queue, reason in [
        (b"\x80 not json", "default", "UnicodeDecodeError: 'utf-8' codec can't decode byte 0x80"),
        (b"not json", "default", "JSONDecodeError: Expecting value"),
        (b"[1,2,3]", "default", "TypeError: list indices must be integers"),
        (b'{"args": []}', "default", "TypeError: "),
        (dramatiq_bytes(), "other", "a message of queue 'default' found in queue 'other'"),
        (dramatiq_bytes(options=[]), "default",
         "not a Dramatiq message: its options is of type list, not dict"),
        (dramatiq_bytes(actor_name=["a"]), "default", "its actor_name is of type list"),
        (dramatiq_bytes(kwargs=3), "default", "its kwargs is of type int, not dict"),
        (dramatiq_bytes(message_timestamp=True), "default",
         "its message_timestamp is of type bool"),
        (dramatiq_bytes(message_id=7), "default", "its message_id is of type int, not str"),
    ]:
        with pytest.raises(Undecodable) as caught:
            _decode(payload, queue)
        assert reason in str(caught.value), (payload, str(caught.value))


def test_a_kombu_payload_is_an_object_with_object_properties() -> None:
    payload = kombu_payload(b'{"body": "aGk=", "properties": {"body_encoding": "base64"}}')
    assert payload["properties"] == {"body_encoding": "base64", "delivery_info": {}}
    assert kombu_payload(b'{"body": "x"}')["properties"] == {"delivery_info": {}}
    for raw, reason in [
        (b"\x80 not json", "UnicodeDecodeError: 'utf-8' codec can't decode byte 0x80"),
        (b"{not json", "JSONDecodeError: "),
        (b"[1,2,3]", "not a kombu message: a JSON array, not an object"),
        (b'"text"', "not a kombu message: a JSON string, not an object"),
        (b"null", "not a kombu message: a JSON null, not an object"),
        (b"1.5", "not a kombu message: a JSON number, not an object"),
        (b'{"properties": [1]}',
         "not a kombu message: its properties are a JSON array, not an object"),
        (b'{"properties": {"delivery_info": "x"}}',
         "its delivery_info is a JSON string, not an object"),
        (b"[" * 100_000 + b"]" * 100_000, "RecursionError: "),
    ]:
        with pytest.raises(Undecodable) as caught:
            kombu_payload(raw)
        assert reason in str(caught.value), (raw[:40], str(caught.value))


def test_limit_options_are_checked_and_named_before_connecting() -> None:
    """The limits options of both integrations: rates in Celery's forms, concurrency
    counts, names that can name a limit; anything else refused naming the option."""
    from fdbrecipes import concurrency, rate
    from fdbrecipes.contrib._flow import parse_rate

    assert parse_rate("10/s", "r") == rate(10, 1.0)
    assert parse_rate("100/m", "r") == rate(100, 60.0)
    assert parse_rate("1000/h", "r") == rate(1000, 3600.0)
    assert parse_rate(5, "r") == parse_rate("5", "r") == rate(5, 1.0)
    s = TransportSettings.from_options({"limits": "app/limits",
                                        "task_limits": {"t.add": {"rate": "10/m"}},
                                        "queue_limits": {"celery": {"concurrency": 4}}})
    assert s.flow.store == ("app", "limits")
    assert s.flow.names == (("t.add", (("task.rate:t.add", rate(10, 60.0)),)),)
    assert s.flow.queues == (("celery", (("queue.concurrency:celery", concurrency(4)),)),)
    hash(s)  # settings key the process's shared state
    bad = [({"task_limits": {"t": {"rate": "0.5/s"}}}, ValueError, r"task_limits\['t'\]\['rate'\]"),
           ({"task_limits": {"t": {"rate": "10/d"}}}, ValueError, "task_limits"),
           ({"task_limits": {"t": {"rate": 1.5}}}, TypeError, "task_limits"),
           ({"queue_limits": {"q": {"concurrency": 0}}}, ValueError,
            r"queue_limits\['q'\]\['concurrency'\]"),
           ({"queue_limits": {"q": {"concurrency": "4"}}}, TypeError, "queue_limits"),
           ({"queue_limits": {"q": {"slots": 4}}}, ValueError, "unknown limit 'slots'"),
           ({"queue_limits": {"q": {}}}, TypeError, r"queue_limits\['q'\]"),
           ({"queue_limits": ["q"]}, TypeError, "queue_limits must be a dict"),
           ({"queue_limits": {"a queue": {"concurrency": 1}}}, ValueError,
            "cannot name a limit"),
           ({"limits": ""}, ValueError, "limits")]
    for options, error, text in bad:
        with pytest.raises(error, match=text):
            TransportSettings.from_options(options)
    with pytest.raises(ValueError, match=r"actor_limits\['send'\]\['rate'\]"):
        FdbBroker(actor_limits={"send": {"rate": "-1/s"}})
    with pytest.raises(ValueError, match=r"queue_limits\['q'\]\['concurrency'\]"):
        FdbBroker(queue_limits={"q": {"concurrency": -1}})


def test_the_name_a_queued_message_carries() -> None:
    """The task (actor) name the limits are keyed by: from the message's bytes, or a
    chunked message's reference; None, never an error, from anything else."""
    from fdbrecipes.contrib.celery._shared import task_of
    from fdbrecipes.contrib.dramatiq import actor_of

    message = {"body": "", "headers": {"task": "t.add", "id": "1"}, "properties": {}}
    assert task_of(json.dumps(message).encode()) == "t.add"
    assert task_of(("blob", b"id", "t.add")) == "t.add"
    for junk in (b"\xff", b"[]", b'{"headers": 1}', b'{"headers": {"task": 2}}',
                 ("blob", b"id")):
        assert task_of(junk) is None
    sent = dramatiq.Message(queue_name="q", actor_name="send", args=(), kwargs={},
                            options={})
    assert actor_of(sent.encode()) == "send"
    assert actor_of(("blob", b"id", "send")) == "send"
    for junk in (b"\xff", b"[]", b'{"actor_name": 3}', ("blob", b"id")):
        assert actor_of(junk) is None


def test_a_celery_apps_rate_limits_become_the_task_limits_option() -> None:
    from fdbrecipes import rate
    from fdbrecipes.contrib.celery import rate_limits

    app = celery.Celery("limited", set_as_current=False)

    @app.task(name="t.paced", rate_limit="10/m")
    def paced() -> None: ...

    @app.task(name="t.free")
    def free() -> None: ...

    options = rate_limits(app)
    assert options == {"t.paced": {"rate": "10/m"}}
    settings = TransportSettings.from_options({"task_limits": options})
    assert settings.flow.names == (("t.paced", (("task.rate:t.paced", rate(10, 60.0)),)),)
