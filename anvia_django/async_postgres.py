"""Appends from asyncio code on psycopg's async connections, with no thread hop.

Where :mod:`anvia_django.db_threads` would send a store call to one of the
store's own threads (async code with no request or ``async_to_sync`` caller
around it), the call already runs on connections of the store's own, so
nothing a caller holds is lost by leaving Django's connection objects too.
On PostgreSQL (psycopg 3) an append is normally one statement, a call of
the append function (see
:class:`~anvia_django.persistence.dialects.PostgreSQLDialect`): that
statement then runs right in the event loop, on async connections the store
opens per event loop from the alias's own settings. Two thread hops were
most of what an append cost beyond the statement itself.

What the function leaves to the steps (a retry, another user's session, a
database without the function) and any database error goes to the store's
threads as before, to the append in steps and Django's error types. What is
not an append always goes there. ``ANVIA_DJANGO["EVENT_LOOP_APPENDS"] = False``
keeps appends on the threads too, e.g. for instrumentation that wraps
Django's cursors.

Connections: at most ``STORE_THREADS`` per alias and event loop, opened on
demand with the alias's ``OPTIONS`` (``prepare_threshold`` as Django would
apply it, ``isolation_level``, ``assume_role``; binding is server-side) and
the time zone Django sets; a broken one is dropped, and one older than a
positive ``CONN_MAX_AGE`` is replaced. They are closed by
:func:`~anvia_django.db_threads.close_db_threads`, when their event loop is
collected, and, for loops that have closed, when a new loop opens its own.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import threading
import time
import weakref
from typing import Any

from django.db import connections
from django.db.backends.base.base import BaseDatabaseWrapper

from .conf import app_settings
from .core.memory.types import MemoryAppendInput
from .db_threads import has_outer_sync_thread, run_in_db_thread
from .persistence.databases import write_alias
from .persistence.dialects import dialect_of, has_async_driver
from .persistence.notify import send_committed
from .persistence.writes import append_in_steps, appended_signal, validated_append
from .signals import messages_appended


async def append_on_event_loop(input: MemoryAppendInput, *, using: str | None) -> bool:
    """Do ``store.append(input)`` here if this path applies; ``False`` if it
    does not, and the caller must send the whole append to a store thread."""
    connection = _connection_here(write_alias(using))
    if connection is None:
        return False
    append = validated_append(input)
    if append is None:
        return True
    alias = connection.alias
    statement = dialect_of(connection).one_statement_append(connection, append)
    conversation = None
    if statement is not None:
        import psycopg

        try:
            row = await _connections_for(alias).fetch_one(statement.sql, statement.params)
        except psycopg.Error as error:
            # The steps run it again through Django. Had the statement
            # committed before its answer was lost, that is a retried
            # append, which the steps recognise and store once.
            statement.failed_for_want_of_the_function(error)
        else:
            conversation = statement.outcome(row)
    if conversation is None:
        await run_in_db_thread(append_in_steps, input, append, using=alias)
        return True
    await send_committed(messages_appended, using=alias, **appended_signal(input, conversation))
    return True


def _connection_here(alias: str) -> BaseDatabaseWrapper | None:
    """Django's connection to ``alias`` in this thread if this path applies,
    else ``None``. One lookup serves the whole append: each costs microseconds
    (asgiref's thread-local storage)."""
    if not app_settings.EVENT_LOOP_APPENDS or app_settings.STORE_THREADS is None:
        return None
    if has_outer_sync_thread():
        return None  # the caller's thread and connection: db_threads keeps them
    connection = connections[alias]
    return connection if has_async_driver(connection) else None


class LoopConnections:
    """Up to ``size`` async connections to one alias, for one event loop."""

    def __init__(self, alias: str, size: int) -> None:
        from psycopg.pq import TransactionStatus

        self.alias = alias
        self._pid = os.getpid()
        self._idle_status = TransactionStatus.IDLE
        self._max_age = connections[alias].settings_dict.get("CONN_MAX_AGE")
        self._slots = asyncio.Semaphore(size)
        self._idle: list[tuple[Any, float]] = []
        self.opened: set[Any] = set()
        """Every connection not yet closed, to close them from any thread."""

    async def fetch_one(self, sql: str, params: list[Any]) -> Any:
        """Run ``sql`` in autocommit; its first row, or ``None``.

        Like a call on a store thread, a statement the caller stops waiting
        for runs to its end first, so the caller's next call cannot
        overtake it.
        """
        async with self._slots:
            connection, opened_at = self._idle.pop() if self._idle else await self._connect()
            task = asyncio.ensure_future(self._run(connection, sql, params))
            try:
                row = await asyncio.shield(task)
            except asyncio.CancelledError:
                with contextlib.suppress(BaseException):
                    await task
                raise
            finally:
                if self._reusable(task, connection, opened_at):
                    self._idle.append((connection, opened_at))
                else:
                    await self._close(connection)
            return row

    async def _run(self, connection: Any, sql: str, params: list[Any]) -> Any:
        cursor = await connection.execute(sql, params)
        return await cursor.fetchone()

    async def _connect(self) -> tuple[Any, float]:
        import psycopg
        from psycopg import sql

        wrapper = connections[self.alias]
        params = wrapper.get_connection_params()
        # Server-side binding whatever ``server_side_binding`` says: Django
        # binds client-side by default for SQL that the server could not
        # take parameters in, and the append's statement is not such SQL.
        # Composing it client-side cost more than the rest of the call's
        # Python. Statements are still prepared only as ``prepare_threshold``
        # says (Django's default: never, for transaction-pooling proxies).
        params["cursor_factory"] = psycopg.AsyncCursor
        connection = await psycopg.AsyncConnection.connect(**params, autocommit=True)
        self.opened.add(connection)
        try:
            options = wrapper.settings_dict["OPTIONS"]
            if (level := options.get("isolation_level")) is not None:
                await connection.set_isolation_level(psycopg.IsolationLevel(level))
            zone = wrapper.timezone_name
            if zone and connection.info.parameter_status("TimeZone") != zone:
                await connection.execute("SELECT set_config('TimeZone', %s, false)", [zone])
            if role := options.get("assume_role"):
                await connection.execute(sql.SQL("SET ROLE {}").format(sql.Identifier(role)))
        except BaseException:
            await self._close(connection)
            raise
        return connection, time.monotonic()

    def _reusable(self, task: asyncio.Future[Any], connection: Any, opened_at: float) -> bool:
        if not task.done() or task.cancelled() or task.exception() is not None:
            return False
        if connection.closed or connection.info.transaction_status != self._idle_status:
            return False
        return not self._max_age or time.monotonic() - opened_at < self._max_age

    async def _close(self, connection: Any) -> None:
        self.opened.discard(connection)
        await connection.close()

    def close_all(self) -> None:
        """Close every connection, from any thread, when the loop no longer
        uses them (it may be gone). In a forked child the sockets are the
        parent's: they are forgotten, not closed."""
        if os.getpid() == self._pid:
            for connection in list(self.opened):
                connection.pgconn.finish()
        self.opened.clear()
        self._idle.clear()


_by_loop: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, dict[str, LoopConnections]] = (
    weakref.WeakKeyDictionary()
)
_lock = threading.Lock()


def _connections_for(alias: str) -> LoopConnections:
    loop = asyncio.get_running_loop()
    pools = _by_loop.get(loop)
    if pools is None:
        with _lock:
            for other, theirs in list(_by_loop.items()):
                if other.is_closed():
                    _close_pools(theirs)
                    del _by_loop[other]
            pools = _by_loop[loop] = {}
        weakref.finalize(loop, _close_pools, pools)
    pool = pools.get(alias)
    if pool is None:
        pool = pools[alias] = LoopConnections(alias, app_settings.STORE_THREADS or 1)
    return pool


def _close_pools(pools: dict[str, LoopConnections]) -> None:
    for pool in pools.values():
        pool.close_all()


def close_event_loop_connections() -> None:
    """Close the async connections of every event loop (see close_db_threads)."""
    with _lock:
        every = list(_by_loop.values())
        _by_loop.clear()
    for pools in every:
        _close_pools(pools)


def _forget_after_fork() -> None:
    # The child shares the parent's sockets: never close them from here.
    global _lock
    _by_loop.clear()
    _lock = threading.Lock()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_after_fork)
