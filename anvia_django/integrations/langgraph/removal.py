"""Deleting checkpoints: whole threads, the checkpoints of runs, and pruning
a thread down to its latest checkpoint per namespace.

Each call commits as a whole, but for :func:`delete_threads_in_batches`
(the commands'), which commits every ``batch_size`` rows. Deleting a thread
also destroys its data key with encryption at rest on (after the commit),
so copies of its rows in backups no longer open.

Imports LangGraph only for type checking: the commands use it without the extra.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import partial, reduce
from operator import or_
from typing import TYPE_CHECKING, Any

from django.db import transaction
from django.db.models import Max, Q, QuerySet

from anvia_django.persistence.codec import codec_for
from anvia_django.persistence.databases import write_alias

from .models import LangGraphBlob, LangGraphCheckpoint, LangGraphWrite

if TYPE_CHECKING:
    from langgraph.checkpoint.serde.base import SerializerProtocol

STRATEGIES = ("keep_latest", "delete")
PAGE = 500


def delete_threads(thread_ids: Sequence[str], *, using: str | None) -> None:
    """Every checkpoint, value and write of ``thread_ids``."""
    if not thread_ids:
        return
    alias = write_alias(using)
    ids = [str(thread_id) for thread_id in thread_ids]
    with transaction.atomic(using=alias):
        for model in (LangGraphWrite, LangGraphBlob, LangGraphCheckpoint):
            model.objects.using(alias).filter(thread_id__in=ids).delete()
        codec_for(alias).forget_checkpoint_threads(ids)


def delete_runs(serde: SerializerProtocol, run_ids: Sequence[str], *, using: str | None) -> None:
    """The checkpoints ``run_ids`` made (``metadata["run_id"]``), their
    writes, and the channel values no checkpoint left in their thread's
    namespace names (which reads those checkpoints' versions)."""
    if not run_ids:
        return
    alias = write_alias(using)
    ids = [str(run_id) for run_id in run_ids]
    checkpoints = LangGraphCheckpoint.objects.using(alias).filter(run_id__in=ids)
    with transaction.atomic(using=alias):
        made: dict[tuple[str, str], list[str]] = defaultdict(list)
        for thread_id, checkpoint_ns, checkpoint_id in checkpoints.values_list(
            "thread_id", "checkpoint_ns", "checkpoint_id"
        ):
            made[thread_id, checkpoint_ns].append(checkpoint_id)
        if not made:
            return
        writes = reduce(
            or_,
            (
                Q(thread_id=thread_id, checkpoint_ns=ns, checkpoint_id__in=checkpoint_ids)
                for (thread_id, ns), checkpoint_ids in made.items()
            ),
        )
        LangGraphWrite.objects.using(alias).filter(writes).delete()
        checkpoints.delete()
        for thread_id, checkpoint_ns in made:
            _delete_unnamed_values(serde, alias, thread_id, checkpoint_ns)


def _delete_unnamed_values(
    serde: SerializerProtocol, alias: str, thread_id: str, checkpoint_ns: str
) -> None:
    """Delete the values of a thread's namespace that none of its checkpoints names."""
    place = {"thread_id": thread_id, "checkpoint_ns": checkpoint_ns}
    named: set[tuple[str, str]] = set()
    left = LangGraphCheckpoint.objects.using(alias).filter(**place)
    for kind, payload in left.values_list("type", "checkpoint").iterator(chunk_size=PAGE):
        versions = serde.loads_typed((kind, bytes(payload))).get("channel_versions", {})
        named.update((channel, str(version)) for channel, version in versions.items())
    values = LangGraphBlob.objects.using(alias).filter(**place)
    rows = list(values.values_list("pk", "checkpoint_ns", "channel", "version", "base_version"))
    kept = _kept_with_bases(rows, {(checkpoint_ns, channel, version) for channel, version in named})
    _delete_pages(values, [row[0] for row in rows if row[0] not in kept])


def _kept_with_bases(
    rows: Sequence[tuple[Any, str, str, str, str | None]], named: set[tuple[str, str, str]]
) -> set[Any]:
    """The primary keys of the value rows ``named`` (namespace, channel,
    version) and of every row their deltas extend (``deltas.py``)."""
    by_version = {(ns, channel, version): (pk, base) for pk, ns, channel, version, base in rows}
    kept: set[Any] = set()
    for ns, channel, version in named:
        found = by_version.get((ns, channel, version))
        while found is not None and found[0] not in kept:
            kept.add(found[0])
            base = found[1]
            found = None if base is None else by_version.get((ns, channel, base))
    return kept


def _delete_pages(values: Any, pks: list[Any]) -> None:
    for start in range(0, len(pks), PAGE):
        values.filter(pk__in=pks[start : start + PAGE]).delete()


def prune(
    serde: SerializerProtocol, thread_ids: Sequence[str], strategy: str, *, using: str | None
) -> None:
    """``"keep_latest"``: each namespace of each thread keeps its latest
    checkpoint, its writes and the values it names; ``"delete"``: nothing."""
    if strategy not in STRATEGIES:
        raise ValueError(f"unknown prune strategy {strategy!r}: one of {', '.join(STRATEGIES)}")
    if strategy == "delete":
        delete_threads(thread_ids, using=using)
        return
    alias = write_alias(using)
    for thread_id in dict.fromkeys(str(thread_id) for thread_id in thread_ids):
        with transaction.atomic(using=alias):
            _keep_latest(serde, alias, thread_id)


def _keep_latest(serde: SerializerProtocol, alias: str, thread_id: str) -> None:
    checkpoints = LangGraphCheckpoint.objects.using(alias).filter(thread_id=thread_id)
    latest = list(
        checkpoints.values("checkpoint_ns")
        .annotate(latest=Max("checkpoint_id"))
        .values_list("checkpoint_ns", "latest")
        .order_by()
    )
    if not latest:
        return
    kept_checkpoints = reduce(
        or_, (Q(checkpoint_ns=ns, checkpoint_id=checkpoint_id) for ns, checkpoint_id in latest)
    )
    named: set[tuple[str, str, str]] = set()
    for ns, kind, payload in checkpoints.filter(kept_checkpoints).values_list(
        "checkpoint_ns", "type", "checkpoint"
    ):
        versions = serde.loads_typed((kind, bytes(payload))).get("channel_versions", {})
        named.update((ns, channel, str(version)) for channel, version in versions.items())
    LangGraphWrite.objects.using(alias).filter(thread_id=thread_id).exclude(
        kept_checkpoints
    ).delete()
    values = LangGraphBlob.objects.using(alias).filter(thread_id=thread_id)
    rows = list(values.values_list("pk", "checkpoint_ns", "channel", "version", "base_version"))
    kept = _kept_with_bases(rows, named)
    _delete_pages(values, [row[0] for row in rows if row[0] not in kept])
    checkpoints.exclude(kept_checkpoints).delete()


GROUP = 500
"""At most this many threads (or namespaces) in one ``IN`` list."""


@dataclass(frozen=True, slots=True)
class ThreadCounts:
    """What the commands delete: threads, their checkpoints, and store items."""

    threads: int = 0
    checkpoints: int = 0
    items: int = 0

    def __add__(self, other: ThreadCounts) -> ThreadCounts:
        return ThreadCounts(
            self.threads + other.threads,
            self.checkpoints + other.checkpoints,
            self.items + other.items,
        )


def delete_threads_in_batches(
    thread_ids: Sequence[str],
    *,
    batch_size: int,
    using: str | None,
    still: Callable[[list[str]], list[str]] | None = None,
    on_batch: Callable[[ThreadCounts], None] | None = None,
) -> ThreadCounts:
    """Every checkpoint, write and value of ``thread_ids``, at most
    ``batch_size`` rows per transaction, so a huge thread never holds one.

    Threads go in groups (at most ``batch_size``, and :data:`GROUP`): a
    group's checkpoints first, oldest first (its latest stays readable
    until the last batch), then its writes and values, which no checkpoint
    names any more; the group's data keys go when its last batch commits.
    ``still`` narrows a group to the threads that still qualify (a
    retention cutoff) before any of it goes. A failure stops at a batch
    boundary: a thread left without checkpoints reads as deleted, and
    deleting it again removes the rest.
    """
    alias = write_alias(using)
    unique = list(dict.fromkeys(str(thread_id) for thread_id in thread_ids))
    size = min(batch_size, GROUP)
    total = ThreadCounts()
    for start in range(0, len(unique), size):
        group = unique[start : start + size]
        if still is not None:
            group = still(group)
            if not group:
                continue
        checkpoints = delete_in_batches(
            LangGraphCheckpoint.objects.using(alias).filter(thread_id__in=group),
            "checkpoint_id",
            batch_size,
        )
        delete_in_batches(
            LangGraphWrite.objects.using(alias).filter(thread_id__in=group), "pk", batch_size
        )
        codec = codec_for(alias)
        delete_in_batches(
            LangGraphBlob.objects.using(alias).filter(thread_id__in=group),
            "pk",
            batch_size,
            last=partial(codec.forget_checkpoint_threads, group),
        )
        counts = ThreadCounts(len(group), checkpoints)
        total += counts
        if on_batch is not None:
            on_batch(counts)
    return total


def delete_in_batches(
    rows: QuerySet[Any],
    order: str,
    batch_size: int,
    *,
    last: Callable[[], None] | None = None,
) -> int:
    """Delete ``rows`` in ascending ``order``, about ``batch_size`` per
    transaction (rows sharing the boundary's value go together); ``last``
    runs inside the final transaction. How many rows went.

    A batch is a range up to its last row's value, not a list of keys: no
    statement grows with the batch size."""
    alias = rows.db
    deleted = 0
    while True:
        with transaction.atomic(using=alias):
            boundary = list(
                rows.order_by(order).values_list(order, flat=True)[batch_size - 1 : batch_size]
            )
            batch = rows.filter(**{f"{order}__lte": boundary[0]}) if boundary else rows
            deleted += batch.order_by().delete()[0]
            if not boundary and last is not None:
                last()
        if not boundary:
            return deleted
