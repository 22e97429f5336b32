"""Appends and loads from asyncio code on psycopg's async connections,
with no thread hop.

Where :mod:`anvia_django.event_loops` lets an append run in the event loop,
on PostgreSQL (psycopg 3) it is normally one statement, a call of the
append function (see
:class:`~anvia_django.persistence.dialects.PostgreSQLDialect`): that
statement runs right in the event loop, on async connections the store
opens per event loop from the alias's own settings.

What the function leaves to the steps (a retry, another user's session, a
database without the function) and any database error goes to the store's
threads as before, to the append in steps and Django's error types. What is
neither an append nor a load always goes there.

Appends that the loop's tasks make while the connections are busy share
a transaction when a connection comes free: one statement, one round trip
and one commit for up to :data:`MOST_APPENDS_PER_TRANSACTION` appends. Each
caller still hears only after the commit; should the group fail, each of
its appends runs alone in steps.

A load (``store.load``) runs there too, on the same connections, with the
queries of the thread's :func:`~anvia_django.persistence.reads.load_messages`
(:mod:`anvia_django.event_loop_loads`), its rows converted a slice at a
time: past :data:`~anvia_django.event_loops.MOST_LOADED_ROWS` rows or
:data:`~anvia_django.event_loops.MOST_LOADED_CHARS` of message text, or on
any psycopg error, it goes to the thread.

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
from collections.abc import AsyncIterator
from functools import lru_cache
from typing import Any, NamedTuple

from django.db import connections
from django.db.backends.base.base import BaseDatabaseWrapper

from .conf import app_settings
from .core.memory.types import MemoryAppendInput, MemoryContext, Message
from .core.memory.validation import validate_context
from .db_threads import run_in_db_thread
from .event_loop_loads import load_replayed
from .event_loops import LOAD_BATCH, Fetched, LoadBound, LongLoads, PerEventLoop
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


async def load_on_event_loop(
    context: MemoryContext, connection: BaseDatabaseWrapper, limit: int | None
) -> list[Message] | None:
    """``store.load(context)`` with the store's ``load_limit``, where
    :func:`applies` says it may run; ``None`` when it is left to the thread
    (too long, or a psycopg error), having raised nothing else.

    Each query runs alone in autocommit, its own snapshot, as through
    Django's connection in autocommit.
    """
    validate_context(context, app_settings.input_limits)
    import psycopg

    held = loop_connections.get(connection.alias)
    try:
        return await load_replayed(context, connection, limit, held.long_loads, held.fetch_all)
    except psycopg.Error:
        return None  # the thread reports it in Django's types


MOST_APPENDS_PER_TRANSACTION = 8
"""At 16 tasks, two groups of 8 kept this project's 2-core benchmark machine's
client and server both busy; groups of 16 made them take turns."""


class _Waiting(NamedTuple):
    session_id: str
    statement: OneStatementAppend
    future: asyncio.Future[Any]


class _Read(NamedTuple):
    """A load's query waiting for a connection."""

    sql: str
    params: list[Any]
    future: asyncio.Future[Any]


