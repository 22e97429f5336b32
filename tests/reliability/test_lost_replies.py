"""An append whose COMMIT reached the database but whose answer was lost is
signalled exactly once, across the retry that finds it stored (issue 33, N2).
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Callable
from typing import Any

import pytest
from django.db import OperationalError, connection, connections

from anvia_django.core.memory import MemoryContext
from anvia_django.encryption import encryption_enabled
from anvia_django.persistence import dialects
from anvia_django.persistence.threads.dispatch import (
    close_db_threads,
    queued_calls,
    run_in_db_thread,
)
from anvia_django.persistence.transcript import unconfirmed
from anvia_django.store import DjangoMemoryStore
from tests.helpers import append_input, assistant, run, stored, user

from .test_faults import FailingCommit, InjectedFault, LostAnswer, kill_connection

STORE = DjangoMemoryStore()


@pytest.fixture(autouse=True)
def nothing_remembered() -> None:
    unconfirmed._began.clear()


class CommitsThenLosesTheConnection:
    """``connection._commit`` whose COMMIT reaches the server, after which
    the connection dies before its answer arrives (the first time only)."""

    def __init__(self) -> None:
        self.real_commit: Callable[[], None] = connection._commit  # type: ignore[attr-defined]
        self.calls = 0

    def __call__(self) -> None:
        self.calls += 1
        self.real_commit()
        if self.calls == 1:
            kill_connection("killed by the server")
            raise OperationalError(2013, "Lost connection to server during query")


@pytest.mark.mysql
@pytest.mark.django_db(transaction=True, databases=["default", "other"])
def test_a_lost_commit_answer_is_retried_and_the_stored_append_signalled_once(
    appended: list[dict[str, Any]], monkeypatch: pytest.MonkeyPatch
) -> None:
    run(STORE.append, append_input("s", [user("hi")], user_id="u"))
    appended.clear()
    lost = CommitsThenLosesTheConnection()
    monkeypatch.setattr(connection, "_commit", lost)
    # The store reconnects and runs the append again: it finds it stored.
    run(STORE.append, append_input("s", [user("a"), assistant("b")], run_id="r2", user_id="u"))
    assert lost.calls >= 1
    assert [message for *_, message in stored("s")] == [user("hi"), user("a"), assistant("b")]
    assert [(call["run_id"], call["first_position"]) for call in appended] == [("r2", 1)]
    assert appended[0]["messages"] == [user("a"), assistant("b")]


@pytest.mark.django_db(transaction=True)
def test_the_callers_retry_after_an_ambiguous_commit_signals_the_stored_append_once(
    appended: list[dict[str, Any]], monkeypatch: pytest.MonkeyPatch
) -> None:
    # The error reaches the caller (it is not a lost connection the store
    # could retry); the caller calls again with the same input.
    run(STORE.append, append_input("s", [user("hi")], user_id="u"))
    appended.clear()
    request = append_input("s", [user("a"), assistant("b")], run_id="r2", user_id="u")
    monkeypatch.setattr(connection, "_commit", FailingCommit(after_committing=True))
    # Where the append is one statement in autocommit, its answer is what is lost.
    with connection.execute_wrapper(LostAnswer()), pytest.raises(InjectedFault):
        run(STORE.append, request)
    monkeypatch.undo()
    assert appended == []
    run(STORE.append, request)
    run(STORE.append, request)  # and again: it was signalled already
    assert [message for *_, message in stored("s")] == [user("hi"), user("a"), assistant("b")]
    assert [(call["run_id"], call["first_position"]) for call in appended] == [("r2", 1)]


@pytest.mark.django_db(transaction=True)
def test_a_retry_after_a_commit_that_did_not_happen_writes_and_signals_once(
    appended: list[dict[str, Any]], monkeypatch: pytest.MonkeyPatch
) -> None:
    run(STORE.append, append_input("s", [user("hi")], user_id="u"))
    appended.clear()
    request = append_input("s", [user("a")], run_id="r2", user_id="u")
    failing = FailingCommit(after_committing=False)
    monkeypatch.setattr(connection, "_commit", failing)
    with contextlib.suppress(InjectedFault):
        run(STORE.append, request)
    monkeypatch.undo()
    if not failing.calls:
        pytest.skip("one statement in autocommit: no COMMIT of its own to fail")
    run(STORE.append, request)
    run(STORE.append, request)
    assert [message for *_, message in stored("s")] == [user("hi"), user("a")]
    assert len(appended) == 1


@pytest.mark.django_db(transaction=True)
def test_an_append_stored_and_signalled_before_is_not_signalled_again(
    appended: list[dict[str, Any]], monkeypatch: pytest.MonkeyPatch
) -> None:
    # A caller repeats an append that had succeeded; this repeat's own
    # answer is lost: the copy it finds was signalled by the first call.
    request = append_input("s", [user("a")], user_id="u")
    run(STORE.append, request)
    assert len(appended) == 1
    monkeypatch.setattr(connection, "_commit", FailingCommit(after_committing=True))
    with connection.execute_wrapper(LostAnswer()), contextlib.suppress(InjectedFault):
        run(STORE.append, request)
    monkeypatch.undo()
    run(STORE.append, request)
    assert [message for *_, message in stored("s")] == [user("a")]
    assert len(appended) == 1


GROUP = 5


def appends_as_one_group() -> None:
    """``GROUP`` appends to sessions g0.. queued behind the store's one
    thread while it is held, so that they run as one group."""

    def hold(started: threading.Event, release: threading.Event, *, using: str | None) -> None:
        started.set()
        assert release.wait(timeout=20)

    async def appends() -> None:
        started, release = threading.Event(), threading.Event()
        held = asyncio.ensure_future(run_in_db_thread(hold, started, release, using=None))
        await asyncio.to_thread(started.wait, 20)
        tasks = [
            asyncio.ensure_future(STORE.append(append_input(f"g{n}", [user(str(n))])))
            for n in range(GROUP)
        ]
        while queued_calls() < GROUP:  # every append queued behind the held call
            await asyncio.sleep(0.001)
        release.set()
        await held
        await asyncio.gather(*tasks)

    asyncio.run(appends())
    close_db_threads()


def assert_each_stored_and_signalled_once(appended: list[dict[str, Any]]) -> None:
    for n in range(GROUP):
        assert run(STORE.load, MemoryContext(f"g{n}")) == [user(str(n))]
    assert sorted(call["session_id"] for call in appended) == [f"g{n}" for n in range(GROUP)]


@pytest.fixture
def one_store_thread(settings: Any) -> None:
    settings.ANVIA_DJANGO = {"STORE_THREADS": 1}
    close_db_threads()


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_a_group_statement_whose_answer_was_lost_signals_each_append_once(
    appended: list[dict[str, Any]], one_store_thread: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    if encryption_enabled():
        pytest.skip("sealed appends group in one transaction (the next test)")
    real = dialects.PostgreSQLDialect.append_group
    groups: list[int] = []

    def answer_lost(self: Any, using: str, appends: Any) -> Any:
        groups.append(len(appends))
        written = real(self, using, appends)
        if len(groups) == 1:
            connections[using].close()
            raise OperationalError("the connection was lost after the group committed")
        return written

    monkeypatch.setattr(dialects.PostgreSQLDialect, "append_group", answer_lost)
    appends_as_one_group()
    assert groups[0] == GROUP
    assert_each_stored_and_signalled_once(appended)


@pytest.mark.django_db(transaction=True)
def test_a_group_transaction_whose_commit_answer_was_lost_signals_each_append_once(
    appended: list[dict[str, Any]], one_store_thread: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    if connection.vendor == "mysql":
        pytest.skip("MariaDB and MySQL append alone, never in groups")
    if connection.vendor == "postgresql" and not encryption_enabled():
        pytest.skip("PostgreSQL's groups are one statement (the test before)")
    backend = type(connections["default"])
    real_commit = backend._commit  # type: ignore[attr-defined]
    commits: list[str] = []

    def answer_lost(self: Any) -> None:
        real_commit(self)
        if threading.current_thread().name.startswith("anvia-db-"):
            commits.append("group")
            if len(commits) == 1:
                raise OperationalError("the answer to COMMIT was lost")

    monkeypatch.setattr(backend, "_commit", answer_lost)
    appends_as_one_group()
    monkeypatch.undo()
    assert commits[0] == "group"
    assert_each_stored_and_signalled_once(appended)
