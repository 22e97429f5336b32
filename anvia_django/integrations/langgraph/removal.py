"""Deleting checkpoints: whole threads, the checkpoints of runs, pruning
a thread down to its latest checkpoint per namespace, and the rest of a
thread whose deletion was interrupted.

Each call commits as a whole, but for :func:`delete_threads_in_batches`
and :func:`delete_leftovers_in_batches` (the commands'), which commit
every ``batch_size`` rows. Deleting a thread
also destroys its data key with encryption at rest on (after the commit),
so copies of its rows in backups no longer open.

Imports LangGraph only for type checking: the commands use it without the extra.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from functools import reduce
from operator import or_
from typing import TYPE_CHECKING, Any

from django.db import transaction
from django.db.models import Count, Exists, Max, OuterRef, Q, QuerySet

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
    leftovers: int = 0
    """Threads a deletion interrupted between its batches left with values
    but no checkpoint (:func:`delete_leftovers_in_batches`)."""

    def __add__(self, other: ThreadCounts) -> ThreadCounts:
        return ThreadCounts(
            self.threads + other.threads,
            self.checkpoints + other.checkpoints,
            self.items + other.items,
            self.leftovers + other.leftovers,
        )


def delete_threads_in_batches(
    thread_ids: Sequence[str],
    *,
    batch_size: int,
    using: str | None,
    cutoff: datetime | None = None,
    on_batch: Callable[[ThreadCounts], None] | None = None,
) -> ThreadCounts:
    """Every checkpoint, write and value of ``thread_ids``, at most
    ``batch_size`` rows per transaction, so a huge thread never holds one.

    Threads go in groups (at most ``batch_size``, and :data:`GROUP`): a
    group's checkpoints first, oldest first (its latest stays readable
    until the last batch), then its writes and values, which no checkpoint
    names any more (:func:`_delete_group_rest`); each thread's data key
    goes when its last batch commits. With a ``cutoff`` (``prune``'s),
    only checkpoints made before it go, and a thread that has one made
    since keeps the rest (:func:`_delete_stale_checkpoints`): a thread
    resumed while it is pruned is not deleted. A failure stops at a batch
    boundary: a thread left without checkpoints reads as deleted, and
    deleting it again removes the rest.
    """
    alias = write_alias(using)
    unique = list(dict.fromkeys(str(thread_id) for thread_id in thread_ids))
    size = min(batch_size, GROUP)
    total = ThreadCounts()
    for start in range(0, len(unique), size):
        group = unique[start : start + size]
        if cutoff is None:
            checkpoints = delete_in_batches(
                LangGraphCheckpoint.objects.using(alias).filter(thread_id__in=group),
                "checkpoint_id",
                batch_size,
            )
        else:
            group, checkpoints = _delete_stale_checkpoints(alias, group, cutoff, batch_size)
        _delete_group_rest(alias, group, batch_size)
        counts = ThreadCounts(len(group), checkpoints)
        total += counts
        if on_batch is not None:
            on_batch(counts)
    return total


def _delete_stale_checkpoints(
    alias: str, group: list[str], cutoff: datetime, batch_size: int
) -> tuple[list[str], int]:
    """The checkpoints of ``group``'s threads made before ``cutoff``,
    oldest first, ``batch_size`` per transaction, but for the threads that
    have a checkpoint from ``cutoff`` on: the threads none such kept, and
    how many checkpoints went.

    Each batch locks its rows, then asks which threads have a newer
    checkpoint (:func:`_fresh_threads`), and deletes only older rows of
    the others. A put locks its parent checkpoint (``conflicts.py``): one
    in flight on a row of the batch has committed by the time the lock is
    held, and the question, read after it, sees its checkpoint; one that
    comes after finds its parent gone and is refused. SQLite runs one
    writer at a time. A thread
    resumed between two batches keeps its new checkpoints, the older ones
    not yet deleted, and every value and write (:func:`_delete_group_rest`
    leaves a thread that has a checkpoint alone)."""
    kept = set(group)
    deleted = 0
    while kept:
        with transaction.atomic(using=alias):
            old = LangGraphCheckpoint.objects.using(alias).filter(
                thread_id__in=sorted(kept), created_at__lt=cutoff
            )
            locked = list(
                old.select_for_update()
                .order_by("checkpoint_id")
                .values_list("checkpoint_id", flat=True)[:batch_size]
            )
            kept -= _fresh_threads(alias, sorted(kept), cutoff)
            if not locked or not kept:
                break
            deleted += (
                old.filter(thread_id__in=sorted(kept), checkpoint_id__lte=locked[-1])
                .order_by()
                .delete()[0]
            )
        if len(locked) < batch_size:
            break
    return [thread_id for thread_id in group if thread_id in kept], deleted


def _fresh_threads(alias: str, thread_ids: list[str], cutoff: datetime) -> set[str]:
    """Which of ``thread_ids`` have a checkpoint made from ``cutoff`` on."""
    rows = LangGraphCheckpoint.objects.using(alias).filter(
        thread_id__in=thread_ids, created_at__gte=cutoff
    )
    return set(rows.order_by().values_list("thread_id", flat=True).distinct())


def delete_leftovers_in_batches(
    thread_ids: Sequence[str], *, batch_size: int, using: str | None
) -> list[str]:
    """The writes, then the values, of each of ``thread_ids`` that has no
    checkpoint (what :func:`delete_threads_in_batches` interrupted between
    its batches leaves: its values go last), at most ``batch_size`` rows per
    transaction, its data key with the last. The threads whose rest went.

    Never a thread that has a checkpoint, or gets one meanwhile: each batch
    locks its rows (by the thread's unique index, never a scan of the
    table), then asks whether the thread has a checkpoint, and deletes the
    locked rows alone, in a statement that asks again. A put commits its
    values with its checkpoint (``writes.py``): the rows of a put in flight
    are not among the locked ones (PostgreSQL does not see them; MariaDB's
    locking read waits for them, then sees their checkpoint too); SQLite
    runs one writer at a time.
    """
    alias = write_alias(using)
    forget = codec_for(alias).forget_checkpoint_threads
    return [
        thread_id
        for thread_id in dict.fromkeys(str(thread_id) for thread_id in thread_ids)
        if _delete_rest(LangGraphWrite, alias, thread_id, batch_size)
        and _delete_rest(LangGraphBlob, alias, thread_id, batch_size, last=forget)
    ]


def _delete_group_rest(alias: str, group: list[str], batch_size: int) -> None:
    """The writes and values of ``group``'s threads, whose checkpoints are
    gone: threads packed into transactions of at most ``batch_size`` rows,
    each a ``thread_id IN`` list (the index's); a thread bigger than a batch
    alone, in its index's order (:func:`_delete_rest`: ordered by the
    primary key, PostgreSQL and MariaDB read the table's key from its start
    for every batch). A thread that has a checkpoint again (a writer made
    it anew meanwhile) keeps its rows and its key."""
    forget = codec_for(alias).forget_checkpoint_threads
    sizes: Counter[str] = Counter()
    for model in _UNIQUE_KEYS:
        rows = model.objects.using(alias).filter(thread_id__in=group)
        sizes.update(
            dict(rows.values("thread_id").annotate(n=Count("pk")).values_list("thread_id", "n"))
        )
    packed: list[str] = []
    held = 0
    for thread_id in group:
        if sizes[thread_id] > batch_size:
            if _delete_rest(LangGraphWrite, alias, thread_id, batch_size):
                _delete_rest(LangGraphBlob, alias, thread_id, batch_size, last=forget)
            continue
        if held + sizes[thread_id] > batch_size:
            _delete_together(alias, packed, forget)
            packed, held = [], 0
        packed.append(thread_id)
        held += sizes[thread_id]
    _delete_together(alias, packed, forget)


def _delete_together(alias: str, threads: list[str], forget: Callable[[list[str]], None]) -> None:
    """The writes and values of ``threads`` that have no checkpoint, in one
    transaction, and their data keys once it commits."""
    if not threads:
        return
    checkpoints = LangGraphCheckpoint.objects.using(alias)
    orphaned = ~Exists(checkpoints.filter(thread_id=OuterRef("thread_id")))
    with transaction.atomic(using=alias):
        for model in _UNIQUE_KEYS:
            model.objects.using(alias).filter(orphaned, thread_id__in=threads).delete()
        living = checkpoints.filter(thread_id__in=threads).values_list("thread_id", flat=True)
        forget(sorted(set(threads) - set(living)))


_UNIQUE_KEYS: dict[type[Any], tuple[str, ...]] = {
    LangGraphWrite: ("checkpoint_ns", "checkpoint_id", "task_id", "idx"),
    LangGraphBlob: ("checkpoint_ns", "channel", "version"),
}
"""Each table's unique key after ``thread_id``: a thread's rows in its index's order."""


def _delete_rest(
    model: type[LangGraphWrite] | type[LangGraphBlob],
    alias: str,
    thread_id: str,
    batch_size: int,
    *,
    last: Callable[[list[str]], None] | None = None,
) -> bool:
    """``model``'s rows of ``thread_id`` while it has no checkpoint, a batch
    per transaction (``last`` runs in the final one); whether it had none."""
    rows = model.objects.using(alias).filter(thread_id=thread_id)
    checkpoints = LangGraphCheckpoint.objects.using(alias).filter(thread_id=thread_id)
    while True:
        with transaction.atomic(using=alias):
            locked = list(
                rows.select_for_update()
                .order_by(*_UNIQUE_KEYS[model])
                .values_list("pk", flat=True)[:batch_size]
            )
            if checkpoints.exists():
                return False
            _delete_pages(rows.exclude(Exists(checkpoints)), locked)
            if len(locked) < batch_size:
                if last is not None:
                    last([thread_id])
                return True


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
