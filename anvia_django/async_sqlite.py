"""Appends and loads from asyncio code to SQLite, in the event loop.

Where the store would send an append to its SQLite thread (see
:mod:`anvia_django.event_loops`), the two thread hops cost about as much as
the append itself: its statements and the commit take a few tenths of a
millisecond on a local disk. So the append runs right in the event loop, on
a ``sqlite3`` connection the store keeps per event loop and alias, opened as
Django opens its own (the alias's ``OPTIONS``, ``init_command``, Django's
SQL functions), with the same statements as the append in steps
(:meth:`~anvia_django.persistence.dialects.SQLiteDialect.append_under_write_lock`).

That connection never waits for the write lock: its busy timeout is 0.
When another connection holds the lock (another process, the store's
thread, the caller's own code) the append goes to the store's SQLite
thread, which waits for it as every other write does. So the event loop is
held for one append's statements and its commit at most, never for a
lock. A database on a slow or network disk, where a commit's sync takes
milliseconds, should keep appends on the thread
(``EVENT_LOOP_APPENDS = False``).

A retry is recognised here and writes nothing; another user's session
raises the scope error, after rolling back. Any ``sqlite3`` error rolls
back and hands the append to the thread, whose steps report it in Django's
error types. An in-memory database is left to the thread: another
connection would not see it.

A load runs there too, on the same connection and with the same queries
as on the thread (:mod:`anvia_django.event_loop_loads`): each query's rows
are fetched at once, then converted a slice at a time, giving the loop
turns. Past :data:`~anvia_django.event_loops.MOST_LOADED_ROWS` rows or
:data:`~anvia_django.event_loops.MOST_LOADED_CHARS` of message text it stops
fetching and goes to the thread, so that a very long transcript's fetching
never holds the event loop. So does a load that meets any ``sqlite3``
error, such as a writer's lock in rollback-journal mode (busy timeout 0
here too).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import sqlite3
from functools import lru_cache
from typing import Any

from django.db import connections
from django.db.backends.base.base import BaseDatabaseWrapper
from django.db.backends.sqlite3.base import FORMAT_QMARK_REGEX, SQLiteCursorWrapper

from .conf import app_settings
from .core.memory.types import MemoryAppendInput, MemoryContext, Message
from .core.memory.validation import validate_context
from .db_threads import run_in_db_thread
from .event_loop_loads import load_replayed
from .event_loops import LOAD_BATCH, Fetched, LoadBound, LongLoads, PerEventLoop
from .persistence.dialects import AppendRequest, LockedConversation, SQLiteDialect
from .persistence.notify import send_committed
from .persistence.writes import append_in_steps, appended_signal
from .signals import messages_appended


def applies(connection: BaseDatabaseWrapper) -> bool:
    """Whether appends to ``connection``'s database may run here: SQLite, on disk."""
    return connection.vendor == "sqlite" and not connection.is_in_memory_db()  # type: ignore[attr-defined]


async def append_on_event_loop(
    input: MemoryAppendInput, append: AppendRequest, connection: BaseDatabaseWrapper
) -> None:
    """``store.append(input)``, already validated as ``append``, where
    :func:`applies` says it may run (the store asks; see
    :mod:`anvia_django.event_loops`)."""
    alias = connection.alias
    outcome = await loop_databases.get(alias).append(connection, append)
    if outcome is LEFT_TO_THE_THREAD:
        await run_in_db_thread(append_in_steps, input, append, using=alias)
    elif isinstance(outcome, LockedConversation):
        await send_committed(messages_appended, using=alias, **appended_signal(input, outcome))


async def load_on_event_loop(
    context: MemoryContext, connection: BaseDatabaseWrapper, limit: int | None
) -> list[Message] | None:
    """``store.load(context)`` with the store's ``load_limit``, where
    :func:`applies` says it may run; ``None`` when it is left to the thread
    (too long, or a ``sqlite3`` error), having raised nothing else."""
    validate_context(context, app_settings.input_limits)
    held = loop_databases.get(connection.alias)
    try:
        db = await held.connection()

        async def fetch(sql: str, params: list[Any]) -> Fetched | None:
            return _fetch_bounded(db, sql, params)

        return await load_replayed(context, connection, limit, held.long_loads, fetch)
    except sqlite3.Error:
        return None


def _fetch_bounded(db: sqlite3.Connection, sql: str, params: list[Any]) -> Fetched | None:
    # All at once, with no await: between two awaits the loop's appends
    # could write on this connection, which the open statement would see.
    cursor = db.execute(_qmark(sql), params)
    try:
        fetched: list[tuple[Any, ...]] = []
        bound = LoadBound()
        while batch := cursor.fetchmany(LOAD_BATCH):
            fetched += batch
            if bound.passed_by(batch):
                return None
        return Fetched(fetched, bound.chars)
    finally:
        cursor.close()  # ends the read: in autocommit, a statement's own transaction


LEFT_TO_THE_THREAD = "left to the thread"
"""The append did not run here (the write lock was taken, or an error); nothing was written."""

Outcome = LockedConversation | None | str
"""An append's outcome: stored, ``None`` for a retry (nothing written), or
:data:`LEFT_TO_THE_THREAD`."""

MOST_APPENDS_PER_COMMIT = 32
"""Bounds how long one group commit holds the event loop."""


_Waiting = tuple[BaseDatabaseWrapper, AppendRequest, "asyncio.Future[Outcome]"]
"""An append queued for the next group commit: Django's connection in the
loop's thread (for converting values), the append, its caller's future."""


