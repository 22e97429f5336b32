"""DjangoMemoryInspector (SPEC section 4, invariant 9) and its query code."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from datetime import timedelta

import pytest
from django.contrib.auth.models import User
from django.db import connections
from django.test.utils import CaptureQueriesContext
from rest_framework.test import APIClient

from anvia_django.core.memory import (
    InvalidMemoryInputError,
    MemoryContext,
    MemoryConversationListOptions,
    MemoryErrorInput,
)
from anvia_django.models import Conversation
from anvia_django.persistence import (
    RowKey,
    find_conversation,
    list_conversation_page,
    list_failed_runs,
    list_message_page,
    record_failed_run,
)
from anvia_django.store import DjangoMemoryStore

from .api_client import LIST_URL, detail_url, messages_url
from .helpers import append_input, assistant, run, user
from .inspector_data import make_conversations, make_messages

pytestmark = pytest.mark.django_db

WRITES = ("INSERT", "UPDATE", "DELETE", "REPLACE", "MERGE", "CREATE", "DROP", "ALTER")


@contextmanager
def assert_no_writes() -> Iterator[CaptureQueriesContext]:
    with CaptureQueriesContext(connections["default"]) as captured:
        yield captured
    statements = [query["sql"].lstrip().upper() for query in captured.captured_queries]
    assert statements, "nothing was captured"
    assert not [sql for sql in statements if sql.startswith(WRITES)]
    assert not [sql for sql in statements if "FOR UPDATE" in sql]


def fill() -> DjangoMemoryStore:
    store = DjangoMemoryStore()
    run(store.append, append_input("a", [user("1"), assistant("2")], user_id="u1"))
    run(store.append, append_input("b", [user("3")], user_id="u2"))
    run(store.append, append_input("a", [user("4")], turn=2, user_id="u1"))
    return store


def test_the_inspector_writes_nothing() -> None:
    store = fill()
    inspector = store.inspector
    with assert_no_writes():
        summaries = run(inspector.list_conversations, MemoryConversationListOptions(limit=10))
        for summary in summaries:
            run(inspector.get_conversation, summary.ref)
        run(inspector.get_conversation, "unknown-ref")
        run(inspector.list_conversations, MemoryConversationListOptions(limit=1, user_id="u2"))


def test_the_api_writes_nothing() -> None:
    fill()
    client = APIClient()
    client.force_authenticate(User.objects.create_user("staff", is_staff=True))
    ref = Conversation.objects.get(session_id="a").ref
    with assert_no_writes():
        for url in (f"{LIST_URL}?limit=1", detail_url(ref), f"{messages_url(ref)}?limit=1"):
            assert client.get(url).status_code == 200


def test_list_conversations_orders_filters_and_limits() -> None:
    inspector = fill().inspector
    summaries = run(inspector.list_conversations, MemoryConversationListOptions(limit=10))
    assert [s.session_id for s in summaries] == ["a", "b"]
    assert [s.message_count for s in summaries] == [3, 1]
    only = run(inspector.list_conversations, MemoryConversationListOptions(limit=10, user_id="u2"))
    assert [s.session_id for s in only] == ["b"]
    one = run(inspector.list_conversations, MemoryConversationListOptions(limit=1))
    assert [s.session_id for s in one] == ["a"]


@pytest.mark.parametrize("limit", [0, -1, 1.5, "10", True, None])
def test_list_conversations_refuses_a_bad_limit(limit: object) -> None:
    inspector = DjangoMemoryStore().inspector
    with pytest.raises(ValueError, match="limit"):
        run(inspector.list_conversations, MemoryConversationListOptions(limit=limit))  # type: ignore[arg-type]


def test_get_conversation_returns_every_message_in_order() -> None:
    inspector = fill().inspector
    ref = Conversation.objects.get(session_id="a").ref
    conversation = run(inspector.get_conversation, ref)
    assert conversation is not None
    assert conversation.session_id == "a"
    assert conversation.user_id == "u1"
    assert [m.position for m in conversation.messages] == [0, 1, 2]
    assert [m.message for m in conversation.messages] == [user("1"), assistant("2"), user("4")]
    assert [m.turn for m in conversation.messages] == [1, 1, 2]
    assert all(m.created_at.utcoffset() == timedelta(0) for m in conversation.messages)


@pytest.mark.parametrize("ref", ["", "nope", "a" * 33, "../../etc", "a", None, 42])
def test_get_conversation_is_none_for_unknown_or_malformed_refs(ref: object) -> None:
    inspector = fill().inspector
    assert run(inspector.get_conversation, ref) is None


def test_refs_are_opaque_and_not_the_session_id() -> None:
    fill()
    refs = list(Conversation.objects.values_list("ref", flat=True))
    assert len(set(refs)) == 2
    for ref in refs:
        assert len(ref) >= 20
        assert ref not in ("a", "b")
    assert run(DjangoMemoryStore().inspector.get_conversation, "a") is None


def test_find_conversation_can_require_an_owner() -> None:
    fill()
    ref = Conversation.objects.get(session_id="a").ref
    assert find_conversation(ref, "u1") is not None
    assert find_conversation(ref, "u2") is None


def test_malformed_refs_cost_no_query(django_assert_num_queries) -> None:
    with django_assert_num_queries(0):
        assert find_conversation("not a ref!") is None


def test_conversation_pages_continue_after_a_key() -> None:
    conversations = make_conversations(5)
    first = list_conversation_page(2)
    assert [s.session_id for s in first.items] == ["s-4", "s-3"]
    assert first.next_key == RowKey(conversations[3].updated_at, conversations[3].id)
    second = list_conversation_page(2, after=first.next_key)
    third = list_conversation_page(2, after=second.next_key)
    assert [s.session_id for s in second.items + third.items] == ["s-2", "s-1", "s-0"]
    assert third.next_key is None


def test_message_pages() -> None:
    [conversation] = make_conversations(1)
    make_messages(conversation, 5)
    page = list_message_page(conversation.id, limit=2)
    assert [m.position for m in page.items] == [0, 1]
    assert page.has_more
    assert page.next_after == 1
    last = list_message_page(conversation.id, after=2, limit=2)
    assert [m.position for m in last.items] == [3, 4]
    assert not last.has_more
    assert last.next_after is None
    with pytest.raises(InvalidMemoryInputError, match="after"):
        list_message_page(conversation.id, after=-1, limit=2)
    with pytest.raises(InvalidMemoryInputError, match="limit"):
        list_message_page(conversation.id, limit=0)


def test_failed_runs_newest_first() -> None:
    fill()
    for run_id in ("r1", "r2", "r3"):
        record_failed_run(
            MemoryErrorInput(MemoryContext("a"), run_id, ValueError("boom"), [user("p")])
        )
    conversation_id = Conversation.objects.get(session_id="a").id
    records = list_failed_runs(conversation_id, limit=2)
    assert [r.run_id for r in records] == ["r3", "r2"]
    assert records[0].error_type == "ValueError"
    assert records[0].error_message == "boom"
    assert "ValueError: boom" in records[0].traceback
    assert records[0].messages == [user("p")]
