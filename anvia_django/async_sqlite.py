"""Appends from asyncio code to SQLite, in the event loop while the write lock is free.

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
"""

from __future__ import annotations

import asyncio
import os
import sqlite3

from django.db import connections
from django.db.backends.sqlite3.base import SQLiteCursorWrapper

from .core.memory.types import MemoryAppendInput
from .db_threads import run_in_db_thread
from .event_loops import PerEventLoop, appends_may_run_here
from .persistence.databases import write_alias
from .persistence.dialects import AppendRequest, LockedConversation, SQLiteDialect
from .persistence.notify import send_committed
from .persistence.writes import append_in_steps, appended_signal, validated_append
from .signals import messages_appended


async def append_on_event_loop(input: MemoryAppendInput, *, using: str | None) -> bool:
    """Do ``store.append(input)`` here if this path applies; ``False`` if it
    does not, and the caller must send the whole append to a store thread."""
    alias = write_alias(using)
    if not _applies(alias):
        return False
    append = validated_append(input)
    if append is None:
        return True
    loop_database = loop_databases.get(alias)
    try:
        conversation = loop_database.append(await loop_database.connection(), append)
    except _LeftToTheThread:
        await run_in_db_thread(append_in_steps, input, append, using=alias)
        return True
    if conversation is not None:
        await send_committed(messages_appended, using=alias, **appended_signal(input, conversation))
    return True


def _applies(alias: str) -> bool:
    if not appends_may_run_here():
        return False
    connection = connections[alias]
    return connection.vendor == "sqlite" and not connection.is_in_memory_db()  # type: ignore[attr-defined]


class _LeftToTheThread(Exception):
    """The append did not run here (the lock was taken, or an error); nothing was written."""


class LoopDatabase:
    """The event loop's own ``sqlite3`` connection to one alias."""

    def __init__(self, alias: str) -> None:
        self.alias = alias
        self.db: sqlite3.Connection | None = None
        self._pid = os.getpid()

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

    def append(self, db: sqlite3.Connection, append: AppendRequest) -> LockedConversation | None:
        """The whole append in one transaction; ``None``: a retry, nothing written.

        Raises :class:`_LeftToTheThread` when it wrote nothing for the thread to do it.
        """
        cursor = db.cursor(factory=SQLiteCursorWrapper)
        try:
            cursor.execute("BEGIN IMMEDIATE")
        except sqlite3.Error as error:
            raise _LeftToTheThread from error
        try:
            conversation = SQLiteDialect().append_under_write_lock(cursor, self.alias, append)
            if conversation is not None:
                cursor.execute("COMMIT")
                return conversation
        except sqlite3.Error as error:
            _roll_back(db)
            raise _LeftToTheThread from error
        except BaseException:
            _roll_back(db)
            raise
        _roll_back(db)
        return None

    def close(self) -> None:
        """Close the connection, from any thread, when its loop no longer uses
        it; in a forked child it is the parent's, and only forgotten."""
        if self.db is not None and os.getpid() == self._pid:
            self.db.close()
        self.db = None


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
