"""What the tests of loads in the event loop share, on SQLite and PostgreSQL."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from django.db import connection

from anvia_django import async_postgres, async_sqlite, db_threads, event_loops
from anvia_django.core.memory import MemoryContext
from anvia_django.persistence import append_messages
from anvia_django.store import DjangoMemoryStore

from .helpers import append_input, user


@pytest.fixture
def loop_reads(monkeypatch: pytest.MonkeyPatch) -> list[tuple[Any, str]]:
    """(the loop's connection, SQL) of every query a load ran in an event loop."""
    sent: list[tuple[Any, str]] = []
    if connection.vendor == "sqlite":
        fetch = async_sqlite._fetch_bounded

        def spy(db: Any, sql: str, params: list[Any]) -> Any:
            sent.append((db, sql))
            return fetch(db, sql, params)

        monkeypatch.setattr(async_sqlite, "_fetch_bounded", spy)
    else:
        fetch_bounded = async_postgres._fetch_bounded

        async def spy_bounded(db: Any, sql: str, params: list[Any]) -> Any:
            sent.append((db, sql))
            return await fetch_bounded(db, sql, params)

        monkeypatch.setattr(async_postgres, "_fetch_bounded", spy_bounded)
    return sent


MOST_ROWS = 100
MOST_CHARS = 128 * 1024


@pytest.fixture(autouse=True)
def small_load_bounds(monkeypatch: pytest.MonkeyPatch) -> None:
    """Bounds of a load in the loop small enough to pass in a test."""
    monkeypatch.setattr(event_loops, "MOST_LOADED_ROWS", MOST_ROWS)
    monkeypatch.setattr(event_loops, "MOST_LOADED_CHARS", MOST_CHARS)


def store_threads_used() -> bool:
    return db_threads._pools != {}


def held_by_loops() -> list[Any]:
    """What the store keeps per event loop for the database: the SQLite
    connection's holder, or the psycopg connections' pool."""
    if connection.vendor == "sqlite":
        return list(async_sqlite.loop_databases.all())
    return list(async_postgres.loop_connections.all())


def loop_connections() -> list[Any]:
    """The event loops' open connections to the database."""
    if connection.vendor == "sqlite":
        return [held.db for held in async_sqlite.loop_databases.all() if held.db is not None]
    return [c for pool in async_postgres.loop_connections.all() for c in pool.opened]


def write(session_id: str, count: int, *, user_id: str | None = None, size: int = 10) -> None:
    """``count`` messages in runs of three, written through Django's connection."""
    for start in range(0, count, 3):
        batch = [user(f"{n}:" + "x" * size) for n in range(start, min(start + 3, count))]
        append_messages(append_input(session_id, batch, run_id=f"run-{start}", user_id=user_id))


def load_in_a_loop(store: DjangoMemoryStore, context: MemoryContext) -> Any:
    return asyncio.run(store.load(context))
