"""Short loads from plain asyncio code on PostgreSQL: what only PostgreSQL does.

The loop's connections are the appends' ones, never more than
``STORE_THREADS`` of them, and a load never shares one with a group of
appends; a killed connection or any psycopg error sends the load to the
thread; an alias with Django's psycopg pool loads in the loop too. What
SQLite and PostgreSQL share is in ``test_loads_in_the_event_loop.py``.
"""

from __future__ import annotations

import asyncio
from typing import Any

import psycopg
import pytest
from django.db import connections

from anvia_django import async_postgres
from anvia_django.core.memory import MemoryContext
from anvia_django.db_threads import close_db_threads
from anvia_django.persistence import load_messages
from anvia_django.store import DjangoMemoryStore

from .helpers import append_input, user
from .loop_loads import load_in_a_loop, loop_connections, loop_reads, store_threads_used, write

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]

__all__ = ["loop_reads"]  # the fixture


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
