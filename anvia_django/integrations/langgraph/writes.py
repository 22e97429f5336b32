"""Storing a checkpoint and a task's pending writes.

A checkpoint row keeps the checkpoint without its channel values; each
value goes to :class:`~.models.LangGraphBlob` under the version
``new_versions`` gives it, once: a version stored already is kept
(``INSERT ... ON CONFLICT DO NOTHING``), since a version names one value.
Everything a call stores commits together.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import lru_cache, reduce
from operator import or_
from typing import Any

from django.db import transaction
from django.db.models import Q
from django.utils import timezone
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import (
    WRITES_IDX_MAP,
    ChannelVersions,
    Checkpoint,
    CheckpointMetadata,
    get_serializable_checkpoint_metadata,
)
from langgraph.checkpoint.serde.base import SerializerProtocol

from anvia_django.persistence.codec import codec_for
from anvia_django.persistence.compiled import CompiledQuery, compile_once
from anvia_django.persistence.databases import write_alias

from . import conflicts, deltas, inserts, reads
from .models import LangGraphBlob, LangGraphCheckpoint, LangGraphWrite
from .places import (
    EMPTY,
    FOLLOWS_LATEST,
    blob_place,
    checkpoint_config,
    slot,
    thread_and_namespace,
    write_place,
)


def put_checkpoint(
    serde: SerializerProtocol,
    config: RunnableConfig,
    checkpoint: Checkpoint,
    metadata: CheckpointMetadata,
    new_versions: ChannelVersions,
    *,
    using: str | None,
    memory: deltas.Remembered | None = None,
    following: conflicts.Following | None = None,
) -> RunnableConfig:
    """Store ``checkpoint`` after the one ``config`` names (its parent), and
    the values of the channels in ``new_versions``; the new checkpoint's
    config. Refused (``conflicts.ConcurrentRunError``) when the put follows
    its thread's latest and the parent no longer is (``conflicts.py``)."""
    alias = write_alias(using)
    thread_id, checkpoint_ns = thread_and_namespace(config)
    parent_id = config["configurable"].get("checkpoint_id")
    values = checkpoint.get("channel_values", {})
    bare = {key: value for key, value in checkpoint.items() if key != "channel_values"}
    kind, payload = serde.dumps_typed(bare)
    stored_metadata: dict[str, Any] = dict(get_serializable_checkpoint_metadata(config, metadata))
    run_id = stored_metadata.get("run_id")
    said = config["configurable"].get(FOLLOWS_LATEST)
    if said is None and following is not None:
        follows = following.after(thread_id, checkpoint_ns, parent_id)
    else:
        follows = said is True
    # A first checkpoint is checked (the namespace still empty) only after a
    # read that found it empty: a config's own root (a copy) may fork.
    checked = follows and (parent_id is not None or said is None)
    parent_lists = memory.of(thread_id, checkpoint_ns, parent_id) if memory else {}
    versions = checkpoint.get("channel_versions", {})
    lists = {
        channel: stored
        for channel, stored in parent_lists.items()
        if str(versions.get(channel)) == stored.version and channel not in new_versions
    }
    # Serialized before the transaction: no lock is held meanwhile.
    plans: dict[str, deltas.Plan] = {}
    if memory is not None:
        for channel, version in new_versions.items():
            if channel in values:
                found = deltas.plan(
                    memory, serde, str(version), values[channel], parent_lists.get(channel)
                )
                if found is not None:
                    plans[channel] = found
    with transaction.atomic(using=alias):
        if checked:
            conflicts.refuse_unless_latest(alias, thread_id, checkpoint_ns, parent_id)
        if new_versions:
            seal = codec_for(alias).checkpoint_sealer(thread_id)
            _whole_unless_base_holds(alias, thread_id, checkpoint_ns, plans)
            blobs: list[tuple[Any, ...]] = []
            for channel, version in new_versions.items():
                key = str(version)
                planned = plans.get(channel)
                if planned is not None:
                    typed = seal(
                        blob_place(checkpoint_ns, channel, key), (planned.kind, planned.payload)
                    )
                    lists[channel] = planned.stored
                elif channel in values:
                    typed = seal(
                        blob_place(checkpoint_ns, channel, key), serde.dumps_typed(values[channel])
                    )
                else:
                    typed = (EMPTY, None)
                blobs.append(
                    (
                        thread_id,
                        checkpoint_ns,
                        channel,
                        key,
                        typed[0],
                        typed[1],
                        planned.base if planned else None,
                        planned.anchor if planned else None,
                        planned.depth if planned else 0,
                        planned.digest if planned else None,
                    )
                )
            inserts.insert(alias, LangGraphBlob, _BLOB_COLUMNS, blobs, keep=_BLOB_KEY)
        row = (
            thread_id,
            checkpoint_ns,
            checkpoint["id"],
            parent_id,
            None if run_id is None else str(run_id),
            kind,
            payload,
            stored_metadata,
            timezone.now(),
        )
        inserts.insert(
            alias,
            LangGraphCheckpoint,
            _CHECKPOINT_COLUMNS,
            [row],
            keep=_CHECKPOINT_KEY,
            replace=("parent_checkpoint_id", "run_id", "type", "checkpoint", "metadata"),
        )
    if memory is not None:
        memory.keep(thread_id, checkpoint_ns, checkpoint["id"], lists)
    if follows and following is not None:
        following.stored(thread_id, checkpoint_ns, checkpoint["id"])
    # Only a config that said so says so again: the loop keeps its own.
    return checkpoint_config(thread_id, checkpoint_ns, checkpoint["id"], follows=said)


