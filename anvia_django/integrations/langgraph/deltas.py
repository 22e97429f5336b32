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
of each stored segment's bytes (``Remembered``), and the new list is
serialized in the same segments and compared. The digest's key lives in
the process only (a digest in a row reveals nothing about its content),
so a version stored by another process, or forgotten, is stored whole.
Only ``JsonPlusSerializer``'s msgpack lists are split: a list's items are
serialized each on its own there, so reading the segments and joining the
lists gives what reading the whole list gives.
"""

from __future__ import annotations

import hashlib
import secrets
import threading
from collections import OrderedDict
from collections.abc import Iterable
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
    counts: tuple[int, ...]  # items in each segment, anchor first
    digest: str  # of the chain's segments, keyed


class Plan(NamedTuple):
    """What to store for one channel's new version."""

    kind: str
    payload: bytes
    base: str | None
    anchor: str | None
    depth: int
    digest: str
    stored: Stored


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

    def digest(self, previous: str, segment: bytes) -> str:
        hashed = hashlib.blake2b(segment, key=self._key, digest_size=16).hexdigest()
        return hashlib.blake2b(
            (previous + hashed).encode(), key=self._key, digest_size=16
        ).hexdigest()

    def chain_digest(self, segments: Iterable[bytes]) -> str:
        digest = ""
        for segment in segments:
            digest = self.digest(digest, segment)
        return digest


def plan(
    memory: Remembered, serde: SerializerProtocol, version: str, value: Any, base: Stored | None
) -> Plan | None:
    """What to store for ``value`` at ``version`` when it is a list (whole
    or the items appended to ``base``); None when it is not a list the
    serializer splits (the caller stores it as before)."""
    if type(value) is not list or not isinstance(serde, JsonPlusSerializer):
        return None
    if base is not None and base.depth + 1 < FULL_EVERY and sum(base.counts) <= len(value):
        segments: list[bytes] = []
        start = 0
        for count in base.counts:
            kind, data = serde.dumps_typed(value[start : start + count])
            if kind != MSGPACK:
                break
            segments.append(data)
            start += count
        else:
            if memory.chain_digest(segments) == base.digest:
                kind, data = serde.dumps_typed(value[start:])
                if kind == MSGPACK:
                    digest = memory.digest(base.digest, data)
                    stored = Stored(
                        version,
                        base.anchor,
                        base.depth + 1,
                        (*base.counts, len(value) - start),
                        digest,
                    )
                    return Plan(kind, data, base.version, base.anchor, stored.depth, digest, stored)
    kind, data = serde.dumps_typed(value)
    if kind != MSGPACK:
        return None
    digest = memory.digest("", data)
    return Plan(
        kind, data, None, None, 0, digest, Stored(version, version, 0, (len(value),), digest)
    )
