"""Appends from plain asyncio code on PostgreSQL: the event loop's own connections.

What must hold on that path is what holds on the store's threads: the same
rows, one copy of a retried append, the scope check, signals after the
commit, a dead connection survived, a cancelled append run to its end, and
connections closed with their loop. Appends made while the connections are
busy share a transaction: each is still stored whole, once, or refused.
"""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import pytest
from django.db import connections, transaction
from django.db.backends.postgresql.psycopg_any import IsolationLevel

from anvia_django import async_postgres, db_threads
from anvia_django.core.memory.errors import ConversationScopeError
from anvia_django.db_threads import close_db_threads
from anvia_django.models import Conversation
from anvia_django.persistence import dialects
from anvia_django.store import DjangoMemoryStore

from .helpers import append_input, stored, user

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]


def loop_connections() -> list[Any]:
    return [c for pool in async_postgres.loop_connections.all() for c in pool.opened]


def terminate(pid: int) -> None:
    with connections["default"].cursor() as cursor:
        cursor.execute("SELECT pg_terminate_backend(%s)", [pid])
    connections.close_all()


def test_a_killed_connection_is_replaced_and_nothing_is_lost_or_doubled() -> None:
    store = DjangoMemoryStore()

    async def main() -> None:
        await store.append(append_input("killed", [user("before")]))
        (connection,) = loop_connections()
        await asyncio.to_thread(terminate, connection.info.backend_pid)
        await store.append(append_input("killed", [user("after")], turn=2))
        assert connection.closed
        assert connection not in loop_connections()

    asyncio.run(main())
    assert [row[3] for row in stored("killed")] == [user("before"), user("after")]


def test_a_cancelled_append_runs_to_its_end_before_the_caller_resumes() -> None:
    store = DjangoMemoryStore()
    asyncio.run(store.append(append_input("cancelled", [user("first")])))
    locked, release = threading.Event(), threading.Event()

    def hold_the_row() -> None:
        with transaction.atomic():
            Conversation.objects.select_for_update().get(session_id="cancelled")
            locked.set()
            release.wait(timeout=20)
        connections.close_all()

    holder = threading.Thread(target=hold_the_row)
    holder.start()

    async def main() -> None:
        assert await asyncio.to_thread(locked.wait, 20)
        task = asyncio.ensure_future(
            store.append(append_input("cancelled", [user("second")], turn=2))
        )
        await asyncio.sleep(0.2)  # the statement now waits for the row lock
        task.cancel()
        await asyncio.sleep(0.1)
        assert not task.done()
        release.set()
        with pytest.raises(asyncio.CancelledError):
            await task

    try:
        asyncio.run(main())
    finally:
        release.set()
        holder.join(timeout=20)
    assert [row[3] for row in stored("cancelled")] == [user("first"), user("second")]
    assert Conversation.objects.get(session_id="cancelled").message_count == 2


def test_connections_follow_the_alias_settings_and_close_with_their_loop(settings: Any) -> None:
    alias = "serializable"
    default = connections["default"].settings_dict
    connections.settings[alias] = {
        **default,
        "OPTIONS": {**default["OPTIONS"], "isolation_level": IsolationLevel.SERIALIZABLE},
        "TEST": {**default["TEST"], "MIRROR": "default"},
    }
    store = DjangoMemoryStore(using=alias)

    async def first_loop() -> Any:
        await store.append(append_input("options", [user("hi")]))
        (connection,) = loop_connections()
        cursor = await connection.execute("SHOW TimeZone")
        assert (await cursor.fetchone())[0] == "UTC"
        # As on Django's connection: the level of the transactions it begins.
        assert connection.isolation_level == IsolationLevel.SERIALIZABLE
        return connection

    async def second_loop() -> None:
        await store.append(append_input("options", [user("again")], turn=2))
        (connection,) = loop_connections()
        close_db_threads()
        assert connection.closed
        await store.append(append_input("options", [user("reopened")], turn=3))
        assert loop_connections() != [connection]

    try:
        first = asyncio.run(first_loop())
        asyncio.run(second_loop())
        assert first.closed
    finally:
        close_db_threads()
        del connections.settings[alias]
    assert Conversation.objects.get(session_id="options").message_count == 3


