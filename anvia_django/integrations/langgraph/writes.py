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
from anvia_django.persistence.codec.base import CheckpointSealer
from anvia_django.persistence.compiled import CompiledQuery, compile_once
from anvia_django.persistence.databases import write_alias
from anvia_django.persistence.dialects.checkpoints import (
    STORED,
    CheckpointPut,
    PutOutcome,
    ValueRow,
    put_in_one_statement,
)
from anvia_django.persistence.one_statement import one_statement

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
    seal = codec_for(alias).checkpoint_sealer(thread_id) if new_versions else None
    while True:
        put = CheckpointPut(
            thread_id,
            checkpoint_ns,
            checkpoint["id"],
            parent_id,
            None if run_id is None else str(run_id),
            kind,
            payload,
            stored_metadata,
            timezone.now(),
            checked,
            _value_rows(serde, checkpoint_ns, values, new_versions, plans, seal),
        )
        outcome = put_in_one_statement(alias, put)
        if outcome is None:
            outcome = _put_in_steps(alias, put)
        if outcome.conflict:
            raise conflicts.ConcurrentRunError(thread_id, checkpoint_ns, parent_id, outcome.latest)
        if not outcome.stale:
            break
        # A base not as this process stored it: nothing was stored; again whole.
        for channel in outcome.stale:
            plans[channel] = plans[channel].as_whole()
    for channel, planned in plans.items():
        lists[channel] = planned.stored
    if memory is not None:
        memory.keep(thread_id, checkpoint_ns, checkpoint["id"], lists)
    if follows and following is not None:
        following.stored(thread_id, checkpoint_ns, checkpoint["id"])
    # Only a config that said so says so again: the loop keeps its own.
    return checkpoint_config(thread_id, checkpoint_ns, checkpoint["id"], follows=said)


def _value_rows(
    serde: SerializerProtocol,
    checkpoint_ns: str,
    values: dict[str, Any],
    new_versions: ChannelVersions,
    plans: dict[str, deltas.Plan],
    seal: CheckpointSealer | None,
) -> list[ValueRow]:
    """The rows of the values of ``new_versions``: as ``plans`` say (a
    delta, or a list serialized whole), else serialized; sealed."""
    rows = []
    for channel, version in new_versions.items():
        key = str(version)
        planned = plans.get(channel)
        if planned is not None:
            typed: tuple[str, bytes | None] = (planned.kind, planned.payload)
        elif channel in values:
            typed = serde.dumps_typed(values[channel])
        else:
            typed = (EMPTY, None)
        if typed[0] != EMPTY and seal is not None:
            typed = seal(blob_place(checkpoint_ns, channel, key), typed)
        rows.append(
            ValueRow(
                channel,
                key,
                typed[0],
                typed[1],
                planned.base if planned else None,
                planned.anchor if planned else None,
                planned.depth if planned else 0,
                planned.digest if planned else None,
                planned.base_digest if planned else None,
            )
        )
    return rows


def _put_in_steps(alias: str, put: CheckpointPut) -> PutOutcome:
    """``put`` checked and stored statement by statement, in one
    transaction: what ``put_in_one_statement`` does in one."""
    with transaction.atomic(using=alias):
        if put.check:
            latest = conflicts.latest_after_lock(
                alias, put.thread_id, put.checkpoint_ns, put.parent_id
            )
            if latest != put.parent_id:
                # Rolled back: the locks taken go now, not with a caller's transaction.
                transaction.set_rollback(True, using=alias)
                return PutOutcome(conflict=True, latest=latest)
        stale = _stale_bases(alias, put)
        if stale:
            transaction.set_rollback(True, using=alias)
            return PutOutcome(stale=stale)
        if put.values:
            blobs = [
                (
                    *(put.thread_id, put.checkpoint_ns, value.channel, value.version),
                    *(value.type, value.blob, value.base_version, value.anchor_version),
                    *(value.depth, value.digest),
                )
                for value in put.values
            ]
            inserts.insert(alias, LangGraphBlob, _BLOB_COLUMNS, blobs, keep=_BLOB_KEY)
        row = (
            *(put.thread_id, put.checkpoint_ns, put.checkpoint_id, put.parent_id, put.run_id),
            *(put.type, put.checkpoint, put.metadata, put.now),
        )
        inserts.insert(
            alias,
            LangGraphCheckpoint,
            _CHECKPOINT_COLUMNS,
            [row],
            keep=_CHECKPOINT_KEY,
            replace=("parent_checkpoint_id", "run_id", "type", "checkpoint", "metadata"),
        )
    return STORED


def _stale_bases(alias: str, put: CheckpointPut) -> tuple[str, ...]:
    """The channels whose delta's base row is not in the database as this
    process stored it (its digest); the bases that are, locked until the
    commit so that no deletion takes them meanwhile."""
    based = [value for value in put.values if value.base_version is not None]
    if not based:
        return ()
    values: dict[str, str | None] = {
        "thread_id": put.thread_id,
        "checkpoint_ns": put.checkpoint_ns,
    }
    for number, value in enumerate(based):
        values[f"channel_{number}"] = value.channel
        values[f"version_{number}"] = value.base_version
    rows = _bases_query(alias, len(based)).rows(alias, values)
    held = {(channel, version): digest for channel, version, digest in rows}
    return tuple(
        value.channel
        for value in based
        if held.get((value.channel, value.base_version or "")) != value.base_digest
    )


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
    with one_statement(alias):
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
