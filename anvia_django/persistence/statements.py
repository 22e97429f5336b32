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
from datetime import datetime, tzinfo
from functools import lru_cache
from typing import Any, cast

from django.conf import settings
from django.db import connections
from django.db.backends.base.base import BaseDatabaseWrapper
from django.db.models import DateTimeField, Field, Model
from django.utils.dateparse import parse_datetime

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
    converted: tuple[tuple[int, Any], ...]
    """(index in the select list, column expression) of the columns the ORM
    converts; the converters come from the connection at fetch time (a
    connection belongs to one thread, this cache to all of them)."""

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


def _bound_converters(connection: BaseDatabaseWrapper, expression: Any) -> list[Converter]:
    found = _converters(connection, expression)
    if connection.vendor == "sqlite" and isinstance(expression.output_field, DateTimeField):
        # Django's SQLite datetime converter reads settings.USE_TZ and the
        # connection's zone for every value, which costs more than the rest
        # of a listing page; this one does the same with both read once.
        exact = getattr(connection.ops, "convert_datetimefield_value", None)
        zone = connection.timezone if settings.USE_TZ else None
        found = [_sqlite_datetime(zone) if f == exact else f for f in found]
    return found


def _sqlite_datetime(zone: tzinfo | None) -> Converter:
    """``DatabaseOperations.convert_datetimefield_value`` of Django's SQLite
    backend, for one ``USE_TZ`` setting and connection time zone."""

    def convert(value: Any, expression: Any, connection: Any) -> Any:
        if value is None:
            return None
        if not isinstance(value, datetime):
            value = parse_datetime(value)
        if zone is not None and value.utcoffset() is None:
            value = value.replace(tzinfo=zone)
        return value

    return convert


def fetch(
    using: str, sql: str, params: Sequence[Any], spec: Columns, *, offset: int = 0
) -> list[tuple[Any, ...]]:
    """Run ``sql`` and convert the columns ``spec`` describes, which start at
    ``offset`` in each row."""
    connection = connections[using]
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        rows = cursor.fetchall()
    if not spec.converted:
        return [tuple(row) for row in rows]
    columns = [
        (offset + index, _bound_converters(connection, expression), expression)
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
