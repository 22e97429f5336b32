"""The SQL that the vendors' dialects share, built once per alias from the
models' own column names, and the two ways of writing an append that more
than one vendor uses: hand-written multi-row INSERTs of the messages, and
the conversation upsert with ``ON CONFLICT .. RETURNING``."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from functools import lru_cache
from typing import Any, cast

from django.db import connections
from django.db.backends.base.base import BaseDatabaseWrapper
from django.db.models import Field, Model

from anvia_django.core.memory.types import JsonObject
from anvia_django.fields import EncodedJSON
from anvia_django.models import Conversation, MemoryMessage, new_ref

from .base import ConversationLock, Dialect, LockedConversation, NewMessages


class HandWrittenInsert(Dialect):
    """The messages of an append in multi-row INSERTs of their encoded text.

    ``bulk_create`` would build a model instance per message and go through
    the whole compiler for each append; the field still encodes every value.
    """

    rows_per_statement = 500
    """7 parameters a row stays below SQLite's smallest variable limit (32,766)."""

    def stored_tail(self, using: str, rows: NewMessages, count: int) -> list[tuple[int, str]]:
        with connections[using].cursor() as cursor:
            cursor.execute(tail_sql(using), tail_params(rows, count))
            return list(cursor.fetchall())

    def insert(self, using: str, rows: NewMessages) -> None:
        connection = connections[using]
        with connection.cursor() as cursor:
            for sql, params in self.insert_statements(connection, rows):
                cursor.execute(sql, params)

    def insert_statements(
        self, connection: BaseDatabaseWrapper, rows: NewMessages
    ) -> list[tuple[str, list[Any]]]:
        using = connection.alias
        values = row_values(connection, rows)
        statements = []
        for start in range(0, len(values), self.rows_per_statement):
            chunk = values[start : start + self.rows_per_statement]
            statements.append((insert_sql(using, len(chunk)), [v for row in chunk for v in row]))
        return statements


class OnConflictUpsert(Dialect):
    """``INSERT .. ON CONFLICT .. DO UPDATE .. RETURNING``: one statement
    creates the row or takes its lock, reserves the positions and returns
    what the append needs."""

    def lock_conversation(self, using: str, lock: ConversationLock) -> LockedConversation:
        return returned(
            using, on_conflict_sql(using), conversation_params(using, lock), lock.reserve
        )


_RETURNED = ("id", "ref", "user_id", "message_count", "updated_at")
_INSERT_COLUMNS = ("conversation", "position", "run_id", "turn", "role", "message", "created_at")


def conversation_params(using: str, lock: ConversationLock) -> list[Any]:
    stamp, encoded = stamp_and_metadata(connections[using], lock.now, lock.metadata)
    # (ref, session_id, scope_key, user_id, created_at, updated_at, message_count, metadata)
    return [
        new_ref(),
        lock.session_id,
        lock.scope_key,
        lock.user_id,
        stamp,
        stamp,
        lock.reserve,
        encoded,
    ]


def stamp_and_metadata(
    connection: BaseDatabaseWrapper, now: datetime, metadata: JsonObject | None
) -> tuple[Any, Any]:
    """``now`` and ``metadata`` as a conversation row's parameters."""
    meta = Conversation._meta
    # created_at and updated_at are alike DateTimeFields: one conversion serves both.
    stamp = meta.get_field("updated_at").get_db_prep_save(now, connection)
    return stamp, meta.get_field("metadata").get_db_prep_save(metadata, connection)


def returned(using: str, sql: str, params: Sequence[Any], reserve: int) -> LockedConversation:
    connection = connections[using]
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        row = cursor.fetchone()
    assert row is not None
    return locked_from_row(connection, row, reserve)


