"""Short loads from plain asyncio code on PostgreSQL: the loop's own connections.

What the store's thread returns, the loop returns: the same messages (types
and order), the same windows, the same scope error. The loop's connections
are the appends' ones, never more than ``STORE_THREADS`` of them, and a load
never shares one with a group of appends. A long transcript, a large one or
any psycopg error sends the load to the thread. A caller with a thread of
its own (``async_to_sync``, a request) keeps its connection and its
transaction, and ``EVENT_LOOP_APPENDS = False`` keeps loads on the threads.
"""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest
from django.db import connections, transaction
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from anvia_django import async_postgres, db_threads, event_loops
from anvia_django.core.memory import MemoryContext
from anvia_django.core.memory.errors import ConversationScopeError, InvalidMemoryInputError
from anvia_django.db_threads import close_db_threads
from anvia_django.persistence import append_messages, load_messages
from anvia_django.store import DjangoMemoryStore

from .helpers import append_input, run, user
from .integrations.common import json_values

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def loop_reads(monkeypatch: pytest.MonkeyPatch) -> list[tuple[Any, str]]:
    """(connection, SQL) of every query a load ran on an event loop's connection."""
    sent: list[tuple[Any, str]] = []
    fetch = async_postgres._fetch_bounded

    async def spy(connection: Any, sql: str, params: list[Any]) -> Any:
        sent.append((connection, sql))
        return await fetch(connection, sql, params)

    monkeypatch.setattr(async_postgres, "_fetch_bounded", spy)
    return sent


def store_threads_used() -> bool:
    return db_threads._pools != {}


def loop_connections() -> list[Any]:
    return [c for pool in async_postgres.loop_connections.all() for c in pool.opened]


def write(session_id: str, count: int, *, user_id: str | None = None, size: int = 10) -> None:
    """``count`` messages in runs of three, written through Django's connection."""
    for start in range(0, count, 3):
        batch = [user(f"{n}:" + "x" * size) for n in range(start, min(start + 3, count))]
        append_messages(append_input(session_id, batch, run_id=f"run-{start}", user_id=user_id))


def load_in_a_loop(store: DjangoMemoryStore, context: MemoryContext) -> Any:
    return asyncio.run(store.load(context))


_sessions = itertools.count()


def test_loads_and_appends_of_one_loop_share_its_connection(
    loop_reads: list[tuple[Any, str]],
) -> None:
    store = DjangoMemoryStore()
    context = MemoryContext("shared", user_id="alice")

    async def main() -> list[Any]:
        loaded = []
        for turn in (1, 2):
            sent = append_input("shared", [user(str(turn))], turn=turn, user_id="alice")
            await store.append(sent)
            loaded.append(await store.load(context))  # sees the append just committed
        (connection,) = loop_connections()
        assert [used for used, _ in loop_reads] == [connection, connection]
        return loaded

    assert asyncio.run(main()) == [[user("1")], [user("1"), user("2")]]
    assert not store_threads_used()
    assert len(loop_reads) == 2  # one query per load, as on the thread


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
    session_id = f"same-{next(_sessions)} % é"
    messages = [{"role": "assistant", **content} for content in contents]
    append_messages(append_input(session_id, messages))
    context = MemoryContext(session_id)

    loaded = load_in_a_loop(DjangoMemoryStore(), context)

    # repr tells 1 from 1.0 and True from 1, which == would not.
    assert repr(loaded) == repr(load_messages(context)) == repr(messages)
    assert not store_threads_used()


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
    limit: int | None, loop_reads: list[tuple[Any, str]]
) -> None:
    write("owned", 4, user_id="alice")
    store = DjangoMemoryStore(load_limit=limit)

    with pytest.raises(ConversationScopeError) as in_the_loop:
        load_in_a_loop(store, MemoryContext("owned", user_id="mallory"))
    with pytest.raises(ConversationScopeError) as on_the_thread:
        load_messages(MemoryContext("owned", user_id="mallory"), limit=limit)
    assert str(in_the_loop.value) == str(on_the_thread.value)
    assert not store_threads_used()
    assert len(loop_reads) == 2  # the scoped read found nothing; then the owner


