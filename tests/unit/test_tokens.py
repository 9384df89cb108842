"""The tokens that name listed rows and where a listing goes on after one (needs no
server): what each kind of row's token holds round-trips, and anything else, however
made, is refused with ValueError (TypeError for what is not bytes)."""

from __future__ import annotations

import fdb.tuple
import pytest
from hypothesis import given
from hypothesis import strategies as st

from fdbrecipes._records.tokens import (
    MOST_NAMED,
    IndexPlace,
    after_key,
    dead_token,
    delayed_token,
    finished_token,
    parse_any,
    parse_dead,
    parse_delayed,
    parse_finished,
    parse_pending,
    parse_removable,
    parse_tokens,
    pending_token,
)

SEQ = st.integers(0, 2**63)
RANDOM = st.binary(min_size=1, max_size=64)


@given(SEQ, RANDOM, st.integers(-(2**40), 2**40), st.integers(0, 2**62))
def test_each_kind_round_trips(seq: int, random: bytes, priority: int, when: int) -> None:
    assert parse_pending(pending_token((seq, random)), 0) == (seq, random)
    assert parse_pending(pending_token((priority, seq, random)), 1) == (priority, seq, random)
    assert parse_delayed(delayed_token(when, (seq, random)), 0) == (when, (seq, random))
    assert parse_dead(dead_token(when, (seq, random)), 0) == (when, (seq, random))
    assert parse_removable(delayed_token(when, (seq, random)), 0) == (seq, random)
    assert parse_any(dead_token(when, (seq, random)), 0).kind == "dead"
    assert parse_any(fdb.tuple.pack(("lease", random)), 0) == ("lease", random)
    entry = (1.5, "group", b"id")
    assert parse_finished(finished_token(IndexPlace(entry)), 1) == (entry, 0)
    assert parse_finished(finished_token(IndexPlace(entry, when + 1)), 1) == (entry, when + 1)


BAD = [b"", b"\xff", b"\x01abc", fdb.tuple.pack(("p",)), fdb.tuple.pack(("p", 1)),
       fdb.tuple.pack(("p", 1, "str")), fdb.tuple.pack(("p", True, b"r")),
       fdb.tuple.pack(("p", 1, b"")), fdb.tuple.pack(("p", 1, b"r" * 65)),
       fdb.tuple.pack(("p", 1.0, b"r")), fdb.tuple.pack(("p", None, b"r")),
       fdb.tuple.pack(("x", 1, b"r")), fdb.tuple.pack(("p", 1, b"r")) + b"\x00" * 2500]


@pytest.mark.parametrize("token", BAD)
def test_anything_else_is_refused(token: bytes) -> None:
    for parse in (parse_pending, parse_delayed, parse_dead, parse_removable, parse_any):
        with pytest.raises(ValueError, match="after is not a token|token is not a token"):
            parse(token, 0, "after" if parse not in (parse_removable, parse_any) else "token")
    with pytest.raises(ValueError):
        parse_finished(token, 0)


@given(st.binary(max_size=80))
def test_random_bytes_are_refused_or_name_a_place(token: bytes) -> None:
    try:
        place = parse_pending(token, 0)
    except ValueError:
        return
    assert pending_token(place) == token  # only a well-made token is accepted


def test_a_token_of_another_shape_is_refused() -> None:
    with pytest.raises(ValueError):
        parse_pending(pending_token((1, 2, b"r")), 0)  # a PriorityQueue's in a Queue
    with pytest.raises(ValueError):
        parse_finished(finished_token(IndexPlace((1.5, b"id"))), 1)  # a Queue's in a FairQueue
    with pytest.raises(ValueError):
        parse_finished(finished_token(IndexPlace((1.5, "g", b"id"), 2)), 0)  # the reverse
    with pytest.raises(ValueError):
        parse_finished(fdb.tuple.pack(("f", 1.5, b"id", 0)), 0)  # the key's own has no number
    with pytest.raises(TypeError, match="bytes"):
        parse_pending("text", 0)


def test_many_tokens_at_most() -> None:
    token = pending_token((1, b"r"))
    assert parse_tokens([token] * MOST_NAMED, parse_pending, 0) == [(1, b"r")] * MOST_NAMED
    with pytest.raises(ValueError, match="at most 1,000"):
        parse_tokens([token] * (MOST_NAMED + 1), parse_pending, 0)
    with pytest.raises(ValueError, match=r"tokens\[1\]"):
        parse_tokens([token, b"bad"], parse_pending, 0)
    with pytest.raises(TypeError):
        parse_tokens(token, parse_pending, 0)


@given(st.binary(min_size=1, max_size=40))
def test_after_key_follows_every_key_with_the_prefix(prefix: bytes) -> None:
    if prefix.rstrip(b"\xff") == b"":
        return
    after = after_key(prefix)
    assert after > prefix + b"\xff" * 10 and not after.startswith(prefix)
