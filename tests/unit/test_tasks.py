"""Tasks without a server: the arguments' checks and conversions, the codecs (JSON,
MessagePack, encryption with key rotation), the app's options, and the testing modes
(inline and manual) in a process where ``libfdb_c`` cannot be loaded."""

from __future__ import annotations

import dataclasses
import datetime
import decimal
import enum
import os
import subprocess
import sys
import textwrap
import uuid
from typing import Any, Dict, FrozenSet, List, Literal, Optional, Tuple, Union

import pytest
from hypothesis import given
from hypothesis import strategies as st

from fdbrecipes.tasks import JSON, App, CodecError, Encrypted, MsgPack, encrypted_key_id
from fdbrecipes.tasks.arguments import Arguments


class Color(enum.Enum):
    RED = "red"
    BLUE = 2


@dataclasses.dataclass
class Point:
    x: int
    y: float
    tags: List[str] = dataclasses.field(default_factory=list)


@dataclasses.dataclass
class Shape:
    points: List[Point]
    color: Color
    made: datetime.datetime


def everything(a: int, b: float, c: str, d: bytes, e: bool, f: Optional[int],
               g: Union[int, str], h: List[Point], i: Dict[str, Tuple[int, str]],
               j: FrozenSet[int], k: Literal["x", "y"], s: Shape, u: uuid.UUID,
               dec: decimal.Decimal, day: datetime.date, t: datetime.time,
               td: datetime.timedelta, *rest: int, **more: str) -> Shape:
    return s


CALL: Dict[str, Any] = dict(
    a=1, b=2.5, c="é", d=b"\x00\xff", e=True, f=None, g="two", h=[Point(1, 2.0, ["t"])],
    i={"k": (1, "v")}, j=frozenset({3, 4}), k="y",
    s=Shape([Point(0, 0.5)], Color.BLUE,
            datetime.datetime(2024, 1, 2, 3, 4, 5, 6, tzinfo=datetime.timezone.utc)),
    u=uuid.UUID(int=7), dec=decimal.Decimal("1.10"), day=datetime.date(2024, 2, 29),
    t=datetime.time(23, 59), td=datetime.timedelta(seconds=90.5))


@pytest.mark.parametrize("codec", [JSON(), MsgPack(),
                                   Encrypted(JSON(), {"k1": bytes(32)}, "k1")])
def test_arguments_of_every_kind_come_back_as_given(codec: Any) -> None:
    arguments = Arguments(everything, "task t")
    plain = arguments.dump((), CALL)
    args, kwargs = arguments.load(codec.decode(codec.encode(plain)))
    assert args == list(CALL.values()) and kwargs == {}  # by position, before *rest
    positional = arguments.dump(tuple(CALL.values()) + (5, 6), {"x": "more"})
    args, kwargs = arguments.load(codec.decode(codec.encode(positional)))
    assert args == [*CALL.values(), 5, 6] and kwargs == {"x": "more"}
    assert arguments.load_result(arguments.dump_result(CALL["s"])) == CALL["s"]


@pytest.mark.parametrize("change, named", [
    ({"a": True}, "argument 'a' must be an int, not bool"),
    ({"b": "1"}, "argument 'b' must be a float"),
    ({"d": "text"}, "argument 'd' must be bytes"),
    ({"h": [Point(1, 2.0, [3])]}, "argument 'h'[0].tags[0] must be a str"),
    ({"i": {"k": (1, 2)}}, "argument 'i'['k'][1] must be a str"),
    ({"k": "z"}, "argument 'k' must be one of 'x', 'y'"),
    ({"s": Point(1, 2.0)}, "argument 's' must be a Shape"),
    ({"u": "00000000-0000-0000-0000-000000000007"}, "argument 'u' must be a UUID"),
    ({"day": datetime.datetime(2024, 1, 1)}, "argument 'day' must be a date"),
    ({"g": 1.5}, "argument 'g' must be an int or a str"),
    ({"nope": 1}, "argument 'nope' must be a str"),  # into **more
])
def test_a_wrong_argument_is_named(change: Dict[str, Any], named: str) -> None:
    arguments = Arguments(everything, "task t")
    with pytest.raises((TypeError, ValueError)) as error:
        arguments.dump((), {**CALL, **change})
    assert named in str(error.value)
    assert str(error.value).startswith("task t: ")


def test_a_type_no_task_keeps_is_refused_when_the_task_is_made() -> None:
    app = App(("t",))

    def bad(when: object) -> None:
        pass

    with pytest.raises(TypeError, match="parameter 'when'"):
        app.task(bad)
    with pytest.raises(TypeError, match="dict keys must be str"):
        Arguments(_int_keys, "t")


def _int_keys(m: Dict[int, str]) -> None:
    pass


@given(st.recursive(st.none() | st.booleans() | st.integers(-2**63, 2**63 - 1)
                    | st.floats(allow_nan=False) | st.text() | st.binary(),
                    lambda inner: st.lists(inner, max_size=4)
                    | st.dictionaries(st.text(), inner, max_size=4), max_leaves=20))
