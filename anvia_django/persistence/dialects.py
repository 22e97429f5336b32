"""The one module that knows database vendors.

Everything else in the app is plain Django. What differs by database is
kept here, one class per vendor:

- creating, locking and reserving positions on a conversation row. Doing it
  in one upsert statement is both the fastest way (about 2x the ORM form)
  and the race-free one: a first append from many processes at once must
  neither fail on the unique session id nor deadlock;
- the retried-append check and the multi-row message INSERT;
- the column collation that keeps ids exact (``"Abc"`` and ``"abc"`` are two
  sessions everywhere) and text in 4-byte UTF-8 on MySQL/MariaDB;
- the planner's row estimate the admin uses instead of a full count.

Any other backend gets :class:`Dialect`: the ORM with ``select_for_update``.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from contextlib import nullcontext
from dataclasses import dataclass
from datetime import datetime
from functools import lru_cache
from typing import Any, cast

from django.db import IntegrityError, ProgrammingError, connections, transaction
from django.db.backends.base.base import BaseDatabaseWrapper
from django.db.models import F, Field, Model, TextField
from django.db.models.functions import Cast

from anvia_django.conf import app_settings
from anvia_django.core.memory.types import JsonObject
from anvia_django.fields import EncodedJSON
from anvia_django.models import Conversation, MemoryMessage, new_ref

from .scope import check_scope

logger = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class LockedConversation:
    id: int
    ref: str
    user_id: str | None
    first_position: int
    """The position of the first of the reserved messages."""
    updated_at: datetime
    """The conversation's new ``updated_at``: never earlier than the one before,
    so the messages written under this lock are stamped in position order even
    when this writer read the clock before another's commit."""

    def could_hold(self, count: int) -> bool:
        """Whether ``count`` messages appended now could be stored already (a
        retry): not in a new conversation, nor in one shorter than that."""
        return self.first_position >= count


@dataclass(frozen=True, slots=True)
class NewMessages:
    """The rows of one append, messages already encoded as JSON text."""

    conversation_id: int
    first_position: int
    run_id: str
    turn: int
    roles: list[str]
    encoded: list[str]
    created_at: datetime


@dataclass(frozen=True, slots=True)
class AppendRequest:
    """One validated append, messages already encoded as JSON text."""

    session_id: str
    user_id: str | None
    metadata: JsonObject | None
    run_id: str
    turn: int
    roles: list[str]
    encoded: list[str]
    now: datetime


