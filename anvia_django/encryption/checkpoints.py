"""Sealing LangGraph's checkpoint values (channel values and pending writes)
and its store's items.

Each value is LangGraph's serializer's ``(type, bytes)``; sealed, the pair
becomes ``("sealed", <key id>:<nonce><ciphertext>)`` over the type, a NUL
and the bytes, so the stored type says nothing either. The associated data
binds a value to its thread and its place there (a blob's namespace,
channel and version; a write's checkpoint, task and index): a value copied
to another row does not open (the places are named by
``integrations/langgraph/places.py``). Every thread has a data key of its own
(``keys.owner_of_thread``), and so has every store namespace
(``keys.owner_of_namespace``), whose name then takes the thread's part.
"""

from __future__ import annotations

from .envelope import VERSION, Cipher, DecryptionError, open_bytes, seal_bytes, sealed_bytes_key
from .keys import cipher_for

SEALED = "sealed"
"""The type column of a sealed value."""

Typed = tuple[str, bytes | None]


def _aad(key_id: int, thread_id: str, place: str) -> bytes:
    text = f"anvia-lg\x00{VERSION}\x00{key_id}\x00{thread_id}\x00{place}"
    return text.encode("utf-8", "surrogatepass")


def seal_typed(cipher: Cipher, key_id: int, thread_id: str, place: str, typed: Typed) -> Typed:
    kind, data = typed
    payload = kind.encode() + b"\x00" + (data or b"")
    return SEALED, seal_bytes(cipher, key_id, _aad(key_id, thread_id, place), payload)


def open_typed(alias: str, thread_id: str, place: str, typed: Typed) -> Typed:
    """The ``(type, bytes)`` sealed in ``typed``; ``typed`` itself when it
    is not sealed (written before encryption was on)."""
    kind, data = typed
    if kind != SEALED or data is None:
        return typed
    key_id = sealed_bytes_key(data)
    aad = _aad(key_id, thread_id, place)
    # A cached cipher may be a stale one for a reused key id: fetch it once more.
    for cached in (True, False):
        payload = open_bytes(cipher_for(alias, key_id, cached=cached), data, aad)
        if payload is not None:
            kind_bytes, _, value = payload.partition(b"\x00")
            return kind_bytes.decode(), value
    raise DecryptionError(
        f"a checkpoint value of thread {thread_id!r} does not decrypt with data key "
        f"{key_id}: it was altered, moved from another row, or sealed under another key"
    )
