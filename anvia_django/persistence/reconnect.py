"""The one place where store calls are retried: a lost connection, a deadlock.

**A lost connection.** Django notices a dead connection (server restart,
idle timeout, a killed backend) only when a query fails on it, and
reconnects at the start of the next request. Agent runs are not requests,
so without this the first store call after a lost connection would fail
although the database is fine. Such a call runs once more, on a fresh
connection.

A call that is safe to repeat (``idempotent``, the default) is repeated
whenever its connection was lost: every write is one transaction, a retried
append is idempotent (if the connection died after the commit reached the
server, the second attempt recognises the stored messages and writes
nothing), and clearing twice is clearing once. A failed-run record could,
in that rare commit-time case, be kept twice; it is a diagnostic record
outside the transcript. A call that is not (``idempotent=False``: pop,
rewind, fork, a summary) is repeated only when none of its statements got
an answer, which is what a connection lost *between* calls looks like:
then nothing of it can have reached the database, while a rewind that
committed before the connection died, repeated after someone else's
append, would remove that append.

**A deadlock or a serialization failure** (MySQL/MariaDB 1213 and 1205,
PostgreSQL 40P01 and 40001). The database rolled the transaction back (a
lock wait timeout rolls back the statement, and ``atomic`` the rest), so
nothing of it was written and running it again is safe, whatever the call.
It runs again after a short random pause, at most :data:`CONFLICT_ATTEMPTS`
times in all (a lock wait timeout, which waited long already, at most
:data:`LOCK_WAIT_ATTEMPTS`); the last attempt's error reaches the caller
unchanged.
On MariaDB ``clear`` beside appends meets this (see docs/production.md).

Inside the caller's own transaction nothing is retried: the transaction
died with the connection (or was rolled back by the deadlock), and the
caller must know.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from functools import wraps
from typing import Any, ParamSpec, TypeVar, overload

from django.db import DatabaseError, InterfaceError, OperationalError, connections

from .databases import write_alias

P = ParamSpec("P")
T = TypeVar("T")

CONFLICT_ATTEMPTS = 6
"""How often a call that meets a deadlock or serialization failure runs in all."""

LOCK_WAIT_ATTEMPTS = 2
"""How often a call whose lock wait timed out (MySQL/MariaDB 1205) runs in
all: each attempt may wait ``innodb_lock_wait_timeout`` (50 s by default)."""

CONFLICT_PAUSE = 0.02
"""Seconds: the first pause after a conflict is random in ``[0, 2 * CONFLICT_PAUSE)``,
each next one up to twice as long (full jitter), so at most about 1.3 s in all."""

_MYSQL_DEADLOCK = 1213
_MYSQL_LOCK_WAIT_TIMEOUT = 1205
_POSTGRESQL_CONFLICTS = frozenset({"40P01", "40001"})  # deadlock; serialization failure


def conflict_attempts(error: BaseException) -> int:
    """How often in all a call that failed with ``error`` may run: more than
    one for a deadlock, a serialization failure or a lock wait timeout, after
    which the database has rolled the transaction (or the statement, and
    ``atomic`` the rest) back; else 1."""
    for candidate in (error, error.__cause__):
        if candidate is None:
            continue
        code = getattr(candidate, "sqlstate", None) or getattr(candidate, "pgcode", None)
        if code in _POSTGRESQL_CONFLICTS:
            return CONFLICT_ATTEMPTS
        args = getattr(candidate, "args", ())
        if args and isinstance(args[0], int) and not isinstance(args[0], bool):
            if args[0] == _MYSQL_DEADLOCK:
                return CONFLICT_ATTEMPTS
            if args[0] == _MYSQL_LOCK_WAIT_TIMEOUT:
                return LOCK_WAIT_ATTEMPTS
    return 1


def conflict_pause(attempt: int) -> float:
    """Seconds to wait before attempt ``attempt + 1`` (``attempt`` from 1)."""
    return random.uniform(0, CONFLICT_PAUSE * 2**attempt)


@overload
def retry_if_connection_lost(function: Callable[P, T], /) -> Callable[P, T]: ...


@overload
def retry_if_connection_lost(*, idempotent: bool) -> Callable[[Callable[P, T]], Callable[P, T]]: ...


def retry_if_connection_lost(
    function: Callable[P, T] | None = None, /, *, idempotent: bool = True
) -> Any:
    """Decorate a persistence function taking ``using=``: retry it on a fresh
    connection if the one it ran on turned out to be dead, and after a
    deadlock or serialization failure (see the module's docstring)."""
    if function is None:
        return lambda decorated: _retrying(decorated, idempotent)
    return _retrying(function, idempotent)


class _Answered:
    """``connection.execute_wrapper`` noting that a statement got an answer."""

    __slots__ = ("answered",)

    def __init__(self) -> None:
        self.answered = False

    def __call__(self, execute: Any, sql: str, params: Any, many: bool, context: Any) -> Any:
        result = execute(sql, params, many, context)
        self.answered = True
        return result


def _retrying(function: Callable[P, T], idempotent: bool) -> Callable[P, T]:
    @wraps(function)
    def call(*args: P.args, **kwargs: P.kwargs) -> T:
        using = kwargs.get("using")
        connection = connections[write_alias(using if isinstance(using, str) else None)]
        if connection.in_atomic_block:
            return function(*args, **kwargs)
        conflicts = 0
        reconnected = False
        while True:
            before = connection.connection
            answered = _Answered()
            try:
                if idempotent:
                    return function(*args, **kwargs)
                with connection.execute_wrapper(answered):
                    return function(*args, **kwargs)
            except DatabaseError as error:
                if conflicts < conflict_attempts(error) - 1:
                    conflicts += 1
                    time.sleep(conflict_pause(conflicts))
                    continue
                if (
                    reconnected
                    or not isinstance(error, (InterfaceError, OperationalError))
                    or not _lost(connection, before)
                    or (not idempotent and answered.answered)
                ):
                    raise
                reconnected = True
                connection.close()

    return call


def _lost(connection: Any, before: Any) -> bool:
    """Whether the call failed because the connection it started on was dead.

    Django drops (and on leaving ``atomic`` even replaces) a connection whose
    rollback failed; the same connection, still usable, means a real error
    such as a lock timeout. A connection this call opened itself cannot have
    been stale: its failure is a real one.
    """
    if before is None:
        return False
    return not (connection.connection is before and connection.is_usable())
