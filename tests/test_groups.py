"""Group commit: appends queued for a busy store thread run together, and
each still behaves as it would alone (persistence/threads/group_commit.py).

Each test holds the store's only thread, queues its appends behind it (it
waits until the pool has them all), and checks the size of every group
that ran: with grouping off, they would each run alone and every test here
fails on its ``group_sizes``."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Awaitable, Iterator, Sequence
from typing import Any
from unittest import mock

import pytest
from django.db import DatabaseError, connection

from anvia_django.core.memory.errors import ConversationScopeError, InvalidMemoryInputError
from anvia_django.core.memory.types import MemoryContext
from anvia_django.persistence import dialects
from anvia_django.persistence.threads import group_commit
from anvia_django.persistence.threads.dispatch import close_db_threads, run_in_db_thread
from anvia_django.persistence.threads.group_commit import appends_together
from anvia_django.persistence.threads.pool import CallResult, DatabaseThreadPool, QueuedCall
from anvia_django.store import DjangoMemoryStore

from .helpers import append_input, stored, user


@pytest.fixture(autouse=True)
def one_store_thread(settings: Any) -> Iterator[None]:
    # One thread: appends made while it is held queue, and form one group.
    settings.ANVIA_DJANGO = {"STORE_THREADS": 1}
    close_db_threads()
    yield
    close_db_threads()


def grouped(size: int) -> list[int]:
    """The group sizes a test of ``size`` queued appends must see: one
    group of them where appends run in groups (PostgreSQL, SQLite: the
    spec of persistence/threads/group_commit.py), none elsewhere (each runs alone)."""
    return [size] if connection.vendor in ("postgresql", "sqlite") else []


@pytest.fixture
def group_sizes(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The number of appends of every group the store ran, in order."""
    sizes: list[int] = []

    def spy(alias: str, members: Sequence[QueuedCall]) -> list[CallResult]:
        sizes.append(len(members))
        return appends_together(alias, members)

    # group_for hands out the module's appends_together: the spy, while patched.
    monkeypatch.setattr(group_commit, "appends_together", spy)
    return sizes


@pytest.fixture
def submitted(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """One entry per call handed to a store thread pool (queued or started)."""
    calls: list[int] = []
    submit = DatabaseThreadPool.submit

    def counted(self: DatabaseThreadPool, *args: Any, **kwargs: Any) -> Any:
        calls.append(1)
        return submit(self, *args, **kwargs)

    monkeypatch.setattr(DatabaseThreadPool, "submit", counted)
    return calls


def _hold(started: threading.Event, release: threading.Event, *, using: str | None) -> None:
    started.set()
    assert release.wait(timeout=20)


async def _as_one_group(
    submitted: list[int], *appends: Awaitable[None]
) -> list[BaseException | None]:
    """Run ``appends`` while the store's only thread is held, so they queue
    and then run as one group; each one's error, or ``None``."""
    started, release = threading.Event(), threading.Event()
    held = asyncio.ensure_future(run_in_db_thread(_hold, started, release, using=None))
    await asyncio.to_thread(started.wait, 20)
    tasks = [asyncio.ensure_future(append) for append in appends]
    # Every append queued behind the held call before it ends: the held
    # call and each append are one submit to the pool.
    async with asyncio.timeout(20):
        while len(submitted) < 1 + len(appends):
            await asyncio.sleep(0)
    assert not held.done()
    release.set()
    await held
    return [
        outcome if isinstance(outcome, BaseException) else None
        for outcome in await asyncio.gather(*tasks, return_exceptions=True)
    ]


@pytest.mark.django_db(transaction=True)
def test_a_failing_append_fails_alone_and_only_committed_ones_are_signalled(
    appended: list[dict[str, Any]], group_sizes: list[int], submitted: list[int]
) -> None:
    store = DjangoMemoryStore()
    asyncio.run(store.append(append_input("owned", [user("mine")], user_id="alice")))
    appended.clear()

    errors = asyncio.run(
        _as_one_group(
            submitted,
            store.append(append_input("g-1", [user("one")])),
            store.append(append_input("owned", [user("not yours")], user_id="mallory")),
            store.append(append_input("g-2", [user("two")], turn=0)),  # bad input
            store.append(append_input("g-3", [user("three")])),
            store.append(append_input("owned", [user("mine again")], turn=2, user_id="alice")),
        )
    )

    assert group_sizes == grouped(5)
    assert [type(error) if error else None for error in errors] == [
        None,
        ConversationScopeError,
        InvalidMemoryInputError,
        None,
        None,
    ]
    assert [message["content"] for _, _, _, message in stored("owned")] == ["mine", "mine again"]
    assert [len(stored(session)) for session in ("g-1", "g-2", "g-3")] == [1, 0, 1]
    assert sorted(call["session_id"] for call in appended) == ["g-1", "g-3", "owned"]


@pytest.mark.django_db(transaction=True)
def test_a_retried_append_in_a_group_writes_nothing(
    appended: list[dict[str, Any]], group_sizes: list[int], submitted: list[int]
) -> None:
    store = DjangoMemoryStore()
    asyncio.run(store.append(append_input("retried", [user("once")])))
    appended.clear()

    errors = asyncio.run(
        _as_one_group(
            submitted,
            store.append(append_input("retried", [user("once")])),
            store.append(append_input("retried", [user("next")], turn=2)),
        )
    )

    assert group_sizes == grouped(2)
    assert errors == [None, None]
    assert [message["content"] for _, _, _, message in stored("retried")] == ["once", "next"]
    # The retry wrote nothing and sent no signal: only "next" did.
    assert [call["session_id"] for call in appended] == ["retried"]


@pytest.mark.django_db(transaction=True)
def test_appends_of_a_failed_group_run_again_alone(
    group_sizes: list[int], submitted: list[int]
) -> None:
    store = DjangoMemoryStore()
    failing = DatabaseError("the group failed")
    # PostgreSQL's group is one statement; SQLite's shares a transaction.
    statement = mock.patch.object(dialects.PostgreSQLDialect, "append_group", side_effect=failing)
    transaction = mock.patch("django.db.transaction.get_rollback", return_value=True)
    with statement as append_group, transaction as get_rollback:
        errors = asyncio.run(
            _as_one_group(
                submitted,
                *(store.append(append_input(f"alone-{n}", [user(str(n))])) for n in range(4)),
            )
        )
    assert group_sizes == grouped(4)
    if group_sizes:
        # The group met its failure (the one statement, or the shared
        # transaction found doomed), then each append ran again alone.
        assert append_group.called or get_rollback.called
    assert errors == [None] * 4
    for n in range(4):
        assert asyncio.run(store.load(MemoryContext(f"alone-{n}"))) == [user(str(n))]


@pytest.mark.django_db(transaction=True)
def test_many_appends_to_one_session_in_a_group_keep_their_order(
    group_sizes: list[int], submitted: list[int]
) -> None:
    store = DjangoMemoryStore()
    errors = asyncio.run(
        _as_one_group(
            submitted,
            *(store.append(append_input("ordered", [user(str(n))], turn=n + 1)) for n in range(20)),
        )
    )
    assert group_sizes == grouped(20)
    assert errors == [None] * 20
    positions = [(position, message["content"]) for position, _, _, message in stored("ordered")]
    assert positions == [(n, str(n)) for n in range(20)]
