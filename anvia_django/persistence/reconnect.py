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

**A connection left broken.** Django restores autocommit after a COMMIT by
a statement of its own on MySQL and MariaDB; when the connection dies just
then, Django keeps it with autocommit off, and every later ``atomic`` block
on that thread pretends to be nested in a transaction that cannot end.
Outside the caller's transaction, a call that fails with the connection
dead closes it before the error reaches the caller, and a call that finds
its thread's connection so left (an error since its last use, no longer
usable) closes it first: the thread's next statement, the store's or the
caller's own ORM query, opens a fresh connection.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from functools import wraps
from typing import Any, ParamSpec, TypeVar, overload

from django.db import DatabaseError, InterfaceError, OperationalError, connections

from anvia_django.persistence.databases import read_alias, write_alias

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
        return lambda decorated: _retrying(decorated, idempotent, write_alias)
    return _retrying(function, idempotent, write_alias)


def retry_read_if_connection_lost(function: Callable[P, T], /) -> Callable[P, T]:
    """:func:`retry_if_connection_lost` for a read of the inspector, the admin
    or a command: it runs on the database the routers pick for reads."""
    return _retrying(function, True, read_alias)


class _Answered:
    """``connection.execute_wrapper`` noting that a statement got an answer."""

    __slots__ = ("answered",)

    def __init__(self) -> None:
        self.answered = False

    def __call__(self, execute: Any, sql: str, params: Any, many: bool, context: Any) -> Any:
        result = execute(sql, params, many, context)
        self.answered = True
        return result


def _retrying(
    function: Callable[P, T], idempotent: bool, alias_for: Callable[[str | None], str]
) -> Callable[P, T]:
    @wraps(function)
    def call(*args: P.args, **kwargs: P.kwargs) -> T:
        using = kwargs.get("using")
        connection = connections[alias_for(using if isinstance(using, str) else None)]
        if connection.in_atomic_block:
            return function(*args, **kwargs)
        close_if_broken(connection)
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
                lost = isinstance(error, (InterfaceError, OperationalError)) and _lost(
                    connection, before
                )
                if reconnected or not lost or (not idempotent and answered.answered):
                    if lost:
                        close_if_broken(connection)
                    raise
                reconnected = True
                connection.close()

    return call


def close_if_broken(connection: Any) -> None:
    """Close ``connection`` if an error since its last use left it unusable,
    so that its thread's next statement opens a fresh one. Outside any atomic
    block only: inside one, the transaction's owner must see the error.

    Django does this between requests (``close_if_unusable_or_obsolete``);
    store calls from tasks, commands and ``async_to_sync`` code are not
    requests. Costs nothing after a call without errors; after one, a ping.
    """
    if connection.connection is None or connection.in_atomic_block:
        return
    if not connection.errors_occurred:
        return
    if connection.is_usable():
        connection.errors_occurred = False
        return
    connection.close()


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
