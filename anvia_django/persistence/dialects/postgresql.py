"""PostgreSQL: an append is one call of the database function that
migrations 0005, 0006 and 0008 create (their SQL is frozen there)."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

from django.db import connections
from django.db.backends.base.base import BaseDatabaseWrapper
from django.db.models import Model

from anvia_django.fields import EncodedJSON
from anvia_django.models import MemoryMessage, new_ref
from anvia_django.persistence.codec import Codec
from anvia_django.persistence.retry_check import is_retry

from .base import AppendRequest, LockedConversation, NewMessages
from .functions import FunctionMissing, call_function
from .statements import (
    HandWrittenInsert,
    OnConflictUpsert,
    locked_from_row,
    stamp_and_metadata,
    tail_params,
    tail_sql,
)

logger = logging.getLogger(__name__)

APPEND_FUNCTION = "anvia_django_append"
APPEND_ARGUMENT_TYPES = (
    "text, text, text, text, text, timestamptz, text, text, integer, text[], text[]"
)
_APPEND_CALL = (
    f"SELECT * FROM {APPEND_FUNCTION}("
    + ", ".join(f"%s::{kind}" for kind in APPEND_ARGUMENT_TYPES.split(", "))
    + ")"
)


def _append_group_sql() -> str:
    """Several appends as one statement: the function called once per
    append, in order, over arrays of their arguments (the messages of all of
    them in two flat arrays, each append's slice given by ``first`` and
    ``last``). One row per append that wrote: its 1-based index, then the
    function's row."""
    *scalars, _roles, _messages = APPEND_ARGUMENT_TYPES.split(", ")
    columns = [f"a{number}" for number in range(len(scalars))]
    arrays = ", ".join(f"%s::{kind}[]" for kind in [*scalars, "integer", "integer"])
    return (
        f"SELECT g.ordinality, r.* FROM unnest({arrays}) "
        f"WITH ORDINALITY AS g({', '.join(columns)}, first, last, ordinality) "
        f"CROSS JOIN LATERAL {APPEND_FUNCTION}("
        + ", ".join(f"g.{column}" for column in columns)
        + ", (%s::text[])[g.first:g.last], (%s::text[])[g.first:g.last]) AS r"
        " ORDER BY g.ordinality"
    )


_APPEND_GROUP = _append_group_sql()

_without_append_function: set[str] = set()
"""Aliases whose database lacks the append function (migrations not applied yet)."""


def forget_missing_functions(**kwargs: object) -> None:
    """After ``migrate`` (``post_migrate``): look for the append function again."""
    _without_append_function.clear()


class PostgreSQLDialect(OnConflictUpsert, HandWrittenInsert):
    """An append is one call of a PL/pgSQL function, ``anvia_django_append``:
    one round trip, in autocommit its own transaction.

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

    def append_in_one_statement(
        self, using: str, append: AppendRequest, codec: Codec
    ) -> LockedConversation | None:
        if not self.appends_in_one_statement(using, codec):
            return None
        connection = connections[using]
        try:
            rows = call_function(using, _APPEND_CALL, self._call_params(connection, append))
        except FunctionMissing:
            _note_missing_function(using)
            return None
        if not rows:
            return None
        return locked_from_row(connection, rows[0], len(append.encoded))

    def appends_in_one_statement(self, using: str, codec: Codec) -> bool:
        # The function compares a retried tail in SQL: plain text only.
        return codec.compares_in_sql and using not in _without_append_function

    def append_group(
        self, using: str, appends: Sequence[AppendRequest]
    ) -> list[LockedConversation | None]:
        connection = connections[using]
        calls = [self._call_params(connection, append) for append in appends]
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
        with connection.cursor() as cursor:
            cursor.execute(_APPEND_GROUP, [*scalars, firsts, lasts, roles, messages])
            rows = cursor.fetchall()
        written: list[LockedConversation | None] = [None] * len(appends)
        for ordinality, *row in rows:
            written[ordinality - 1] = locked_from_row(
                connection, row, len(appends[ordinality - 1].encoded)
            )
        return written

    def insert_messages(
        self, using: str, rows: NewMessages, *, retry_of: list[str] | None, codec: Codec
    ) -> bool:
        if retry_of is None:
            return super().insert_messages(using, rows, retry_of=None, codec=codec)
        connection = connections[using]
        first, *rest = self.insert_statements(connection, rows)
        with connection.cursor() as cursor:
            # One statement: the tail is read from the statement's snapshot,
            # taken after the row lock was granted, and the INSERT's own rows
            # are invisible to it. Data-modifying CTEs run even unreferenced.
            cursor.execute(
                f"WITH tail AS ({tail_sql(using)}), written AS ({first[0]}) SELECT * FROM tail",
                [*tail_params(rows, len(retry_of)), *first[1]],
            )
            if is_retry(codec, rows.conversation_id, cursor.fetchall(), retry_of):
                return False
            for sql, params in rest:
                cursor.execute(sql, params)
        return True

    def _call_params(self, connection: BaseDatabaseWrapper, append: AppendRequest) -> list[Any]:
        """The append function's arguments for ``append``."""
        stamp, metadata = stamp_and_metadata(connection, append.now, append.metadata)
        encode = MemoryMessage._meta.get_field("message").get_db_prep_save
        stored = [encode(EncodedJSON(message), connection) for message in append.encoded]
        return [
            *(new_ref(), append.session_id, append.scope_key, append.user_id),
            *(append.user_id or None, stamp),
            *(metadata, append.run_id, append.turn, append.roles, stored),
        ]

    def compact(self, using: str, models: Sequence[type[Model]]) -> list[str]:
        """``VACUUM`` each table: dead row versions (the deleted rows, and
        the old versions of updated ones) stay in its pages until it runs.
        It cannot run inside a transaction block: there, the statements
        are left to the operator."""
        connection = connections[using]
        statements = [
            f"VACUUM {connection.ops.quote_name(model._meta.db_table)}" for model in models
        ]
        if connection.in_atomic_block:
            return statements
        with connection.cursor() as cursor:
            for statement in statements:
                cursor.execute(statement)
        return []

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


def _note_missing_function(using: str) -> None:
    """Append in steps on ``using`` until the next ``migrate``, and say so once."""
    if using not in _without_append_function:
        _without_append_function.add(using)
        logger.warning(
            "The database of alias %r has no %s function: appends run in steps "
            "until `manage.py migrate` has run.",
            using,
            APPEND_FUNCTION,
        )
