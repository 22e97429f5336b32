"""A retried append writes nothing, also when it races the original's commit,
and on PostgreSQL an append that is no retry is one statement."""

from __future__ import annotations

import threading
from collections.abc import Callable

import pytest
from django.db import connection, connections, transaction
from django.test.utils import CaptureQueriesContext

from anvia_django.conf import app_settings
from anvia_django.core.memory import MemoryContext
from anvia_django.models import Conversation, MemoryMessage
from anvia_django.persistence import append_messages, load_messages

from .helpers import append_input, assistant, user
from .lock_waits import StatementWatch, wait_for_a_lock_wait


@pytest.mark.django_db(transaction=True)
def test_a_retry_waiting_on_the_original_append_writes_nothing() -> None:
    # The lost-connection-during-commit case: the retry arrives while the
    # original is still holding the conversation's lock. Once that commits,
    # the retry must see its rows, not a snapshot from before them.
    append_messages(append_input("s", [user("q")], turn=1))
    batch = [assistant("a"), {"role": "tool", "tool_call_id": "c1", "content": "ok"}]
    locked, release = threading.Event(), threading.Event()
    errors: list[BaseException] = []
    watch = StatementWatch()
    order: list[str] = []

    def original() -> None:
        try:
            with transaction.atomic():
                append_messages(append_input("s", batch, turn=2))
                locked.set()
                release.wait(20)
                order.append("original releases")
        except BaseException as error:  # pragma: no cover - reported below
            errors.append(error)
        finally:
            connections.close_all()

    def retry() -> None:
        try:
            locked.wait(20)
            with connection.execute_wrapper(watch):
                append_messages(append_input("s", batch, turn=2))
            order.append("retry returns")
        except BaseException as error:  # pragma: no cover - reported below
            errors.append(error)
        finally:
            connections.close_all()

    threads = [threading.Thread(target=original), threading.Thread(target=retry)]
    for thread in threads:
        thread.start()
    assert locked.wait(20)
    # The retry is seen waiting for the original's lock (on the server, or
    # on SQLite inside the statement that takes the write lock)...
    wait_for_a_lock_wait(watch)
    order.append("retry waits")
    release.set()
    for thread in threads:
        thread.join(30)
    assert errors == []
    # ... and returns only after the original committed.
    assert order == ["retry waits", "original releases", "retry returns"]
    assert load_messages(MemoryContext("s")) == [user("q"), *batch]
    assert Conversation.objects.get().message_count == 3
    assert list(MemoryMessage.objects.order_by("position").values_list("position", flat=True)) == [
        0,
        1,
        2,
    ]


@pytest.mark.django_db
def test_a_rolled_back_retry_leaves_the_next_append_gap_free() -> None:
    batch = [assistant("a"), assistant("b")]
    append_messages(append_input("s", batch, turn=1))
    append_messages(append_input("s", batch, turn=1))
    append_messages(append_input("s", [user("next")], turn=2))
    assert list(MemoryMessage.objects.order_by("position").values_list("position", flat=True)) == [
        0,
        1,
        2,
    ]
    assert Conversation.objects.get().message_count == 3


def statements(work: Callable[[], object]) -> list[str]:
    """The SQL ``work`` sends, less the savepoints of the test's transaction."""
    with CaptureQueriesContext(connection) as captured:
        work()
    sql = [query["sql"] for query in captured.captured_queries]
    return [text for text in sql if not text.startswith(("SAVEPOINT", "RELEASE", "ROLLBACK"))]


@pytest.mark.django_db
def test_an_append_is_one_statement_on_postgresql_and_a_retry_writes_nothing() -> None:
    if app_settings.SQL_DIALECT == "generic":
        pytest.skip("counts the statements of the SQL written per database")
    append_messages(append_input("s", [user("q"), assistant("a")], turn=1))
    second = append_input("s", [user("q2"), assistant("a2")], turn=2)
    # PostgreSQL: create-or-lock, scope and retry checks and the insert in
    # one statement. SQLite, in-process: the upsert, the check, the insert.
    expected = 1 if connection.vendor == "postgresql" else 3
    assert len(statements(lambda: append_messages(second))) == expected
    # A retry: on PostgreSQL the one statement writes nothing, and the
    # append in steps (upsert, then the check sharing the insert's
    # statement) finds the copy and rolls back; on SQLite the upsert and
    # the check, which finds the copy and stops.
    retried = statements(lambda: append_messages(second))
    assert len(retried) == (3 if connection.vendor == "postgresql" else 2)
    assert Conversation.objects.get().message_count == 4
    assert MemoryMessage.objects.count() == 4
