"""DjangoMemoryStore against SPEC section 4, on SQLite and PostgreSQL alike."""

from __future__ import annotations

import re

import pytest
from django.db import DatabaseError, connection

from anvia_django.core.memory import (
    ConversationScopeError,
    MemoryContext,
    MemoryErrorInput,
    get_inspector,
)
from anvia_django.models import Conversation, FailedRun, MemoryMessage
from anvia_django.persistence.dialects.postgresql import APPEND_FUNCTION
from anvia_django.store import DjangoMemoryStore

from .helpers import append_input, assistant, run, snapshot, user

pytestmark = pytest.mark.django_db

TOOL_EXCHANGE = [
    user("What is the status of order 42? 🚚"),
    {
        "role": "assistant",
        "content": None,
        "tool_calls": [{"id": "call_1", "name": "lookup_order", "arguments": {"order_id": 42}}],
    },
    {
        "role": "tool",
        "tool_call_id": "call_1",
        "name": "lookup_order",
        "content": {
            "order": {"id": 42, "items": [{"sku": "A-1", "qty": 2, "price": 9.99}]},
            "shipped": True,
            "carrier": None,
            "notes": ["naïve café", "日本語", "Ω≈ç√"],
        },
    },
    assistant("Order 42 shipped. Ça roule! 🎉"),
]


def test_round_trip_keeps_every_message_equal_and_in_order() -> None:
    store = DjangoMemoryStore()
    big = {"role": "tool", "tool_call_id": "c", "content": "x" * 1_000_000}
    run(store.append, append_input("s1", TOOL_EXCHANGE[:2], turn=1))
    run(store.append, append_input("s1", [TOOL_EXCHANGE[2], big], turn=2))
    run(store.append, append_input("s1", TOOL_EXCHANGE[3:], turn=3))

    assert run(store.load, MemoryContext("s1")) == [*TOOL_EXCHANGE[:3], big, TOOL_EXCHANGE[3]]
    rows = MemoryMessage.objects.order_by("position")
    assert [r.position for r in rows] == [0, 1, 2, 3, 4]
    assert [(r.run_id, r.turn, r.role) for r in rows] == [
        ("run-1", 1, "user"),
        ("run-1", 1, "assistant"),
        ("run-1", 2, "tool"),
        ("run-1", 2, "tool"),
        ("run-1", 3, "assistant"),
    ]
    conversation = Conversation.objects.get()
    assert conversation.message_count == 5
    assert conversation.updated_at >= conversation.created_at
    assert all(r.created_at.tzinfo is not None for r in rows)


def test_append_keeps_updated_at_and_count_current() -> None:
    store = DjangoMemoryStore()
    run(store.append, append_input("s1", [user("a")]))
    first = Conversation.objects.get()
    run(store.append, append_input("s1", [assistant("b"), assistant("c")], turn=2))
    second = Conversation.objects.get()
    assert second.message_count == 3
    assert second.updated_at >= first.updated_at
    assert second.created_at == first.created_at
    assert second.ref == first.ref


def test_empty_append_writes_nothing(django_assert_num_queries) -> None:
    store = DjangoMemoryStore()
    with django_assert_num_queries(0):
        run(store.append, append_input("s1", []))
    assert not Conversation.objects.exists()


def test_user_and_metadata_are_recorded() -> None:
    store = DjangoMemoryStore()
    run(store.append, append_input("s1", [user("hi")], user_id="u1", metadata={"channel": "web"}))
    conversation = Conversation.objects.get()
    assert (conversation.session_id, conversation.user_id) == ("s1", "u1")
    assert conversation.metadata == {"channel": "web"}
    # Later metadata replaces it; a call without metadata keeps it.
    run(store.append, append_input("s1", [user("again")], turn=2, user_id="u1"))
    assert Conversation.objects.get().metadata == {"channel": "web"}
    run(store.append, append_input("s1", [user("x")], turn=3, metadata={"channel": "app"}))
    assert Conversation.objects.get().metadata == {"channel": "app"}


