"""Calling a database function that a migration created (PostgreSQL's
append function, LangGraph's put and read functions): one statement."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from django.db import ProgrammingError, connections

from anvia_django.persistence.one_statement import one_statement, refuse

UNDEFINED_FUNCTION = "42883"


class FunctionMissing(Exception):
    """The database lacks the function: its migration has not run yet."""


def call_function(
    using: str,
    sql: str,
    params: Sequence[Any],
    *,
    wrote: Callable[[list[tuple[Any, ...]]], bool] | None = None,
) -> list[tuple[Any, ...]]:
    """The rows ``sql`` (a call) returns on ``using``; ``wrote``, when
    given, tells from them whether the call wrote (else, inside a caller's
    transaction, its savepoint is rolled back: no lock it took is kept).
    Raises :class:`FunctionMissing` where the function does not exist."""
    try:
        # Inside the caller's transaction a savepoint, so that a missing
        # function leaves it usable; in autocommit the call is a transaction.
        with one_statement(using), connections[using].cursor() as cursor:
            cursor.execute(sql, params)
            rows = [tuple(row) for row in cursor.fetchall()]
            if wrote is not None and not wrote(rows):
                refuse(using)
    except ProgrammingError as error:
        if getattr(error.__cause__, "sqlstate", None) != UNDEFINED_FUNCTION:
            raise
        raise FunctionMissing(sql) from error
    return rows
