"""LangGraph's threads and store items as ``anvia_memory export`` records
(JSON objects with the export's camelCase keys).

A thread is a ``langgraphThread`` record (its id, and the user and tenant
it carries), then a ``langgraphCheckpoint`` record per checkpoint, by
namespace and age, with its channel values and pending writes decoded by
LangGraph's default serializer and written as LangChain's JSON
(``langchain_core.load.dumpd``); without LangGraph installed a checkpoint
has no values, only its row as stored (base64). A store item is a
``langgraphStoreItem``, its value opened.

Imports LangGraph only when decoding.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Callable, Collection, Iterator, Sequence
from typing import Any

from django.db.models import Q

from anvia_django.persistence.codec import codec_for
from anvia_django.persistence.databases import read_alias

from .models import LangGraphCheckpoint, LangGraphStoreItem
from .places import opened_item
from .removal import GROUP
from .scopes import NAMESPACE_SEPARATOR, namespace_scope, thread_scope

PAGE = 100
"""Checkpoints decoded together (their values and writes in one query each)."""

Record = dict[str, Any]
_CHECKPOINT_FIELDS = (
    "thread_id",
    "checkpoint_ns",
    "checkpoint_id",
    "parent_checkpoint_id",
    "type",
    "checkpoint",
    "metadata",
)


def iter_thread_records(
    thread_ids: Sequence[str], *, batch_size: int, using: str | None = None
) -> Iterator[Record]:
    """Each thread's record, then its checkpoints' records."""
    alias = read_alias(using)
    decode = _decoder(alias)
    page_size = min(batch_size, PAGE)
    for thread_id in thread_ids:
        scope = thread_scope(thread_id)
        checkpoints = LangGraphCheckpoint.objects.using(alias).filter(thread_id=thread_id)
        yield {
            "type": "langgraphThread",
            "threadId": thread_id,
            "thread": scope.thread,
            "userId": scope.user_id,
            "tenant": scope.tenant,
            "checkpointCount": checkpoints.count(),
        }
        after: Q | None = None
        while True:
            page = checkpoints.filter(after) if after is not None else checkpoints
            rows = list(
                page.order_by("checkpoint_ns", "checkpoint_id").values_list(
                    *_CHECKPOINT_FIELDS, "created_at"
                )[:page_size]
            )
            yield from _checkpoint_records(rows, decode)
            if len(rows) < page_size:
                break
            namespace, checkpoint_id = rows[-1][1], rows[-1][2]
            after = Q(checkpoint_ns__gt=namespace) | Q(
                checkpoint_ns=namespace, checkpoint_id__gt=checkpoint_id
            )


def iter_item_records(
    namespaces: Collection[str], *, batch_size: int, using: str | None = None
) -> Iterator[Record]:
    """Each item of ``namespaces`` (their column's text), its value opened."""
    alias = read_alias(using)
    codec = codec_for(alias)
    names = sorted(namespaces)
    for start in range(0, len(names), GROUP):
        items = LangGraphStoreItem.objects.using(alias).filter(
            namespace__in=names[start : start + GROUP]
        )
        last = 0
        while True:
            rows = list(
                items.filter(pk__gt=last)
                .order_by("pk")
                .values_list(
                    "pk",
                    "namespace",
                    "key",
                    "value",
                    "created_at",
                    "updated_at",
                    "ttl_minutes",
                    "expires_at",
                )[:batch_size]
            )
            for _, namespace, key, stored, created, updated, ttl, expires in rows:
                scope = namespace_scope(namespace)
                yield {
                    "type": "langgraphStoreItem",
                    "namespace": namespace.split(NAMESPACE_SEPARATOR),
                    "key": key,
                    "userId": scope.user_id if scope else None,
                    "tenant": scope.tenant if scope else None,
                    "value": json.loads(opened_item(codec, namespace, key, stored)),
                    "createdAt": created.isoformat(),
                    "updatedAt": updated.isoformat(),
                    "ttlMinutes": ttl,
                    "expiresAt": expires.isoformat() if expires else None,
                }
            if len(rows) < batch_size:
                break
            last = rows[-1][0]


Decoder = Callable[[list[tuple[Any, ...]]], list[Record]]
"""Checkpoint rows -> the fields of each one's record that hold its values."""


def _checkpoint_records(rows: list[tuple[Any, ...]], decode: Decoder) -> Iterator[Record]:
    for row, fields in zip(rows, decode(rows), strict=True):
        thread_id, namespace, checkpoint_id, parent, _, _, metadata, created = row
        yield {
            "type": "langgraphCheckpoint",
            "threadId": thread_id,
            "checkpointNs": namespace,
            "checkpointId": checkpoint_id,
            "parentCheckpointId": parent,
            "createdAt": created.isoformat(),
            "metadata": metadata,
            **fields,
        }


def _decoder(alias: str) -> Decoder:
    try:
        from langchain_core.load import dumpd

        from . import reads
        from .decoding import SERDE as serde
    except ImportError:
        return _as_stored

    def decode(rows: list[tuple[Any, ...]]) -> list[Record]:
        stored = [reads.StoredCheckpoint(*row[:7]) for row in rows]
        tuples = reads.with_values(serde, stored, using=alias)
        return [
            {
                "channelValues": dumpd(found.checkpoint["channel_values"]),
                "pendingWrites": [
                    {"taskId": task_id, "channel": channel, "value": dumpd(value)}
                    for task_id, channel, value in found.pending_writes or []
                ],
            }
            for found in tuples
        ]

    return decode


def _as_stored(rows: list[tuple[Any, ...]]) -> list[Record]:
    """Without LangGraph: no values (decoding them needs its serializer),
    and the checkpoint as that serializer typed it (its channels' versions)."""
    return [
        {
            "channelValues": None,
            "pendingWrites": None,
            "stored": {"type": row[4], "base64": base64.b64encode(bytes(row[5])).decode()},
        }
        for row in rows
    ]
