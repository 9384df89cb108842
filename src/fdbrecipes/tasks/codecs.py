"""How a task's arguments and result become bytes, and back: codecs.

A codec turns *plain data* (None, bool, int, float, str, bytes, lists and dicts with
str keys of these; :mod:`.arguments` makes it from typed values and back) into bytes
and back:

* :class:`JSON` (the default): compact UTF-8 JSON; bytes are written as
  ``{"__bytes__": "<base64>"}``, and, outside tasks, a dataclass, an enum, a datetime,
  a UUID or a pydantic model given to it becomes its plain form (one way: decoding
  gives plain data back).
* :class:`MsgPack`: MessagePack (the ``msgpack`` package, ``pip install msgpack``),
  smaller and faster, bytes kept as bytes.
* :class:`Encrypted`: another codec's bytes sealed with an AEAD of the
  ``cryptography`` package (AES-GCM, or ChaCha20-Poly1305), under one of several keys
  named by ids: the key id is stored with each item, so keys rotate (items sealed
  under an old key still open while that key is listed) and a missing or wrong key
  says which key id it was (:class:`CodecError`).

A codec is anything with ``encode(value) -> bytes`` and ``decode(data) -> value``
(:class:`Codec`).  Codecs compute in memory: they read and write nothing in
FoundationDB and cost no round trip.
"""

from __future__ import annotations

import base64
import json
import os
from typing import Any, Dict, Mapping, Optional, Tuple

from .._codec import NONCE_BYTES, SEALED, Codec, sealed_key_id
from .arguments import plain_of

__all__ = ["JSON", "Codec", "CodecError", "Encrypted", "MsgPack", "encrypted_key_id"]


class CodecError(ValueError):
    """Data a codec cannot decode (not of its format, a key it does not hold, a key
    that does not open it).  A worker makes such a job a dead letter, with this
    message as the reason."""


#: The key a JSON object holding bytes has (its only key).
BYTES_KEY = "__bytes__"


def _json_default(value: Any) -> Any:
    if isinstance(value, (bytes, bytearray, memoryview)):
        return {BYTES_KEY: base64.b64encode(bytes(value)).decode("ascii")}
    return plain_of(value)


def _json_object(pairs: Dict[str, Any]) -> Any:
    if len(pairs) == 1 and BYTES_KEY in pairs and isinstance(pairs[BYTES_KEY], str):
        return base64.b64decode(pairs[BYTES_KEY])
    return pairs


#: The JSON codec's encoder and decoder, made once (``json.dumps``/``loads`` with
#: options make one per call).
_ENCODER = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False, default=_json_default)
_DECODER = json.JSONDecoder(object_hook=_json_object)


class JSON:
    """Compact UTF-8 JSON (see the module docstring); NaN and the infinities are kept
    as Python's ``json`` writes them."""

    name = "json"

    def __repr__(self) -> str:
        return "JSON()"

    def encode(self, value: Any) -> bytes:
        try:
            return _ENCODER.encode(value).encode("utf-8")
        except RecursionError:
            raise ValueError("the value is nested too deeply for JSON") from None

    def decode(self, data: bytes) -> Any:
        try:
            return _DECODER.decode(data.decode("utf-8"))
        except (UnicodeDecodeError, ValueError) as e:
            raise CodecError(f"not JSON: {e}") from None


class MsgPack:
    """MessagePack (needs ``pip install msgpack``): bytes kept as bytes, maps with str
    keys.

    Raises:
        ImportError: msgpack is not installed (when made).
    """

    name = "msgpack"

    def __init__(self) -> None:
        try:
            import msgpack
        except ImportError as e:
            raise ImportError("MsgPack needs the msgpack package: pip install msgpack") from e
        self._msgpack = msgpack

    def __repr__(self) -> str:
        return "MsgPack()"

    def encode(self, value: Any) -> bytes:
        try:
            packed: bytes = self._msgpack.packb(value, use_bin_type=True, default=plain_of)
        except (OverflowError, self._msgpack.PackException) as e:
            raise ValueError(f"cannot be encoded as MessagePack: {e}") from None
        return packed

    def decode(self, data: bytes) -> Any:
        try:
            return self._msgpack.unpackb(data, raw=False)
        except Exception as e:  # msgpack raises several kinds of errors on bad data
            raise CodecError(f"not MessagePack: {type(e).__name__}: {e}") from None


#: The AEADs :class:`Encrypted` offers, and the key sizes each takes.
ALGORITHMS = {"aes-gcm": (16, 24, 32), "chacha20-poly1305": (32,)}


def encrypted_key_id(data: bytes) -> Optional[str]:
    """The key id ``data`` was sealed under by :class:`Encrypted`, or None if it is not
    sealed data (what the dashboard shows in place of ciphertext)."""
    parsed = sealed_key_id(data)
    return None if parsed is None else parsed[0]