def test_clear_removes_conversation_messages_and_failed_runs() -> None:
    store = DjangoMemoryStore()
    run(store.append, append_input("s1", [user("a")]))
    run(store.append, append_input("s2", [user("b")]))
    run(store.record_error, MemoryErrorInput(MemoryContext("s1"), "run-2", RuntimeError("x"), []))
    run(store.clear, MemoryContext("s1"))
    assert run(store.load, MemoryContext("s1")) == []
    assert list(Conversation.objects.values_list("session_id", flat=True)) == ["s2"]
    assert not FailedRun.objects.exists()
    assert MemoryMessage.objects.count() == 1
    # Positions restart after a clear.
    run(store.append, append_input("s1", [user("c")]))
    assert MemoryMessage.objects.get(conversation__session_id="s1").position == 0


def test_clearing_an_unknown_session_is_not_an_error() -> None:
    store = DjangoMemoryStore()
    run(store.append, append_input("s1", [user("kept")]))
    before = snapshot()
    assert run(store.clear, MemoryContext("nobody")) is None
    # Nothing was made for the unknown session, nothing else changed.
    assert snapshot() == before
    assert run(store.load, MemoryContext("s1")) == [user("kept")]


@pytest.mark.parametrize("operation", ["load", "append", "clear", "record_error"])
def test_another_user_is_refused_and_nothing_changes(operation: str) -> None:
    store = DjangoMemoryStore()
    run(store.append, append_input("s1", [user("secret")], user_id="alice"))
    before = snapshot()
    intruder = MemoryContext("s1", user_id="mallory")
    calls = {
        "load": lambda: run(store.load, intruder),
        "append": lambda: run(store.append, append_input("s1", [user("x")], user_id="mallory")),
        "clear": lambda: run(store.clear, intruder),
        "record_error": lambda: run(
            store.record_error, MemoryErrorInput(intruder, "r", ValueError("boom"), [])
        ),
    }
    with pytest.raises(ConversationScopeError):
        calls[operation]()
    assert snapshot() == before


def test_a_context_without_user_is_trusted() -> None:
    store = DjangoMemoryStore()
    run(store.append, append_input("s1", [user("hi")], user_id="alice"))
    run(store.append, append_input("s1", [assistant("hello")], turn=2))
    assert run(store.load, MemoryContext("s1")) == [user("hi"), assistant("hello")]
    assert run(store.load, MemoryContext("s1", user_id="alice")) == [user("hi"), assistant("hello")]
    assert Conversation.objects.get().user_id == "alice"


def test_record_error_keeps_the_failure_outside_the_transcript() -> None:
    store = DjangoMemoryStore()
    run(store.append, append_input("s1", [user("a")]))
    try:
        raise KeyError("missing thing")
    except KeyError as exc:
        error = exc
    partial = [user("b"), {"role": "assistant", "content": "half"}]
    run(store.record_error, MemoryErrorInput(MemoryContext("s1"), "run-9", error, partial))

    failed = FailedRun.objects.get()
    assert failed.run_id == "run-9"
    assert failed.error_type == "KeyError"
    assert failed.error_message == "'missing thing'"
    assert "Traceback" in failed.traceback
    assert "missing thing" in failed.traceback
    assert failed.messages == partial
    assert run(store.load, MemoryContext("s1")) == [user("a")]
    assert Conversation.objects.get().message_count == 1


def test_record_error_for_a_session_without_messages() -> None:
    store = DjangoMemoryStore()
    run(store.record_error, MemoryErrorInput(MemoryContext("new"), "r", TimeoutError(), []))
    assert FailedRun.objects.get().conversation.session_id == "new"
    assert run(store.load, MemoryContext("new")) == []