def test_json_and_msgpack_round_trip_plain_data(value: Any) -> None:
    for codec in (JSON(), MsgPack()):
        assert codec.decode(codec.encode(value)) == value


def test_encryption_rotates_and_names_the_key_it_lacks() -> None:
    old, new = os.urandom(32), os.urandom(32)
    before = Encrypted(JSON(), {"2024": old}, current="2024")
    sealed = before.encode({"card": "4111 1111"})
    assert b"4111" not in sealed and encrypted_key_id(sealed) == "2024"
    assert sealed != before.encode({"card": "4111 1111"})  # a fresh nonce each time
    rotated = Encrypted(JSON(), {"2024": old, "2025": new}, current="2025")
    assert rotated.decode(sealed) == {"card": "4111 1111"}
    assert encrypted_key_id(rotated.encode(1)) == "2025"
    dropped = Encrypted(JSON(), {"2025": new}, current="2025")
    with pytest.raises(CodecError, match="key id '2024', which this codec does not hold"):
        dropped.decode(sealed)
    wrong = Encrypted(JSON(), {"2024": new}, current="2024")
    with pytest.raises(CodecError, match="key of key id '2024' does not decrypt"):
        wrong.decode(sealed)
    altered = sealed[:-1] + bytes([sealed[-1] ^ 1])
    with pytest.raises(CodecError, match="'2024' does not decrypt"):
        before.decode(altered)
    chacha = Encrypted(MsgPack(), {"c": new}, "c", algorithm="chacha20-poly1305")
    assert chacha.decode(chacha.encode([b"x", 1])) == [b"x", 1]
    with pytest.raises(CodecError, match="not encrypted"):
        before.decode(b"plain")
    assert encrypted_key_id(b"plain") is None


@pytest.mark.parametrize("args, error", [
    (dict(codec=JSON(), keys={}, current="a"), "non-empty mapping"),
    (dict(codec=JSON(), keys={"a": b"short"}, current="a"), "keys\\['a'\\] must be bytes"),
    (dict(codec=JSON(), keys={"a": bytes(32)}, current="b"), "current must be one of"),
    (dict(codec="json", keys={"a": bytes(32)}, current="a"), "codec must be a Codec"),
])
def test_encrypted_refuses_bad_arguments(args: Dict[str, Any], error: str) -> None:
    with pytest.raises((TypeError, ValueError), match=error):
        Encrypted(**args)


def test_app_options_are_checked() -> None:
    app = App(("t",))

    @app.task(queue="p", priority=1)
    def a(x: int) -> None:
        pass

    with pytest.raises(ValueError, match="exists already"):
        app.task(name=a.name)(lambda: None)
    with pytest.raises(ValueError, match="is a priority-queue already"):
        app.task(queue="p", group="x")(_grouped)
    with pytest.raises(ValueError, match="names no parameter"):
        app.task(queue="f", group="tenant")(_grouped)
    with pytest.raises(TypeError, match="priority or group, not both"):
        app.task(priority=1, group="x")(_grouped)
    with pytest.raises(ValueError, match="needs the app's history"):
        App(("u",), history=None).task(time_limit=5)(_grouped)
    with pytest.raises(TypeError, match="subspace must be"):
        App("t")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="'inline', 'manual' or None"):
        app.testing("eager")
    with pytest.raises(RuntimeError, match="none runs here"):
        a.then(1)


def _grouped(x: str) -> None:
    pass


#: An app tested with no libfdb_c to load: the library's loader is made to fail.
NO_LIBRARY = textwrap.dedent("""
    import asyncio, ctypes, sys
    real = ctypes.CDLL.__init__
    def refuse(self, name, *args, **kwargs):
        if name and "fdb_c" in str(name):
            raise OSError("libfdb_c cannot be loaded here")
        real(self, name, *args, **kwargs)
    ctypes.CDLL.__init__ = refuse
    import fdb
    try:
        fdb.api_version(730)
    except Exception as e:
        print("no library:", type(e).__name__)
    from fdbrecipes.tasks import App, Encrypted, JSON

    app = App(("myapp",), codec=Encrypted(JSON(), {"k": bytes(32)}, "k"))
    sent = []

    @app.task
    def send(to: str, subject: str) -> int:
        sent.append((to, subject))
        if to == "bounce":
            raise RuntimeError("bounced")
        welcome.then(to)
        return len(subject)

    @app.task
    async def welcome(to: str) -> str:
        return "welcome " + to

    with app.testing("inline"):
        handle = send.defer(None, to="a@b", subject="hi")
        print("inline", handle.status(None), handle.result(None), sent)
        try:
            send.defer(None, to="bounce", subject="x")
        except RuntimeError as e:
            print("inline raised", e)
        try:
            send.defer(None, to="a@b", subject=3)
        except TypeError as e:
            print("refused", e)
    sent.clear()
    with app.testing("manual"):
        first = send.defer(None, to="c@d", subject="hello")
        bounce = send.defer(None, to="bounce", subject="x")
        print("manual waiting", [r.task.name.split(".")[-1] for r in app.deferred], sent)
        ran = app.drain()
        print("manual ran", [(r.task.name.split(".")[-1], r.state) for r in ran])
        print("manual results", first.result(None), bounce.status(None), app.deferred)
        later = welcome.defer(None, to="e")
        print("async drain", [r.result for r in asyncio.run(app.drain_async())],
              later.result(None))
    print("fdb.impl loaded:", "fdb.impl" in sys.modules)
""")


