"""MySQL and MariaDB: ``INSERT .. ON DUPLICATE KEY UPDATE``, statements kept
under the packet limit, and binary ``utf8mb4`` columns."""

from __future__ import annotations

from collections.abc import Sequence
from functools import lru_cache
from typing import Any

from django.db import connections
from django.db.backends.base.base import BaseDatabaseWrapper
from django.db.models import Model

from anvia_django.core.memory.bounded_records import RecordLimit
from anvia_django.core.memory.errors import InvalidMemoryInputError
from anvia_django.models import Conversation

from .base import ConversationLock, LockedConversation, NewMessages
from .statements import (
    CONVERSATION_INSERT,
    HandWrittenInsert,
    conversation_params,
    insert_sql,
    quoted,
    returned,
    returned_columns,
    row_values,
)


class MySQLDialect(HandWrittenInsert):
    """MySQL 8 (and MariaDB before 10.5): ``INSERT .. ON DUPLICATE KEY
    UPDATE``, then a read of the row it locked.

    A plain INSERT that hits the unique session id takes a *shared* lock on
    the existing row and keeps it after its savepoint is rolled back; two
    such writers then both wait to upgrade to the exclusive lock and InnoDB
    kills one (error 1213). ON DUPLICATE KEY takes the exclusive lock at
    once, so racing first appends queue instead.
    """

    record_limit = RecordLimit(bytes=4 * 1024 * 1024, sealed_chars=12 * 1024 * 1024)
    """A failed-run record is one row in one INSERT: 4 MiB of UTF-8, at most
    twice that once the driver has escaped it; sealed (JSON, then base64)
    at most 12 MiB, under MariaDB's default 16 MiB packet."""

    max_statement_bytes = 4 * 1024 * 1024
    """Well under the smallest default ``max_allowed_packet`` (MySQL 8: 64 MB,
    MariaDB: 16 MB), so several large messages never make one oversized packet."""

    def lock_conversation(self, using: str, lock: ConversationLock) -> LockedConversation:
        params = conversation_params(using, lock)
        sql, select = _duplicate_key_sql(using)
        connection = connections[using]
        with connection.cursor() as cursor:
            cursor.execute(sql, [*params, *params[5:]])
            # ``id = LAST_INSERT_ID(id)`` made the id of an updated row the
            # connection's last insert id too.
            conversation_id = cursor.lastrowid
        # The row is locked by this transaction: the read sees its own update.
        return returned(using, select, [conversation_id], lock.reserve)

    def insert_statements(
        self, connection: BaseDatabaseWrapper, rows: NewMessages
    ) -> list[tuple[str, list[Any]]]:
        using = connection.alias
        values = row_values(connection, rows)
        statements: list[tuple[str, list[Any]]] = []
        chunk: list[tuple[Any, ...]] = []
        size = 0
        for offset, row in enumerate(values):
            # The message's UTF-8 at worst, escaped, and the rest.
            row_size = len(row[5]) * 4 + 200
            if row_size > SURELY_FITS:
                refuse_unless_it_fits(connection, row[5], offset)
            if chunk and (
                size + row_size > self.max_statement_bytes or len(chunk) == self.rows_per_statement
            ):
                statements.append((insert_sql(using, len(chunk)), [v for r in chunk for v in r]))
                chunk, size = [], 0
            chunk.append(row)
            size += row_size
        if chunk:
            statements.append((insert_sql(using, len(chunk)), [v for r in chunk for v in r]))
        return statements

    def compact(self, using: str, models: Sequence[type[Model]]) -> list[str]:
        """``OPTIMIZE TABLE``: InnoDB rebuilds each table and its FULLTEXT
        index, without the deleted rows and their words. It commits the
        transaction it runs in, so inside one it is left to the operator."""
        connection = connections[using]
        tables = ", ".join(connection.ops.quote_name(model._meta.db_table) for model in models)
        statement = f"OPTIMIZE TABLE {tables}"
        if connection.in_atomic_block:
            return [statement]
        with connection.cursor() as cursor:
            cursor.execute(statement)
            cursor.fetchall()  # one status row per table
        return []

    def wait_for_writes_in_flight(self, using: str) -> None:
        # LOCK TABLES ... READ waits for the metadata locks every transaction
        # that wrote the table holds until it ends. It commits an open
        # transaction, so it must run outside one.
        connection = connections[using]
        if connection.in_atomic_block:
            raise RuntimeError("wait_for_writes_in_flight must not run inside a transaction")
        table = connection.ops.quote_name(Conversation._meta.db_table)
        with connection.cursor() as cursor:
            cursor.execute(f"LOCK TABLES {table} READ")
            cursor.execute("UNLOCK TABLES")


