"""Value encoding: every value round-trips exactly, bad ones are refused (no server
needed).  Argument validation is in test_validation.py."""

from __future__ import annotations

import enum
import math
import sys
import uuid

import fdb.tuple
import pytest
from hypothesis import given
from hypothesis import strategies as st

from fdbrecipes._values import MAX_VALUE_BYTES, decode_value, encode_value

scalars = st.one_of(
    st.binary(max_size=64),
    st.text(max_size=32),
    st.integers(min_value=-(2**200), max_value=2**200),
    st.floats(allow_nan=False),
    st.booleans(),
    st.uuids(),
)
values = st.recursive(
    scalars,
    lambda children: st.tuples(children, children) | st.lists(children, max_size=3).map(tuple),
    max_leaves=8,
)


def same(a: object, b: object) -> bool:
    """Equal and of exactly the same types, all the way down (1 != 1.0 != True)."""
    if type(a) is not type(b):
        return False
    if isinstance(a, tuple):
        assert isinstance(b, tuple)
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
    if isinstance(a, float):
        assert isinstance(b, float)
        return math.copysign(1, a) == math.copysign(1, b) and (a == b or (a != a and b != b))
    return a == b


@given(values)
def test_every_value_round_trips_exactly(value: object) -> None:
    assert same(decode_value(encode_value(value)), value)


@pytest.mark.parametrize(
    "value",
    [b"", "", 0, -1, 2**64, -(2**64), 0.0, -0.0, float("inf"), True, False,
     uuid.UUID(int=0), (), (None,), ((1, "a"), (b"x", (True, 2.5)))],
)
def test_edge_values_round_trip(value: object) -> None:
    assert same(decode_value(encode_value(value)), value)


def test_nan_round_trips() -> None:
    out = decode_value(encode_value(float("nan")))
    assert isinstance(out, float) and out != out


def test_encoding_is_the_tuple_layer() -> None:
    assert encode_value(b"job") == fdb.tuple.pack((b"job",))


class Color(enum.IntEnum):
    RED = 1


@pytest.mark.parametrize(
    ("value", "error"),
    [
        (None, ValueError),
        ([1, 2], TypeError),
        ({"a": 1}, TypeError),
        (bytearray(b"x"), TypeError),
        (Color.RED, TypeError),  # would come back as a plain int
        (fdb.tuple.Versionstamp(), TypeError),
        (object(), TypeError),
        ((1, [2]), TypeError),
        ("\ud800", ValueError),  # a lone surrogate cannot be UTF-8 encoded
        (2**2100, ValueError),  # beyond the tuple layer's 255-byte integers
    ],
)
def test_bad_values_are_refused_with_the_argument_named(value: object, error: type) -> None:
    with pytest.raises(error, match="^value"):
        encode_value(value)


def test_size_limit_is_on_the_encoded_value() -> None:
    overhead = len(encode_value(b""))
    encode_value(b"x" * (MAX_VALUE_BYTES - overhead))
    with pytest.raises(ValueError, match=r"value encodes to 100,001 bytes"):
        encode_value(b"x" * (MAX_VALUE_BYTES - overhead + 1))


def test_a_value_nested_past_the_recursion_limit_is_a_value_error() -> None:
    """Issue 43, item 10: a tuple nested deeper than the tuple layer can pack raised
    RecursionError (a traceback in the CLI, a 500 in the dashboard)."""
    value: object = "x"
    for _ in range(sys.getrecursionlimit() * 2):
        value = (value,)
    with pytest.raises(ValueError, match="value is nested too deeply"):
        encode_value(value)
    with pytest.raises(TypeError, match="not list"):
        encode_value(((((["deep list"],),),),))
