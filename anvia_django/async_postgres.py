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

Appends that the loop's tasks make while the connections are busy share
a transaction when a connection comes free: one statement, one round trip
and one commit for up to :data:`MOST_APPENDS_PER_TRANSACTION` appends. Each
caller still hears only after the commit; should the group fail, each of
its appends runs alone in steps.

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
from functools import lru_cache
from typing import Any, NamedTuple

from django.db import connections
from django.db.backends.base.base import BaseDatabaseWrapper

from .conf import app_settings
from .core.memory.types import MemoryAppendInput
from .db_threads import run_in_db_thread
from .event_loops import PerEventLoop
from .persistence.dialects import (
    AppendRequest,
    OneStatementAppend,
    append_group,
    dialect_of,
    has_async_driver,
)
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
            row = await loop_connections.get(alias).fetch_one(append.session_id, statement)
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


MOST_APPENDS_PER_TRANSACTION = 8
"""At 16 tasks, two groups of 8 kept this project's 2-core benchmark machine's
client and server both busy; groups of 16 made them take turns."""


class _Waiting(NamedTuple):
    session_id: str
    statement: OneStatementAppend
    future: asyncio.Future[Any]


class LoopConnections:
    """Up to ``size`` async connections to one alias, for one event loop.

    Each connection runs one group of appends at a time: those waiting when
    it comes free, at most :data:`MOST_APPENDS_PER_TRANSACTION`. One append
    alone is its statement in autocommit; several are one statement, in a
    transaction sent in one round trip (psycopg's pipeline mode).
    """

    def __init__(self, alias: str, size: int) -> None:
        from psycopg.pq import TransactionStatus

        self.alias = alias
        self._pid = os.getpid()
        self._idle_status = TransactionStatus.IDLE
        self._max_age = connections[alias].settings_dict.get("CONN_MAX_AGE")
        self._size = size
        self._runners: set[asyncio.Task[None]] = set()
        self._waiting: list[_Waiting] = []
        self._idle: list[tuple[Any, float]] = []
        self._give_way = ""
        self.opened: set[Any] = set()
        """Every connection not yet closed, to close them from any thread."""

    async def fetch_one(self, session_id: str, statement: OneStatementAppend) -> Any:
        """Run the append ``statement`` for ``session_id``; its row, or ``None``.

        Raises the psycopg error of the statement's group: nothing of that
        group was stored. Like a call on a store thread, a statement the
        caller stops waiting for runs to its end first, so the caller's next
        call cannot overtake it.
        """
        loop = asyncio.get_running_loop()
        future: asyncio.Future[Any] = loop.create_future()
        self._waiting.append(_Waiting(session_id, statement, future))
        if len(self._runners) < self._size:
            runner = loop.create_task(self._run_waiting())
            self._runners.add(runner)
            runner.add_done_callback(self._runners.discard)
        try:
            return await asyncio.shield(future)
        except asyncio.CancelledError:
            with contextlib.suppress(BaseException):
                await future
            raise

    async def _run_waiting(self) -> None:
        while self._waiting:
            group = self._waiting[:MOST_APPENDS_PER_TRANSACTION]
            del self._waiting[:MOST_APPENDS_PER_TRANSACTION]
            try:
                rows = await self._run_group(group)
            except BaseException as error:
                # Every caller must hear; a cancelled runner (its loop is
                # ending) cancels its callers.
                for waiting in group:
                    if waiting.future.done():
                        continue
                    if isinstance(error, asyncio.CancelledError):
                        waiting.future.cancel()
                    else:
                        waiting.future.set_exception(error)
                if not isinstance(error, Exception):
                    raise
            else:
                for waiting, row in zip(group, rows, strict=True):
                    if not waiting.future.done():
                        waiting.future.set_result(row)

    async def _run_group(self, group: list[_Waiting]) -> list[Any]:
        connection, opened_at = self._idle.pop() if self._idle else await self._connect()
        reusable = False
        try:
            if len(group) == 1:
                (waiting,) = group
                statement = waiting.statement
                cursor = await connection.execute(_binary(statement.sql), statement.params)
                rows = [await cursor.fetchone()]
            else:
                rows = await self._in_one_transaction(connection, group)
            reusable = self._reusable(connection, opened_at)
            return rows
        finally:
            if reusable:
                self._idle.append((connection, opened_at))
            else:
                await self._close(connection)

    async def _in_one_transaction(self, connection: Any, group: list[_Waiting]) -> list[Any]:
        # Groups lock conversations in session order, so that groups cannot
        # deadlock each other; and they give way to every other transaction
        # (a lock wait longer than a tenth of ``deadlock_timeout`` fails the
        # group), so that PostgreSQL breaks a deadlock with anyone else's
        # code by failing the group, whose appends then run alone.
        in_order = sorted(range(len(group)), key=lambda index: group[index].session_id)
        sql, params = append_group([group[index].statement for index in in_order])
        try:
            async with connection.pipeline():
                await connection.execute("BEGIN")
                await connection.execute(self._give_way)
                cursor = await connection.execute(sql, params)
                await connection.execute("COMMIT")
        except BaseException:
            if connection.info.transaction_status != self._idle_status:
                with contextlib.suppress(Exception):
                    await connection.execute("ROLLBACK")
            raise
        rows: list[Any] = [None] * len(group)
        for ordinality, *row in await cursor.fetchall():
            rows[in_order[ordinality - 1]] = row
        return rows

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
            if not self._give_way:
                cursor = await connection.execute(
                    "SELECT extract(epoch FROM current_setting('deadlock_timeout')::interval)"
                )
                row = await cursor.fetchone()
                milliseconds = max(1, int(row[0] * 100)) if row else 100
                self._give_way = f"SET LOCAL lock_timeout = {milliseconds}"
        except BaseException:
            await self._close(connection)
            raise
        return connection, time.monotonic()

    def _reusable(self, connection: Any, opened_at: float) -> bool:
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


@lru_cache(maxsize=8)
def _binary(sql: str) -> str:
    """``sql`` with its parameters sent in binary: psycopg escapes each
    element of a text array sent as text with a regular expression."""
    return sql.replace("%s", "%b")


def _open_connections(alias: str) -> LoopConnections:
    return LoopConnections(alias, app_settings.STORE_THREADS or 1)


loop_connections = PerEventLoop(_open_connections, LoopConnections.close_all)
