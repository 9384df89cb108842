"""A structure's ``codec=``: what its values are encoded with, on the way in and out.

Without a codec (the default) a structure stores its values with the tuple layer, as
given.  With one (anything with ``encode(value) -> bytes`` and ``decode(bytes) ->
value``, such as :class:`fdbrecipes.tasks.JSON` or :class:`fdbrecipes.tasks.Encrypted`),
a pushed value is stored as the codec's bytes (:meth:`Values.encoded`), and every
value a call returns (popped, peeked, listed, leased, a dead letter's, a job's result)
is decoded (:func:`decoded`, the decorator of the operations that return values).  A
stored value the codec cannot decode (a key it does not hold, bytes pushed without the
codec) is returned as :class:`Undecodable`, never raised: a pop that took it has
committed, and a listing goes on; a worker makes such a job a dead letter with its
reason.  The format of sealed (encrypted) bytes is known here too, so the tools can
show "encrypted" without a key (:func:`sealed_key_id`).  In memory only.
"""

from __future__ import annotations

import functools
from typing import (
    Any,
    Callable,
    NamedTuple,
    Optional,
    Protocol,
    Tuple,
    TypeVar,
    cast,
    runtime_checkable,
)

from ._fdb import Gen
from ._values import MAX_VALUE_BYTES, encode_value

__all__ = ["SEALED", "Codec", "Undecodable", "Values", "decoded", "sealed_key_id"]

F = TypeVar("F", bound=Callable[..., Any])

#: What bytes sealed by :class:`fdbrecipes.tasks.Encrypted` begin with (then the key
#: id's length, the key id, the nonce, the ciphertext).
SEALED = b"\xfeE1"
#: Bytes of the AEAD's nonce and tag.
NONCE_BYTES, TAG_BYTES = 12, 16


def sealed_key_id(data: Any) -> Optional[Tuple[str, int]]:
    """(the key id, where the nonce begins) of sealed bytes, or None if ``data`` is
    not sealed."""
    if type(data) is not bytes or not data.startswith(SEALED) or len(data) <= len(SEALED):
        return None
    size = data[len(SEALED)]
    start = len(SEALED) + 1
    if len(data) < start + size + NONCE_BYTES + TAG_BYTES:
        return None
    try:
        key_id = data[start:start + size].decode("utf-8")
    except UnicodeDecodeError:
        return None
    return key_id, start + size


@runtime_checkable
class Codec(Protocol):
    """Turns values into bytes (:meth:`encode`) and back (:meth:`decode`)."""

    def encode(self, value: Any) -> bytes:
        """``value`` as bytes (TypeError or ValueError if it cannot be)."""

    def decode(self, data: bytes) -> Any:
        """The value ``data`` encodes (an exception if it does not)."""


class Undecodable(NamedTuple):
    """A stored value a structure's codec could not decode: its stored ``data`` and
    the ``reason`` (the codec's error)."""

    data: Any
    reason: str


class Values:
    """The codec of one structure (None: the tuple layer's values, as given)."""

    def __init__(self, codec: Any) -> None:
        if codec is not None and not isinstance(codec, Codec):
            raise TypeError(f"codec must have encode() and decode(), not "
                            f"{type(codec).__name__}")
        self.codec: Optional[Codec] = codec

    def encoded(self, value: Any, name: str = "value") -> bytes:
        """``value`` as stored: tuple-packed, after the codec's encoding.

        Raises:
            TypeError or ValueError: it cannot be (naming ``name``), or it is too large.
        """
        if self.codec is not None:
            try:
                value = self.codec.encode(value)
            except (TypeError, ValueError) as e:
                raise type(e)(f"{name} cannot be encoded by the codec: {e}") from None
            if type(value) is not bytes:
                raise TypeError(f"the codec made {type(value).__name__} of {name}, not bytes")
        return encode_value(value, name, MAX_VALUE_BYTES)

    def result(self, value: Any) -> Any:
        """A job's result as the worker stores it: the codec's bytes (a value as it is
        without a codec; None stays None).

        Raises:
            TypeError or ValueError: the codec cannot encode it.
        """
        return value if self.codec is None or value is None else self.codec.encode(value)

    def value(self, stored: Any) -> Any:
        """A stored value, decoded (an :class:`Undecodable` if it cannot be)."""
        if type(stored) is not bytes or self.codec is None:
            return Undecodable(stored, f"not stored by the codec: a {type(stored).__name__}")
        try:
            return self.codec.decode(stored)
        except Exception as e:  # a codec's own errors, whatever they are
            return Undecodable(stored, f"{type(e).__name__}: {e}"[:1_000])

    def out(self, result: Any, at: Optional[int] = None) -> Any:
        """What an operation returned, its values decoded: a value (element ``at`` of
        a tuple), a Lease (its value), a row with a ``value``, a record with a
        ``result``, what ``finish_and_claim`` returned (its leases), or a list of
        these."""
        if result is None:
            return None
        if type(result) is list:
            return [self.out(each, at) for each in result]
        if at is not None:
            return result[:at] + (self.value(result[at]),) + result[at + 1:]
        fields = getattr(result, "_fields", None)
        if fields is not None:
            if "value" in fields:
                return result._replace(value=self.value(result.value))
            if "leases" in fields:
                return result._replace(leases=self.out(result.leases))
            if "result" in fields:
                return result if result.result is None else \
                    result._replace(result=self.value(result.result))
            return result
        if hasattr(result, "token") and hasattr(result, "value"):  # a Lease
            result.value = self.value(result.value)
            return result
        return self.value(result)


def decoded(at: Optional[int] = None) -> Callable[[F], F]:
    """Decorate an operations object's method whose operation returns values: with a
    codec, what it returns is decoded (see :meth:`Values.out`; ``at``: the value is
    element ``at`` of each tuple returned).  The method runs as before (its arguments
    checked when it is called); without a codec its operation is returned as it is."""
    def decorate(method: F) -> F:
        @functools.wraps(method)
        def wrapper(self: Any, *args: Any, **kwargs: Any) -> Any:
            op = method(self, *args, **kwargs)
            values: Values = self.values
            return op if values.codec is None else _decoding(op, values, at)
        return cast(F, wrapper)
    return decorate


def _decoding(op: Gen[Any], values: Values, at: Optional[int]) -> Gen[Any]:
    result = yield from op
    return values.out(result, at)
