"""SQLite (3.35+, for ``RETURNING``): one writer at a time."""

from __future__ import annotations

from collections.abc import Sequence
from typing import cast

from django.db import connections, transaction
from django.db.models import Model

from anvia_django.models import Conversation, MemoryMessage

from .full_text import FTS_TABLE, sqlite_has_fts5
from .statements import HandWrittenInsert, OnConflictUpsert


class SQLiteDialect(OnConflictUpsert, HandWrittenInsert):
    """One writer at a time (``transaction_mode = "IMMEDIATE"``): the upsert
    runs under the database's write lock.

    Tried and not kept: the retry check as a scalar subquery in the upsert's
    ``RETURNING`` (two statements an append instead of three). Measured
    within one process, alternating, it saved nothing (192 against 188 µs an
    append inside a transaction): the window query cost what the statement
    did.
    """

    def compact(self, using: str, models: Sequence[type[Model]]) -> list[str]:
        """Merge the full-text index's segments (FTS5 ``optimize``): a
        deleted message's words stay in the segments of the contentless
        FTS5 table until then. Runs in a transaction too. The tables' own
        freed pages are a matter of ``PRAGMA secure_delete`` or ``VACUUM``
        (docs/production.md)."""
        connection = connections[using]
        if MemoryMessage in models and sqlite_has_fts5(connection):
            with connection.cursor() as cursor:
                cursor.execute(f"INSERT INTO {FTS_TABLE} ({FTS_TABLE}) VALUES ('optimize')")
        return []

    def wait_for_writes_in_flight(self, using: str) -> None:
        # One writer at a time: taking the write lock waits for the one in
        # flight. A write statement takes it even when it matches no row
        # (whatever the transaction mode).
        connection = connections[using]
        quote = connection.ops.quote_name
        table = quote(Conversation._meta.db_table)
        pk = quote(cast(str, Conversation._meta.pk.column))
        with transaction.atomic(using=using), connection.cursor() as cursor:
            cursor.execute(f"UPDATE {table} SET {pk} = {pk} WHERE 0 = 1")