class Encrypted:
    """``codec``'s bytes sealed with an AEAD (authenticated encryption), under the key
    ``current`` of ``keys``.

    Each encoding draws a fresh random 96-bit nonce and stores, in the clear, the key
    id and the nonce before the ciphertext (which the key id authenticates too: the
    AEAD's associated data).  Decoding opens data sealed under any key of ``keys``:
    add a new key, make it ``current``, and items sealed under the old one still open
    while it is listed.  Data sealed under a key not listed, or that the key does not
    open (a wrong key, altered data), raises :class:`CodecError` naming the key id (a
    worker makes such a job a dead letter with that reason).  The cryptography is the
    ``cryptography`` package's (``pip install cryptography``); nothing here is
    hand-written.

    Args:
        codec: the codec whose bytes are sealed (e.g. :class:`JSON`).
        keys: key id (a str of 1 to 255 UTF-8 bytes) to key (bytes: 16, 24 or 32 for
            AES-GCM, 32 for ChaCha20-Poly1305).
        current: the key id new data is sealed under.
        algorithm: ``"aes-gcm"`` (default) or ``"chacha20-poly1305"``.

    Raises:
        TypeError or ValueError: a bad argument (named); ImportError: no
            ``cryptography``.
    """

    name = "encrypted"

    def __init__(self, codec: Codec, keys: Mapping[str, bytes], current: str, *,
                 algorithm: str = "aes-gcm") -> None:
        if not isinstance(codec, Codec):
            raise TypeError(f"codec must be a Codec (encode and decode), not "
                            f"{type(codec).__name__}")
        if algorithm not in ALGORITHMS:
            raise ValueError(f"algorithm must be one of {sorted(ALGORITHMS)}, got {algorithm!r}")
        try:
            from cryptography.exceptions import InvalidTag
            from cryptography.hazmat.primitives.ciphers.aead import AESGCM, ChaCha20Poly1305
        except ImportError as e:
            raise ImportError("Encrypted needs the cryptography package: pip install "
                              "cryptography") from e
        if not isinstance(keys, Mapping) or not keys:
            raise TypeError("keys must be a non-empty mapping of key id to key bytes")
        sizes = ALGORITHMS[algorithm]
        aead = AESGCM if algorithm == "aes-gcm" else ChaCha20Poly1305
        self._ciphers: Dict[str, Any] = {}
        for key_id, key in keys.items():
            if type(key_id) is not str or not 0 < len(key_id.encode("utf-8")) <= 255:
                raise TypeError(f"keys: a key id must be a str of 1 to 255 UTF-8 bytes, not "
                                f"{key_id!r}")
            if type(key) is not bytes or len(key) not in sizes:
                raise ValueError(f"keys[{key_id!r}] must be bytes of length "
                                 f"{' or '.join(map(str, sizes))} for {algorithm}")
            self._ciphers[key_id] = aead(key)
        if current not in self._ciphers:
            raise ValueError(f"current must be one of the key ids of keys, got {current!r}")
        self.codec = codec
        self.current = current
        self.algorithm = algorithm
        self._invalid = InvalidTag
        self._header = SEALED + bytes((len(current.encode("utf-8")),)) + current.encode("utf-8")

    def __repr__(self) -> str:
        return (f"Encrypted({self.codec!r}, keys=[{', '.join(map(repr, self._ciphers))}], "
                f"current={self.current!r})")

    @property
    def key_ids(self) -> Tuple[str, ...]:
        """The ids of the keys held."""
        return tuple(self._ciphers)

    def encode(self, value: Any) -> bytes:
        plain = self.codec.encode(value)
        nonce = os.urandom(NONCE_BYTES)
        sealed: bytes = self._ciphers[self.current].encrypt(nonce, plain, self._header)
        return self._header + nonce + sealed

    def decode(self, data: bytes) -> Any:
        parsed = sealed_key_id(data)
        if parsed is None:
            raise CodecError("not encrypted data (no key id found)")
        key_id, at = parsed
        cipher = self._ciphers.get(key_id)
        if cipher is None:
            raise CodecError(f"encrypted under key id {key_id!r}, which this codec does not "
                             f"hold (it holds {', '.join(map(repr, self._ciphers))})")
        nonce, sealed = data[at:at + NONCE_BYTES], data[at + NONCE_BYTES:]
        try:
            plain = cipher.decrypt(nonce, sealed, data[:at])
        except self._invalid:
            raise CodecError(f"the key of key id {key_id!r} does not decrypt the data (a "
                             "wrong key, or altered data)") from None
        return self.codec.decode(plain)
