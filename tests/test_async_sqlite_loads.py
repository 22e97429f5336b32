"""Short loads from plain asyncio code on SQLite: what only SQLite does.

The loop must not hold itself up: a locked database or any ``sqlite3``
error sends the load to the thread, and an in-memory database, which the
loop's own connection would not see, is left to it. What SQLite and
PostgreSQL share is in ``test_loads_in_the_event_loop.py``.
"""

from __future__ import annotations

import asyncio
import sqlite3
import threading
from typing import Any

import pytest
from django.db import connection
from django.db.backends.sqlite3.base import DatabaseWrapper

from anvia_django import async_sqlite
from anvia_django.core.memory import MemoryContext
from anvia_django.persistence import load_messages
from anvia_django.store import DjangoMemoryStore

from .helpers import user
from .loop_loads import load_in_a_loop, loop_reads, store_threads_used, write

pytestmark = [pytest.mark.sqlite, pytest.mark.django_db(transaction=True)]

__all__ = ["loop_reads"]  # the fixture


def test_a_locked_database_sends_the_load_to_the_thread_which_waits() -> None:
    write("locked", 3)
    locked, release = threading.Event(), threading.Event()

    def hold_an_exclusive_lock() -> None:
        other = sqlite3.connect(connection.settings_dict["NAME"], isolation_level=None)
        try:
            if other.execute("PRAGMA journal_mode").fetchone()[0] == "wal":
                pytest.fail("a WAL database lets readers past a writer: no lock to meet")
            other.execute("BEGIN EXCLUSIVE")
            locked.set()
            release.wait(timeout=20)
            other.execute("COMMIT")
        finally:
            other.close()

    holder = threading.Thread(target=hold_an_exclusive_lock)
    holder.start()

    async def main() -> Any:
        assert await asyncio.to_thread(locked.wait, 20)
        task = asyncio.ensure_future(DjangoMemoryStore().load(MemoryContext("locked")))
        await asyncio.sleep(0.2)
        # The event loop runs on: the load waits on the store's thread.
        assert not task.done()
        assert store_threads_used()
        release.set()
        return await task

    try:
        loaded = asyncio.run(main())
    finally:
        release.set()
        holder.join(timeout=20)
    assert loaded == load_messages(MemoryContext("locked"))


def test_any_sqlite_error_in_the_loop_leaves_the_load_to_the_thread(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    write("faulty", 3)

    def fail(*args: Any) -> Any:
        raise sqlite3.OperationalError("disk I/O error")

    monkeypatch.setattr(async_sqlite, "_fetch_bounded", fail)
    loaded = load_in_a_loop(DjangoMemoryStore(), MemoryContext("faulty"))
    assert loaded == load_messages(MemoryContext("faulty"))
    assert store_threads_used()


def test_an_in_memory_database_is_left_to_the_thread(
    monkeypatch: pytest.MonkeyPatch, loop_reads: list[tuple[Any, str]]
) -> None:
    write("memory", 3)
    monkeypatch.setattr(DatabaseWrapper, "is_in_memory_db", lambda self: True)
    loaded = load_in_a_loop(DjangoMemoryStore(), MemoryContext("memory"))
    assert loaded == [user("0:" + "x" * 10), user("1:" + "x" * 10), user("2:" + "x" * 10)]
    assert store_threads_used()
    assert loop_reads == []