class LoopConnections:
    """Up to ``size`` async connections to one alias, for one event loop.

    Each connection runs one group of appends at a time: those waiting when
    it comes free, at most :data:`MOST_APPENDS_PER_TRANSACTION`. One append
    alone is its statement in autocommit; several are one statement, in a
    transaction sent in one round trip (psycopg's pipeline mode). Or it runs
    one load's query (:meth:`fetch_all`), in autocommit.

    Each connection in use is held by one of at most ``size`` holders: a
    runner task, which takes the waiting appends and loads in turn until
    none is left, or a load running in its caller's task. A holder takes an
    idle connection or, when there is none, opens one, so there are never
    more than ``size`` connections, and no two holders share one.
    """

    def __init__(self, alias: str, size: int) -> None:
        from psycopg.pq import TransactionStatus

        self.alias = alias
        self._pid = os.getpid()
        self._idle_status = TransactionStatus.IDLE
        self._max_age = connections[alias].settings_dict.get("CONN_MAX_AGE")
        self._size = size
        self._runners: set[asyncio.Task[None]] = set()
        self._holders = 0
        """Runners and loads in their callers' tasks, each holding (or
        about to hold) one connection; at most ``size``."""
        self._waiting: list[_Waiting | _Read] = []
        self._idle: list[tuple[Any, float]] = []
        self._give_way = ""
        self.opened: set[Any] = set()
        """Every connection not yet closed, to close them from any thread."""
        self.long_loads = LongLoads()

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
        if self._holders < self._size:
            self._start_runner(loop)
        try:
            return await asyncio.shield(future)
        except asyncio.CancelledError:
            with contextlib.suppress(BaseException):
                await future
            raise

    async def fetch_all(self, sql: str, params: list[Any]) -> Fetched | None:
        """A load's query's rows and their text count, or ``None`` when past the
        bounds of :class:`~anvia_django.event_loops.LoadBound` (the rest is
        not converted: psycopg converts rows as they are fetched).

        With a holder's place free and nothing waiting, it runs right in the
        caller's task; else it waits its turn with the appends, for a
        runner. Raises the query's psycopg error. A read changes nothing, so
        a cancelled caller stops waiting at once.
        """
        if self._holders < self._size and not self._waiting:
            self._holders += 1
            try:
                return await self._read(sql, params)
            finally:
                self._holders -= 1
                if self._waiting:  # queued while this load held its place
                    self._start_runner(asyncio.get_running_loop())
        loop = asyncio.get_running_loop()
        future: asyncio.Future[Any] = loop.create_future()
        self._waiting.append(_Read(sql, params, future))
        if self._holders < self._size:
            self._start_runner(loop)
        return await future  # type: ignore[no-any-return]

    def _start_runner(self, loop: asyncio.AbstractEventLoop) -> None:
        self._holders += 1
        runner = loop.create_task(self._run_each_waiting())
        self._runners.add(runner)
        runner.add_done_callback(self._runner_done)

    def _runner_done(self, runner: asyncio.Task[None]) -> None:
        # Here rather than in the runner: a runner cancelled before its
        # first step runs none of its code, and its place would be lost.
        self._runners.discard(runner)
        self._holders -= 1
        # Queued while this runner was ending (or before a cancelled one
        # started), when every place was taken: their callers wait for them
        # even when cancelled, as when their loop ends.
        if self._waiting and self._holders < self._size:
            self._start_runner(runner.get_loop())

    def _next_group(self) -> list[_Waiting | _Read]:
        """The waiting load, or the waiting appends before the next load
        (at most :data:`MOST_APPENDS_PER_TRANSACTION`), first come first."""
        if isinstance(self._waiting[0], _Read):
            return [self._waiting.pop(0)]
        count = 1
        while count < min(MOST_APPENDS_PER_TRANSACTION, len(self._waiting)) and isinstance(
            self._waiting[count], _Waiting
        ):
            count += 1
        group = self._waiting[:count]
        del self._waiting[:count]
        return group

    async def _run_each_waiting(self) -> None:
        while self._waiting:
            group = self._next_group()
            if isinstance(group[0], _Read) and group[0].future.done():
                continue  # a load whose caller stopped waiting
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

    async def _run_group(self, group: list[_Waiting | _Read]) -> list[Any]:
        first = group[0]
        if isinstance(first, _Read):
            return [await self._read(first.sql, first.params)]
        appends = [waiting for waiting in group if isinstance(waiting, _Waiting)]
        async with self._connection() as connection:
            if len(appends) > 1:
                return await self._in_one_transaction(connection, appends)
            statement = first.statement
            cursor = await connection.execute(_binary(statement.sql), statement.params)
            return [await cursor.fetchone()]

    async def _read(self, sql: str, params: list[Any]) -> Fetched | None:
        async with self._connection() as connection:
            return await _fetch_bounded(connection, sql, params)

    @contextlib.asynccontextmanager
    async def _connection(self) -> AsyncIterator[Any]:
        """An idle connection, or a new one; back to the idle ones after a
        use that left it reusable, else closed."""
        connection, opened_at = self._idle.pop() if self._idle else await self._connect()
        reusable = False
        try:
            yield connection
            reusable = self._reusable(connection, opened_at)
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


async def _fetch_bounded(connection: Any, sql: str, params: list[Any]) -> Fetched | None:
    # Not a named (server-side) cursor: the whole result arrives with the
    # execute, and psycopg converts each row only when it is fetched.
    cursor = connection.cursor()
    try:
        await cursor.execute(sql, params)
        fetched: list[tuple[Any, ...]] = []
        bound = LoadBound()
        while batch := await cursor.fetchmany(LOAD_BATCH):
            fetched += batch
            if bound.passed_by(batch):
                return None
        return Fetched(fetched, bound.chars)
    finally:
        await cursor.close()


@lru_cache(maxsize=8)
def _binary(sql: str) -> str:
    """``sql`` with its parameters sent in binary: psycopg escapes each
    element of a text array sent as text with a regular expression."""
    return sql.replace("%s", "%b")


def _open_connections(alias: str) -> LoopConnections:
    return LoopConnections(alias, app_settings.STORE_THREADS or 1)


loop_connections = PerEventLoop(_open_connections, LoopConnections.close_all)
