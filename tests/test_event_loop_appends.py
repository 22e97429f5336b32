"""Appends from plain asyncio code, in the event loop (PostgreSQL and SQLite).

Whatever the database, an append made there stores and announces what one
on the store's threads would: the same rows, one copy of a retried append,
the scope check, signals after the commit. The vendors' own cases are in
test_async_postgres.py and test_async_sqlite.py.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from django.db import connection

from anvia_django import async_postgres, async_sqlite, db_threads
from anvia_django.core.memory.errors import ConversationScopeError
from anvia_django.models import Conversation
from anvia_django.store import DjangoMemoryStore

from .helpers import append_input, stored, user

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.skipif(
        connection.vendor == "mysql", reason="MySQLdb has no async connections: appends hop"
    ),
]


def held_by_event_loops() -> list[Any]:
    return [*async_postgres.loop_connections.all(), *async_sqlite.loop_databases.all()]


def test_appends_run_in_the_event_loop_and_store_what_the_threads_would(
    appended: list[dict[str, Any]],
) -> None:
    store = DjangoMemoryStore()

    async def main() -> None:
        await store.append(append_input("loop", [user("a"), user("b")], user_id="u1"))
        await store.append(append_input("loop", [user("c")], run_id="run-2", user_id="u1"))

    asyncio.run(main())
    assert db_threads._pools == {}  # no store thread was needed
    assert len(held_by_event_loops()) == 1
    assert stored("loop") == [
        (0, "run-1", 1, user("a")),
        (1, "run-1", 1, user("b")),
        (2, "run-2", 1, user("c")),
    ]
    conversation = Conversation.objects.get(session_id="loop")
    assert (conversation.message_count, conversation.user_id) == (3, "u1")
    assert [(c["first_position"], c["ref"], c["messages"]) for c in appended] == [
        (0, conversation.ref, [user("a"), user("b")]),
        (2, conversation.ref, [user("c")]),
    ]


def test_a_retried_append_is_stored_once_and_announced_once(
    appended: list[dict[str, Any]],
) -> None:
    store = DjangoMemoryStore()
    append = append_input("retry", [user("once")])

    async def main() -> None:
        await store.append(append)
        await store.append(append)

    asyncio.run(main())
    assert stored("retry") == [(0, "run-1", 1, user("once"))]
    assert Conversation.objects.get(session_id="retry").message_count == 1
    assert len(appended) == 1


def test_another_users_session_is_refused_and_left_as_it_was() -> None:
    store = DjangoMemoryStore()

    async def main() -> None:
        await store.append(append_input("owned", [user("mine")], user_id="alice"))
        with pytest.raises(ConversationScopeError):
            await store.append(append_input("owned", [user("theirs")], user_id="mallory"))

    asyncio.run(main())
    assert stored("owned") == [(0, "run-1", 1, user("mine"))]
    assert Conversation.objects.get(session_id="owned").message_count == 1


def test_turned_off_appends_go_to_the_store_threads(settings: Any) -> None:
    settings.ANVIA_DJANGO = {"EVENT_LOOP_APPENDS": False}
    asyncio.run(DjangoMemoryStore().append(append_input("threads", [user("hi")])))
    assert db_threads._pools != {}
    assert held_by_event_loops() == []
    assert stored("threads") == [(0, "run-1", 1, user("hi"))]
