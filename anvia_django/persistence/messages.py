"""The message-table statements of an append, as plain SQL.

An append already holds every message encoded as JSON (validation produced
it), so the rows are written from those strings in one multi-row INSERT;
going through model instances and ``bulk_create`` would build a model per
message and encode each message a second time.
"""

from __future__ import annotations

from datetime import datetime
from functools import lru_cache
from typing import Any, cast

from django.db import connections
from django.db.models import Field

from anvia_django.fields import EncodedJSON
from anvia_django.models import MemoryMessage

_INSERT_COLUMNS = ("conversation", "position", "run_id", "turn", "role", "message", "created_at")
_ROWS_PER_STATEMENT = 500
"""7 parameters a row stays below SQLite's smallest variable limit (32,766)."""


def insert_messages(
    using: str,
    *,
    conversation_id: int,
    first_position: int,
    run_id: str,
    turn: int,
    roles: list[str],
    encoded: list[str],
    now: datetime,
    unless_retry_of: list[str] | None = None,
) -> bool:
    """Insert ``encoded`` (JSON text) at positions from ``first_position``.

    With ``unless_retry_of`` (the messages' JSON text, normally ``encoded``),
    first compare it with the text of the last messages stored for ``run_id``
    and ``turn``: when they are equal the append is a retry and this returns
    ``False``, and the caller must roll
    the transaction back (on PostgreSQL the rows went in by then: the
    comparison shares the INSERT's statement, saving a round trip).
    Must run while the conversation's row lock is held, so the comparison
    sees every append committed before this one.
    """
    connection = connections[using]
    if connection.vendor not in ("postgresql", "sqlite"):
        if unless_retry_of is not None and _is_tail(
            using, conversation_id, run_id, turn, unless_retry_of
        ):
            return False
        _bulk_create(using, conversation_id, first_position, run_id, turn, roles, encoded, now)
        return True
    created_at = MemoryMessage._meta.get_field("created_at").get_db_prep_save(now, connection)
    rows = [
        (conversation_id, first_position + offset, run_id, turn, role, message, created_at)
        for offset, (role, message) in enumerate(zip(roles, encoded, strict=True))
    ]
    chunks = [
        rows[start : start + _ROWS_PER_STATEMENT]
        for start in range(0, len(rows), _ROWS_PER_STATEMENT)
    ]
    with connection.cursor() as cursor:
        if unless_retry_of is not None:
            tail: list[Any] = [conversation_id, run_id, turn, len(unless_retry_of)]
            if connection.vendor == "postgresql":
                # One statement: the tail is read from the statement's
                # snapshot, taken after the row lock was granted, and the
                # INSERT's own rows are invisible to it.
                first = chunks.pop(0)
                cursor.execute(
                    _tail_then_insert_sql(using, len(first)),
                    [*tail, *(value for row in first for value in row)],
                )
                if _stored_tail(cursor) == unless_retry_of:
                    return False
            else:
                cursor.execute(_tail_sql(using), tail)
                if _stored_tail(cursor) == unless_retry_of:
                    return False
        for chunk in chunks:
            cursor.execute(
                _insert_sql(using, connection.vendor, len(chunk)),
                [value for row in chunk for value in row],
            )
    return True


def _is_tail(using: str, conversation_id: int, run_id: str, turn: int, messages: list[str]) -> bool:
    with connections[using].cursor() as cursor:
        cursor.execute(_tail_sql(using), [conversation_id, run_id, turn, len(messages)])
        return _stored_tail(cursor) == messages


def _stored_tail(cursor: Any) -> list[str]:
    """The tail query's rows (newest first) as JSON text, in position order.

    Text, not decoded values: a retry must match exactly, and in Python
    ``True == 1 == 1.0`` would call different messages equal.
    """
    stored = [row[0] for row in cursor.fetchall()]
    stored.reverse()
    return stored


def _column(name: str) -> str:
    field = MemoryMessage._meta.get_field(name)
    assert isinstance(field, Field)
    return cast(str, field.column)


@lru_cache(maxsize=64)
def _insert_sql(using: str, vendor: str, rows: int) -> str:
    quote = connections[using].ops.quote_name
    columns = ", ".join(quote(_column(name)) for name in _INSERT_COLUMNS)
    # The message column is text (ExactJSONField): the encoded JSON is stored as is.
    row = "(%s, %s, %s, %s, %s, %s, %s)"
    table = quote(MemoryMessage._meta.db_table)
    return f"INSERT INTO {table} ({columns}) VALUES " + ", ".join([row] * rows)


@lru_cache(maxsize=16)
def _tail_sql(using: str) -> str:
    quote = connections[using].ops.quote_name
    table = quote(MemoryMessage._meta.db_table)
    return (
        f"SELECT {quote(_column('message'))} FROM {table}"
        f" WHERE {quote(_column('conversation'))} = %s AND {quote(_column('run_id'))} = %s"
        f" AND {quote(_column('turn'))} = %s ORDER BY {quote(_column('position'))} DESC LIMIT %s"
    )


@lru_cache(maxsize=64)
def _tail_then_insert_sql(using: str, rows: int) -> str:
    # Data-modifying CTEs run to completion even when unreferenced.
    insert = _insert_sql(using, "postgresql", rows)
    return f"WITH tail AS ({_tail_sql(using)}), written AS ({insert}) SELECT * FROM tail"


def _bulk_create(
    using: str,
    conversation_id: int,
    first_position: int,
    run_id: str,
    turn: int,
    roles: list[str],
    encoded: list[str],
    now: datetime,
) -> None:
    # Other backends: let the field adapt the values it is handed as text.
    MemoryMessage.objects.using(using).bulk_create(
        [
            MemoryMessage(
                conversation_id=conversation_id,
                position=first_position + offset,
                run_id=run_id,
                turn=turn,
                role=role,
                message=EncodedJSON(message),
                created_at=now,
            )
            for offset, (role, message) in enumerate(zip(roles, encoded, strict=True))
        ]
    )
