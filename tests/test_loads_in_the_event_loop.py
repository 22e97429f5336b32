"""Short loads from plain asyncio code, in the event loop: SQLite and PostgreSQL.

What the store's thread returns, the loop returns: the same messages (types
and order), the same windows, the same scope error, on the connections the
loop's appends use. A long or large transcript sends the load to the
thread, which the loop then remembers. A caller with a thread of its own
(``async_to_sync``, a request) keeps its connection and its transaction,
and ``EVENT_LOOP_APPENDS = False`` keeps loads on the threads. What only one
database does (a locked SQLite file, a killed PostgreSQL connection) is in
``test_async_sqlite_loads.py`` and ``test_async_postgres_loads.py``.
"""

from __future__ import annotations

import asyncio
import itertools
from typing import Any

import pytest
from django.db import transaction
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from anvia_django import event_loop_loads
from anvia_django.core.memory import MemoryContext
from anvia_django.core.memory.errors import ConversationScopeError, InvalidMemoryInputError
from anvia_django.db_threads import close_db_threads
from anvia_django.persistence import append_messages, load_messages
from anvia_django.persistence.compiled import CompiledQuery
from anvia_django.store import DjangoMemoryStore

from .helpers import append_input, run, user
from .integrations.common import json_values
from .loop_loads import (
    MOST_CHARS,
    MOST_ROWS,
    held_by_loops,
    load_in_a_loop,
    loop_connections,
    loop_reads,
    small_load_bounds,
    store_threads_used,
    write,
)

pytestmark = [pytest.mark.event_loop, pytest.mark.django_db(transaction=True)]

__all__ = ["loop_reads", "small_load_bounds"]  # the fixtures

_sessions = itertools.count()


def test_a_short_load_runs_on_the_loops_connection_not_on_a_thread(
    loop_reads: list[str],
) -> None:
    write("short", 20, user_id="alice")
    loaded = load_in_a_loop(DjangoMemoryStore(), MemoryContext("short", user_id="alice"))

    assert loaded == load_messages(MemoryContext("short", user_id="alice"))
    assert len(loaded) == 20
    assert not store_threads_used()
    assert len(loop_reads) == 1  # one query, as on the thread


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
        (MOST_ROWS, 10, True),
        (MOST_ROWS + 1, 10, False),
        (3, MOST_CHARS // 4, True),
        (3, MOST_CHARS // 2, False),
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
    for limit, on_the_loop in ((120, False), (90, True), (30, True)):
        close_db_threads()
        loaded = load_in_a_loop(DjangoMemoryStore(load_limit=limit), context)
        assert loaded == load_messages(context, limit=limit)
        assert store_threads_used() is not on_the_loop
    assert len(loop_reads) == 3


@pytest.mark.parametrize(
    ("count", "size", "expected_pieces"),
    [
        # Short messages: 64 rows at a time.
        (MOST_ROWS, 10, [64, MOST_ROWS - 64]),
        # About 3,000 characters each, 8,000 at a time: two rows at a time.
        (12, 3000, [2] * 6),
    ],
)
def test_a_long_load_gives_the_loop_a_turn_between_pieces_of_converting(
    monkeypatch: pytest.MonkeyPatch,
    loop_reads: list[tuple[Any, str]],
    count: int,
    size: int,
    expected_pieces: list[int],
) -> None:
    write("long", count, size=size)
    # Every piece is past the time allowed, so the loop gets a turn after each.
    monkeypatch.setattr(event_loop_loads, "CONVERTING_SLICE", 0.0)
    monkeypatch.setattr(event_loop_loads, "CONVERTING_CHARS", 8000)
    ticks = 0
    ticks_at_each_piece: list[int] = []
    pieces: list[int] = []
    column_converter = CompiledQuery.column_converter

    def spy(self: CompiledQuery, connection: Any) -> Any:
        convert = column_converter(self, connection)

        def converting(fetched: list[Any]) -> list[Any]:
            ticks_at_each_piece.append(ticks)
            pieces.append(len(fetched))
            return convert(fetched)

        return converting

    monkeypatch.setattr(CompiledQuery, "column_converter", spy)

    async def main() -> list[Any]:
        nonlocal ticks
        load = asyncio.create_task(DjangoMemoryStore().load(MemoryContext("long")))
        while not load.done():
            ticks += 1
            await asyncio.sleep(0)
        return await load

    loaded = asyncio.run(main())
    assert pieces == expected_pieces
    # Another task ran between every two pieces.
    assert all(b > a for a, b in itertools.pairwise(ticks_at_each_piece))
    assert not store_threads_used()
    assert len(loop_reads) == 1
    assert loaded == load_messages(MemoryContext("long"))


def test_a_session_found_too_long_goes_straight_to_the_thread_next_time(
    loop_reads: list[tuple[Any, str]],
) -> None:
    write("long", MOST_ROWS + 5)
    write("short", 3)
    store = DjangoMemoryStore()

    async def main() -> None:
        for _ in range(3):
            assert len(await store.load(MemoryContext("long"))) == MOST_ROWS + 5
        # Remembered per load_limit: a short window of it still runs here.
        assert len(await DjangoMemoryStore(load_limit=3).load(MemoryContext("long"))) == 3
        # And the connection the long read used is still the loop's.
        assert len(await store.load(MemoryContext("short"))) == 3
        assert len(loop_connections()) == 1

    asyncio.run(main())
    assert len(loop_reads) == 3  # long read once in the loop, then left to the thread


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
    assert held_by_loops() == []


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
