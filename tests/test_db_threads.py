"""Where store calls from async code run, and what each place can see.

Outside any request or ``async_to_sync`` (plain ``asyncio.run``), calls
spread over the store's own threads, each with its own connection, and run
at the same time on PostgreSQL; on SQLite they queue on one thread. With a
sync caller around them (``async_to_sync``, a ``TestCase``, a request's
``ThreadSensitiveContext``) they run on the caller's thread and connection,
inside its open transaction.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest
from asgiref.sync import ThreadSensitiveContext, async_to_sync
from django.db import DatabaseError, connections, transaction
from django.test import TestCase

from anvia_django.models import Conversation, MemoryMessage
from anvia_django.persistence import append_messages
from anvia_django.persistence.threads.dispatch import (
    close_db_threads,
    has_outer_sync_thread,
    run_in_db_thread,
)
from anvia_django.store import DjangoMemoryStore

from .helpers import append_input, user

TASKS = 4


@pytest.fixture(autouse=True)
def _stop_store_threads() -> Iterator[None]:
    yield
    close_db_threads()


def where(*, using: str | None) -> tuple[str, int | None]:
    """This call's thread name, and its PostgreSQL backend pid."""
    conn = connections[using or "default"]
    pid = None
    if conn.vendor == "postgresql":
        with conn.cursor() as cursor:
            cursor.execute("SELECT pg_backend_pid()")
            pid = cursor.fetchone()[0]
    return threading.current_thread().name, pid


def close_connections(*, using: str | None) -> None:
    """Close this thread's connections (asgiref's threads never do)."""
    connections.close_all()


def open_transaction_at_once(barrier: threading.Barrier, *, using: str | None) -> int:
    """Hold a transaction open until every task holds one: needs them all at once."""
    with transaction.atomic(using=using), connections[using or "default"].cursor() as cursor:
        cursor.execute("SELECT pg_backend_pid()")
        pid: int = cursor.fetchone()[0]
        barrier.wait(timeout=20)
    return pid


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_tasks_hold_transactions_at_once_on_their_own_connections() -> None:
    barrier = threading.Barrier(TASKS)

    async def main() -> list[int]:
        assert not has_outer_sync_thread()
        calls = [
            run_in_db_thread(open_transaction_at_once, barrier, using=None) for _ in range(TASKS)
        ]
        return await asyncio.gather(*calls)

    # On one shared thread the first call would wait at the barrier forever
    # (BrokenBarrierError after the timeout): all four transactions were open at once.
    pids = asyncio.run(main())
    assert len(set(pids)) == TASKS


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_concurrent_appends_from_asyncio_run_use_several_threads_and_store_everything() -> None:
    store = DjangoMemoryStore()
    sessions = [f"worker-{n}" for n in range(8)]

    async def session_work(session: str) -> list[tuple[str, int | None]]:
        seen = []
        for i in range(10):
            await store.append(append_input(session, [user(f"{session} {i}")], run_id=f"r{i}"))
            seen.append(await run_in_db_thread(where, using=None))
        return seen

    async def main() -> list[list[tuple[str, int | None]]]:
        return await asyncio.gather(*(session_work(s) for s in sessions))

    places = {place for seen in asyncio.run(main()) for place in seen}
    assert len({name for name, _ in places}) > 1
    assert all(name.startswith("anvia-db-shared-") for name, _ in places)
    # One connection per thread, kept from call to call.
    assert len({pid for _, pid in places}) == len({name for name, _ in places})
    for session in sessions:
        stored = list(
            MemoryMessage.objects.filter(conversation__session_id=session)
            .order_by("position")
            .values_list("position", "message")
        )
        assert stored == [(i, user(f"{session} {i}")) for i in range(10)]