SURELY_FITS = 1024 * 1024
"""Bytes of one row's statement that fit whatever ``max_allowed_packet``
says (its smallest value is 1 KiB, its default 16 MiB on MariaDB and
64 MiB on MySQL 8); a bigger row is measured against the server's value."""

STATEMENT_ROOM = 4096
"""Bytes of the INSERT beside the message: its SQL, the other columns."""

_ESCAPED = ("\\", "'", '"', "\x00", "\n", "\r", "\x1a")
"""What the driver escapes with a backslash inside a statement's string."""


def escaped_size(text: str) -> int:
    """Bytes of ``text`` as the driver sends it in a statement: its UTF-8,
    one more for each character it escapes (a message of backslashes or
    quotes doubles)."""
    size = len(text) if text.isascii() else len(text.encode("utf-8"))
    return size + sum(text.count(character) for character in _ESCAPED)


def refuse_unless_it_fits(connection: BaseDatabaseWrapper, text: str, offset: int) -> None:
    """Raise ``InvalidMemoryInputError`` when the INSERT of message
    ``offset`` (``text``, as stored) would pass the server's
    ``max_allowed_packet``: the server would refuse it (1153) and drop the
    connection. The caller's transaction then rolls back: nothing written."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT @@max_allowed_packet")
        row = cursor.fetchone()
    assert row is not None
    limit = int(row[0])
    size = escaped_size(text) + STATEMENT_ROOM
    if size > limit:
        raise InvalidMemoryInputError(
            f"is {size} bytes as MySQL/MariaDB receives it (escaped), over the server's "
            f"max_allowed_packet of {limit} bytes; raise max_allowed_packet, or lower "
            'ANVIA_DJANGO["MAX_MESSAGE_BYTES"] to refuse such messages up front',
            path=f"messages[{offset}]",
        )


class MariaDBDialect(MySQLDialect):
    """MariaDB 10.5+: ``ON DUPLICATE KEY UPDATE .. RETURNING`` in one statement."""

    def lock_conversation(self, using: str, lock: ConversationLock) -> LockedConversation:
        params = conversation_params(using, lock)
        sql, _ = _duplicate_key_sql(using)
        returning = f"{sql} RETURNING {returned_columns(using)}"
        return returned(using, returning, [*params, *params[5:]], lock.reserve)


@lru_cache(maxsize=16)
def _duplicate_key_sql(using: str) -> tuple[str, str]:
    """The upsert (its UPDATE takes the last three values again: ``VALUES()``
    is deprecated on MySQL 8 and its replacement unknown to MariaDB) and the
    SELECT of the row by id."""
    table, c = quoted(using, Conversation)
    upsert = CONVERSATION_INSERT.format(table=table, **c) + (
        f"ON DUPLICATE KEY UPDATE {c['id']} = LAST_INSERT_ID({c['id']}), "
        f"{c['updated_at']} = GREATEST({c['updated_at']}, CAST(%s AS DATETIME(6))), "
        f"{c['message_count']} = {c['message_count']} + %s, "
        f"{c['metadata']} = COALESCE(%s, {c['metadata']})"
    )
    select = f"SELECT {returned_columns(using)} FROM {table} WHERE {c['id']} = %s"
    return upsert, select
