"""persistence.pop_last_message and load_latest_messages, without any framework."""

from __future__ import annotations

from typing import Any

import pytest

from anvia_django import signals
from anvia_django.core.memory import ConversationScopeError, InvalidMemoryInputError, MemoryContext
from anvia_django.models import Conversation
from anvia_django.persistence import append_messages, load_latest_messages, pop_last_message

from .helpers import append_input, snapshot, user

pytestmark = pytest.mark.django_db


def test_pop_removes_the_highest_position_and_signals_after_commit(
    django_capture_on_commit_callbacks,
) -> None:
    append_messages(append_input("s1", [user("a"), user("b")]))
    received: list[dict[str, Any]] = []

    def receiver(**kwargs: Any) -> None:
        received.append(kwargs)

    signals.message_popped.connect(receiver)
    try:
        with django_capture_on_commit_callbacks(execute=True):
            assert pop_last_message(MemoryContext("s1")) == user("b")
    finally:
        signals.message_popped.disconnect(receiver)
    [event] = received
    assert (event["session_id"], event["position"], event["message"]) == ("s1", 1, user("b"))
    conversation = Conversation.objects.get()
    assert conversation.message_count == 1
    assert event["ref"] == conversation.ref


def test_pop_costs_a_fixed_number_of_queries(django_assert_num_queries) -> None:
    append_messages(append_input("s1", [user(str(n)) for n in range(30)]))
    with django_assert_num_queries(6):  # savepoint, lock, select, delete, update, release
        pop_last_message(MemoryContext("s1"))


def test_pop_refuses_another_user_and_changes_nothing() -> None:
    append_messages(append_input("s1", [user("a")], user_id="alice"))
    before = snapshot()
    with pytest.raises(ConversationScopeError):
        pop_last_message(MemoryContext("s1", user_id="mallory"))
    with pytest.raises(ConversationScopeError):
        load_latest_messages(MemoryContext("s1", user_id="mallory"), 1)
    assert snapshot() == before


def test_latest_messages_are_cut_exactly_not_by_run() -> None:
    append_messages(append_input("s1", [user("a"), user("b")], run_id="r1"))
    append_messages(append_input("s1", [user("c")], run_id="r2"))
    context = MemoryContext("s1")
    assert load_latest_messages(context, 2) == [user("b"), user("c")]
    assert load_latest_messages(context, 0) == []
    assert load_latest_messages(context, 9) == [user("a"), user("b"), user("c")]
    assert load_latest_messages(MemoryContext("unknown"), 3) == []
    with pytest.raises(InvalidMemoryInputError, match="limit"):
        load_latest_messages(context, -1)
