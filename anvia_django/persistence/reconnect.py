"""One retry on a fresh connection when the database connection was lost.

Django notices a dead connection (server restart, idle timeout, a killed
backend) only when a query fails on it, and reconnects at the start of the
next request. Agent runs are not requests, so without this the first store
call after a lost connection would fail although the database is fine.

Only calls that are safe to repeat use it: every write is one transaction,
a retried append is idempotent (if the connection died after the commit
reached the server, the second attempt recognises the stored messages and
writes nothing), and clearing twice is clearing once. A failed-run record
could, in that rare commit-time case, be kept twice; it is a diagnostic
record outside the transcript. Inside the caller's own transaction nothing
is retried: the transaction died with the connection, and the caller must
know.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import wraps
from typing import ParamSpec, TypeVar

from django.db import InterfaceError, OperationalError, connections

from .databases import write_alias

P = ParamSpec("P")
T = TypeVar("T")


def retry_if_connection_lost(function: Callable[P, T]) -> Callable[P, T]:
    """Decorate a persistence function taking ``using=``: retry it once on a
    fresh connection if the one it ran on turned out to be dead."""

    @wraps(function)
    def call(*args: P.args, **kwargs: P.kwargs) -> T:
        using = kwargs.get("using")
        connection = connections[write_alias(using if isinstance(using, str) else None)]
        if connection.in_atomic_block:
            return function(*args, **kwargs)
        before = connection.connection
        try:
            return function(*args, **kwargs)
        except (InterfaceError, OperationalError):
            # Django drops (and on leaving ``atomic`` even replaces) a
            # connection whose rollback failed; the same connection, still
            # usable, means a real error such as a lock timeout.
            # A connection this call opened itself cannot have been stale:
            # its failure is a real one (lock timeout, deadlock) and is raised.
            if before is None or (connection.connection is before and connection.is_usable()):
                raise
            connection.close()
        return function(*args, **kwargs)

    return call