class Dialect:
    """Any database Django supports: the ORM, with ``select_for_update``.

    Correct wherever a failed INSERT releases its locks with its savepoint
    (PostgreSQL does): creating a new session may otherwise deadlock when
    several first appends race.
    """

    def lock_conversation(
        self,
        using: str,
        *,
        session_id: str,
        user_id: str | None,
        metadata: JsonObject | None,
        now: datetime,
        reserve: int,
    ) -> LockedConversation:
        conversations = Conversation.objects.using(using)
        row = conversations.select_for_update().filter(session_id=session_id).first()
        if row is None:
            try:
                with transaction.atomic(using=using):
                    row = conversations.create(
                        session_id=session_id,
                        user_id=user_id,
                        metadata=metadata,
                        created_at=now,
                        updated_at=now,
                        message_count=0,
                    )
            except IntegrityError:
                # Another writer created it first; its commit released the row.
                row = conversations.select_for_update().get(session_id=session_id)
        updated_at = max(now, row.updated_at)
        changes: dict[str, object] = {
            "updated_at": updated_at,
            "message_count": F("message_count") + reserve,
        }
        if metadata is not None:
            changes["metadata"] = metadata
        conversations.filter(pk=row.pk).update(**changes)
        return LockedConversation(row.pk, row.ref, row.user_id, row.message_count, updated_at)

    def append_in_one_statement(
        self, using: str, append: AppendRequest
    ) -> LockedConversation | None:
        """Do the whole append (create or lock, scope check, retry check,
        reserve, insert) in :meth:`one_statement_append`'s statement, where
        the dialect has one; ``None`` means nothing was written and the
        caller must take the row lock and append in steps.
        """
        connection = connections[using]
        statement = self.one_statement_append(connection, append)
        if statement is None:
            return None
        # Inside the caller's transaction a savepoint, so that a missing
        # function leaves it usable; in autocommit the call is a transaction.
        block = transaction.atomic(using=using) if connection.in_atomic_block else nullcontext()
        try:
            with block, connection.cursor() as cursor:
                cursor.execute(statement.sql, statement.params)
                row = cursor.fetchone()
        except ProgrammingError as error:
            if not statement.failed_for_want_of_the_function(error.__cause__):
                raise
            return None
        return statement.outcome(row)

    def one_statement_append(
        self, connection: BaseDatabaseWrapper, append: AppendRequest
    ) -> OneStatementAppend | None:
        """The append as one statement, for any connection to ``connection``'s
        database to run (Django's, or the event loop's); ``None`` where there
        is none."""
        return None

    def insert_messages(
        self, using: str, rows: NewMessages, *, unless_retry_of: list[str] | None
    ) -> bool:
        """Insert ``rows``; with ``unless_retry_of``, first compare it with the
        text of the last messages stored for the run and turn, and write
        nothing (returning ``False``) when they are equal.

        ``False`` means the caller must roll the transaction back: a dialect
        may have written the rows in the statement that compared them.
        Runs under the conversation's row lock, so the comparison sees every
        append committed before this one.
        """
        if unless_retry_of is not None:
            stored = (
                MemoryMessage.objects.using(using)
                .filter(conversation_id=rows.conversation_id, run_id=rows.run_id, turn=rows.turn)
                # The column's value, not the decoded message (see _as_stored).
                .annotate(text=Cast("message", output_field=TextField()))
                .order_by("-position")
                .values_list("text", flat=True)[: len(unless_retry_of)]
            )
            if _in_position_order(list(stored)) == _as_stored(connections[using], unless_retry_of):
                return False
        MemoryMessage.objects.using(using).bulk_create(
            [
                MemoryMessage(
                    conversation_id=rows.conversation_id,
                    position=rows.first_position + offset,
                    run_id=rows.run_id,
                    turn=rows.turn,
                    role=role,
                    message=EncodedJSON(message),
                    created_at=rows.created_at,
                )
                for offset, (role, message) in enumerate(zip(rows.roles, rows.encoded, strict=True))
            ]
        )
        return True

    def column_collation(self, connection: BaseDatabaseWrapper) -> str | None:
        """The collation of this app's text columns; ``None``: the database's own."""
        return None

    def create_functions(self, connection: BaseDatabaseWrapper) -> None:
        """Create (or replace) the database functions this dialect calls."""

    def drop_functions(self, connection: BaseDatabaseWrapper) -> None:
        """Drop what :meth:`create_functions` created."""

    def estimated_row_count(self, using: str, model: type[Model]) -> int | None:
        """The planner's idea of ``model``'s row count, ``None`` if it has none."""
        return None


def _in_position_order(newest_first: list[str]) -> list[str]:
    newest_first.reverse()
    return newest_first


