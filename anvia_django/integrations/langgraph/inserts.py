"""The saver's INSERTs, compiled once per table, row count and conflict
clause: Django's own SQL for ``bulk_create`` (its backend's ``INSERT ..
ON CONFLICT``, ``INSERT IGNORE``, ``ON DUPLICATE KEY UPDATE``), without
building model instances and compiling the statement on every put (about
a tenth of a put on SQLite). Each value still goes through its field
(``get_db_prep_save``), as ``bulk_create`` sends it."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, cast

from django.db import connections
from django.db.models import Field, Model
from django.db.models.constants import OnConflict
from django.db.models.sql import InsertQuery

from anvia_django.persistence.dialects.upserts import conflict_target


@dataclass(frozen=True)
class CompiledInsert:
    sql: str
    fields: tuple[Field[Any, Any], ...]

    def run(self, using: str, rows: Sequence[Sequence[Any]]) -> None:
        """Insert ``rows``, each the values of ``fields`` in order."""
        connection = connections[using]
        params = [
            field.get_db_prep_save(value, connection)
            for row in rows
            for field, value in zip(self.fields, row, strict=True)
        ]
        with connection.cursor() as cursor:
            cursor.execute(self.sql, params)


def insert(
    using: str,
    model: type[Model],
    columns: tuple[str, ...],
    rows: Sequence[Sequence[Any]],
    *,
    keep: tuple[str, ...] | None = None,
    replace: tuple[str, ...] = (),
) -> None:
    """Insert ``rows`` of ``columns`` into ``model``'s table. A row whose
    unique key ``keep`` is stored already: kept as it is, or with
    ``replace`` given, those columns replaced (``bulk_create``'s
    ``ignore_conflicts`` and ``update_conflicts``)."""
    _compiled(using, model, columns, len(rows), keep, replace).run(using, rows)


@lru_cache(maxsize=64)
def _compiled(
    using: str,
    model: type[Model],
    columns: tuple[str, ...],
    count: int,
    keep: tuple[str, ...] | None,
    replace: tuple[str, ...],
) -> CompiledInsert:
    meta = model._meta
    fields = tuple(cast("Field[Any, Any]", meta.get_field(name)) for name in columns)
    on_conflict = None
    unique: list[Any] = []
    if keep is not None:
        on_conflict = OnConflict.UPDATE if replace else OnConflict.IGNORE
        if replace:
            unique = [meta.get_field(name) for name in conflict_target(using, keep) or ()]
    query = InsertQuery(
        model,
        on_conflict=on_conflict,
        update_fields=[meta.get_field(name) for name in replace],
        unique_fields=unique,
    )
    # Placeholder rows: the SQL depends on their number, not their values.
    query.insert_values(list(fields), [model() for _ in range(count)])
    ((sql, _),) = query.get_compiler(using=using).as_sql()
    return CompiledInsert(sql, fields)
