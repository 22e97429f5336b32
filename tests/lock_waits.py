"""Seeing a race happen: a statement of another connection waiting for a
lock, as the database server shows it (or, on SQLite, which has no server,
as the waiting thread's own statement shows it).

A test that claims "B waits for A's lock" waits for that wait to be seen,
instead of sleeping and hoping that B got there in time.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from django.db import connection

SERVER_LOCK_WAITS = {
    # Sessions of this database (not other test databases on the server)
    # whose current statement waits for a lock.
    "postgresql": (
        "SELECT count(*) FROM pg_stat_activity"
        " WHERE datname = current_database() AND wait_event_type = 'Lock'"
        " AND pid <> pg_backend_pid()"
    ),
    "mysql": (
        "SELECT count(*) FROM information_schema.innodb_trx AS trx"
        " JOIN information_schema.processlist AS process ON process.id = trx.trx_mysql_thread_id"
        " WHERE trx.trx_state = 'LOCK WAIT' AND process.db = DATABASE()"
    ),
}


POLL_SECONDS = {
    # InnoDB refreshes what information_schema.innodb_trx shows only once it
    # has not been read for 0.1 s: polled more often, it never changes.
    "mysql": 0.25,
}


class StatementWatch:
    """The statements running on the connections it wraps: in the thread
    that will wait, ``with connection.execute_wrapper(watch):``."""

    def __init__(self) -> None:
        self.running: list[str] = []

    def __call__(self, execute: Callable[..., Any], sql: str, *args: Any) -> Any:
        self.running.append(sql)
        try:
            return execute(sql, *args)
        finally:
            self.running.remove(sql)


def wait_for_a_lock_wait(watch: StatementWatch, timeout: float = 20) -> None:
    """Return once the watched thread is waiting for a lock held by
    another connection; fail after ``timeout`` seconds.

    On PostgreSQL and MariaDB/MySQL the server must show a session of this
    database waiting for a lock. On SQLite (one writer at a time, the wait
    in the busy handler) the watched thread must be inside a statement
    that takes the write lock, while another connection holds it.
    """
    deadline = time.monotonic() + timeout
    query = SERVER_LOCK_WAITS.get(connection.vendor)
    while time.monotonic() < deadline:
        if query is not None:
            with connection.cursor() as cursor:
                cursor.execute(query)
                (waiting,) = cursor.fetchone()
            if waiting:
                return
        elif any(sql.startswith("BEGIN IMMEDIATE") for sql in list(watch.running)):
            return
        time.sleep(POLL_SECONDS.get(connection.vendor, 0.005))
    raise AssertionError(
        f"no statement waited for a lock within {timeout} s: {_sessions()!r}"
        f" (running on the watched connection: {watch.running!r})"
    )


SESSIONS = {
    "postgresql": (
        "SELECT pid, state, wait_event_type, wait_event, query FROM pg_stat_activity"
        " WHERE datname = current_database() AND pid <> pg_backend_pid()"
    ),
    "mysql": (
        "SELECT process.id, process.state, process.info, trx.trx_state"
        " FROM information_schema.processlist AS process"
        " LEFT JOIN information_schema.innodb_trx AS trx"
        " ON process.id = trx.trx_mysql_thread_id"
        " WHERE process.db = DATABASE() AND process.id <> CONNECTION_ID()"
    ),
}


def _sessions() -> list[tuple[object, ...]]:
    """What the server shows of this database's other sessions, for a failure message."""
    query = SESSIONS.get(connection.vendor)
    if query is None:
        return []
    with connection.cursor() as cursor:
        cursor.execute(query)
        return list(cursor.fetchall())
