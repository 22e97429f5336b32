"""Calling a database function that a migration created (PostgreSQL's
append function, LangGraph's put and read functions): one statement."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from django.db import ProgrammingError, connections, transaction

UNDEFINED_FUNCTION = "42883"


class FunctionMissing(Exception):
    """The database lacks the function: its migration has not run yet."""


def call_function(using: str, sql: str, params: Sequence[Any]) -> list[tuple[Any, ...]]:
    """The rows ``sql`` (a call) returns on ``using``. Raises
    :class:`FunctionMissing` where the function does not exist."""
    connection = connections[using]
    try:
        # Inside the caller's transaction a savepoint, so that a missing
        # function leaves it usable; in autocommit the call is a transaction.
        if connection.in_atomic_block:
            with transaction.atomic(using=using), connection.cursor() as cursor:
                cursor.execute(sql, params)
                rows = cursor.fetchall()
        else:
            with connection.cursor() as cursor:
                cursor.execute(sql, params)
                rows = cursor.fetchall()
    except ProgrammingError as error:
        if getattr(error.__cause__, "sqlstate", None) != UNDEFINED_FUNCTION:
            raise
        raise FunctionMissing(sql) from error
    return [tuple(row) for row in rows]
