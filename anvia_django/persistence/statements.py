"""Hand-written SELECTs that give back exactly what ``values_list`` would.

For the hottest reads (a 50-row listing page, a message page) building and
compiling a queryset costs more than the database takes to answer, so their
SQL is written once per alias and cached. The rows still go through the
converters the ORM applies to those columns (the backend's, then the
field's ``from_db_value``), so callers see the same values either way.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, cast

from django.db import connections
from django.db.models import Field, Model

Converter = Callable[[Any, Any, Any], Any]

SUPPORTED_VENDORS = ("postgresql", "sqlite")
"""Where the hand-written SQL (row-value keyset comparisons) is known to work
and use the indexes; other backends keep the ORM path."""


def supported(using: str) -> bool:
    return connections[using].vendor in SUPPORTED_VENDORS


@dataclass(frozen=True, slots=True)
class Columns:
    """Quoted column names of some fields of one model, and their converters."""

    table: str
    names: dict[str, str]
    converters: tuple[tuple[int, tuple[Converter, ...], Any], ...]
    """(index in the select list, converters, the column expression)."""

    def select(self, fields: Sequence[str], prefix: str = "") -> str:
        return ", ".join(f"{prefix}{self.names[name]}" for name in fields)


@lru_cache(maxsize=64)
def columns(using: str, model: type[Model], fields: tuple[str, ...]) -> Columns:
    """Column names of ``fields`` of ``model`` on ``using`` and the converters
    the ORM would apply to a select list of exactly those fields."""
    connection = connections[using]
    quote = connection.ops.quote_name
    meta = model._meta
    names = {}
    converters = []
    for index, name in enumerate(fields):
        field = cast("Field[Any, Any]", meta.get_field(name))
        names[name] = quote(cast(str, field.column))
        expression = field.get_col(meta.db_table)
        found = tuple(
            connection.ops.get_db_converters(expression) + expression.get_db_converters(connection)
        )
        if found:
            converters.append((index, found, expression))
    return Columns(quote(meta.db_table), names, tuple(converters))


def fetch(
    using: str, sql: str, params: Sequence[Any], spec: Columns, *, offset: int = 0
) -> list[tuple[Any, ...]]:
    """Run ``sql`` and convert the columns ``spec`` describes, which start at
    ``offset`` in each row."""
    connection = connections[using]
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        rows = cursor.fetchall()
    if not spec.converters:
        return [tuple(row) for row in rows]
    converted = []
    for row in rows:
        values = list(row)
        for index, functions, expression in spec.converters:
            value = values[offset + index]
            for function in functions:
                value = function(value, expression, connection)
            values[offset + index] = value
        converted.append(tuple(values))
    return converted