class _HandWrittenInsert(Dialect):
    """The messages of an append in multi-row INSERTs of their encoded text.

    ``bulk_create`` would build a model instance per message and go through
    the whole compiler for each append; the field still encodes every value.
    """

    rows_per_statement = 500
    """7 parameters a row stays below SQLite's smallest variable limit (32,766)."""

    def insert_messages(
        self, using: str, rows: NewMessages, *, unless_retry_of: list[str] | None
    ) -> bool:
        connection = connections[using]
        with connection.cursor() as cursor:
            return self.insert_on(cursor, connection, rows, unless_retry_of=unless_retry_of)

    def insert_on(
        self,
        cursor: Any,
        connection: BaseDatabaseWrapper,
        rows: NewMessages,
        *,
        unless_retry_of: list[str] | None,
    ) -> bool:
        """:meth:`insert_messages` on ``cursor``, of Django's ``connection`` or
        another connection to its database."""
        if unless_retry_of is not None:
            cursor.execute(_tail_sql(connection.alias), _tail_params(rows, unless_retry_of))
            if _stored_tail(cursor) == _as_stored(connection, unless_retry_of):
                return False
        for sql, params in self._inserts(connection, rows):
            cursor.execute(sql, params)
        return True

    def _inserts(
        self, connection: BaseDatabaseWrapper, rows: NewMessages
    ) -> list[tuple[str, list[Any]]]:
        using = connection.alias
        values = _row_values(connection, rows)
        statements = []
        for start in range(0, len(values), self.rows_per_statement):
            chunk = values[start : start + self.rows_per_statement]
            statements.append((_insert_sql(using, len(chunk)), [v for row in chunk for v in row]))
        return statements


class _OnConflictUpsert(Dialect):
    """``INSERT .. ON CONFLICT .. DO UPDATE .. RETURNING``: one statement
    creates the row or takes its lock, reserves the positions and returns
    what the append needs."""

    def lock_conversation(
        self,
        using: str,
        *,
        session_id: str,
        user_id: str | None,
        metadata: JsonObject | None,
        now: datetime,
        reserve: int,
    ) -> LockedConversation:
        params = _conversation_params(using, session_id, user_id, metadata, now, reserve)
        return _returned(using, _on_conflict_sql(using), params, reserve)


_without_append_function: set[str] = set()
"""Aliases whose database lacks the append function (migrations not applied yet)."""


def forget_missing_functions(**kwargs: Any) -> None:
    """After ``migrate`` (``post_migrate``): look for the append function again."""
    _without_append_function.clear()


@dataclass(frozen=True, slots=True)
class OneStatementAppend:
    """PostgreSQL's append in one statement, ready to run on a connection."""

    connection: BaseDatabaseWrapper
    """Django's connection to the database, in the thread that runs the statement."""
    count: int
    sql: str
    params: list[Any]

    def outcome(self, row: Sequence[Any] | None) -> LockedConversation | None:
        """The conversation from the statement's row; ``None``: it wrote nothing."""
        return None if row is None else _locked(self.connection, row, self.count)

    def failed_for_want_of_the_function(self, error: BaseException | None) -> bool:
        """Whether the driver's ``error`` says the database has no append
        function; if so, this process appends in steps there until the next
        ``migrate`` and says so once."""
        if getattr(error, "sqlstate", None) != UNDEFINED_FUNCTION:
            return False
        using = self.connection.alias
        if using not in _without_append_function:
            _without_append_function.add(using)
            logger.warning(
                "The database of alias %r has no %s function: appends run in steps "
                "until `manage.py migrate` has run.",
                using,
                APPEND_FUNCTION,
            )
        return True