class LoopDatabase:
    """The event loop's own ``sqlite3`` connection to one alias.

    Appends that tasks of the loop make at the same moment (those queued
    before the loop runs its next callback) share one transaction, each in
    a savepoint of its own: one commit, one sync of the journal, for many
    appends. Every caller still hears only after the commit.
    """

    def __init__(self, alias: str) -> None:
        self.alias = alias
        self.db: sqlite3.Connection | None = None
        self._pid = os.getpid()
        self._waiting: list[_Waiting] = []
        self.long_loads = LongLoads()

    async def append(self, connection: BaseDatabaseWrapper, append: AppendRequest) -> Outcome:
        """Queue ``append`` for the next group commit and wait for its outcome.

        Raises the error of that append alone (the scope error, say). A
        cancelled caller resumes only after the commit, so that its next
        call cannot overtake this one.
        """
        try:
            await self.connection()
        except sqlite3.Error:
            return LEFT_TO_THE_THREAD  # whose own connection reports it in Django's types
        loop = asyncio.get_running_loop()
        future: asyncio.Future[Outcome] = loop.create_future()
        self._waiting.append((connection, append, future))
        if len(self._waiting) == 1:
            loop.call_soon(self._commit_waiting)
        try:
            return await asyncio.shield(future)
        except asyncio.CancelledError:
            with contextlib.suppress(BaseException):
                await future
            raise

    async def connection(self) -> sqlite3.Connection:
        if self.db is None:
            # Django refuses to open a connection in a thread running an
            # event loop; opening one is rare, so a thread opens it.
            opened = await asyncio.to_thread(_open, self.alias)
            if self.db is None:
                self.db = opened
            else:  # another task of this loop opened one meanwhile
                opened.close()
        return self.db

    def _commit_waiting(self) -> None:
        group = self._waiting[:MOST_APPENDS_PER_COMMIT]
        del self._waiting[:MOST_APPENDS_PER_COMMIT]
        if self._waiting:
            asyncio.get_running_loop().call_soon(self._commit_waiting)
        appends = [(connection, append) for connection, append, _ in group]
        outcomes: list[Outcome | BaseException]
        try:
            if self.db is None:  # closed meanwhile (close_db_threads)
                outcomes = [LEFT_TO_THE_THREAD] * len(appends)
            else:
                outcomes = self._run_in_one_transaction(self.db, appends)
        except BaseException as error:
            # Every caller must hear, whatever happened (a KeyboardInterrupt
            # in this callback also stops the loop).
            outcomes = [error] * len(appends)
            if not isinstance(error, Exception):
                raise
        finally:
            for (_, _, future), outcome in zip(group, outcomes, strict=True):
                if isinstance(outcome, BaseException):
                    future.set_exception(outcome)
                else:
                    future.set_result(outcome)

    def _run_in_one_transaction(
        self, db: sqlite3.Connection, appends: list[tuple[BaseDatabaseWrapper, AppendRequest]]
    ) -> list[Outcome | BaseException]:
        try:
            cursor = db.cursor(factory=_StatementCursor)
            cursor.execute("BEGIN IMMEDIATE")
        except sqlite3.Error:
            return [LEFT_TO_THE_THREAD] * len(appends)
        dialect = SQLiteDialect()
        # A savepoint each, so that one append's error or retry rolls back
        # that append alone; one append alone needs none.
        savepoints = len(appends) > 1
        outcomes: list[Outcome | BaseException] = []
        try:
            for connection, append in appends:
                if savepoints:
                    cursor.execute("SAVEPOINT anvia_append")
                try:
                    outcome = dialect.append_under_write_lock(cursor, connection, append)
                except sqlite3.Error:
                    raise
                except Exception as error:  # this append's own, e.g. the scope error
                    outcomes.append(error)
                    outcome = None
                else:
                    outcomes.append(outcome)
                if savepoints:
                    if outcome is None:
                        cursor.execute("ROLLBACK TO anvia_append")
                    cursor.execute("RELEASE anvia_append")
                elif outcome is None:
                    _roll_back(db)
                    return outcomes
            cursor.execute("COMMIT")
        except sqlite3.Error:
            # Nothing of the group is stored: the thread's steps do each
            # append again, and report errors in Django's types.
            _roll_back(db)
            return [LEFT_TO_THE_THREAD] * len(appends)
        except BaseException:
            _roll_back(db)
            raise
        return outcomes

    def close(self) -> None:
        """Close the connection, from any thread, when its loop no longer uses
        it; in a forked child it is the parent's, and only forgotten."""
        if self.db is not None and os.getpid() == self._pid:
            self.db.close()
        self.db = None


class _StatementCursor(SQLiteCursorWrapper):
    """Django's SQLite cursor, converting each of the append's few statements
    to ``?`` placeholders once instead of on every call."""

    def convert_query(self, query: str, *, param_names: list[str] | None = None) -> str:
        if param_names is None:
            return _qmark(query)
        return str(super().convert_query(query, param_names=param_names))


@lru_cache(maxsize=128)
def _qmark(query: str) -> str:
    return str(FORMAT_QMARK_REGEX.sub("?", query).replace("%%", "%"))


def _open(alias: str) -> sqlite3.Connection:
    wrapper = connections.create_connection(alias)
    db: sqlite3.Connection = wrapper.get_new_connection(wrapper.get_connection_params())
    db.isolation_level = None  # autocommit: BEGIN and COMMIT are the append's own
    db.execute("PRAGMA busy_timeout = 0")
    return db


def _roll_back(db: sqlite3.Connection) -> None:
    if db.in_transaction:
        db.rollback()


loop_databases = PerEventLoop(LoopDatabase, LoopDatabase.close)
