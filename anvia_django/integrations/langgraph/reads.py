"""Reading checkpoints back: one, the latest of a thread's namespace, or a
list, each with its channel values and pending writes.

A batch of checkpoints costs four queries whatever its size: the rows,
their channel values (each version once, however many checkpoints share
it), the chains of the values stored as deltas, and their writes, in
``writes_sort_key`` order. One checkpoint (``get_tuple``, the hottest read)
costs the same four, each compiled once (``persistence/compiled.py``), or
on PostgreSQL two: the row, then one call of a function for the rest
(``dialects/checkpoints.py``); the latest's config says that a run follows
it (``conflicts.py``).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterable, Iterator, Sequence
from functools import lru_cache, reduce
from operator import or_
from typing import Any, NamedTuple, cast

from django.db.models import Q, QuerySet
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import Checkpoint, CheckpointTuple, get_checkpoint_id
from langgraph.checkpoint.serde.base import SerializerProtocol

from anvia_django.persistence.codec import codec_for
from anvia_django.persistence.compiled import CompiledQuery, Slot, compile_once
from anvia_django.persistence.databases import write_alias
from anvia_django.persistence.dialects.checkpoints import read_in_one_statement
from anvia_django.persistence.dialects.json_values import MetadataString

from .conflicts import Following
from .models import LangGraphBlob, LangGraphCheckpoint, LangGraphWrite
from .places import (
    EMPTY,
    as_bytes,
    blob_place,
    checkpoint_config,
    loaded,
    slot,
    thread_and_namespace,
    write_place,
)

BATCH = 100
"""Checkpoints read together by a list: their values and writes in one query each."""


class StoredCheckpoint(NamedTuple):
    thread_id: str
    checkpoint_ns: str
    checkpoint_id: str
    parent_checkpoint_id: str | None
    type: str
    checkpoint: Any
    metadata: Any


_COLUMNS = StoredCheckpoint._fields


def latest_or_named(
    serde: SerializerProtocol,
    config: RunnableConfig,
    *,
    using: str | None,
    following: Following | None = None,
) -> CheckpointTuple | None:
    """The checkpoint ``config`` names, else the latest of its thread and
    namespace, whose config then says that a run follows the latest
    (``conflicts.py``); ``following`` remembers a namespace found empty."""
    alias = write_alias(using)
    thread_id, checkpoint_ns = thread_and_namespace(config)
    where = {"thread_id": thread_id, "checkpoint_ns": checkpoint_ns}
    checkpoint_id = get_checkpoint_id(config)
    if checkpoint_id:
        where["checkpoint_id"] = checkpoint_id
    query = _checkpoint_query(alias, named=bool(checkpoint_id))
    found = [StoredCheckpoint(*row) for row in query.rows(alias, where)]
    if not found:
        if not checkpoint_id and following is not None:
            following.found_empty(thread_id, checkpoint_ns)
        return None
    read = with_values(serde, found, using=alias)[0]
    if checkpoint_id:
        return read
    row = found[0]
    return read._replace(
        config=checkpoint_config(row.thread_id, row.checkpoint_ns, row.checkpoint_id, follows=True)
    )


@lru_cache(maxsize=16)
def _checkpoint_query(alias: str, *, named: bool) -> CompiledQuery:
    """A thread's checkpoint by its id (``named``), else its latest:
    compiled once (``persistence/compiled.py``), the hottest read."""
    rows = LangGraphCheckpoint.objects.filter(
        thread_id=slot(LangGraphCheckpoint, "thread_id"),
        checkpoint_ns=slot(LangGraphCheckpoint, "checkpoint_ns"),
    )
    if named:
        rows = rows.filter(checkpoint_id=slot(LangGraphCheckpoint, "checkpoint_id"))
    else:
        rows = rows.order_by("-checkpoint_id")
    return compile_once(rows.values_list(*_COLUMNS)[:1], alias)


def matching(
    config: RunnableConfig | None,
    *,
    filter: dict[str, Any] | None,
    before: RunnableConfig | None,
    limit: int | None,
    using: str | None,
) -> list[StoredCheckpoint]:
    """The rows of the checkpoints a ``list`` returns, newest first."""
    rows = LangGraphCheckpoint.objects.using(write_alias(using))
    if config is not None:
        configurable = config["configurable"]
        rows = rows.filter(thread_id=str(configurable["thread_id"]))
        checkpoint_ns = configurable.get("checkpoint_ns")
        if checkpoint_ns is not None:
            rows = rows.filter(checkpoint_ns=checkpoint_ns)
        checkpoint_id = get_checkpoint_id(config)
        if checkpoint_id:
            rows = rows.filter(checkpoint_id=checkpoint_id)
    if filter:
        rows = _narrowed(rows, filter)
    before_id = get_checkpoint_id(before) if before is not None else None
    if before_id:
        rows = rows.filter(checkpoint_id__lt=before_id)
    rows = rows.order_by("-checkpoint_id", "-thread_id", "-checkpoint_ns")
    values = rows.values_list(*_COLUMNS)
    if not filter:
        return [StoredCheckpoint(*row) for row in values[: _bound(limit)]]
    bound = _bound(limit)
    held: list[StoredCheckpoint] = []
    for row in values.iterator(chunk_size=BATCH):
        if bound is not None and len(held) >= bound:
            break
        found = StoredCheckpoint(*row)
        if _holds(found.metadata, filter):
            held.append(found)
    return held


def _bound(limit: int | None) -> int | None:
    return None if limit is None else max(limit, 0)


def _narrowed(rows: QuerySet[LangGraphCheckpoint], filter: dict[str, Any]) -> Any:
    """``rows`` narrowed in SQL by the string values of ``filter`` (the
    database's JSON functions, ``dialects/json_values.py``); every value is
    compared again in Python (:func:`_holds`)."""
    for number, (key, value) in enumerate(filter.items()):
        if isinstance(value, str) and "." not in key:
            name = f"metadata_{number}"
            rows = rows.alias(**{name: MetadataString(key)}).filter(**{name: value})
    return rows


def _holds(metadata: Any, filter: dict[str, Any]) -> bool:
    return isinstance(metadata, dict) and all(
        metadata.get(key) == value for key, value in filter.items()
    )


def batches(rows: Sequence[StoredCheckpoint]) -> Iterator[Sequence[StoredCheckpoint]]:
    for start in range(0, len(rows), BATCH):
        yield rows[start : start + BATCH]


def with_values(
    serde: SerializerProtocol, rows: Sequence[StoredCheckpoint], *, using: str | None
) -> list[CheckpointTuple]:
    """``rows`` as checkpoint tuples, with their channel values and pending writes."""
    alias = write_alias(using)
    checkpoints = [serde.loads_typed((row.type, bytes(row.checkpoint))) for row in rows]
    wanted: dict[tuple[str, str], set[tuple[str, str]]] = defaultdict(set)
    for row, checkpoint in zip(rows, checkpoints, strict=True):
        versions = checkpoint.get("channel_versions", {})
        wanted[row.thread_id, row.checkpoint_ns].update(
            (channel, str(version)) for channel, version in versions.items()
        )
    found = None
    write_rows: Iterable[Sequence[Any]] | None = None
    if len(rows) == 1:
        found, write_rows = _read_in_one_statement(alias, rows[0], wanted)
    values = _values(serde, alias, wanted, found)
    writes = _writes(serde, alias, _write_rows(alias, rows) if write_rows is None else write_rows)
    tuples = []
    for row, checkpoint in zip(rows, checkpoints, strict=True):
        channel_values = {}
        for channel, version in checkpoint.get("channel_versions", {}).items():
            key = (row.thread_id, row.checkpoint_ns, channel, str(version))
            if key in values:
                channel_values[channel] = values[key]
        parent = row.parent_checkpoint_id
        tuples.append(
            CheckpointTuple(
                # A checkpoint named by its id is forked from on purpose.
                config=checkpoint_config(
                    row.thread_id, row.checkpoint_ns, row.checkpoint_id, follows=False
                ),
                checkpoint=cast(Checkpoint, {**checkpoint, "channel_values": channel_values}),
                metadata=row.metadata,
                parent_config=(
                    checkpoint_config(row.thread_id, row.checkpoint_ns, parent, follows=False)
                    if parent
                    else None
                ),
                pending_writes=writes.get(
                    (row.thread_id, row.checkpoint_ns, row.checkpoint_id), []
                ),
            )
        )
    return tuples


class _Blob(NamedTuple):
    thread_id: str
    checkpoint_ns: str
    channel: str
    version: str
    type: str
    blob: Any
    base_version: str | None
    anchor_version: str | None


def _read_in_one_statement(
    alias: str, row: StoredCheckpoint, wanted: dict[tuple[str, str], set[tuple[str, str]]]
) -> tuple[dict[tuple[str, str, str, str], _Blob] | None, list[tuple[Any, ...]] | None]:
    """One checkpoint's value rows with their chains, and its write rows
    (``_WRITE_COLUMNS``), read in one statement where the database can
    (``dialects/checkpoints.py``); else (None, None)."""
    thread_id, checkpoint_ns, checkpoint_id = row.thread_id, row.checkpoint_ns, row.checkpoint_id
    read = read_in_one_statement(
        alias,
        thread_id,
        checkpoint_ns,
        checkpoint_id,
        sorted(wanted.get((thread_id, checkpoint_ns), ())),
    )
    if read is None:
        return None, None
    found = _keyed((thread_id, checkpoint_ns, *value) for value in read.values)
    writes = [(thread_id, checkpoint_ns, checkpoint_id, *write) for write in read.writes]
    return found, writes


def _values(
    serde: SerializerProtocol,
    alias: str,
    wanted: dict[tuple[str, str], set[tuple[str, str]]],
    found: dict[tuple[str, str, str, str], _Blob] | None = None,
) -> dict[tuple[str, str, str, str], Any]:
    """The values of ``wanted`` versions, by (thread, namespace, channel,
    version). A value stored as a delta (``deltas.py``) is put back together
    from its chain, whose rows a second query reads by their anchors; each
    row is opened and loaded once however many values share it. ``found``:
    the rows of both, read already."""
    codec = codec_for(alias)
    if found is None:
        found = _blobs(alias, wanted)
        anchors: dict[tuple[str, str], set[tuple[str, str]]] = defaultdict(set)
        for row in found.values():
            if row.base_version is not None and row.anchor_version is not None:
                anchors[row.thread_id, row.checkpoint_ns].add((row.channel, row.anchor_version))
        if anchors:
            found.update(_chains(alias, anchors))
    segments: dict[tuple[str, str, str, str], Any] = {}

    def segment(row: _Blob) -> Any:
        key = (row.thread_id, row.checkpoint_ns, row.channel, row.version)
        if key not in segments:
            place = blob_place(row.checkpoint_ns, row.channel, row.version)
            typed = codec.open_checkpoint_value(
                row.thread_id, place, (row.type, as_bytes(row.blob))
            )
            segments[key] = loaded(serde, typed)
        return segments[key]

    values: dict[tuple[str, str, str, str], Any] = {}
    for (thread_id, checkpoint_ns), pairs in wanted.items():
        for channel, version in pairs:
            key = (thread_id, checkpoint_ns, channel, version)
            target = found.get(key)
            if target is None or target.type == EMPTY:
                continue
            if target.base_version is None:
                values[key] = segment(target)
                continue
            chain = [target]
            while chain[-1].base_version is not None:
                base = found.get((thread_id, checkpoint_ns, channel, chain[-1].base_version or ""))
                if base is None:
                    raise LookupError(
                        f"thread {thread_id!r}: the value of {channel!r} at {version} "
                        f"extends version {chain[-1].base_version}, which is not stored"
                    )
                chain.append(base)
            whole: list[Any] = []
            for part in reversed(chain):
                whole.extend(segment(part))
            values[key] = whole
    return values


_BLOB_COLUMNS = _Blob._fields


COMPILED_PAIRS = 16
"""Up to this many values of one thread and namespace are read by a query
compiled once for their number (a checkpoint's channels); more, or values
of several threads (a list's batch), by one built for the call."""


def _blobs(
    alias: str, wanted: dict[tuple[str, str], set[tuple[str, str]]]
) -> dict[tuple[str, str, str, str], _Blob]:
    if not any(wanted.values()):
        return {}
    compiled = _compiled_pairs(alias, wanted, _blobs_query)
    if compiled is not None:
        return compiled
    # A batch's many values: one range of the thread's rows, filtered (an
    # index search per value, as a checkpoint's few are read, plans slower).
    where = reduce(
        or_,
        (
            Q(thread_id=thread_id, checkpoint_ns=checkpoint_ns)
            & reduce(or_, (Q(channel=channel, version=version) for channel, version in pairs))
            for (thread_id, checkpoint_ns), pairs in wanted.items()
            if pairs
        ),
    )
    return _keyed(LangGraphBlob.objects.using(alias).filter(where).values_list(*_BLOB_COLUMNS))


def _chains(
    alias: str, anchors: dict[tuple[str, str], set[tuple[str, str]]]
) -> dict[tuple[str, str, str, str], _Blob]:
    """Every row of the chains starting at ``anchors``: the anchors and the
    rows naming them (at most ``deltas.FULL_EVERY`` a chain and branch)."""
    compiled = _compiled_pairs(alias, anchors, _chains_query)
    if compiled is not None:
        return compiled
    where = reduce(
        or_,
        (
            Q(thread_id=thread_id, checkpoint_ns=checkpoint_ns, channel=channel)
            & (Q(anchor_version=anchor) | Q(version=anchor))
            for (thread_id, checkpoint_ns), pairs in anchors.items()
            for channel, anchor in pairs
        ),
    )
    return _keyed(LangGraphBlob.objects.using(alias).filter(where).values_list(*_BLOB_COLUMNS))


def _compiled_pairs(
    alias: str,
    wanted: dict[tuple[str, str], set[tuple[str, str]]],
    query: Callable[[str, int], CompiledQuery],
) -> dict[tuple[str, str, str, str], _Blob] | None:
    """The rows of ``query`` for the (channel, version) pairs of one thread
    and namespace, or None when ``wanted`` is not that (or too many pairs)."""
    if len(wanted) != 1:
        return None
    ((thread_id, checkpoint_ns), pairs) = next(iter(wanted.items()))
    if not pairs or len(pairs) > COMPILED_PAIRS:
        return None
    values = {"thread_id": thread_id, "checkpoint_ns": checkpoint_ns}
    for number, (channel, version) in enumerate(sorted(pairs)):
        values[f"channel_{number}"] = channel
        values[f"version_{number}"] = version
    return _keyed(query(alias, len(pairs)).rows(alias, values))


def pair_slots(number: int) -> tuple[Slot, Slot]:
    """The slots of a blob's (channel, version) pair number ``number``."""
    return (
        slot(LangGraphBlob, "channel", f"channel_{number}"),
        slot(LangGraphBlob, "version", f"version_{number}"),
    )


def _in_thread(**columns: Any) -> Q:
    """A condition on one blob row's columns of the thread and namespace
    the query is given: each term of an OR names its whole index prefix,
    so that every database reads it from the index (one searched under
    ``thread AND namespace AND (a OR b)`` scans the thread's rows)."""
    return Q(
        thread_id=slot(LangGraphBlob, "thread_id"),
        checkpoint_ns=slot(LangGraphBlob, "checkpoint_ns"),
        **columns,
    )


@lru_cache(maxsize=4 * COMPILED_PAIRS)
def _blobs_query(alias: str, pairs: int) -> CompiledQuery:
    """The values of ``pairs`` (channel, version) pairs of one thread and namespace."""
    where = reduce(
        or_,
        (
            _in_thread(channel=channel, version=version)
            for channel, version in map(pair_slots, range(pairs))
        ),
    )
    rows = LangGraphBlob.objects.filter(where).values_list(*_BLOB_COLUMNS)
    return compile_once(rows, alias)


@lru_cache(maxsize=4 * COMPILED_PAIRS)
def _chains_query(alias: str, pairs: int) -> CompiledQuery:
    """The rows of the chains of ``pairs`` (channel, anchor) pairs of one
    thread and namespace (the version slots hold the anchors)."""
    where = reduce(
        or_,
        (
            _in_thread(channel=channel, anchor_version=anchor)
            | _in_thread(channel=channel, version=anchor)
            for channel, anchor in map(pair_slots, range(pairs))
        ),
    )
    rows = LangGraphBlob.objects.filter(where).values_list(*_BLOB_COLUMNS)
    return compile_once(rows, alias)


def _keyed(rows: Iterable[Sequence[Any]]) -> dict[tuple[str, str, str, str], _Blob]:
    found = {}
    for values in rows:
        row = _Blob(*values)
        found[row.thread_id, row.checkpoint_ns, row.channel, row.version] = row
    return found


def _writes(
    serde: SerializerProtocol, alias: str, rows: Iterable[Sequence[Any]]
) -> dict[tuple[str, str, str], list[tuple[str, str, Any]]]:
    """The pending writes of ``rows`` (``_WRITE_COLUMNS``), opened and loaded."""
    codec = codec_for(alias)
    writes: dict[tuple[str, str, str], list[tuple[str, str, Any]]] = defaultdict(list)
    for thread_id, checkpoint_ns, checkpoint_id, task_id, idx, channel, kind, blob in rows:
        place = write_place(checkpoint_ns, checkpoint_id, task_id, idx)
        typed = codec.open_checkpoint_value(thread_id, place, (kind, as_bytes(blob)))
        writes[thread_id, checkpoint_ns, checkpoint_id].append(
            (task_id, channel, loaded(serde, typed))
        )
    return writes


_WRITE_COLUMNS = (
    "thread_id",
    "checkpoint_ns",
    "checkpoint_id",
    "task_id",
    "idx",
    "channel",
    "type",
    "blob",
)
_WRITE_ORDER = ("task_path", "task_id", "idx")


def _write_rows(alias: str, rows: Sequence[StoredCheckpoint]) -> Iterable[Sequence[Any]]:
    """The pending writes of ``rows``, in ``writes_sort_key`` order."""
    if len(rows) == 1:
        (row,) = rows
        values = {
            "thread_id": row.thread_id,
            "checkpoint_ns": row.checkpoint_ns,
            "checkpoint_id": row.checkpoint_id,
        }
        return _writes_query(alias).rows(alias, values)
    ids: dict[tuple[str, str], list[str]] = defaultdict(list)
    for row in rows:
        ids[row.thread_id, row.checkpoint_ns].append(row.checkpoint_id)
    where = reduce(
        or_,
        (
            Q(thread_id=thread_id, checkpoint_ns=checkpoint_ns, checkpoint_id__in=checkpoint_ids)
            for (thread_id, checkpoint_ns), checkpoint_ids in ids.items()
        ),
    )
    return (
        LangGraphWrite.objects.using(alias)
        .filter(where)
        .order_by(*_WRITE_ORDER)
        .values_list(*_WRITE_COLUMNS)
    )


@lru_cache(maxsize=16)
def _writes_query(alias: str) -> CompiledQuery:
    """The pending writes of one checkpoint, in order."""
    found = LangGraphWrite.objects.filter(
        thread_id=slot(LangGraphWrite, "thread_id"),
        checkpoint_ns=slot(LangGraphWrite, "checkpoint_ns"),
        checkpoint_id=slot(LangGraphWrite, "checkpoint_id"),
    )
    return compile_once(found.order_by(*_WRITE_ORDER).values_list(*_WRITE_COLUMNS), alias)