class PostgreSQLDialect(_OnConflictUpsert, _HandWrittenInsert):
    """An append is one call of a PL/pgSQL function, ``anvia_django_append``
    (migration 0005): one round trip, in autocommit its own transaction.

    The function runs the append in steps on the server: it locks the
    conversation row (or creates it), then checks the scope and the retry
    in statements of their own, whose snapshots under READ COMMITTED are
    taken after the lock was granted and so see every append committed
    before it; then it reserves the positions and inserts. The lock is
    held for the server's work only, never for a round trip, and PL/pgSQL
    keeps its statements' plans for the connection's life, which Django's
    default client-side binding would not. For another user's session or a
    retry it writes nothing and returns no row: the caller then appends in
    steps, which raise the scope error or recognise the retry. Without the
    function (migrations not applied yet) the caller appends in steps.
    """

    def one_statement_append(
        self, connection: BaseDatabaseWrapper, append: AppendRequest
    ) -> OneStatementAppend | None:
        if connection.alias in _without_append_function:
            return None
        stamp, metadata = _stamp_and_metadata(connection, append.now, append.metadata)
        encode = MemoryMessage._meta.get_field("message").get_db_prep_save
        stored = [encode(EncodedJSON(message), connection) for message in append.encoded]
        params = [
            *(new_ref(), append.session_id, append.user_id, append.user_id or None, stamp),
            *(metadata, append.run_id, append.turn, append.roles, stored),
        ]
        return OneStatementAppend(connection, len(append.encoded), _APPEND_CALL, params)

    def create_functions(self, connection: BaseDatabaseWrapper) -> None:
        with connection.cursor() as cursor:
            cursor.execute(_append_function_sql(connection.alias))

    def drop_functions(self, connection: BaseDatabaseWrapper) -> None:
        with connection.cursor() as cursor:
            cursor.execute(f"DROP FUNCTION IF EXISTS {APPEND_FUNCTION}({_APPEND_ARGUMENT_TYPES})")

    def insert_messages(
        self, using: str, rows: NewMessages, *, unless_retry_of: list[str] | None
    ) -> bool:
        if unless_retry_of is None:
            return super().insert_messages(using, rows, unless_retry_of=None)
        connection = connections[using]
        first, *rest = self._inserts(connection, rows)
        with connection.cursor() as cursor:
            # One statement: the tail is read from the statement's snapshot,
            # taken after the row lock was granted, and the INSERT's own rows
            # are invisible to it. Data-modifying CTEs run even unreferenced.
            cursor.execute(
                f"WITH tail AS ({_tail_sql(using)}), written AS ({first[0]}) SELECT * FROM tail",
                [*_tail_params(rows, unless_retry_of), *first[1]],
            )
            if _stored_tail(cursor) == _as_stored(connection, unless_retry_of):
                return False
            for sql, params in rest:
                cursor.execute(sql, params)
        return True

    def estimated_row_count(self, using: str, model: type[Model]) -> int | None:
        connection = connections[using]
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT reltuples::bigint FROM pg_class WHERE oid = to_regclass(%s)",
                [connection.ops.quote_name(model._meta.db_table)],
            )
            row = cursor.fetchone()
        # -1 (never analysed) or no row: no estimate.
        return int(row[0]) if row and row[0] >= 0 else None


class SQLiteDialect(_OnConflictUpsert, _HandWrittenInsert):
    """One writer at a time (``transaction_mode = "IMMEDIATE"``): the upsert
    runs under the database's write lock."""

    def append_under_write_lock(
        self, cursor: Any, connection: BaseDatabaseWrapper, append: AppendRequest
    ) -> LockedConversation | None:
        """The append's steps on ``cursor``, of a connection in a transaction
        that holds the write lock (the event loop's own, see
        :mod:`anvia_django.async_sqlite`): create or reserve, check the scope
        (raising :class:`ConversationScopeError`), check for a retry, insert.

        ``None``: a retry, nothing to write; the caller must roll back.
        """
        count = len(append.encoded)
        stamp, metadata = _stamp_and_metadata(connection, append.now, append.metadata)
        params = [new_ref(), append.session_id, append.user_id, stamp, stamp, count, metadata]
        cursor.execute(_on_conflict_sql(connection.alias), params)
        conversation = _locked(connection, cursor.fetchone(), count)
        check_scope(conversation.user_id, append.user_id)
        rows = NewMessages(
            conversation.id,
            conversation.first_position,
            append.run_id,
            append.turn,
            append.roles,
            append.encoded,
            conversation.updated_at,
        )
        retry_of = append.encoded if conversation.could_hold(count) else None
        if not self.insert_on(cursor, connection, rows, unless_retry_of=retry_of):
            return None
        return conversation


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
        user_id: str | None,
        metadata: JsonObject | None,
        now: datetime,
        reserve: int,
    ) -> LockedConversation:
        params = _conversation_params(using, session_id, user_id, metadata, now, reserve)
        sql, select = _duplicate_key_sql(using)
        connection = connections[using]
        with connection.cursor() as cursor:
            cursor.execute(sql, [*params, *params[4:]])
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

    def column_collation(self, connection: BaseDatabaseWrapper) -> str | None:
        # Binary and NO PAD: ids compare byte for byte, "a" != "A" != "a ",
        # and every text column is utf8mb4 whatever the table's default.
        if getattr(connection, "mysql_is_mariadb", False):
            return "utf8mb4_nopad_bin"
        version = cast(tuple[int, ...], getattr(connection, "mysql_version", (0,)))
        return "utf8mb4_0900_bin" if version >= (8, 0, 17) else "utf8mb4_bin"


