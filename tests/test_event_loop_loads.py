"""Short loads from plain asyncio code on SQLite: the event loop's own connection.

What the store's thread returns, the loop returns: the same messages (types
and order), the same windows, the same scope error. What the loop must not
do is hold itself up: a long transcript, a large one, a locked database or
any ``sqlite3`` error sends the load to the thread. A caller with a thread
of its own (``async_to_sync``, a request) keeps its connection and its
transaction, and ``EVENT_LOOP_APPENDS = False`` keeps loads on the threads.
"""

from __future__ import annotations

import asyncio
import itertools
import sqlite3
import threading
from typing import Any

import pytest
from django.db import connection, transaction
from django.db.backends.sqlite3.base import DatabaseWrapper
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from anvia_django import async_sqlite, db_threads, event_loops
from anvia_django.core.memory import MemoryContext
from anvia_django.core.memory.errors import ConversationScopeError, InvalidMemoryInputError
from anvia_django.persistence import append_messages, load_messages
from anvia_django.store import DjangoMemoryStore

from .helpers import append_input, run, user
from .integrations.common import json_values

pytestmark = [pytest.mark.sqlite, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def loop_reads(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The SQL of every query a load ran on an event loop's connection."""
    sent: list[str] = []
    fetch = async_sqlite._LoopReader._fetch

    def spy(self: async_sqlite._LoopReader, query: Any, values: Any) -> Any:
        sent.append(query.sql)
        return fetch(self, query, values)

    monkeypatch.setattr(async_sqlite._LoopReader, "_fetch", spy)
    return sent


def store_threads_used() -> bool:
    return db_threads._pools != {}


def write(session_id: str, count: int, *, user_id: str | None = None, size: int = 10) -> None:
    """``count`` messages in runs of three, written through Django's connection."""
    for start in range(0, count, 3):
        batch = [user(f"{n}:" + "x" * size) for n in range(start, min(start + 3, count))]
        append_messages(append_input(session_id, batch, run_id=f"run-{start}", user_id=user_id))


def load_in_a_loop(store: DjangoMemoryStore, context: MemoryContext) -> Any:
    return asyncio.run(store.load(context))


def test_a_short_load_runs_on_the_loops_connection_not_on_a_thread(
    loop_reads: list[str],
) -> None:
    write("short", 20, user_id="alice")
    loaded = load_in_a_loop(DjangoMemoryStore(), MemoryContext("short", user_id="alice"))

    assert loaded == load_messages(MemoryContext("short", user_id="alice"))
    assert len(loaded) == 20
    assert not store_threads_used()
    assert len(loop_reads) == 1  # one query, as on the thread


def test_loads_and_appends_of_one_loop_share_its_connection(loop_reads: list[str]) -> None:
    store = DjangoMemoryStore()
    context = MemoryContext("shared")

    async def main() -> list[Any]:
        loaded = []
        for turn in (1, 2):
            await store.append(append_input("shared", [user(str(turn))], turn=turn))
            loaded.append(await store.load(context))  # sees the append just committed
        assert len(async_sqlite.loop_databases.all()) == 1
        return loaded

    assert asyncio.run(main()) == [[user("1")], [user("1"), user("2")]]
    assert not store_threads_used()
    assert len(loop_reads) == 2


@settings(
    max_examples=30,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    contents=st.lists(
        st.dictionaries(st.sampled_from(["content", "name", "tool_calls", "meta"]), json_values),
        min_size=1,
        max_size=8,
    )
)
def test_the_loop_loads_exactly_what_the_thread_loads(contents: list[dict[str, Any]]) -> None:
    session_id = f"same-{next(_sessions)}"
    messages = [{"role": "assistant", **content} for content in contents]
    append_messages(append_input(session_id, messages))
    context = MemoryContext(session_id)

    loaded = load_in_a_loop(DjangoMemoryStore(), context)

    # repr tells 1 from 1.0 and True from 1, which == would not.
    assert repr(loaded) == repr(load_messages(context)) == repr(messages)
    assert not store_threads_used()


_sessions = itertools.count()


@settings(
    max_examples=30,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    runs=st.lists(st.integers(1, 5), min_size=1, max_size=8),
    limit=st.integers(1, 12),
    scoped=st.booleans(),
)
def test_load_limit_windows_are_the_threads_windows(
    runs: list[int], limit: int, scoped: bool
) -> None:
    session_id = f"window-{next(_sessions)}"
    for number, size in enumerate(runs):
        batch = [user(f"{number}/{i}") for i in range(size)]
        append_messages(append_input(session_id, batch, run_id=f"run-{number}", user_id="u"))
    context = MemoryContext(session_id, user_id="u" if scoped else None)

    loaded = load_in_a_loop(DjangoMemoryStore(load_limit=limit), context)

    assert loaded == load_messages(context, limit=limit)
    assert not store_threads_used()


@pytest.mark.parametrize("limit", [None, 5])
def test_another_users_session_raises_in_the_loop_as_on_the_thread(
    limit: int | None, loop_reads: list[str]
) -> None:
    write("owned", 4, user_id="alice")
    store = DjangoMemoryStore(load_limit=limit)

    with pytest.raises(ConversationScopeError):
        load_in_a_loop(store, MemoryContext("owned", user_id="mallory"))
    with pytest.raises(ConversationScopeError):
        load_messages(MemoryContext("owned", user_id="mallory"), limit=limit)
    assert not store_threads_used()
    assert len(loop_reads) == 2  # the scoped read found nothing; then the owner


def test_unknown_and_trusted_contexts_load_as_on_the_thread() -> None:
    write("trusted", 2, user_id="alice")
    store = DjangoMemoryStore()
    for context in (
        MemoryContext("unknown", user_id="bob"),
        MemoryContext("unknown"),
        MemoryContext("trusted"),
        MemoryContext("trusted", user_id="alice"),
    ):
        assert load_in_a_loop(store, context) == load_messages(context)
    assert not store_threads_used()


def test_bad_input_is_refused_before_any_query(loop_reads: list[str]) -> None:
    with pytest.raises(InvalidMemoryInputError):
        load_in_a_loop(DjangoMemoryStore(), MemoryContext(""))
    assert loop_reads == []
    assert not store_threads_used()


@pytest.mark.parametrize(
    ("count", "size", "on_the_loop"),
    [
        (event_loops.MOST_LOADED_ROWS, 10, True),
        (event_loops.MOST_LOADED_ROWS + 1, 10, False),
        (3, event_loops.MOST_LOADED_CHARS // 4, True),
        (3, event_loops.MOST_LOADED_CHARS // 2, False),
    ],
)
def test_long_or_large_transcripts_go_to_the_thread(
    count: int, size: int, on_the_loop: bool
) -> None:
    write("long", count, size=size)
    loaded = load_in_a_loop(DjangoMemoryStore(), MemoryContext("long"))

    assert loaded == load_messages(MemoryContext("long"))
    assert len(loaded) == count
    assert store_threads_used() is not on_the_loop


def test_a_window_longer_than_the_loops_bound_goes_to_the_thread() -> None:
    write("window", 150)
    context = MemoryContext("window")
    for limit, on_the_loop in ((120, False), (30, True)):
        db_threads.close_db_threads()
        loaded = load_in_a_loop(DjangoMemoryStore(load_limit=limit), context)
        assert loaded == load_messages(context, limit=limit)
        assert store_threads_used() is not on_the_loop


def test_a_session_found_too_long_goes_straight_to_the_thread_next_time(
    loop_reads: list[str],
) -> None:
    write("long", event_loops.MOST_LOADED_ROWS + 5)
    store = DjangoMemoryStore()

    async def main() -> None:
        for _ in range(3):
            await store.load(MemoryContext("long"))

    asyncio.run(main())
    assert len(loop_reads) == 1  # read once in the loop, then left to the thread


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

    monkeypatch.setattr(async_sqlite._LoopReader, "_fetch", fail)
    loaded = load_in_a_loop(DjangoMemoryStore(), MemoryContext("faulty"))
    assert loaded == load_messages(MemoryContext("faulty"))
    assert store_threads_used()


def test_turned_off_loads_go_to_the_store_threads(settings: Any, loop_reads: list[str]) -> None:
    settings.ANVIA_DJANGO = {"EVENT_LOOP_APPENDS": False}
    write("threads", 3)
    loaded = load_in_a_loop(DjangoMemoryStore(), MemoryContext("threads"))
    assert loaded == load_messages(MemoryContext("threads"))
    assert store_threads_used()
    assert loop_reads == []
    assert async_sqlite.loop_databases.all() == []


def test_an_in_memory_database_is_left_to_the_thread(
    monkeypatch: pytest.MonkeyPatch, loop_reads: list[str]
) -> None:
    write("memory", 3)
    monkeypatch.setattr(DatabaseWrapper, "is_in_memory_db", lambda self: True)
    loaded = load_in_a_loop(DjangoMemoryStore(), MemoryContext("memory"))
    assert loaded == [user("0:" + "x" * 10), user("1:" + "x" * 10), user("2:" + "x" * 10)]
    assert store_threads_used()
    assert loop_reads == []


def test_a_caller_with_its_own_thread_reads_its_own_open_transaction(
    loop_reads: list[str],
) -> None:
    # Through async_to_sync the load runs on the caller's thread and
    # connection, so it sees what the caller's atomic() block has not
    # committed; the loop's connection could not.
    with transaction.atomic():
        write("uncommitted", 2)
        loaded = run(DjangoMemoryStore().load, MemoryContext("uncommitted"))
        assert [m["content"] for m in loaded] == ["0:" + "x" * 10, "1:" + "x" * 10]
    assert loop_reads == []
    assert not store_threads_used()
