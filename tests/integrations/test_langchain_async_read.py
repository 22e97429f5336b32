"""DjangoChatMessageHistory.messages read from inside async code (issue 13,
case 3), as LangChain's in-memory history can be: in an event loop of this
thread (a notebook, asyncio.run) and in one under async_to_sync (an async
view), on SQLite and PostgreSQL.

The read runs in a fresh thread with its own connection, which sees
committed data only; so these tests commit for real (transaction=True)."""

from __future__ import annotations

import asyncio
import threading
import time
from typing import Any

import pytest
from asgiref.sync import async_to_sync
from django.core.exceptions import SynchronousOnlyOperation
from django.db import connection, transaction

from tests.helpers import snapshot

pytest.importorskip("langchain_core")

from langchain_core.chat_history import InMemoryChatMessageHistory
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage

from anvia_django.integrations.langchain import DjangoChatMessageHistory

from .langchain_support import IGNORE_IN_MEMORY_DEPRECATION

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.filterwarnings(IGNORE_IN_MEMORY_DEPRECATION),
]

EXCHANGE: list[BaseMessage] = [
    HumanMessage("Where is order 42?", id="h1"),
    AIMessage("", tool_calls=[{"id": "c1", "name": "lookup", "args": {"order": 42}}]),
    ToolMessage("shipped", tool_call_id="c1"),
    AIMessage("It has shipped."),
]


def read_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name == "anvia-sync-read"]


def open_backends() -> int:
    """Connections to the test database (PostgreSQL), this one included."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()")
        (count,) = cursor.fetchone()
    return int(count)


def test_messages_reads_inside_an_event_loop_like_the_in_memory_history() -> None:
    ours = DjangoChatMessageHistory("notebook")
    reference = InMemoryChatMessageHistory()
    for history in (ours, reference):
        history.add_messages(EXCHANGE[:2])
        history.add_messages(EXCHANGE[2:])
    backends = open_backends() if connection.vendor == "postgresql" else None

    async def cell() -> tuple[list[BaseMessage], list[BaseMessage]]:
        # What a notebook cell or an async view does: the sync property.
        return ours.messages, reference.messages

    seen, expected = asyncio.run(cell())
    assert seen == expected == EXCHANGE
    assert read_threads() == []
    if backends is not None:
        # The read thread closed the connection it opened. A closed
        # connection's backend lingers in pg_stat_activity for a moment.
        deadline = time.monotonic() + 5
        while open_backends() > backends and time.monotonic() < deadline:
            time.sleep(0.05)
        assert open_backends() <= backends


def test_messages_reads_inside_async_to_sync_as_in_an_async_view() -> None:
    history = DjangoChatMessageHistory("view", user_id="u1")
    history.add_messages(EXCHANGE)

    async def view() -> list[BaseMessage]:
        return history.messages

    assert async_to_sync(view)() == EXCHANGE
    assert async_to_sync(view)() == history.messages


def test_reads_inside_a_loop_keep_owner_scoping_and_errors() -> None:
    DjangoChatMessageHistory("owned", user_id="alice").add_messages(EXCHANGE[:1])

    async def intrude() -> Any:
        return DjangoChatMessageHistory("owned", user_id="mallory").messages

    from anvia_django.core.memory import ConversationScopeError

    with pytest.raises(ConversationScopeError):
        asyncio.run(intrude())


def test_a_read_cannot_deadlock_on_a_transaction_waiting_for_the_loop() -> None:
    """A sync caller inside atomic() that waits (async_to_sync) for a loop
    whose code reads the same conversation: the read does not wait for the
    caller's locks, and sees what was committed before."""
    history = DjangoChatMessageHistory("locked")
    history.add_messages(EXCHANGE[:1])
    seen: list[list[BaseMessage]] = []

    async def read() -> list[BaseMessage]:
        return history.messages

    def sync_caller() -> None:
        try:
            with transaction.atomic():
                history.add_messages(EXCHANGE[1:])  # locks the conversation row
                seen.append(async_to_sync(read)())
        finally:
            connection.close()

    caller = threading.Thread(target=sync_caller)
    caller.start()
    caller.join(timeout=60)
    assert not caller.is_alive(), "the read waited on the caller's transaction"
    assert seen == [EXCHANGE[:1]]
    assert history.messages == EXCHANGE


SYNC_WRITES: dict[str, tuple[Any, Any, list[BaseMessage]]] = {
    # method: (the sync call, the async call to use instead, the history after it)
    "add_messages": (
        lambda h: h.add_messages(EXCHANGE[1:]),
        lambda h: h.aadd_messages(EXCHANGE[1:]),
        EXCHANGE,
    ),
    "add_message": (
        lambda h: h.add_message(EXCHANGE[1]),
        lambda h: h.aadd_messages([EXCHANGE[1]]),
        EXCHANGE[:2],
    ),
    "clear": (lambda h: h.clear(), lambda h: h.aclear(), []),
}


@pytest.mark.parametrize("method", list(SYNC_WRITES))
def test_sync_writes_inside_a_loop_say_which_method_to_await(method: str) -> None:
    history = DjangoChatMessageHistory("writes")
    history.add_messages(EXCHANGE[:1])
    before = snapshot()
    sync_call, async_call, after = SYNC_WRITES[method]

    async def sync_write() -> None:
        sync_call(history)

    async def async_write() -> list[BaseMessage]:
        await async_call(history)
        return history.messages

    expected = "aclear" if method == "clear" else "aadd_messages"
    with pytest.raises(SynchronousOnlyOperation, match=expected):
        asyncio.run(sync_write())
    assert snapshot() == before
    assert asyncio.run(async_write()) == after