class MariaDBDialect(MySQLDialect):
    """MariaDB 10.5+: ``ON DUPLICATE KEY UPDATE .. RETURNING`` in one statement."""

    def lock_conversation(
        self,
        using: str,
        *,
        session_id: str,
        user_id: str | None,
        metadata: JsonObject | None,
        now: datetime,
        reserve: int,
    ) -> LockedConversation:
        params = _conversation_params(using, session_id, user_id, metadata, now, reserve)
        sql, _ = _duplicate_key_sql(using)
        return _returned(
            using, f"{sql} RETURNING {_returned_columns(using)}", [*params, *params[4:]], reserve
        )


GENERIC = Dialect()
_POSTGRESQL = PostgreSQLDialect()
_SQLITE = SQLiteDialect()
_MYSQL = MySQLDialect()
_MARIADB = MariaDBDialect()


def dialect_for(using: str) -> Dialect:
    """The dialect the store uses on database ``using``: its vendor's, or the
    generic one where ``ANVIA_DJANGO["SQL_DIALECT"]`` says ``"generic"``."""
    return dialect_of(connections[using])


def dialect_of(connection: BaseDatabaseWrapper) -> Dialect:
    """:func:`dialect_for` the database of ``connection``, already at hand."""
    if app_settings.SQL_DIALECT == "generic":
        return GENERIC
    return vendor_dialect(connection)


def vendor_dialect(connection: BaseDatabaseWrapper) -> Dialect:
    """The dialect written for ``connection``'s vendor, else the generic one."""
    vendor = connection.vendor
    if vendor == "postgresql":
        return _POSTGRESQL
    if vendor == "sqlite":
        # RETURNING needs SQLite 3.35; Django 5.2 still runs on 3.31.
        return _SQLITE if connection.features.can_return_columns_from_insert else GENERIC
    if vendor == "mysql":
        return _MARIADB if connection.features.can_return_columns_from_insert else _MYSQL
    return GENERIC


def create_database_functions(connection: BaseDatabaseWrapper) -> None:
    """What migration 0005 creates: the functions ``connection``'s dialect calls."""
    vendor_dialect(connection).create_functions(connection)


def drop_database_functions(connection: BaseDatabaseWrapper) -> None:
    vendor_dialect(connection).drop_functions(connection)


def has_async_driver(connection: BaseDatabaseWrapper) -> bool:
    """Whether ``connection``'s driver has async connections (psycopg 3)."""
    if connection.vendor != "postgresql":
        return False
    from django.db.backends.postgresql.psycopg_any import is_psycopg3

    return is_psycopg3


def one_writer_at_a_time(connection: BaseDatabaseWrapper) -> bool:
    """Whether the database runs one writing transaction at a time (SQLite)."""
    return bool(connection.vendor == "sqlite")


def unknown_vendor(connection: BaseDatabaseWrapper) -> str | None:
    """The vendor name of ``connection`` if no dialect here is written for it."""
    return None if connection.vendor in ("postgresql", "sqlite", "mysql") else connection.vendor


