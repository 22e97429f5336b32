"""MySQL and MariaDB: ``INSERT .. ON DUPLICATE KEY UPDATE``, statements kept
under the packet limit, and binary ``utf8mb4`` columns."""

from __future__ import annotations

from datetime import datetime
from functools import lru_cache
from typing import Any

from django.db import connections
from django.db.backends.base.base import BaseDatabaseWrapper

from anvia_django.core.memory.types import JsonObject
from anvia_django.models import Conversation

from .base import LockedConversation, NewMessages
from .statements import (
    _CONVERSATION_INSERT,
    _conversation_params,
    _HandWrittenInsert,
    _insert_sql,
    _quoted,
    _returned,
    _returned_columns,
    _row_values,
)


class MySQLDialect(_HandWrittenInsert):
    """MySQL 8 (and MariaDB before 10.5): ``INSERT .. ON DUPLICATE KEY
    UPDATE``, then a read of the row it locked.

    A plain INSERT that hits the unique session id takes a *shared* lock on
    the existing row and keeps it after its savepoint is rolled back; two
    such writers then both wait to upgrade to the exclusive lock and InnoDB
    kills one (error 1213). ON DUPLICATE KEY takes the exclusive lock at
    once, so racing first appends queue instead.
    """

    max_statement_bytes = 4 * 1024 * 1024
    """Well under the smallest default ``max_allowed_packet`` (MySQL 8: 64 MB,
    MariaDB: 16 MB), so several large messages never make one oversized packet."""

    def lock_conversation(
        self,
        using: str,
        *,
        session_id: str,
        scope_key: str,
        user_id: str | None,
        metadata: JsonObject | None,
        now: datetime,
        reserve: int,
    ) -> LockedConversation:
        params = _conversation_params(using, session_id, scope_key, user_id, metadata, now, reserve)
        sql, select = _duplicate_key_sql(using)
        connection = connections[using]
        with connection.cursor() as cursor:
            cursor.execute(sql, [*params, *params[5:]])
            # ``id = LAST_INSERT_ID(id)`` made the id of an updated row the
            # connection's last insert id too.
            conversation_id = cursor.lastrowid
        # The row is locked by this transaction: the read sees its own update.
        return _returned(using, select, [conversation_id], reserve)

    def _inserts(
        self, connection: BaseDatabaseWrapper, rows: NewMessages
    ) -> list[tuple[str, list[Any]]]:
        using = connection.alias
        values = _row_values(connection, rows)
        statements: list[tuple[str, list[Any]]] = []
        chunk: list[tuple[Any, ...]] = []
        size = 0
        for row in values:
            row_size = len(row[5]) * 4 + 200  # the message's UTF-8 at worst, and the rest
            if chunk and (
                size + row_size > self.max_statement_bytes or len(chunk) == self.rows_per_statement
            ):
                statements.append((_insert_sql(using, len(chunk)), [v for r in chunk for v in r]))
                chunk, size = [], 0
            chunk.append(row)
            size += row_size
        if chunk:
            statements.append((_insert_sql(using, len(chunk)), [v for r in chunk for v in r]))
        return statements


class MariaDBDialect(MySQLDialect):
    """MariaDB 10.5+: ``ON DUPLICATE KEY UPDATE .. RETURNING`` in one statement."""

    def lock_conversation(
        self,
        using: str,
        *,
        session_id: str,
        scope_key: str,
        user_id: str | None,
        metadata: JsonObject | None,
        now: datetime,
        reserve: int,
    ) -> LockedConversation:
        params = _conversation_params(using, session_id, scope_key, user_id, metadata, now, reserve)
        sql, _ = _duplicate_key_sql(using)
        return _returned(
            using, f"{sql} RETURNING {_returned_columns(using)}", [*params, *params[5:]], reserve
        )


@lru_cache(maxsize=16)
def _duplicate_key_sql(using: str) -> tuple[str, str]:
    """The upsert (its UPDATE takes the last three values again: ``VALUES()``
    is deprecated on MySQL 8 and its replacement unknown to MariaDB) and the
    SELECT of the row by id."""
    table, c = _quoted(using, Conversation)
    upsert = _CONVERSATION_INSERT.format(table=table, **c) + (
        f"ON DUPLICATE KEY UPDATE {c['id']} = LAST_INSERT_ID({c['id']}), "
        f"{c['updated_at']} = GREATEST({c['updated_at']}, CAST(%s AS DATETIME(6))), "
        f"{c['message_count']} = {c['message_count']} + %s, "
        f"{c['metadata']} = COALESCE(%s, {c['metadata']})"
    )
    select = f"SELECT {_returned_columns(using)} FROM {table} WHERE {c['id']} = %s"
    return upsert, select
