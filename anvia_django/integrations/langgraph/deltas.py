"""Channel values stored as the items appended since an earlier version.

A list channel (``messages``) grows by a few items a step; stored whole at
every version, a thread grows with the square of its length. When a new
version's list extends the list of the version it replaces (the parent
checkpoint's version of that channel, same thread and namespace) item for
item, only the appended items are stored, as a row naming its base
version; a read puts the chain back together. Every ``FULL_EVERY``
versions the whole value is stored again (an anchor), so a chain is at
most that many rows, read in one query by their anchor.

"Item for item" is checked on the serializer's bytes, never on Python
equality: the saver remembers, for the versions it stored, a keyed digest
of the bytes of the whole list's items (``Remembered``); the new list is
serialized once, whole, and the digest of its first bytes compared. The
digest's key lives in the process only (a digest in a row reveals nothing
about its content), so a version stored by another process, or forgotten,
is stored whole. Only ``JsonPlusSerializer``'s msgpack lists are split: a
msgpack array is a header and then each item's bytes, each item serialized
on its own, so the items appended are the array's last bytes under a
header of their own, and reading the segments and joining the lists gives
what reading the whole list gives.
"""

from __future__ import annotations

import hashlib
import secrets
import threading
from collections import OrderedDict
from typing import Any, NamedTuple

from langgraph.checkpoint.serde.base import SerializerProtocol
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer

FULL_EVERY = 64
"""Versions per chain: an anchor (the whole value) and up to 63 deltas.
Chosen by measurement (benchmarks/langgraph_savers.py, 200 turns of a chat,
a version of ``messages`` per super-step): bytes stored were 15.7x the
transcript's JSON with 16, 10.0x with 32, 7.2x with 64."""
REMEMBERED = 256
"""Checkpoints whose list channels a saver remembers (least recent forgotten)."""
MSGPACK = "msgpack"


class Stored(NamedTuple):
    """How one version of a list channel was stored by this process."""

    version: str
    anchor: str  # the version of the chain's whole value (itself for an anchor)
    depth: int  # rows after the anchor
    items: int  # items in the whole value
    length: int  # bytes of those items in the whole value's serialization
    digest: str  # of those bytes, keyed


class Plan(NamedTuple):
    """What to store for one channel's new version."""

    kind: str
    payload: bytes
    base: str | None
    anchor: str | None
    depth: int
    digest: str
    base_digest: str | None  # what the base row's digest must be for the delta to hold
    whole: bytes  # the whole value's serialization, stored instead when the base does not hold
    stored: Stored

    def as_whole(self) -> Plan:
        """This plan with the whole value stored: the chain starts again here."""
        version = self.stored.version
        return self._replace(
            payload=self.whole,
            base=None,
            anchor=None,
            depth=0,
            base_digest=None,
            stored=self.stored._replace(anchor=version, depth=0),
        )


class Remembered:
    """A saver's memory of the list channels it stored, per checkpoint."""

    def __init__(self) -> None:
        self._key = secrets.token_bytes(32)
        self._lock = threading.Lock()
        self._checkpoints: OrderedDict[tuple[str, str, str], dict[str, Stored]] = OrderedDict()

    def of(
        self, thread_id: str, checkpoint_ns: str, checkpoint_id: str | None
    ) -> dict[str, Stored]:
        if checkpoint_id is None:
            return {}
        with self._lock:
            found = self._checkpoints.get((thread_id, checkpoint_ns, checkpoint_id))
            if found is None:
                return {}
            self._checkpoints.move_to_end((thread_id, checkpoint_ns, checkpoint_id))
            return dict(found)

    def keep(
        self, thread_id: str, checkpoint_ns: str, checkpoint_id: str, channels: dict[str, Stored]
    ) -> None:
        with self._lock:
            self._checkpoints[thread_id, checkpoint_ns, checkpoint_id] = channels
            self._checkpoints.move_to_end((thread_id, checkpoint_ns, checkpoint_id))
            while len(self._checkpoints) > REMEMBERED:
                self._checkpoints.popitem(last=False)

    def hasher(self) -> Any:
        """A keyed hash, for the digests of serialized items."""
        return hashlib.blake2b(key=self._key, digest_size=16)


def plan(
    memory: Remembered, serde: SerializerProtocol, version: str, value: Any, base: Stored | None
) -> Plan | None:
    """What to store for ``value`` at ``version`` when it is a list (whole
    or the items appended to ``base``); None when it is not a list the
    serializer splits (the caller stores it as before).

    The list is serialized once, whole: a msgpack array is its header and
    then each item's bytes, so the items of ``base`` are a prefix of those
    bytes when the list extends it, which the prefix's digest tells."""
    if type(value) is not list or not isinstance(serde, JsonPlusSerializer):
        return None
    kind, data = serde.dumps_typed(value)
    if kind != MSGPACK:
        return None
    start = _items_start(data, len(value))
    if start is None:
        return None
    body = memoryview(data)[start:]
    hasher = memory.hasher()
    if (
        base is not None
        and base.depth + 1 < FULL_EVERY
        and base.items <= len(value)
        and base.length <= len(body)
    ):
        hasher.update(body[: base.length])
        if hasher.copy().hexdigest() == base.digest:
            hasher.update(body[base.length :])
            digest = hasher.hexdigest()
            payload = _header(len(value) - base.items) + bytes(body[base.length :])
            stored = Stored(version, base.anchor, base.depth + 1, len(value), len(body), digest)
            return Plan(
                kind,
                payload,
                base.version,
                base.anchor,
                stored.depth,
                digest,
                base.digest,
                data,
                stored,
            )
        hasher.update(body[base.length :])
    else:
        hasher.update(body)
    digest = hasher.hexdigest()
    stored = Stored(version, version, 0, len(value), len(body), digest)
    return Plan(kind, data, None, None, 0, digest, None, data, stored)


def _items_start(data: bytes, count: int) -> int | None:
    """Where the items of a serialized list of ``count`` items begin (after
    the msgpack array's header), or None if ``data`` is not such an array."""
    if not data:
        return None
    first = data[0]
    if first & 0xF0 == 0x90:
        length, start = first & 0x0F, 1
    elif first == 0xDC:
        length, start = int.from_bytes(data[1:3], "big"), 3
    elif first == 0xDD:
        length, start = int.from_bytes(data[1:5], "big"), 5
    else:
        return None
    return start if length == count else None


def _header(count: int) -> bytes:
    """A msgpack array's header for ``count`` items (the shortest form, as msgpack writes it)."""
    if count < 16:
        return bytes([0x90 | count])
    if count < 0x10000:
        return b"\xdc" + count.to_bytes(2, "big")
    return b"\xdd" + count.to_bytes(4, "big")
