"""SQLite (3.35+, for ``RETURNING``): one writer at a time."""

from __future__ import annotations

from .statements import _HandWrittenInsert, _OnConflictUpsert


class SQLiteDialect(_OnConflictUpsert, _HandWrittenInsert):
    """One writer at a time (``transaction_mode = "IMMEDIATE"``): the upsert
    runs under the database's write lock."""
