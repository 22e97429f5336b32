"""Appends from asyncio code on psycopg's async connections, with no thread hop.

Where :mod:`anvia_django.event_loops` lets an append run in the event loop,
on PostgreSQL (psycopg 3) it is normally one statement, a call of the
append function (see
:class:`~anvia_django.persistence.dialects.PostgreSQLDialect`): that
statement runs right in the event loop, on async connections the store
opens per event loop from the alias's own settings.

What the function leaves to the steps (a retry, another user's session, a
database without the function) and any database error goes to the store's
threads as before, to the append in steps and Django's error types. What is
not an append always goes there.

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
import time
from typing import Any

from django.db import connections
from django.db.backends.base.base import BaseDatabaseWrapper

from .conf import app_settings
from .core.memory.types import MemoryAppendInput
from .db_threads import run_in_db_thread
from .event_loops import PerEventLoop
from .persistence.dialects import AppendRequest, dialect_of, has_async_driver
from .persistence.notify import send_committed
from .persistence.writes import append_in_steps, appended_signal
from .signals import messages_appended


def applies(connection: BaseDatabaseWrapper) -> bool:
    """Whether appends to ``connection``'s database may run here (psycopg 3)."""
    return has_async_driver(connection)


async def append_on_event_loop(
    input: MemoryAppendInput, append: AppendRequest, connection: BaseDatabaseWrapper
) -> None:
    """``store.append(input)``, already validated as ``append``, where
    :func:`applies` says it may run (the store asks; see
    :mod:`anvia_django.event_loops`)."""
    alias = connection.alias
    statement = dialect_of(connection).one_statement_append(connection, append)
    conversation = None
    if statement is not None:
        import psycopg

        try:
            row = await loop_connections.get(alias).fetch_one(statement.sql, statement.params)
        except psycopg.Error as error:
            # The steps run it again through Django. Had the statement
            # committed before its answer was lost, that is a retried
            # append, which the steps recognise and store once.
            statement.failed_for_want_of_the_function(error)
        else:
            conversation = statement.outcome(row)
    if conversation is None:
        await run_in_db_thread(append_in_steps, input, append, using=alias)
        return
    await send_committed(messages_appended, using=alias, **appended_signal(input, conversation))


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


def _open_connections(alias: str) -> LoopConnections:
    return LoopConnections(alias, app_settings.STORE_THREADS or 1)


loop_connections = PerEventLoop(_open_connections, LoopConnections.close_all)
