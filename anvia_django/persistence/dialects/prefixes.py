"""Rows whose id column starts with a prefix, compared exactly and served
by the column's index.

Where the column orders strings by code point, the prefix is a range of
that order: exact, and what a B-tree index serves. SQLite's ``BINARY``
(its ``LIKE`` would ignore ASCII case), and PostgreSQL on a database whose
collation is libc's ``C``, ``POSIX`` or ``C.UTF-8`` (the planner serves
``LIKE`` from the index only for ``C`` itself). On MariaDB and MySQL a
plain ``LIKE 'prefix%'`` (its wildcards escaped): exact on this app's id
columns, whose collation is binary (``fields.py``), and a range of their
index. Not Django's ``startswith``, which is ``LIKE BINARY`` there: the
cast leaves the optimizer no range, and it reads the whole index. On
PostgreSQL's other deterministic collations, Django's ``startswith``:
``LIKE``, exact, but a scan (a range of a language's order would leave
matches out).
"""

from __future__ import annotations

from typing import Any, cast

from django.db import connections
from django.db.models import F, Q
from django.db.models.lookups import StartsWith

SURROGATES = range(0xD800, 0xE000)
CODE_POINT_COLLATIONS = frozenset({"C", "POSIX", "C.UTF-8", "C.utf8"})

_code_point_order: dict[tuple[str, str], bool] = {}
"""(alias, database name) -> whether PostgreSQL orders its text by code point."""


def starts_with(using: str, field: str, prefix: str) -> Q:
    """``field`` starts with ``prefix`` (case and all) on database ``using``;
    ``field`` one of this app's id columns (``IdentifierField``: binary on MySQL)."""
    if connections[using].vendor == "mysql":
        return Q(_BinaryColumnLike(F(field), prefix))
    if not _orders_by_code_point(using):
        return Q(**{f"{field}__startswith": prefix})
    above = following(prefix)
    lower = Q(**{f"{field}__gte": prefix})
    return lower if above is None else lower & Q(**{f"{field}__lt": above})


class _BinaryColumnLike(StartsWith):
    """``LIKE 'prefix%'`` without Django's ``BINARY`` on MySQL and MariaDB:
    exact on a column of binary collation alone."""

    def get_rhs_op(self, connection: Any, rhs: str) -> str:
        return f"LIKE {rhs}"


def _orders_by_code_point(using: str) -> bool:
    connection = connections[using]
    if connection.vendor == "sqlite":
        return True
    if connection.vendor != "postgresql":
        return False
    key = (using, str(connection.settings_dict["NAME"]))
    known = _code_point_order.get(key)
    if known is None:
        version = cast(int, getattr(connection, "pg_version", 0))
        provider = "datlocprovider" if version >= 150000 else "'c'"
        with connection.cursor() as cursor:
            cursor.execute(
                f"SELECT datcollate, {provider} FROM pg_database WHERE datname = current_database()"
            )
            collate, kind = cursor.fetchone()
        known = _code_point_order[key] = kind == "c" and collate in CODE_POINT_COLLATIONS
    return known


def following(prefix: str) -> str | None:
    """The least string greater than every string that starts with
    ``prefix``; ``None`` when there is none (only code point U+10FFFF)."""
    text = prefix
    while text:
        point = ord(text[-1]) + 1
        if point in SURROGATES:  # not text SQLite can hold
            point = SURROGATES.stop
        if point <= 0x10FFFF:
            return text[:-1] + chr(point)
        text = text[:-1]
    return None