def _whole_unless_base_holds(
    alias: str, thread_id: str, checkpoint_ns: str, plans: dict[str, deltas.Plan]
) -> None:
    """A delta is kept only when its base row is in the database as this
    process stored it (its digest), locked until the commit so that no
    deletion takes it meanwhile; else the value is stored whole."""
    based = {channel: plan for channel, plan in plans.items() if plan.base is not None}
    if not based:
        return
    values: dict[str, str | None] = {"thread_id": thread_id, "checkpoint_ns": checkpoint_ns}
    for number, (channel, plan) in enumerate(based.items()):
        values[f"channel_{number}"] = channel
        values[f"version_{number}"] = plan.base
    rows = _bases_query(alias, len(based)).rows(alias, values)
    held = {(channel, version): digest for channel, version, digest in rows}
    for channel, plan in based.items():
        if held.get((channel, plan.base or "")) != plan.base_digest:
            plans[channel] = plan.as_whole()


@lru_cache(maxsize=16)
def _bases_query(alias: str, pairs: int) -> CompiledQuery:
    """The digests of ``pairs`` base rows of one thread and namespace,
    locked: compiled once, in a transaction (``select_for_update``)."""
    where = reduce(
        or_,
        (
            Q(channel=channel, version=version)
            for channel, version in map(reads.pair_slots, range(pairs))
        ),
    )
    rows = LangGraphBlob.objects.select_for_update().filter(
        where,
        thread_id=slot(LangGraphBlob, "thread_id"),
        checkpoint_ns=slot(LangGraphBlob, "checkpoint_ns"),
    )
    return compile_once(rows.values_list("channel", "version", "digest"), alias)


def put_writes(
    serde: SerializerProtocol,
    config: RunnableConfig,
    writes: Sequence[tuple[str, Any]],
    task_id: str,
    task_path: str,
    *,
    using: str | None,
) -> None:
    """Store a task's writes against the checkpoint ``config`` names.

    As LangGraph's savers do: a write stored already under its (task, index)
    is kept, unless every write of the call goes to a special channel
    (an error, an interrupt, a resume, ``WRITES_IDX_MAP``), which replace."""
    if not writes:
        return
    alias = write_alias(using)
    thread_id, checkpoint_ns = thread_and_namespace(config)
    checkpoint_id = config["configurable"]["checkpoint_id"]
    with transaction.atomic(using=alias):
        seal = codec_for(alias).checkpoint_sealer(thread_id)
        rows: list[tuple[Any, ...]] = []
        for index, (channel, value) in enumerate(writes):
            idx = WRITES_IDX_MAP.get(channel, index)
            kind, data = seal(
                write_place(checkpoint_ns, checkpoint_id, task_id, idx), serde.dumps_typed(value)
            )
            rows.append(
                (
                    thread_id,
                    checkpoint_ns,
                    checkpoint_id,
                    task_id,
                    idx,
                    task_path,
                    channel,
                    kind,
                    data,
                )
            )
        if all(channel in WRITES_IDX_MAP for channel, _ in writes):
            replace: tuple[str, ...] = ("task_path", "channel", "type", "blob")
        else:
            replace = ()
        inserts.insert(
            alias, LangGraphWrite, _WRITE_COLUMNS, rows, keep=_WRITE_KEY, replace=replace
        )


_BLOB_COLUMNS = (
    "thread_id",
    "checkpoint_ns",
    "channel",
    "version",
    "type",
    "blob",
    "base_version",
    "anchor_version",
    "depth",
    "digest",
)
_BLOB_KEY = ("thread_id", "checkpoint_ns", "channel", "version")
_CHECKPOINT_COLUMNS = (
    "thread_id",
    "checkpoint_ns",
    "checkpoint_id",
    "parent_checkpoint_id",
    "run_id",
    "type",
    "checkpoint",
    "metadata",
    "created_at",
)
_CHECKPOINT_KEY = ("thread_id", "checkpoint_ns", "checkpoint_id")
_WRITE_COLUMNS = (
    "thread_id",
    "checkpoint_ns",
    "checkpoint_id",
    "task_id",
    "idx",
    "task_path",
    "channel",
    "type",
    "blob",
)
_WRITE_KEY = ("thread_id", "checkpoint_ns", "checkpoint_id", "task_id", "idx")
