"""Appends from plain asyncio code on SQLite: the event loop's own connection.

What must hold on that path is what holds on the store's thread: the same
rows, one copy of a retried append, the scope check, signals after the
commit, nothing half-written after an error, and no waiting for the write
lock in the event loop: a held lock sends the append to the thread.
"""

from __future__ import annotations

import asyncio
import sqlite3
import threading
from typing import Any

import pytest
from django.db import connection, connections

from anvia_django import async_sqlite, db_threads
from anvia_django.core.memory.errors import ConversationScopeError
from anvia_django.db_threads import close_db_threads
from anvia_django.models import Conversation
from anvia_django.persistence import append_messages
from anvia_django.persistence.dialects import SQLiteDialect
from anvia_django.store import DjangoMemoryStore

from .helpers import append_input, stored, user

pytestmark = [pytest.mark.sqlite, pytest.mark.django_db(transaction=True)]


def loop_databases() -> list[sqlite3.Connection]:
    return [held.db for held in async_sqlite.loop_databases.all() if held.db is not None]


def test_a_held_write_lock_sends_the_append_to_the_thread_which_waits_for_it() -> None:
    locked, release = threading.Event(), threading.Event()

    def hold_the_write_lock() -> None:
        other = sqlite3.connect(connection.settings_dict["NAME"], isolation_level=None)
        try:
            other.execute("BEGIN IMMEDIATE")
            locked.set()
            release.wait(timeout=20)
            other.execute("COMMIT")
        finally:
            other.close()

    holder = threading.Thread(target=hold_the_write_lock)
    holder.start()
    store = DjangoMemoryStore()

    async def main() -> None:
        assert await asyncio.to_thread(locked.wait, 20)
        task = asyncio.ensure_future(store.append(append_input("waits", [user("hi")])))
        await asyncio.sleep(0.2)
        # The event loop runs on: the append waits on the store's thread.
        assert not task.done()
        assert db_threads._pools != {}
        release.set()
        await task

    try:
        asyncio.run(main())
    finally:
        release.set()
        holder.join(timeout=20)
    assert stored("waits") == [(0, "run-1", 1, user("hi"))]


def test_an_error_mid_append_rolls_back_and_the_thread_appends_once(
    monkeypatch: pytest.MonkeyPatch, appended: list[dict[str, Any]]
) -> None:
    insert_on = SQLiteDialect.insert_on
    loop_thread = threading.current_thread()

    def fail_in_the_loop(self: SQLiteDialect, *args: Any, **kwargs: Any) -> bool:
        if threading.current_thread() is loop_thread:
            raise sqlite3.OperationalError("disk I/O error")
        return insert_on(self, *args, **kwargs)

    store = DjangoMemoryStore()
    asyncio.run(store.append(append_input("faulty", [user("first")])))
    monkeypatch.setattr(SQLiteDialect, "insert_on", fail_in_the_loop)
    asyncio.run(store.append(append_input("faulty", [user("second"), user("third")], turn=2)))

    assert [row[3] for row in stored("faulty")] == [user("first"), user("second"), user("third")]
    assert Conversation.objects.get(session_id="faulty").message_count == 3
    assert [c["first_position"] for c in appended] == [0, 1]


def test_connections_close_with_their_loop_and_with_close_db_threads() -> None:
    store = DjangoMemoryStore()

    async def append(turn: int) -> sqlite3.Connection:
        await store.append(append_input("closing", [user(str(turn))], turn=turn))
        (db,) = loop_databases()
        return db

    first = asyncio.run(append(1))
    second = asyncio.run(append(2))  # a new loop: the closed loop's connection goes
    assert second is not first
    with pytest.raises(sqlite3.ProgrammingError):
        first.execute("SELECT 1")
    close_db_threads()
    with pytest.raises(sqlite3.ProgrammingError):
        second.execute("SELECT 1")
    assert loop_databases() == []
    asyncio.run(append(3))
    assert Conversation.objects.get(session_id="closing").message_count == 3


