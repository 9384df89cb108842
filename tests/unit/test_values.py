"""Value encoding and validation (no server needed)."""

from __future__ import annotations

import enum
import math
import uuid

import fdb.tuple
import pytest
from hypothesis import given
from hypothesis import strategies as st

from fdbrecipes._core import (
    MAX_VALUE_BYTES,
    check_id,
    check_int,
    check_seconds,
    check_timeout,
    decode_value,
    encode_value,
)

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


def test_check_int_refuses_bools_and_floats() -> None:
    assert check_int(5, "n", low=0) == 5
    with pytest.raises(TypeError, match="^n must be an int"):
        check_int(True, "n")
    with pytest.raises(TypeError, match="^n must be an int"):
        check_int(1.0, "n")
    with pytest.raises(ValueError, match="^n must be >= 0"):
        check_int(-1, "n", low=0)
    with pytest.raises(ValueError, match="^n must be <= 3"):
        check_int(4, "n", high=3)


def test_seconds_and_timeouts() -> None:
    assert check_seconds(2, "lease_seconds") == 2.0
    for bad in (0, -1, float("inf"), float("nan")):
        with pytest.raises(ValueError, match="^lease_seconds"):
            check_seconds(bad, "lease_seconds")
    with pytest.raises(TypeError, match="^lease_seconds"):
        check_seconds("1", "lease_seconds")
    assert check_timeout(None) is None
    assert check_timeout(0) == 0.0
    with pytest.raises(ValueError, match="^timeout"):
        check_timeout(-1)


def test_ids() -> None:
    assert check_id(None) is None
    assert check_id(b"x") == b"x"
    with pytest.raises(TypeError, match="^id"):
        check_id("x")
    with pytest.raises(ValueError, match="^id"):
        check_id(b"")
    with pytest.raises(ValueError, match="^id"):
        check_id(b"x" * 1001)