def test_a_runner_cancelled_before_it_starts_gives_its_place_back(settings: Any) -> None:
    # Cancelled before its first step (its loop ending), a runner runs
    # none of its code; with one place in all, a lost place would leave
    # every later append waiting for a runner that never comes.
    settings.ANVIA_DJANGO = {"STORE_THREADS": 1}
    store = DjangoMemoryStore()

    async def main() -> None:
        held = async_postgres.loop_connections.get("default")
        held._start_runner(asyncio.get_running_loop())
        (runner,) = held._runners
        runner.cancel()
        append = asyncio.ensure_future(store.append(append_input("place", [user("hi")])))
        done, _ = await asyncio.wait({append}, timeout=10)
        if not done:  # fail rather than hang: the append's caller waits for it
            for waiting in held._waiting:
                waiting.future.cancel()
        assert done
        assert runner.cancelled()
        await append

    try:
        asyncio.run(main())
    finally:
        close_db_threads()
    assert [row[3] for row in stored("place")] == [user("hi")]


@pytest.mark.parametrize("sessions", [1, 5])
def test_tasks_appending_at_once_store_every_append_once_and_in_order(sessions: int) -> None:
    # Writers of one session queue on its row lock inside the append
    # function. Every fourth append is sent twice, as a retry would be: the
    # function leaves those to the steps on the store's threads, while the
    # other tasks' appends go on in the event loop.
    from .test_concurrency import kept_appends
    from .workers import writer_messages

    writers, appends = 12, 30
    session_ids = [f"tasks-{n}" for n in range(sessions)]
    store = DjangoMemoryStore()

    async def writer(number: int) -> None:
        for index in range(appends):
            append = append_input(
                session_ids[(index + number) % sessions],
                writer_messages(number, index),
                run_id=f"writer-{number}",
                turn=index + 1,
            )
            await store.append(append)
            if index % 4 == 0:
                await store.append(append)

    async def main() -> None:
        await asyncio.gather(*(writer(n) for n in range(writers)))

    asyncio.run(main())
    assert db_threads._pools != {}  # the retries, at least, went to the steps
    for slot, session_id in enumerate(session_ids):
        # Positions gap-free, counts exact, appends whole (kept_appends checks).
        kept = kept_appends(session_id)
        for number in range(writers):
            expected = [i for i in range(appends) if (i + number) % sessions == slot]
            assert kept.get(number, []) == expected, f"writer {number} in {session_id}"


def test_without_the_append_function_the_event_loop_sends_appends_to_the_steps(
    caplog: pytest.LogCaptureFixture,
) -> None:
    connection = connections["default"]
    dialects.drop_database_functions(connection)
    store = DjangoMemoryStore()

    async def main() -> None:
        await store.append(append_input("no-function", [user("a")]))
        await store.append(append_input("no-function", [user("b")], turn=2))

    try:
        asyncio.run(main())
    finally:
        dialects.create_database_functions(connection)
        dialects.forget_missing_functions()
    assert [row[3] for row in stored("no-function")] == [user("a"), user("b")]
    warnings = [r for r in caplog.records if dialects.APPEND_FUNCTION in r.getMessage()]
    assert len(warnings) == 1


def transactions_by_session() -> dict[str, int]:
    """Each conversation's writing transaction (``xmin``: rows a transaction
    wrote carry its id)."""
    with connections["default"].cursor() as cursor:
        cursor.execute("SELECT session_id, xmin::text FROM anvia_django_conversation")
        return {session_id: int(xmin) for session_id, xmin in cursor.fetchall()}


