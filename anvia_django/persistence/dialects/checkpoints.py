"""A LangGraph checkpoint stored, and read, in one statement where the
database can.

PostgreSQL: one call of ``anvia_django_langgraph_put`` (migration 0016,
its SQL frozen there), one round trip in autocommit its own transaction,
where the saver's steps take seven (BEGIN, two locks, the bases' digests,
two INSERTs, COMMIT); it checks and stores as the steps do
(``integrations/langgraph/writes.py``). And one call of
``anvia_django_langgraph_read`` for a checkpoint's values, their chains
and its writes, where the compiled queries take three (``reads.py``).
Both keep their plans for the connection's life. Elsewhere, under the
generic dialect, or before the migration ran: None, and the caller takes
the steps.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.db import connections

from anvia_django.models import LangGraphCheckpoint

from . import dialect_for
from .functions import FunctionMissing, call_function
from .postgresql import PostgreSQLDialect

_PUT_CALL = (
    "SELECT * FROM anvia_django_langgraph_put("
    "%s::text, %s::text, %s::text, %s::text, %s::text, %s::text, %s::bytea, %s::text, "
    "%s::timestamptz, %s::boolean, %s::text[], %s::text[], %s::text[], %s::bytea[], "
    "%s::text[], %s::text[], %s::smallint[], %s::text[], %s::text[])"
)


@dataclass(frozen=True, slots=True)
class ValueRow:
    """One channel value of a put, as stored (``LangGraphBlob``'s columns)."""

    channel: str
    version: str
    type: str
    blob: bytes | None
    base_version: str | None
    anchor_version: str | None
    depth: int
    digest: str | None
    base_digest: str | None
    """What the base row's digest must be for a delta to hold."""


@dataclass(frozen=True, slots=True)
class CheckpointPut:
    thread_id: str
    checkpoint_ns: str
    checkpoint_id: str
    parent_id: str | None
    run_id: str | None
    type: str
    checkpoint: bytes
    metadata: Any
    now: datetime
    check: bool
    """Refused unless the parent is still the latest (``conflicts.py``)."""
    values: Sequence[ValueRow]


@dataclass(frozen=True, slots=True)
class PutOutcome:
    conflict: bool = False
    """The parent is no longer the latest: nothing stored."""
    latest: str | None = None
    """The thread's latest checkpoint, on a conflict."""
    stale: tuple[str, ...] = ()
    """Channels whose delta's base is not as remembered: nothing stored."""


STORED = PutOutcome()

logger = logging.getLogger(__name__)

_READ_CALL = (
    "SELECT * FROM anvia_django_langgraph_read(%s::text, %s::text, %s::text, %s::text[], "
    "%s::text[])"
)
VALUES, CHAINS, WRITES = 0, 1, 2


@dataclass(frozen=True, slots=True)
class CheckpointRead:
    values: list[tuple[Any, ...]]
    """(channel, version, type, blob, base_version, anchor_version): the
    values asked for and the rows of their chains."""
    writes: list[tuple[Any, ...]]
    """(task_id, idx, channel, type, blob), in ``writes_sort_key`` order."""


_without_function: set[str] = set()
"""Aliases whose database lacks the functions (migrations not applied yet)."""


def forget_missing_checkpoint_functions(**kwargs: object) -> None:
    """After ``migrate`` (``post_migrate``): look for the functions again."""
    _without_function.clear()


def read_in_one_statement(
    using: str,
    thread_id: str,
    checkpoint_ns: str,
    checkpoint_id: str,
    versions: Sequence[tuple[str, str]],
) -> CheckpointRead | None:
    """The (channel, version) ``versions`` of a thread's namespace with the
    rows of their chains, and the pending writes of ``checkpoint_id``, in
    one statement; None where the database cannot."""
    if not _has_functions(using):
        return None
    params = [
        *(thread_id, checkpoint_ns, checkpoint_id),
        *([channel for channel, _ in versions], [version for _, version in versions]),
    ]
    try:
        rows = call_function(using, _READ_CALL, params)
    except FunctionMissing:
        _note_missing_functions(using)
        return None
    read = CheckpointRead([], [])
    for part, channel, version, kind, blob, base, anchor, task_id, idx in rows:
        if part == WRITES:
            read.writes.append((task_id, idx, channel, kind, blob))
        else:
            read.values.append((channel, version, kind, blob, base, anchor))
    return read


def _note_missing_functions(using: str) -> None:
    """Store and read in steps on ``using`` until the next ``migrate`` in
    this process (another process: until it restarts), and say so once."""
    if using not in _without_function:
        _without_function.add(using)
        logger.warning(
            "The database of alias %r lacks the LangGraph functions of migration "
            "0016: checkpoints are stored and read in steps until `manage.py migrate` "
            "has run (and this process has restarted, unless it ran it).",
            using,
        )


def _has_functions(using: str) -> bool:
    return isinstance(dialect_for(using), PostgreSQLDialect) and using not in _without_function


def put_in_one_statement(using: str, put: CheckpointPut) -> PutOutcome | None:
    """Check and store ``put`` in one statement, or None where the database
    cannot (the caller then takes the steps)."""
    if not _has_functions(using):
        return None
    connection = connections[using]
    meta = LangGraphCheckpoint._meta
    values = put.values
    params = [
        *(put.thread_id, put.checkpoint_ns, put.checkpoint_id, put.parent_id, put.run_id),
        *(put.type, put.checkpoint),
        meta.get_field("metadata").get_db_prep_save(put.metadata, connection),
        meta.get_field("created_at").get_db_prep_save(put.now, connection),
        put.check,
        [value.channel for value in values],
        [value.version for value in values],
        [value.type for value in values],
        [value.blob for value in values],
        [value.base_version for value in values],
        [value.anchor_version for value in values],
        [value.depth for value in values],
        [value.digest for value in values],
        [value.base_digest for value in values],
    ]
    try:
        ((conflict, latest, stale),) = call_function(
            using, _PUT_CALL, params, wrote=lambda rows: not rows[0][0] and not rows[0][2]
        )
    except FunctionMissing:
        _note_missing_functions(using)
        return None
    if conflict:
        return PutOutcome(conflict=True, latest=latest)
    if stale:
        return PutOutcome(stale=tuple(stale))
    return STORED
