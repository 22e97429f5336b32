"""Signals go out after the commit, and not at all when the write is undone."""

from __future__ import annotations

from typing import Any

import pytest
from django.db import transaction

from anvia_django import signals
from anvia_django.core.memory import MemoryContext, MemoryErrorInput
from anvia_django.models import Conversation
from anvia_django.persistence import append_messages, clear_conversation, record_failed_run

from .helpers import append_input, user


@pytest.fixture
def received() -> Any:
    events: list[tuple[str, dict[str, Any]]] = []

    def receiver(name: str) -> Any:
        def handle(sender: type, **kwargs: Any) -> None:
            assert sender is Conversation
            events.append((name, kwargs))

        return handle

    handlers = {
        "appended": receiver("appended"),
        "cleared": receiver("cleared"),
        "failed": receiver("failed"),
    }
    signals.messages_appended.connect(handlers["appended"])
    signals.conversation_cleared.connect(handlers["cleared"])
    signals.run_failed.connect(handlers["failed"])
    yield events
    signals.messages_appended.disconnect(handlers["appended"])
    signals.conversation_cleared.disconnect(handlers["cleared"])
    signals.run_failed.disconnect(handlers["failed"])


@pytest.mark.django_db(transaction=True)
def test_signals_follow_each_committed_write(received: list[tuple[str, dict[str, Any]]]) -> None:
    append_messages(append_input("s1", [user("a"), user("b")], user_id="u", run_id="r", turn=1))
    append_messages(append_input("s1", [user("c")], user_id="u", run_id="r", turn=2))
    record_failed_run(MemoryErrorInput(MemoryContext("s1"), "r2", ValueError("x"), []))
    clear_conversation(MemoryContext("s1"))

    names = [name for name, _ in received]
    assert names == ["appended", "appended", "failed", "cleared"]
    first, second = received[0][1], received[1][1]
    assert first["session_id"] == "s1"
    assert first["user_id"] == "u"
    assert (first["run_id"], first["turn"], first["first_position"]) == ("r", 1, 0)
    assert first["messages"] == [user("a"), user("b")]
    assert second["first_position"] == 2
    assert received[2][1]["error_type"] == "ValueError"
    assert received[3][1]["ref"] == first["ref"]
    assert all(kwargs["using"] == "default" for _, kwargs in received)


@pytest.mark.django_db(transaction=True)
def test_nothing_is_sent_when_the_outer_transaction_rolls_back(
    received: list[tuple[str, dict[str, Any]]],
) -> None:
    def append_then_fail() -> None:
        with transaction.atomic():
            append_messages(append_input("s1", [user("a")]))
            assert received == []  # not before the outermost commit
            raise RuntimeError("undo")

    with pytest.raises(RuntimeError, match="undo"):
        append_then_fail()
    assert received == []
    assert not Conversation.objects.exists()


@pytest.mark.django_db(transaction=True)
def test_a_failing_receiver_does_not_turn_a_committed_append_into_an_error(
    caplog: pytest.LogCaptureFixture,
) -> None:
    def broken(sender: type, **kwargs: Any) -> None:
        raise RuntimeError("receiver bug")

    signals.messages_appended.connect(broken)
    try:
        append_messages(append_input("s1", [user("kept")]))
    finally:
        signals.messages_appended.disconnect(broken)
    # The caller sees success, so it will not retry and duplicate the append.
    assert Conversation.objects.get().message_count == 1
    assert "receiver bug" in caplog.text