def test_appends_waiting_for_the_connection_share_one_transaction_of_at_most_eight(
    settings: Any, appended: list[dict[str, Any]]
) -> None:
    settings.ANVIA_DJANGO = {"STORE_THREADS": 1}
    store = DjangoMemoryStore()
    sessions = [f"group-{n:02}" for n in range(17)]
    # One to three messages each: the group's statement slices each
    # append's messages out of one array of them all.
    sent = {s: [user(f'{s} "{n}" \\ é') for n in range(i % 3 + 1)] for i, s in enumerate(sessions)}

    async def main() -> None:
        await asyncio.gather(*(store.append(append_input(s, sent[s])) for s in sessions))

    asyncio.run(main())
    assert db_threads._pools == {}  # no append needed the steps
    by_transaction: dict[int, list[str]] = {}
    for session_id, xmin in transactions_by_session().items():
        by_transaction.setdefault(xmin, []).append(session_id)
    sizes = sorted(len(group) for group in by_transaction.values())
    assert sizes == [1, 8, 8]
    for session_id, messages in sent.items():
        assert stored(session_id) == [(n, "run-1", 1, m) for n, m in enumerate(messages)]
        conversation = Conversation.objects.get(session_id=session_id)
        assert conversation.message_count == len(messages)
    signalled = {call["messages"][0]["content"]: call["messages"] for call in appended}
    assert signalled == {messages[0]["content"]: messages for messages in sent.values()}


def test_a_group_leaves_a_retry_and_another_users_session_to_the_steps(
    settings: Any, appended: list[dict[str, Any]]
) -> None:
    settings.ANVIA_DJANGO = {"STORE_THREADS": 1}
    store = DjangoMemoryStore()
    asyncio.run(store.append(append_input("owned", [user("mine")], user_id="alice")))
    retried = append_input("twice", [user("once")])

    async def main() -> list[BaseException | None]:
        results = await asyncio.gather(
            # Made before the loop's connection is free: one transaction.
            store.append(append_input("first", [user("fine")])),
            store.append(retried),
            store.append(append_input("owned", [user("theirs")], user_id="mallory", turn=2)),
            store.append(retried),
            store.append(append_input("other", [user("fine")])),
            return_exceptions=True,
        )
        return list(results)

    results = asyncio.run(main())
    assert [type(result) for result in results] == [
        type(None),
        type(None),
        ConversationScopeError,
        type(None),
        type(None),
    ]
    assert stored("twice") == [(0, "run-1", 1, user("once"))]
    assert stored("owned") == [(0, "run-1", 1, user("mine"))]
    assert stored("other") == [(0, "run-1", 1, user("fine"))]
    assert Conversation.objects.get(session_id="twice").message_count == 1
    assert Conversation.objects.get(session_id="owned").message_count == 1
    assert len(appended) == 4  # owned's first append, first, twice once, other
    written_by = transactions_by_session()
    assert written_by["first"] == written_by["twice"] == written_by["other"]


def test_a_group_gives_way_to_a_lock_held_elsewhere_and_its_appends_run_alone(
    settings: Any,
) -> None:
    # The holder's transaction could be waiting for a lock of the group's:
    # rather than wait, the group fails and each of its appends runs alone
    # on the store's threads, where only the held session's one waits.
    settings.ANVIA_DJANGO = {"STORE_THREADS": 1}
    store = DjangoMemoryStore()
    asyncio.run(store.append(append_input("held", [user("first")])))
    locked, release = threading.Event(), threading.Event()

    def hold_the_row() -> None:
        with transaction.atomic():
            Conversation.objects.select_for_update().get(session_id="held")
            locked.set()
            release.wait(timeout=20)
        connections.close_all()

    holder = threading.Thread(target=hold_the_row)
    holder.start()
    others = [f"free-{n}" for n in range(7)]

    async def main() -> None:
        assert await asyncio.to_thread(locked.wait, 20)
        group = [asyncio.ensure_future(store.append(append_input(s, [user(s)]))) for s in others]
        group.append(
            asyncio.ensure_future(store.append(append_input("held", [user("second")], turn=2)))
        )
        _, pending = await asyncio.wait(group[:-1], timeout=15)
        assert not pending, "the group waited for the held lock"
        assert not group[-1].done()
        release.set()
        await group[-1]

    try:
        asyncio.run(main())
    finally:
        release.set()
        holder.join(timeout=20)
    assert db_threads._pools != {}  # the group's appends ran alone
    assert [row[3] for row in stored("held")] == [user("first"), user("second")]
    for session_id in others:
        assert stored(session_id) == [(0, "run-1", 1, user(session_id))]