def test_a_retried_append_writes_nothing() -> None:
    store = DjangoMemoryStore()
    batch = [assistant("a"), {"role": "tool", "tool_call_id": "c1", "content": "ok"}]
    run(store.append, append_input("s1", [user("q")], turn=1))
    run(store.append, append_input("s1", batch, turn=2))
    run(store.append, append_input("s1", batch, turn=2))
    assert run(store.load, MemoryContext("s1")) == [user("q"), *batch]
    assert Conversation.objects.get().message_count == 3
    # The same messages in another turn or run are new history, not a retry.
    run(store.append, append_input("s1", batch, turn=3))
    run(store.append, append_input("s1", batch, run_id="run-2", turn=2))
    assert Conversation.objects.get().message_count == 7
    assert MemoryMessage.objects.count() == 7


def test_the_store_exposes_its_inspector() -> None:
    store = DjangoMemoryStore(using="default")
    inspector = get_inspector(store)
    assert inspector is store.inspector
    assert inspector is not None


@pytest.mark.parametrize("bad", [0, -1, 1.5, True, "3"])
def test_load_limit_must_be_a_positive_int(bad: object) -> None:
    with pytest.raises(ValueError, match="load_limit"):
        DjangoMemoryStore(load_limit=bad)  # type: ignore[arg-type]


def test_a_fault_mid_append_leaves_the_transcript_unchanged() -> None:
    store = DjangoMemoryStore()
    run(store.append, append_input("s1", [user("kept")]))
    before = snapshot()
    table = MemoryMessage._meta.db_table

    def fail_on_message_insert(execute, sql, params, many, context):
        # Also where the insert runs inside the append function (PostgreSQL).
        if re.search(rf"INSERT INTO \W?{table}\W", sql) or APPEND_FUNCTION in sql:
            raise DatabaseError("injected fault")
        return execute(sql, params, many, context)

    with (
        connection.execute_wrapper(fail_on_message_insert),
        pytest.raises(DatabaseError, match="injected fault"),
    ):
        run(store.append, append_input("s1", [assistant("lost"), assistant("too")], turn=2))
    assert snapshot() == before
    assert run(store.load, MemoryContext("s1")) == [user("kept")]


def test_a_retry_must_match_exactly_not_by_python_equality() -> None:
    # True == 1 == 1.0 in Python, but they are different JSON messages.
    store = DjangoMemoryStore()
    run(store.append, append_input("s1", [{"role": "user", "content": 1}]))
    run(store.append, append_input("s1", [{"role": "user", "content": True}]))
    run(store.append, append_input("s1", [{"role": "user", "content": 1.0}]))
    loaded = run(store.load, MemoryContext("s1"))
    assert [type(m["content"]) for m in loaded] == [int, bool, float]


def test_record_error_keeps_error_text_no_backend_could_store_as_is() -> None:
    store = DjangoMemoryStore()
    error = ValueError("bad byte \x00 and \ud800 here")
    run(store.record_error, MemoryErrorInput(MemoryContext("s1"), "r", error, []))
    failed = FailedRun.objects.get()
    assert failed.error_message == "bad byte \\x00 and \\ud800 here"
    assert "\x00" not in failed.traceback


def test_a_writer_with_an_older_clock_reading_never_moves_time_back(monkeypatch) -> None:
    # As when a writer reads the clock, then queues on the row lock behind a later one.
    from datetime import timedelta

    from django.utils import timezone

    store = DjangoMemoryStore()
    run(store.append, append_input("s1", [user("first")]))
    first = Conversation.objects.get().updated_at
    earlier = timezone.now() - timedelta(seconds=10)
    monkeypatch.setattr("anvia_django.persistence.transcript.append.timezone.now", lambda: earlier)
    run(store.append, append_input("s1", [assistant("second")], turn=2))
    assert Conversation.objects.get().updated_at == first
    stamps = list(MemoryMessage.objects.order_by("position").values_list("created_at", flat=True))
    assert stamps == sorted(stamps)
