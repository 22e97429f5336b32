"""One retry on a fresh connection when the database connection was lost.

Django notices a dead connection (server restart, idle timeout, a killed
backend) only when a query fails on it, and reconnects at the start of the
next request. Agent runs are not requests, so without this the first store
call after a lost connection would fail although the database is fine.

The retry is safe because every write is one transaction and a retried
append is idempotent: if the connection died after the commit reached the
server, the second attempt recognises the stored messages and writes
nothing. Inside the caller's own transaction nothing is retried (the
transaction is gone with the connection, and the caller must know).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

from django.db import InterfaceError, OperationalError, connections

T = TypeVar("T")


def retry_if_connection_lost(alias: str, work: Callable[[], T]) -> T:
    connection = connections[alias]
    if connection.in_atomic_block:
        return work()
    before = connection.connection
    try:
        return work()
    except (InterfaceError, OperationalError):
        # Django drops (and on leaving ``atomic`` even replaces) a connection
        # whose rollback failed; the same connection, still usable, means a
        # real error such as a lock timeout, which the caller must see.
        if connection.connection is before and before is not None and connection.is_usable():
            raise
        connection.close()
    return work()