def column_collation(connection: BaseDatabaseWrapper) -> str | None:
    """The collation this app's text columns get on ``connection``."""
    return vendor_dialect(connection).column_collation(connection)


def estimated_row_count(using: str, model: type[Model]) -> int | None:
    """The planner's row estimate for ``model``'s table, where there is one
    (PostgreSQL): for counts that must not scan a huge table."""
    return vendor_dialect(connections[using]).estimated_row_count(using, model)


# The SQL, built once per alias from the models' own column names.

_RETURNED = ("id", "ref", "user_id", "message_count", "updated_at")
_INSERT_COLUMNS = ("conversation", "position", "run_id", "turn", "role", "message", "created_at")


def _conversation_params(
    using: str,
    session_id: str,
    user_id: str | None,
    metadata: JsonObject | None,
    now: datetime,
    reserve: int,
) -> list[Any]:
    stamp, encoded = _stamp_and_metadata(connections[using], now, metadata)
    # (ref, session_id, user_id, created_at, updated_at, message_count, metadata)
    return [new_ref(), session_id, user_id, stamp, stamp, reserve, encoded]


def _stamp_and_metadata(
    connection: BaseDatabaseWrapper, now: datetime, metadata: JsonObject | None
) -> tuple[Any, Any]:
    """``now`` and ``metadata`` as a conversation row's parameters."""
    meta = Conversation._meta
    # created_at and updated_at are alike DateTimeFields: one conversion serves both.
    stamp = meta.get_field("updated_at").get_db_prep_save(now, connection)
    return stamp, meta.get_field("metadata").get_db_prep_save(metadata, connection)


def _returned(using: str, sql: str, params: Sequence[Any], reserve: int) -> LockedConversation:
    connection = connections[using]
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        row = cursor.fetchone()
    assert row is not None
    return _locked(connection, row, reserve)


