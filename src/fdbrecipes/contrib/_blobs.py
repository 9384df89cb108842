"""Values longer than one FoundationDB value, in chunks.

A blob is stored under ``S/(name..., i)`` in chunks of at most :data:`CHUNK` bytes
(FoundationDB refuses values over 100,000 bytes); a blob is at most :data:`MAX_BYTES`,
so that one transaction (10,000,000 bytes of writes) writes it whole.  Writing,
reading and clearing a blob are each part of the caller's transaction.
"""

from __future__ import annotations

from typing import Any, Optional, Tuple

__all__ = ["CHUNK", "MAX_BYTES", "Blobs"]

#: Bytes per chunk: FoundationDB values are at most 100,000 bytes.
CHUNK = 90_000

#: The largest blob: what one transaction can write with room to spare.
MAX_BYTES = 8_000_000


class Blobs:
    """Blobs named by tuples, under one subspace."""

    __slots__ = ("subspace",)

    def __init__(self, subspace: Any) -> None:
        self.subspace = subspace

    @staticmethod
    def check(data: bytes, name: str) -> None:
        """Refuse, before anything is written, data too large for one transaction.

        Raises:
            ValueError: ``data`` is over :data:`MAX_BYTES` (``name`` says what it is).
        """
        if len(data) > MAX_BYTES:
            raise ValueError(f"{name} is {len(data):,} bytes; at most {MAX_BYTES:,} fit in "
                             "one FoundationDB transaction")

    def write(self, tr: Any, name: Tuple[Any, ...], data: bytes) -> None:
        """Store ``data`` under ``name``, replacing what was there.  Writes
        ``ceil(len / CHUNK)`` keys and one range clear; reads nothing."""
        self.check(data, "a value")
        r = self.subspace.range(name)
        tr.clear_range(r.start, r.stop)
        for i, start in enumerate(range(0, max(len(data), 1), CHUNK)):
            tr[self.subspace.pack((*name, i))] = data[start:start + CHUNK]

    def read(self, tr: Any, name: Tuple[Any, ...]) -> Optional[bytes]:
        """The blob under ``name``, or None.  One range read (a read conflict on it)."""
        r = self.subspace.range(name)
        chunks = [kv.value for kv in tr.get_range(r.start, r.stop)]
        return b"".join(chunks) if chunks else None

    def first_key(self, name: Tuple[Any, ...]) -> bytes:
        """The key of the blob's first chunk: a watch on it fires when the blob is
        written or cleared."""
        return bytes(self.subspace.pack((*name, 0)))

    def clear(self, tr: Any, name: Tuple[Any, ...]) -> None:
        """Remove the blob under ``name``.  One range clear."""
        r = self.subspace.range(name)
        tr.clear_range(r.start, r.stop)
