"""One engine: every statement of the store runs on Django's connections.

From asyncio code outside a request the store's calls run on its own
threads, each with Django's connection for that thread: instrumentation
that wraps Django's cursors (``execute_wrapper``, debug toolbars, APM,
``assertNumQueries``) sees every statement, and connections follow Django's
settings. Cancelling a caller never loses a signal, never hangs, and never
lets an append overtake an earlier one of its session.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
import re
import threading
from collections import Counter
from collections.abc import Awaitable, Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from django.db import connections
from django.db.backends.signals import connection_created

from anvia_django.core.memory.branches import MemoryForkInput
from anvia_django.core.memory.compaction import MemoryCompactionInput
from anvia_django.core.memory.run_records import MemoryRunInput
from anvia_django.core.memory.types import (
    MemoryContext,
    MemoryConversationListOptions,
    MemoryErrorInput,
    Message,
)
from anvia_django.persistence.threads.dispatch import close_db_threads
from anvia_django.store import DjangoMemoryStore

from .helpers import append_input, assistant, user

PACKAGE = Path(__file__).resolve().parent.parent / "anvia_django"


def test_the_package_opens_no_connection_of_its_own() -> None:
    own = re.compile(r"AsyncConnection|get_new_connection|sqlite3\.connect|psycopg\.connect")
    found = [
        f"{path.relative_to(PACKAGE)}:{number}"
        for path in PACKAGE.rglob("*.py")
        for number, line in enumerate(path.read_text().splitlines(), 1)
        if own.search(line)
    ]
    assert found == []


@pytest.fixture
def wrapped() -> Iterator[list[tuple[str, str]]]:
    """``(thread name, sql)`` of every statement run through Django's cursor
    wrappers on connections opened during the test."""
    seen: list[tuple[str, str]] = []
    lock = threading.Lock()

    def wrapper(execute: Callable[..., Any], sql: str, *args: Any) -> Any:
        with lock:
            seen.append((threading.current_thread().name, sql))
        return execute(sql, *args)

    def install(sender: Any, connection: Any, **kwargs: Any) -> None:
        connection.execute_wrappers.append(wrapper)

    close_db_threads()  # their connections were opened before the wrapper
    connection_created.connect(install)
    try:
        yield seen
    finally:
        connection_created.disconnect(install)
        close_db_threads()


async def _summarise(previous: str | None, messages: list[Message]) -> str:
    return f"{len(messages)} messages"


def _every_method(store: DjangoMemoryStore) -> list[tuple[str, Callable[[], Awaitable[Any]]]]:
    context = MemoryContext("engine", user_id="u1")
    now = datetime.now(UTC)
    return [
        ("append", lambda: store.append(append_input("engine", [user("a")], user_id="u1"))),
        (
            "append more",
            lambda: store.append(
                append_input("engine", [assistant("b"), user("c")], turn=2, user_id="u1")
            ),
        ),
        ("load", lambda: store.load(context)),
        (
            "record_error",
            lambda: store.record_error(MemoryErrorInput(context, "r2", ValueError("x"), [])),
        ),
        (
            "record_run",
            lambda: store.record_run(MemoryRunInput(context, "run-1", "succeeded", now, now)),
        ),
        ("fork", lambda: store.fork(MemoryForkInput(context, "engine-fork", 2))),
        (
            "compact",
            lambda: store.compact(MemoryCompactionInput(context, _summarise, keep_messages=1)),
        ),
        ("load_compacted", lambda: store.load_compacted(context)),
        ("load_entries", lambda: store.load_entries(context)),
        ("rewind", lambda: store.rewind(context, 2)),
        (
            "list_conversations",
            lambda: store.inspector.list_conversations(MemoryConversationListOptions(limit=5)),
        ),
        ("get_conversation", lambda: store.inspector.get_conversation("no-such-ref")),
        ("clear", lambda: store.clear(context)),
    ]


@pytest.mark.django_db(transaction=True)
def test_every_store_method_runs_through_djangos_cursor_wrappers(
    wrapped: list[tuple[str, str]],
) -> None:
    store = DjangoMemoryStore()
    counts: dict[str, int] = {}

    async def main() -> None:
        for name, call in _every_method(store):
            before = len(wrapped)
            await call()
            counts[name] = len(wrapped) - before

    asyncio.run(main())
    assert [name for name, count in counts.items() if count == 0] == []
    # On the store's threads, on their Django connections.
    assert {name.rsplit("-", 1)[0] for name, _ in wrapped} == {
        f"anvia-db-{'default' if connections['default'].vendor == 'sqlite' else 'shared'}"
    }


@pytest.mark.django_db(transaction=True)
def test_a_job_per_asyncio_run_reuses_the_store_threads_connection(settings: Any) -> None:
    # A Celery task or a management command: its own event loop, every time.
    created: list[str] = []

    def count(sender: Any, connection: Any, **kwargs: Any) -> None:
        created.append(connection.alias)

    database = connections["default"].settings_dict
    saved = database["CONN_MAX_AGE"]
    database["CONN_MAX_AGE"] = 60
    close_db_threads()
    connection_created.connect(count)
    store = DjangoMemoryStore()

    async def job(number: int) -> list[Message]:
        context = MemoryContext(f"job-{number}")
        await store.append(append_input(context.session_id, [user("hi")]))
        return await store.load(context)

    try:
        assert asyncio.run(job(0)) == [user("hi")]
        # The first job opened the thread's connection (on MySQL, Django also
        # opens one briefly to learn the server's version).
        assert created
        created.clear()
        for number in range(1, 10):
            assert asyncio.run(job(number)) == [user("hi")]
    finally:
        connection_created.disconnect(count)
        database["CONN_MAX_AGE"] = saved
        close_db_threads()
    assert created == []


@pytest.mark.django_db(transaction=True)
def test_cancelled_appends_never_hang_overtake_or_lose_their_signal(
    appended: list[dict[str, Any]],
) -> None:
    """200 appends cancelled at random points (some twice) while 8 other
    tasks append: every stored append was signalled exactly once, each
    session holds its messages in the order they were made, and nothing
    hangs."""
    store = DjangoMemoryStore()
    rng = random.Random(20261205)

    async def steady(lane: int) -> None:
        for number in range(25):
            await store.append(append_input(f"steady-{lane}", [user(str(number))], turn=number + 1))

    async def cancelled(lane: int) -> None:
        for number in range(25):
            task = asyncio.ensure_future(
                store.append(append_input(f"cancel-{lane}", [user(str(number))], turn=number + 1))
            )
            await asyncio.sleep(rng.choice([0, 0, 0.0005, 0.002]))
            task.cancel()
            if rng.random() < 0.3:
                await asyncio.sleep(0)
                task.cancel()
            # As a caller that stopped waiting and goes on: the next append
            # must not overtake this one.
            with contextlib.suppress(asyncio.CancelledError):
                await task

    async def main() -> None:
        lanes = [steady(lane) for lane in range(8)] + [cancelled(lane) for lane in range(8)]
        await asyncio.wait_for(asyncio.gather(*lanes), timeout=120)

    asyncio.run(main())

    stored: dict[str, list[int]] = {}
    for lane in range(8):
        for prefix in ("steady", "cancel"):
            session = f"{prefix}-{lane}"
            loaded = asyncio.run(store.load(MemoryContext(session)))
            stored[session] = [int(message["content"]) for message in loaded]
    for session, numbers in stored.items():
        assert numbers == sorted(numbers), session
        if session.startswith("steady"):
            assert numbers == list(range(25))
    signalled = Counter(
        (call["session_id"], int(call["messages"][0]["content"])) for call in appended
    )
    kept = Counter((session, number) for session, numbers in stored.items() for number in numbers)
    assert signalled == kept
