"""Deleting checkpoints: whole threads, the checkpoints of runs, and pruning
a thread down to its latest checkpoint per namespace.

Each call commits as a whole. Deleting a thread also destroys its data key
with encryption at rest on (after the commit), so copies of its rows in
backups no longer open.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from functools import reduce
from operator import or_
from typing import Any

from django.db import transaction
from django.db.models import Max, Q
from langgraph.checkpoint.serde.base import SerializerProtocol

from anvia_django.persistence.codec import codec_for
from anvia_django.persistence.databases import write_alias

from .models import LangGraphBlob, LangGraphCheckpoint, LangGraphWrite

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