@pytest.mark.sqlite
@pytest.mark.django_db(transaction=True)
def test_sqlite_calls_queue_on_one_thread() -> None:
    store = DjangoMemoryStore()

    async def session_work(session: str) -> set[str]:
        names = set()
        for i in range(5):
            await store.append(append_input(session, [user(str(i))]))
            names.add((await run_in_db_thread(where, using=None))[0])
        return names

    async def main() -> list[set[str]]:
        return await asyncio.gather(*(session_work(f"q{n}") for n in range(8)))

    names = set().union(*asyncio.run(main()))
    assert names == {"anvia-db-default-0"}
    assert [c.message_count for c in Conversation.objects.order_by("session_id")] == [5] * 8


@pytest.mark.django_db(transaction=True)
def test_store_threads_none_keeps_asgirefs_shared_thread(settings: Any) -> None:
    settings.ANVIA_DJANGO = {"STORE_THREADS": None}

    async def main() -> set[str]:
        calls = [run_in_db_thread(where, using=None) for _ in range(TASKS)]
        names = {name for name, _ in await asyncio.gather(*calls)}
        await run_in_db_thread(close_connections, using=None)
        return names

    (name,) = asyncio.run(main())
    assert not name.startswith("anvia-db-")


@pytest.mark.django_db
def test_async_to_sync_inside_atomic_sees_and_rolls_back_with_the_caller() -> None:
    store = DjangoMemoryStore()

    def inside_atomic() -> None:
        with transaction.atomic():
            append_messages(append_input("outer", [user("first")]))
            async_to_sync(store.append)(append_input("outer", [user("inside")], run_id="r2"))
            # The append ran on this thread's connection: it saw the caller's
            # uncommitted conversation, and its own rows are visible here.
            assert Conversation.objects.get(session_id="outer").message_count == 2
            context = append_input("outer", []).context
            assert async_to_sync(store.load)(context) == [user("first"), user("inside")]
            raise RuntimeError("undo")

    with pytest.raises(RuntimeError, match="undo"):
        inside_atomic()
    assert not Conversation.objects.filter(session_id="outer").exists()


@pytest.mark.django_db
def test_a_request_context_keeps_calls_on_its_own_thread() -> None:
    async def request() -> set[str]:
        async with ThreadSensitiveContext():
            assert has_outer_sync_thread()
            calls = [run_in_db_thread(where, using=None) for _ in range(TASKS)]
            names = {name for name, _ in await asyncio.gather(*calls)}
            await run_in_db_thread(close_connections, using=None)
            return names

    (name,) = asyncio.run(request())
    assert not name.startswith("anvia-db-")