def test_unknown_and_trusted_contexts_load_as_on_the_thread(
    loop_reads: list[tuple[Any, str]],
) -> None:
    write("trusted", 2, user_id="alice")
    store = DjangoMemoryStore()
    contexts = (
        MemoryContext("unknown", user_id="bob"),
        MemoryContext("unknown"),
        MemoryContext("trusted"),
        MemoryContext("trusted", user_id="alice"),
    )
    for context in contexts:
        assert load_in_a_loop(store, context) == load_messages(context)
    assert not store_threads_used()
    assert len(loop_reads) == 5  # the unknown session's scoped load asks for its owner


def test_bad_input_is_refused_before_any_query(loop_reads: list[tuple[Any, str]]) -> None:
    with pytest.raises(InvalidMemoryInputError):
        load_in_a_loop(DjangoMemoryStore(), MemoryContext(""))
    assert loop_reads == []
    assert loop_connections() == []
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
    count: int, size: int, on_the_loop: bool, loop_reads: list[tuple[Any, str]]
) -> None:
    write("long", count, size=size)
    loaded = load_in_a_loop(DjangoMemoryStore(), MemoryContext("long"))

    assert loaded == load_messages(MemoryContext("long"))
    assert len(loaded) == count
    assert len(loop_reads) == 1  # tried in the loop either way
    assert store_threads_used() is not on_the_loop


def test_a_window_longer_than_the_loops_bound_goes_to_the_thread(
    loop_reads: list[tuple[Any, str]],
) -> None:
    write("window", 150)
    context = MemoryContext("window")
    for limit, on_the_loop in ((120, False), (30, True)):
        close_db_threads()
        loaded = load_in_a_loop(DjangoMemoryStore(load_limit=limit), context)
        assert loaded == load_messages(context, limit=limit)
        assert store_threads_used() is not on_the_loop
    assert len(loop_reads) == 2


def test_a_session_found_too_long_goes_straight_to_the_thread_next_time(
    loop_reads: list[tuple[Any, str]],
) -> None:
    write("long", event_loops.MOST_LOADED_ROWS + 5)
    write("short", 3)
    store = DjangoMemoryStore()

    async def main() -> None:
        for _ in range(3):
            assert len(await store.load(MemoryContext("long"))) == event_loops.MOST_LOADED_ROWS + 5
        # Remembered per load_limit: a short window of it still runs here.
        assert len(await DjangoMemoryStore(load_limit=3).load(MemoryContext("long"))) == 3
        # And the connection the long read used is still the loop's.
        assert len(await store.load(MemoryContext("short"))) == 3
        assert len(loop_connections()) == 1

    asyncio.run(main())
    assert len(loop_reads) == 3  # long read once in the loop, then left to the thread


def terminate(pid: int) -> None:
    with connections["default"].cursor() as cursor:
        cursor.execute("SELECT pg_terminate_backend(%s)", [pid])
    connections.close_all()


def test_a_killed_connection_sends_that_load_to_the_thread_and_is_replaced(
    loop_reads: list[tuple[Any, str]],
) -> None:
    write("killed", 3)
    store = DjangoMemoryStore()
    context = MemoryContext("killed")

    async def main() -> None:
        first = await store.load(context)
        (connection,) = loop_connections()
        assert not store_threads_used()
        await asyncio.to_thread(terminate, connection.info.backend_pid)
        assert await store.load(context) == first  # on the thread
        assert store_threads_used()
        assert connection.closed
        assert connection not in loop_connections()
        close_db_threads()
        assert await store.load(context) == first  # in the loop, on a new connection
        assert not store_threads_used()

    asyncio.run(main())
    assert len(loop_reads) == 3