def test_loop_appends_and_another_connections_appends_interleave_whole_and_gap_free() -> None:
    # Tasks append in the event loop while a thread appends through Django's
    # connection to the same sessions: the loop finds the write lock taken
    # now and then and sends those appends (and nothing half-done) to the
    # store's thread. Every fourth append is sent twice, as a retry would be.
    from .test_concurrency import kept_appends
    from .workers import writer_messages

    tasks, appends = 6, 20
    sessions = ["mixed-0", "mixed-1"]
    thread_writer = tasks

    def input_of(number: int, index: int) -> Any:
        return append_input(
            sessions[(index + number) % len(sessions)],
            writer_messages(number, index),
            run_id=f"writer-{number}",
            turn=index + 1,
        )

    def write_through_django() -> None:
        try:
            for index in range(appends * 2):
                append_messages(input_of(thread_writer, index))
        finally:
            connections.close_all()

    store = DjangoMemoryStore()

    async def task(number: int) -> None:
        for index in range(appends):
            await store.append(input_of(number, index))
            if index % 4 == 0:
                await store.append(input_of(number, index))

    async def main() -> None:
        writer = asyncio.create_task(asyncio.to_thread(write_through_django))
        await asyncio.gather(*(task(n) for n in range(tasks)), writer)

    asyncio.run(main())
    for slot, session_id in enumerate(sessions):
        kept = kept_appends(session_id)
        for number in range(tasks):
            expected = [i for i in range(appends) if (i + number) % len(sessions) == slot]
            assert kept.get(number, []) == expected, f"task {number} in {session_id}"
        expected = [i for i in range(appends * 2) if (i + thread_writer) % len(sessions) == slot]
        assert kept.get(thread_writer, []) == expected


def test_appends_made_at_once_share_one_commit_and_each_keeps_its_own_outcome(
    appended: list[dict[str, Any]],
) -> None:
    store = DjangoMemoryStore()
    statements: list[str] = []

    async def main() -> list[Any]:
        await store.append(append_input("shared", [user("first")], user_id="alice"))
        (db,) = loop_databases()
        db.set_trace_callback(statements.append)
        retried = append_input("shared", [user("twice")], run_id="run-2", user_id="alice")
        calls = [
            store.append(append_input(f"group-{n}", [user(str(n)), user("x")])) for n in range(6)
        ]
        calls += [
            store.append(retried),
            store.append(append_input("shared", [user("no")], run_id="run-3", user_id="eve")),
            store.append(retried),
            store.append(append_input("shared", [user("last")], run_id="run-4", user_id="alice")),
        ]
        return await asyncio.gather(*calls, return_exceptions=True)

    outcomes = asyncio.run(main())
    assert [type(o) for o in outcomes] == [type(None)] * 7 + [ConversationScopeError] + [
        type(None)
    ] * 2
    assert statements.count("BEGIN IMMEDIATE") == statements.count("COMMIT") == 1
    assert db_threads._pools == {}
    for n in range(6):
        assert stored(f"group-{n}") == [(0, "run-1", 1, user(str(n))), (1, "run-1", 1, user("x"))]
    assert stored("shared") == [
        (0, "run-1", 1, user("first")),
        (1, "run-2", 1, user("twice")),
        (2, "run-4", 1, user("last")),
    ]
    assert Conversation.objects.get(session_id="shared").message_count == 3
    assert len(appended) == 1 + 6 + 2  # not the refused append, not the retry


def test_an_error_in_a_group_sends_the_whole_group_to_the_thread(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    insert_on = SQLiteDialect.insert_on
    loop_thread = threading.current_thread()

    def fail_for_one(
        self: SQLiteDialect, cursor: Any, connection: Any, rows: Any, **kw: Any
    ) -> bool:
        if threading.current_thread() is loop_thread and '"2"' in rows.encoded[0]:
            raise sqlite3.OperationalError("disk I/O error")
        return insert_on(self, cursor, connection, rows, **kw)

    store = DjangoMemoryStore()

    async def main() -> None:
        await store.append(append_input("group", [user("first")]))
        monkeypatch.setattr(SQLiteDialect, "insert_on", fail_for_one)
        await asyncio.gather(
            *(store.append(append_input("group", [user(str(n))], turn=n)) for n in range(1, 5))
        )

    asyncio.run(main())
    assert db_threads._pools != {}
    assert [row[3] for row in stored("group")] == [user(n) for n in ("first", "1", "2", "3", "4")]
    assert Conversation.objects.get(session_id="group").message_count == 5


def test_a_connection_that_cannot_be_opened_leaves_appends_to_the_thread(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def unable(alias: str) -> sqlite3.Connection:
        raise sqlite3.OperationalError("unable to open database file")

    monkeypatch.setattr(async_sqlite, "_open", unable)
    asyncio.run(DjangoMemoryStore().append(append_input("unopened", [user("hi")])))
    assert db_threads._pools != {}
    assert stored("unopened") == [(0, "run-1", 1, user("hi"))]