def locked_from_row(
    connection: BaseDatabaseWrapper, row: Sequence[Any], reserve: int
) -> LockedConversation:
    """The conversation a statement returned (``_RETURNED``'s columns)."""
    conversation_id, ref, owner, count, updated_at = row
    column = cast("Field[Any, Any]", Conversation._meta.get_field("updated_at")).cached_col
    # The compiler's order: the backend's converters, then the field's.
    for convert in [
        *connection.ops.get_db_converters(column),
        *column.get_db_converters(connection),
    ]:
        updated_at = convert(updated_at, column, connection)
    return LockedConversation(conversation_id, ref, owner, count - reserve, updated_at)


def quoted(using: str, model: type[Model]) -> tuple[str, dict[str, str]]:
    quote = connections[using].ops.quote_name
    columns = {field.name: quote(cast(str, field.column)) for field in model._meta.concrete_fields}
    return quote(model._meta.db_table), columns


def returned_columns(using: str) -> str:
    _, c = quoted(using, Conversation)
    return ", ".join(c[name] for name in _RETURNED)


CONVERSATION_INSERT = (
    "INSERT INTO {table} ({ref}, {session_id}, {scope_key}, {user_id}, {created_at}, "
    "{updated_at}, {message_count}, {metadata}) VALUES (%s, %s, %s, %s, %s, %s, %s, %s) "
)


@lru_cache(maxsize=16)
def on_conflict_upsert(using: str) -> str:
    """The conversation upsert, without its ``RETURNING`` clause."""
    table, c = quoted(using, Conversation)
    return CONVERSATION_INSERT.format(table=table, **c) + (
        f"ON CONFLICT ({c['session_id']}, {c['scope_key']}) DO UPDATE SET "
        # Never backwards: a writer that read the clock, then queued on the
        # lock behind a later one, must not move the conversation back in time.
        f"{c['updated_at']} = CASE WHEN EXCLUDED.{c['updated_at']} > {table}.{c['updated_at']} "
        f"THEN EXCLUDED.{c['updated_at']} ELSE {table}.{c['updated_at']} END, "
        f"{c['message_count']} = {table}.{c['message_count']} + EXCLUDED.{c['message_count']}, "
        f"{c['metadata']} = COALESCE(EXCLUDED.{c['metadata']}, {table}.{c['metadata']})"
    )


@lru_cache(maxsize=16)
def on_conflict_sql(using: str) -> str:
    return f"{on_conflict_upsert(using)} RETURNING {returned_columns(using)}"


@lru_cache(maxsize=64)
def insert_sql(using: str, rows: int) -> str:
    table, c = quoted(using, MemoryMessage)
    columns = ", ".join(c[name] for name in _INSERT_COLUMNS)
    row = "(" + ", ".join(["%s"] * len(_INSERT_COLUMNS)) + ")"
    return f"INSERT INTO {table} ({columns}) VALUES " + ", ".join([row] * rows)


@lru_cache(maxsize=16)
def tail_sql(using: str) -> str:
    """The newest messages of a run and turn, newest first: their positions
    and the column's text as stored."""
    table, c = quoted(using, MemoryMessage)
    return (
        f"SELECT {c['position']}, {c['message']} FROM {table} WHERE {c['conversation']} = %s "
        f"AND {c['run_id']} = %s AND {c['turn']} = %s ORDER BY {c['position']} DESC LIMIT %s"
    )


def tail_params(rows: NewMessages, count: int) -> list[Any]:
    return [rows.conversation_id, rows.run_id, rows.turn, count]


def row_values(connection: BaseDatabaseWrapper, rows: NewMessages) -> list[tuple[Any, ...]]:
    fields = MemoryMessage._meta
    created_at = fields.get_field("created_at").get_db_prep_save(rows.created_at, connection)
    encode = fields.get_field("message").get_db_prep_save
    return [
        (
            rows.conversation_id,
            rows.first_position + offset,
            rows.run_id,
            rows.turn,
            role,
            encode(EncodedJSON(message), connection),
            created_at,
        )
        for offset, (role, message) in enumerate(zip(rows.roles, rows.encoded, strict=True))
    ]
