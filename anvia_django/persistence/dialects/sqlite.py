"""SQLite (3.35+, for ``RETURNING``): one writer at a time."""

from __future__ import annotations

from typing import cast

from django.db import connections, transaction

from anvia_django.models import Conversation

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