class AsyncTestCaseSeesItsTransaction(TestCase):
    """Django runs an async test method through ``async_to_sync``."""

    @classmethod
    def setUpTestData(cls) -> None:
        append_messages(append_input("fixture", [user("first")], user_id="u1"))

    async def test_store_sees_the_test_transaction(self) -> None:
        store = DjangoMemoryStore()
        await store.append(append_input("fixture", [user("hi")], user_id="u1"))
        context = append_input("fixture", [], user_id="u1").context
        assert await store.load(context) == [user("first"), user("hi")]
        conversation = await Conversation.objects.aget(session_id="fixture")
        assert conversation.message_count == 2


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_close_db_threads_closes_their_connections() -> None:
    async def main() -> list[tuple[str, int | None]]:
        return await asyncio.gather(*(run_in_db_thread(where, using=None) for _ in range(TASKS)))

    pids = [pid for _, pid in asyncio.run(main())]
    close_db_threads()
    # A closed client connection's server process ends after it reads the
    # Terminate message, a moment later on a loaded machine: wait for that,
    # boundedly. Connections left open would stay listed for good.
    remaining: int | None = None
    with connections["default"].cursor() as cursor:
        for _ in range(100):
            cursor.execute("SELECT count(*) FROM pg_stat_activity WHERE pid = ANY(%s)", [pids])
            remaining = cursor.fetchone()[0]
            if remaining == 0:
                break
            time.sleep(0.05)
    assert remaining == 0


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_a_dead_connection_is_replaced_after_the_call_that_met_it(settings: Any) -> None:
    settings.ANVIA_DJANGO = {"STORE_THREADS": 1}
    store = DjangoMemoryStore()

    async def call() -> tuple[str, int | None]:
        return await run_in_db_thread(where, using=None)

    _, first = asyncio.run(call())
    with connections["default"].cursor() as cursor:
        cursor.execute("SELECT pg_terminate_backend(%s)", [first])
    with pytest.raises(DatabaseError):
        asyncio.run(call())
    _, second = asyncio.run(call())
    assert second != first
    asyncio.run(store.append(append_input("after", [user("ok")])))
    assert Conversation.objects.get(session_id="after").message_count == 1


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True, databases=["default", "pooled"])
def test_psycopg_pool_connections_go_back_after_each_call(pooled_alias: str, settings: Any) -> None:
    store = DjangoMemoryStore(using=pooled_alias)

    async def main() -> None:
        # Eight tasks on up to eight threads share a pool of two connections.
        await asyncio.gather(
            *(store.append(append_input(f"pool-{n}", [user("hi")])) for n in range(8))
        )

    asyncio.run(main())
    pool = connections[pooled_alias].pool  # type: ignore[attr-defined]
    assert pool.get_stats()["pool_max"] == 2
    # Both connections can be taken: none is held by an idle thread. (Not
    # pool_available == pool_size: a connection the pool is still adding,
    # after a call waited for one, counts in the size before it is ready.)
    taken = [pool.getconn(timeout=20) for _ in range(2)]
    for conn in taken:
        pool.putconn(conn)
    assert Conversation.objects.filter(session_id__startswith="pool-").count() == 8


@pytest.mark.parametrize("value", [0, -1, "8", 2.5, True])
def test_store_threads_must_be_a_positive_integer_or_none(settings: Any, value: object) -> None:
    from anvia_django.checks import check_settings

    settings.ANVIA_DJANGO = {"STORE_THREADS": value}
    assert [m.id for m in check_settings()] == ["anvia_django.E006"]
    settings.ANVIA_DJANGO = {"STORE_THREADS": None}
    assert check_settings() == []


def test_a_cancelled_call_that_already_started_finishes_before_the_caller_resumes() -> None:
    started, release = threading.Event(), threading.Event()
    finished: list[str] = []

    def slow(*, using: str | None) -> None:
        started.set()
        release.wait(timeout=20)
        finished.append("done")

    async def main() -> None:
        task = asyncio.ensure_future(run_in_db_thread(slow, using=None))
        await asyncio.get_running_loop().run_in_executor(None, started.wait, 20)
        task.cancel()
        await asyncio.sleep(0.05)
        assert not task.done()  # still waiting for the running call
        release.set()
        with pytest.raises(asyncio.CancelledError):
            await task
        assert finished == ["done"]

    asyncio.run(main())


def test_a_call_cancelled_before_it_started_never_runs(settings: Any) -> None:
    settings.ANVIA_DJANGO = {"STORE_THREADS": 1}
    release = threading.Event()
    ran: list[int] = []

    def block(*, using: str | None) -> None:
        release.wait(timeout=20)

    def record(*, using: str | None) -> None:
        ran.append(1)

    async def main() -> None:
        first = asyncio.ensure_future(run_in_db_thread(block, using=None))
        queued = asyncio.ensure_future(run_in_db_thread(record, using=None))
        await asyncio.sleep(0.05)
        queued.cancel()
        with pytest.raises(asyncio.CancelledError):
            await queued
        release.set()
        await first

    asyncio.run(main())
    assert ran == []


def test_the_removed_event_loop_setting_is_named_and_ignored(settings: Any) -> None:
    from anvia_django.checks import check_settings

    settings.ANVIA_DJANGO = {"EVENT_LOOP_APPENDS": True}
    messages = check_settings()
    assert [m.id for m in messages] == ["anvia_django.W007"]
    assert "EVENT_LOOP_APPENDS" in messages[0].msg
