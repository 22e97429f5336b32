"""Copying a thread's checkpoints, values and writes to another thread.

The whole history is copied (every ancestor with its writes), as a thread
using LangGraph's delta channels needs. With encryption at rest on, each
value is opened and sealed again under the target thread's key and place.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any, TypeVar

from django.db import models, transaction

from anvia_django.persistence.codec import CheckpointValue, codec_for
from anvia_django.persistence.databases import write_alias

from .models import LangGraphBlob, LangGraphCheckpoint, LangGraphWrite
from .places import EMPTY, as_bytes, blob_place, write_place

PAGE = 500
M = TypeVar("M", bound=models.Model)


def copy_thread(source: str, target: str, *, using: str | None) -> None:
    """Copy thread ``source`` into thread ``target``: rows ``target`` holds
    already under the same keys are kept."""
    alias = write_alias(using)
    codec = codec_for(alias)
    with transaction.atomic(using=alias):
        seal = codec.checkpoint_sealer(target)

        def resealed(place: str, value: CheckpointValue) -> CheckpointValue:
            if value[0] == EMPTY:
                return value
            return seal(place, codec.open_checkpoint_value(source, place, value))

        _copy(LangGraphCheckpoint, alias, source, target, lambda row: None)

        def blob(row: Any) -> None:
            place = blob_place(row.checkpoint_ns, row.channel, row.version)
            row.type, row.blob = resealed(place, (row.type, as_bytes(row.blob)))

        _copy(LangGraphBlob, alias, source, target, blob)

        def write(row: Any) -> None:
            place = write_place(row.checkpoint_ns, row.checkpoint_id, row.task_id, row.idx)
            row.type, row.blob = resealed(place, (row.type, as_bytes(row.blob)))

        _copy(LangGraphWrite, alias, source, target, write)


def _copy(
    model: type[M], alias: str, source: str, target: str, change: Callable[[M], None]
) -> None:
    for page in _pages(model, alias, source):
        for row in page:
            change(row)
            row.pk = None
            row.thread_id = target  # type: ignore[attr-defined]
        model._default_manager.using(alias).bulk_create(page, ignore_conflicts=True)


def _pages(model: type[M], alias: str, thread_id: str) -> Iterator[list[M]]:
    last = 0
    rows = model._default_manager.using(alias).filter(thread_id=thread_id).order_by("pk")
    while True:
        page = list(rows.filter(pk__gt=last)[:PAGE])
        if not page:
            return
        last = page[-1].pk
        yield page