def _locked(
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


def _quoted(using: str, model: type[Model]) -> tuple[str, dict[str, str]]:
    quote = connections[using].ops.quote_name
    columns = {field.name: quote(cast(str, field.column)) for field in model._meta.concrete_fields}
    return quote(model._meta.db_table), columns


def _returned_columns(using: str) -> str:
    _, c = _quoted(using, Conversation)
    return ", ".join(c[name] for name in _RETURNED)


_CONVERSATION_INSERT = (
    "INSERT INTO {table} ({ref}, {session_id}, {user_id}, {created_at}, {updated_at}, "
    "{message_count}, {metadata}) VALUES (%s, %s, %s, %s, %s, %s, %s) "
)


@lru_cache(maxsize=16)
def _on_conflict_upsert(using: str) -> str:
    """The conversation upsert, without its ``RETURNING`` clause."""
    table, c = _quoted(using, Conversation)
    return _CONVERSATION_INSERT.format(table=table, **c) + (
        f"ON CONFLICT ({c['session_id']}) DO UPDATE SET "
        # Never backwards: a writer that read the clock, then queued on the
        # lock behind a later one, must not move the conversation back in time.
        f"{c['updated_at']} = CASE WHEN EXCLUDED.{c['updated_at']} > {table}.{c['updated_at']} "
        f"THEN EXCLUDED.{c['updated_at']} ELSE {table}.{c['updated_at']} END, "
        f"{c['message_count']} = {table}.{c['message_count']} + EXCLUDED.{c['message_count']}, "
        f"{c['metadata']} = COALESCE(EXCLUDED.{c['metadata']}, {table}.{c['metadata']})"
    )


@lru_cache(maxsize=16)
def _on_conflict_sql(using: str) -> str:
    return f"{_on_conflict_upsert(using)} RETURNING {_returned_columns(using)}"


APPEND_FUNCTION = "anvia_django_append"
_APPEND_ARGUMENT_TYPES = "text, text, text, text, timestamptz, text, text, integer, text[], text[]"
_APPEND_CALL = (
    f"SELECT * FROM {APPEND_FUNCTION}("
    + ", ".join(f"%s::{kind}" for kind in _APPEND_ARGUMENT_TYPES.split(", "))
    + ")"
)
UNDEFINED_FUNCTION = "42883"


@lru_cache(maxsize=1)
def _append_group_sql() -> str:
    kinds = _APPEND_ARGUMENT_TYPES.split(", ")
    *scalars, _roles, _messages = kinds
    columns = [f"a{number}" for number in range(len(scalars))]
    arrays = ", ".join(f"%b::{kind}[]" for kind in [*scalars, "integer", "integer"])
    return (
        f"SELECT g.ordinality, r.* FROM unnest({arrays}) "
        f"WITH ORDINALITY AS g({', '.join(columns)}, first, last, ordinality) "
        f"CROSS JOIN LATERAL {APPEND_FUNCTION}("
        + ", ".join(f"g.{column}" for column in columns)
        + ", (%b::text[])[g.first:g.last], (%b::text[])[g.first:g.last]) AS r"
    )


def append_group(appends: Sequence[OneStatementAppend]) -> tuple[str, list[Any]]:
    """Several appends as one statement for psycopg (binary parameters), the
    function called once per append in their order: one row per append that
    wrote, its 1-based index in ``appends`` first, then its
    :meth:`OneStatementAppend.outcome` row.

    One statement instead of one per append: the group's parameters are
    twelve arrays, which the client composes and the server parses once.
    """
    calls = [append.params for append in appends]
    scalars = [list(column) for column in zip(*(call[:-2] for call in calls), strict=True)]
    roles: list[Any] = []
    messages: list[Any] = []
    firsts: list[int] = []
    lasts: list[int] = []
    for call in calls:
        firsts.append(len(messages) + 1)
        roles.extend(call[-2])
        messages.extend(call[-1])
        lasts.append(len(messages))
    return _append_group_sql(), [*scalars, firsts, lasts, roles, messages]


def _append_function_sql(using: str) -> str:
    """PostgreSQL's append as a PL/pgSQL function (see :class:`PostgreSQLDialect`).

    Arguments: ref, session id and user id for a new row, the caller's user
    id for the scope check (NULL: trusted code), the time, metadata, run
    id, turn, roles and messages. Returns ``_RETURNED``'s columns, or no
    row when it wrote nothing.
    """
    table, c = _quoted(using, Conversation)
    messages, m = _quoted(using, MemoryMessage)
    columns = ", ".join(m[name] for name in _INSERT_COLUMNS)
    found = "found_id, found_ref, found_user, found_count, found_at"
    returned = ", ".join(f"t.{c[name]}" for name in _RETURNED)
    return f"""
CREATE OR REPLACE FUNCTION {APPEND_FUNCTION}(
    p_ref text, p_session text, p_user text, p_scope text, p_now timestamptz,
    p_metadata text, p_run text, p_turn integer, p_roles text[], p_messages text[]
) RETURNS TABLE (
    out_id bigint, out_ref text, out_user text, out_count integer, out_updated_at timestamptz
) LANGUAGE plpgsql VOLATILE
-- Each statement below finds its rows through an index. PL/pgSQL keeps
-- their plans for the connection's life: planned while the tables were
-- empty (just migrated, or analysed when empty) they would scan whole
-- tables for as long as the connection lives.
SET enable_seqscan = off
AS $append$
DECLARE
    n integer := cardinality(p_messages);
    found_id bigint;
    found_ref text;
    found_user text;
    found_count integer;
    found_at timestamptz;
BEGIN
    LOOP
        SELECT {returned} INTO {found}
            FROM {table} t WHERE t.{c["session_id"]} = p_session FOR UPDATE;
        IF FOUND THEN
            -- Under the row lock: the statements below see every append
            -- committed before this one.
            IF p_scope IS NOT NULL AND found_user IS DISTINCT FROM p_scope THEN
                RETURN;
            END IF;
            IF found_count >= n AND ARRAY(
                SELECT s.{m["message"]} FROM {messages} s
                WHERE s.{m["conversation"]} = found_id AND s.{m["run_id"]} = p_run
                    AND s.{m["turn"]} = p_turn
                ORDER BY s.{m["position"]} DESC LIMIT n
            ) = ARRAY(
                SELECT a.message FROM unnest(p_messages) WITH ORDINALITY AS a(message, ordinality)
                ORDER BY a.ordinality DESC
            ) THEN
                RETURN;
            END IF;
            -- Never backwards: a writer that read the clock, then queued on
            -- the lock behind a later one, must not move the conversation back.
            UPDATE {table} t SET {c["message_count"]} = t.{c["message_count"]} + n,
                {c["updated_at"]} = GREATEST(t.{c["updated_at"]}, p_now),
                {c["metadata"]} = COALESCE(p_metadata, t.{c["metadata"]})
                WHERE t.{c["id"]} = found_id
                RETURNING t.{c["message_count"]}, t.{c["updated_at"]} INTO found_count, found_at;
            EXIT;
        END IF;
        INSERT INTO {table} AS t ({c["ref"]}, {c["session_id"]}, {c["user_id"]},
                {c["created_at"]}, {c["updated_at"]}, {c["message_count"]}, {c["metadata"]})
            VALUES (p_ref, p_session, p_user, p_now, p_now, n, p_metadata)
            ON CONFLICT ({c["session_id"]}) DO NOTHING
            RETURNING {returned} INTO {found};
        -- Not found: another writer created the session first; lock its row.
        EXIT WHEN FOUND;
    END LOOP;
    INSERT INTO {messages} ({columns})
        SELECT found_id, found_count - n + a.ordinality - 1, p_run, p_turn, a.role, a.message,
            found_at
        FROM unnest(p_roles, p_messages) WITH ORDINALITY AS a(role, message, ordinality);
    RETURN QUERY SELECT found_id, found_ref, found_user, found_count, found_at;
END
$append$
"""


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


@lru_cache(maxsize=64)
def _insert_sql(using: str, rows: int) -> str:
    table, c = _quoted(using, MemoryMessage)
    columns = ", ".join(c[name] for name in _INSERT_COLUMNS)
    row = "(" + ", ".join(["%s"] * len(_INSERT_COLUMNS)) + ")"
    return f"INSERT INTO {table} ({columns}) VALUES " + ", ".join([row] * rows)


@lru_cache(maxsize=16)
def _tail_sql(using: str) -> str:
    table, c = _quoted(using, MemoryMessage)
    return (
        f"SELECT {c['message']} FROM {table} WHERE {c['conversation']} = %s "
        f"AND {c['run_id']} = %s AND {c['turn']} = %s ORDER BY {c['position']} DESC LIMIT %s"
    )


def _tail_params(rows: NewMessages, messages: list[str]) -> list[Any]:
    return [rows.conversation_id, rows.run_id, rows.turn, len(messages)]


def _stored_tail(cursor: Any) -> list[str]:
    """The tail query's rows (newest first) as stored, in position order."""
    return _in_position_order([row[0] for row in cursor.fetchall()])


def _as_stored(connection: BaseDatabaseWrapper, encoded: list[str]) -> list[Any]:
    """``encoded`` as the message column holds it: what the field makes of it.

    A retry is recognised by comparing column values, not decoded messages:
    in Python ``True == 1 == 1.0`` would call different messages equal.
    """
    encode = MemoryMessage._meta.get_field("message").get_db_prep_save
    return [encode(EncodedJSON(message), connection) for message in encoded]


def _row_values(connection: BaseDatabaseWrapper, rows: NewMessages) -> list[tuple[Any, ...]]:
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