def test_any_psycopg_error_in_the_loop_leaves_the_load_to_the_thread(
    monkeypatch: pytest.MonkeyPatch, loop_reads: list[tuple[Any, str]]
) -> None:
    write("faulty", 3)
    fetch = async_postgres._fetch_bounded  # the spy

    async def fail(connection: Any, sql: str, params: list[Any]) -> Any:
        await fetch(connection, sql, params)
        raise psycopg.errors.QueryCanceled("canceling statement due to statement timeout")

    monkeypatch.setattr(async_postgres, "_fetch_bounded", fail)
    loaded = load_in_a_loop(DjangoMemoryStore(), MemoryContext("faulty"))
    assert loaded == load_messages(MemoryContext("faulty"))
    assert store_threads_used()
    assert len(loop_reads) == 1


def test_loads_wait_their_turn_with_appends_on_at_most_the_store_threads_connections(
    settings: Any, loop_reads: list[tuple[Any, str]]
) -> None:
    # One connection: loads and groups of appends take turns on it, in the
    # order they came; none goes to a thread, none shares the connection.
    settings.ANVIA_DJANGO = {"STORE_THREADS": 1}
    store = DjangoMemoryStore()
    sessions = [f"turns-{n}" for n in range(6)]
    for session_id in sessions:
        write(session_id, 2)

    async def load_then_append(session_id: str) -> list[Any]:
        before = await store.load(MemoryContext(session_id))
        await store.append(append_input(session_id, [user("new")], run_id="run-new"))
        return [before, await store.load(MemoryContext(session_id))]

    async def main() -> list[list[Any]]:
        results = await asyncio.gather(*(load_then_append(s) for s in sessions))
        assert len(loop_connections()) == 1
        return list(results)

    results = asyncio.run(main())
    assert not store_threads_used()
    for session_id, (before, after) in zip(sessions, results, strict=True):
        assert before == load_messages(MemoryContext(session_id))[:2]
        assert after == [*before, user("new")] == load_messages(MemoryContext(session_id))
    assert len(loop_reads) == 12


def test_turned_off_loads_go_to_the_store_threads(
    settings: Any, loop_reads: list[tuple[Any, str]]
) -> None:
    write("threads", 3)
    context = MemoryContext("threads")
    assert load_in_a_loop(DjangoMemoryStore(), context) == load_messages(context)
    assert not store_threads_used()
    assert len(loop_reads) == 1

    settings.ANVIA_DJANGO = {"EVENT_LOOP_APPENDS": False}
    close_db_threads()
    assert load_in_a_loop(DjangoMemoryStore(), context) == load_messages(context)
    assert store_threads_used()
    assert len(loop_reads) == 1
    assert async_postgres.loop_connections.all() == []


def test_a_caller_with_its_own_thread_reads_its_own_open_transaction(
    loop_reads: list[tuple[Any, str]],
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
    # Committed, a load from the event loop sees it, in the loop.
    assert load_in_a_loop(DjangoMemoryStore(), MemoryContext("uncommitted")) == loaded
    assert len(loop_reads) == 1


@pytest.fixture(scope="module")
def pooled_alias() -> Iterator[str]:
    """A second alias to the test database through Django's psycopg pool."""
    pytest.importorskip("psycopg_pool")
    alias = "pooled"
    default = connections["default"].settings_dict
    connections.settings[alias] = {
        **default,
        "CONN_MAX_AGE": 0,
        "OPTIONS": {**default["OPTIONS"], "pool": {"min_size": 1, "max_size": 2}},
        "TEST": {**default["TEST"], "MIRROR": "default"},
    }
    try:
        yield alias
    finally:
        close_db_threads()
        connections[alias].close_pool()  # type: ignore[attr-defined]
        connections[alias].close()
        del connections.settings[alias]


@pytest.mark.django_db(transaction=True, databases=["default", "pooled"])
def test_an_alias_with_djangos_pool_loads_in_the_loop(
    pooled_alias: str, loop_reads: list[tuple[Any, str]]
) -> None:
    write("pooled", 3, user_id="alice")
    context = MemoryContext("pooled", user_id="alice")
    loaded = load_in_a_loop(DjangoMemoryStore(using=pooled_alias), context)
    assert loaded == load_messages(context, using=pooled_alias)
    assert len(loaded) == 3
    assert not store_threads_used()
    assert len(loop_reads) == 1