def test_inline_and_manual_modes_need_no_libfdb_c(tmp_path: Any) -> None:
    found = subprocess.run([sys.executable, "-c", NO_LIBRARY], capture_output=True,
                           text=True, timeout=120, cwd=tmp_path,
                           env={**os.environ, "FDB_CLUSTER_FILE": str(tmp_path / "none")})
    assert found.returncode == 0, found.stderr
    lines = found.stdout.splitlines()
    assert lines[0] == "no library: RuntimeError" or lines[0].startswith("no library:")
    assert lines[1:] == [
        "inline succeeded 2 [('a@b', 'hi')]",
        "inline raised bounced",
        "refused task __main__.send: argument 'subject' must be a str, not int",
        "manual waiting ['send', 'send'] []",
        "manual ran [('send', 'succeeded'), ('send', 'dead'), ('welcome', 'succeeded')]",
        "manual results 5 dead []",
        "async drain ['welcome e'] welcome e",
        "fdb.impl loaded: False",
    ], found.stdout


try:
    import pydantic
except ImportError:  # pragma: no cover - the test extra installs it
    pydantic = None
else:
    class Order(pydantic.BaseModel):
        sku: str
        quantity: int
        placed: datetime.datetime

    def repeat(order: Order, times: int = 1) -> List[Order]:
        return [order] * times


@pytest.mark.skipif(pydantic is None, reason="pydantic is not installed")
def test_pydantic_models_are_arguments_and_results() -> None:
    app = App(("shop",))
    task = app.task(name="repeat")(repeat)
    order = Order(sku="a-1", quantity=2,
                  placed=datetime.datetime(2024, 3, 1, tzinfo=datetime.timezone.utc))
    plain = task.arguments.dump((order,), {"times": 2})
    assert plain["order"] == {"sku": "a-1", "quantity": 2, "placed": "2024-03-01T00:00:00Z"}
    for codec in (JSON(), MsgPack(), Encrypted(JSON(), {"k": bytes(32)}, "k")):
        args, kwargs = task.arguments.load(codec.decode(codec.encode(plain)))
        assert (args, kwargs) == ([], {"order": order, "times": 2})
    assert task.arguments.load_result(task.arguments.dump_result([order])) == [order]
    with pytest.raises(TypeError, match="argument 'order' must be an Order, not dict"):
        task.arguments.dump(({"sku": "a-1", "quantity": 2},), {})
    with pytest.raises(ValueError, match="(?s)argument 'order': .*quantity"):
        task.arguments.load({"order": {"sku": "a-1", "quantity": "many",
                                       "placed": "2024-03-01T00:00:00Z"}, "times": 1})
    with app.testing("manual"):
        handle = task.defer(None, order, times=3)
        app.drain()
        assert handle.result(None) == [order, order, order]


def test_what_a_call_of_a_task_with_limits_carries() -> None:
    """A call carries each limit's key and cost, computed from its arguments; the
    structure's uses read them back (GLOBAL for a use without key, None for a call the
    key function leaves out, or a task that carries none)."""
    from fdb.subspace_impl import Subspace

    from fdbrecipes import Limits
    from fdbrecipes._limits.specs import EXEMPT
    from fdbrecipes.tasks.envelope import open_envelope
    from fdbrecipes.tasks.limiting import carried_cost, carried_key, structure_uses

    limits = Limits(Subspace(("limits",)))
    app = App(("carry",))

    @app.task(limits=[limits.use("per", key=_first), limits.use("all", cost=_double)])
    def job(who: str, n: int) -> None: ...

    @app.task
    def plain(n: int) -> None: ...

    value = job.item("ada", 3)
    assert value[4] == (("per", 1, "ada", 1), ("all", 0, None, 6))
    assert open_envelope(value).name == job.name
    assert carried_key("per", value) == "ada" and carried_cost("all", value) == 6
    uses = {use.name: use for use in structure_uses([*job.limits, *plain.limits])}
    assert uses["per"].key_of(value) == "ada"
    assert uses["all"].key_of(value) is None  # the global key
    assert uses["all"].cost_of(value) == 6
    assert uses["per"].key_of(job.item("", 1)) is EXEMPT  # its key function said None
    assert uses["per"].key_of(plain.item(1)) is EXEMPT   # a task without the limit
    assert len(plain.item(1)) == 4                        # as before limits existed


def _first(who: str, n: int) -> Any:
    return who or None


def _double(who: str, n: int) -> int:
    return 2 * n
