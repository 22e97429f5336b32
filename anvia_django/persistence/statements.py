"""Rows of hand-written statements, converted as ``values_list`` would.

Only the conversation upsert of ``locking.py`` still writes its SQL by hand
(every read is a queryset). Its ``RETURNING`` row goes through the
converters the ORM applies to those columns (the backend's, then the
field's ``from_db_value``), so callers see the values a queryset would give.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, cast

from django.db import connections
from django.db.backends.base.base import BaseDatabaseWrapper
from django.db.models import Field, Model

Converter = Callable[[Any, Any, Any], Any]


@dataclass(frozen=True, slots=True)
class Columns:
    """Quoted column names of some fields of one model, and their converters."""

    table: str
    names: dict[str, str]
    converted: tuple[tuple[int, Any], ...]
    """(index in the select list, column expression) of the columns the ORM
    converts; the converters come from the connection at fetch time (a
    connection belongs to one thread, this cache to all of them)."""


@lru_cache(maxsize=64)
def columns(using: str, model: type[Model], fields: tuple[str, ...]) -> Columns:
    """Column names of ``fields`` of ``model`` on ``using`` and the converters
    the ORM would apply to a select list of exactly those fields."""
    connection = connections[using]
    quote = connection.ops.quote_name
    meta = model._meta
    names = {}
    converted = []
    for index, name in enumerate(fields):
        field = cast("Field[Any, Any]", meta.get_field(name))
        names[name] = quote(cast(str, field.column))
        expression = field.get_col(meta.db_table)
        if _converters(connection, expression):
            converted.append((index, expression))
    return Columns(quote(meta.db_table), names, tuple(converted))


def _converters(connection: BaseDatabaseWrapper, expression: Any) -> list[Converter]:
    # The compiler's order: the backend's converters, then the field's.
    return list(connection.ops.get_db_converters(expression)) + list(
        expression.get_db_converters(connection)
    )


def fetch(using: str, sql: str, params: Sequence[Any], spec: Columns) -> list[tuple[Any, ...]]:
    """Run ``sql`` and convert the columns ``spec`` describes."""
    connection = connections[using]
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        rows = cursor.fetchall()
    if not spec.converted:
        return [tuple(row) for row in rows]
    columns = [
        (index, _converters(connection, expression), expression)
        for index, expression in spec.converted
    ]
    converted = []
    for row in rows:
        values = list(row)
        for index, functions, expression in columns:
            value = values[index]
            for function in functions:
                value = function(value, expression, connection)
            values[index] = value
        converted.append(tuple(values))
    return converted
