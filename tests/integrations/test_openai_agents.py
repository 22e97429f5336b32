"""DjangoSession against the behaviour of the Agents SDK's own session tests
(tests/memory/test_session.py, tests/extensions/memory/test_sqlalchemy_session.py),
on SQLite and PostgreSQL. The Runner tests are in test_openai_agents_runner.py,
the session_settings ones in test_openai_agents_settings.py."""

from __future__ import annotations

import asyncio
import inspect
import json
import threading
import uuid
from datetime import UTC, datetime
from typing import Any, cast

import pytest
from django.db import DatabaseError, connection
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from anvia_django.core.memory import ConversationScopeError, InvalidMemoryInputError
from anvia_django.models import Conversation, MemoryMessage
from anvia_django.persistence import (
    get_conversation_with_messages,
    list_conversation_summaries,
)
from tests.helpers import run, snapshot, writes

from .common import (
    assert_gap_free,
    at_once,
    json_values,
    kill_backend,
    stored_rows,
)

agents = pytest.importorskip("agents")

from agents import SQLiteSession  # noqa: E402
from agents.items import TResponseInputItem  # noqa: E402
from agents.memory import Session, SessionSettings  # noqa: E402

from anvia_django.integrations.openai_agents import (  # noqa: E402
    ITEM_KEY,
    DjangoSession,
    item_to_message,
    message_to_item,
)

pytestmark = pytest.mark.django_db

APPEND = "anvia_django.integrations.batches.append_messages"


def text(role: str, content: str) -> TResponseInputItem:
    return cast(TResponseInputItem, {"role": role, "content": content})


def output_message(item_id: str, value: str) -> TResponseInputItem:
    return cast(
        TResponseInputItem,
        {
            "id": item_id,
            "type": "message",
            "role": "assistant",
            "status": "completed",
            "content": [{"type": "output_text", "text": value, "annotations": [], "logprobs": []}],
        },
    )


FUNCTION_CALL = cast(
    TResponseInputItem,
    {
        "type": "function_call",
        "call_id": "call_1",
        "name": "lookup_order",
        "arguments": '{"order_id": 42}',
        "id": "fc_1",
        "status": "completed",
    },
)
FUNCTION_OUTPUT = cast(
    TResponseInputItem,
    {"type": "function_call_output", "call_id": "call_1", "output": '{"shipped": true}'},
)
REASONING = cast(
    TResponseInputItem,
    {"id": "rs_1", "type": "reasoning", "summary": [{"type": "summary_text", "text": "…"}]},
)


def contents(items: list[TResponseInputItem]) -> list[Any]:
    return [cast(dict[str, Any], item).get("content") for item in items]


# --- the protocol -----------------------------------------------------------


def test_implements_the_session_protocol_with_its_signatures() -> None:
    session = DjangoSession("s1")
    assert isinstance(session, Session)
    for name in ("get_items", "add_items", "pop_item", "clear_session"):
        ours = inspect.signature(getattr(DjangoSession, name))
        theirs = inspect.signature(getattr(Session, name))
        assert list(ours.parameters) == list(theirs.parameters)
        assert [p.default for p in ours.parameters.values()] == [
            p.default for p in theirs.parameters.values()
        ]
        assert inspect.iscoroutinefunction(getattr(session, name))
    assert session.session_id == "s1"
    assert session.session_settings == SessionSettings()


def test_bad_session_ids_are_refused_at_construction() -> None:
    with pytest.raises(InvalidMemoryInputError, match="session_id"):
        DjangoSession("  ")
    with pytest.raises(InvalidMemoryInputError, match="session_id"):
        DjangoSession("x" * 256)


# --- add, get, pop, clear (test_session.py) ---------------------------------


def test_direct_operations() -> None:
    session = DjangoSession("direct")
    run(session.add_items, [text("user", "Hello"), text("assistant", "Hi there!")])
    assert contents(run(session.get_items)) == ["Hello", "Hi there!"]

    popped = run(session.pop_item)
    assert popped == text("assistant", "Hi there!")
    assert contents(run(session.get_items)) == ["Hello"]

    run(session.clear_session)
    assert run(session.get_items) == []
    assert not Conversation.objects.filter(session_id="direct").exists()


def test_pop_until_empty_then_none() -> None:
    session = DjangoSession("pop")
    assert run(session.pop_item) is None
    items = [text("user", "Hello"), text("assistant", "Hi there!"), text("user", "How are you?")]
    run(session.add_items, items)
    assert [run(session.pop_item) for _ in range(3)] == items[::-1]
    assert run(session.pop_item) is None
    assert run(session.get_items) == []
    assert Conversation.objects.get(session_id="pop").message_count == 0


def test_pop_on_an_unknown_session_creates_nothing() -> None:
    assert run(DjangoSession("nobody").pop_item) is None
    assert not Conversation.objects.exists()


def test_pop_keeps_positions_gap_free_and_the_count_exact() -> None:
    session = DjangoSession("gaps")
    run(session.add_items, [text("user", str(n)) for n in range(4)])
    run(session.pop_item)
    run(session.pop_item)
    assert_gap_free("gaps")
    run(session.add_items, [text("user", "again")])
    assert_gap_free("gaps")
    assert contents(run(session.get_items)) == ["0", "1", "again"]


def test_adding_nothing_writes_nothing(django_assert_num_queries) -> None:
    with django_assert_num_queries(0):
        run(DjangoSession("empty").add_items, [])
    assert not Conversation.objects.exists()


# --- limit --------------------------------------------------------------------


def test_get_items_with_limit() -> None:
    session = DjangoSession("limit")
    run(session.add_items, [text("user", f"Message {n}") for n in range(1, 7)])
    assert contents(run(session.get_items, 2)) == ["Message 5", "Message 6"]
    assert contents(run(session.get_items, 4)) == [f"Message {n}" for n in range(3, 7)]
    assert len(run(session.get_items, 10)) == 6
    assert run(session.get_items, 0) == []
    assert len(run(session.get_items)) == 6


def test_limit_cuts_exactly_across_batches() -> None:
    # Unlike DjangoMemoryStore(load_limit=...), a session limit is not run-aligned.
    session = DjangoSession("batches")
    run(session.add_items, [text("user", "a"), FUNCTION_CALL])
    run(session.add_items, [FUNCTION_OUTPUT, text("assistant", "b")])
    assert run(session.get_items, 3) == [FUNCTION_CALL, FUNCTION_OUTPUT, text("assistant", "b")]


def test_session_settings_limit_is_the_default() -> None:
    session = DjangoSession("settings", session_settings=SessionSettings(limit=2))
    from_dict = DjangoSession("settings", session_settings={"limit": 1})
    assert from_dict.session_settings == SessionSettings(limit=1)
    run(session.add_items, [text("user", str(n)) for n in range(5)])
    assert contents(run(session.get_items)) == ["3", "4"]
    assert contents(run(session.get_items, 3)) == ["2", "3", "4"]
    assert contents(run(from_dict.get_items)) == ["4"]


@pytest.mark.parametrize("bad", [-1, 1.5, "2", True])
def test_a_bad_limit_is_refused(bad: Any) -> None:
    with pytest.raises(InvalidMemoryInputError, match="limit"):
        run(DjangoSession("bad").get_items, bad)


# --- order with tied timestamps -----------------------------------------------


def test_tied_timestamps_keep_insertion_order_for_get_limit_and_pop() -> None:
    session = DjangoSession("tied")
    run(session.add_items, [output_message("older", "old")])
    run(session.add_items, [REASONING, output_message("newest", "...")])
    MemoryMessage.objects.update(created_at=datetime(2025, 10, 15, 17, 26, 39, tzinfo=UTC))

    ids = [cast(dict[str, Any], i)["id"] for i in run(session.get_items)]
    assert ids == ["older", "rs_1", "newest"]
    assert [cast(dict[str, Any], i)["id"] for i in run(session.get_items, 2)] == ["rs_1", "newest"]
    assert cast(dict[str, Any], run(session.pop_item))["id"] == "newest"
    assert [cast(dict[str, Any], i)["id"] for i in run(session.get_items)] == ["older", "rs_1"]


# --- isolation ----------------------------------------------------------------


def test_sessions_are_isolated_for_every_operation() -> None:
    one, two = DjangoSession("session_1"), DjangoSession("session_2")
    run(one.add_items, [text("user", "Session 1 message")])
    run(two.add_items, [text("user", "Session 2 message 1"), text("user", "Session 2 message 2")])
    assert run(two.pop_item) == text("user", "Session 2 message 2")
    assert contents(run(one.get_items)) == ["Session 1 message"]
    run(two.clear_session)
    assert contents(run(one.get_items)) == ["Session 1 message"]


def test_session_ids_are_exact() -> None:
    for session_id in ("Foo", "foo", "tenant", "tenant "):
        run(DjangoSession(session_id).add_items, [text("user", session_id)])
    for session_id in ("Foo", "foo", "tenant", "tenant "):
        assert contents(run(DjangoSession(session_id).get_items)) == [session_id]


# --- lossless mapping ---------------------------------------------------------


def test_items_without_a_role_are_wrapped_and_come_back_equal() -> None:
    session = DjangoSession("tools")
    odd = [
        FUNCTION_CALL,
        FUNCTION_OUTPUT,
        REASONING,
        {"role": "user", ITEM_KEY: "collides", "content": "x"},
        {"role": "", "content": "empty role"},
        {"role": 7, "content": "not a string"},
        {"no": "type, no role"},
        {"type": "t" * 65},
    ]
    items = [text("user", "Where is order 42?"), *cast(list[TResponseInputItem], odd)]
    run(session.add_items, items)
    assert run(session.get_items) == items
    assert [row[3] for row in stored_rows("tools")] == [
        "user",
        "function_call",
        "function_call_output",
        "reasoning",
        "item",
        "item",
        "item",
        "item",
        "item",
    ]
    # Items with a role are stored as they are, readable in the admin.
    first = MemoryMessage.objects.get(position=0).message
    assert first == {"role": "user", "content": "Where is order 42?"}


@settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(st.dictionaries(st.sampled_from(["role", "type", ITEM_KEY, "content", "id"]), json_values))
def test_any_json_item_round_trips(item: dict[str, Any]) -> None:
    stored = item_to_message(cast(TResponseInputItem, item))
    assert isinstance(stored["role"], str)
    assert stored["role"].strip()
    assert message_to_item(json.loads(json.dumps(stored))) == item


def test_unicode_and_large_items_round_trip() -> None:
    session = DjangoSession("unicode 🌍")
    items = [
        text("user", "naïve café 日本語 Ω≈ç√ 🎉 \u202e mirrored"),
        cast(TResponseInputItem, {**cast(dict[str, Any], FUNCTION_OUTPUT), "output": "x" * 10**6}),
        text("assistant", "🧪" * 50_000),
        text("user", "O'Reilly"),
        text("assistant", "Robert'); DROP TABLE students;--"),
        text("user", '"SELECT * FROM users WHERE name = "admin";" %s %(x)s ? \\'),
    ]
    run(session.add_items, items)
    assert run(session.get_items) == items
    assert run(session.pop_item) == items[-1]


@pytest.mark.parametrize("operation", ["add_items", "pop_item", "clear_session"])
def test_a_database_fault_mid_write_leaves_the_session_as_it_was(operation: str) -> None:
    session = DjangoSession("fault")
    run(session.add_items, [text("user", "kept"), text("assistant", "also kept")])
    before = snapshot()

    def fail_on_a_write(execute, sql, params, many, context):
        if writes(sql):
            raise DatabaseError("injected fault")
        return execute(sql, params, many, context)

    args = ([text("user", "lost"), FUNCTION_CALL],) if operation == "add_items" else ()
    with (
        connection.execute_wrapper(fail_on_a_write),
        pytest.raises(DatabaseError, match="injected fault"),
    ):
        run(getattr(session, operation), *args)
    assert snapshot() == before
    # Still usable afterwards.
    run(session.add_items, [text("user", "after")])
    assert contents(run(session.get_items)) == ["kept", "also kept", "after"]


def test_a_batch_with_a_bad_item_writes_nothing() -> None:
    session = DjangoSession("atomic")
    run(session.add_items, [text("user", "kept")])
    before = snapshot()
    with pytest.raises(InvalidMemoryInputError, match=r"items\[1\]"):
        run(session.add_items, [text("user", "fine"), "not a dict"])
    with pytest.raises(InvalidMemoryInputError, match=r"messages\[1\]"):
        run(session.add_items, [text("user", "fine"), {"role": "user", "content": float("nan")}])
    assert snapshot() == before


# --- owner scoping --------------------------------------------------------------


@pytest.mark.parametrize("operation", ["get_items", "add_items", "pop_item", "clear_session"])
def test_another_users_session_is_refused_and_unchanged(operation: str) -> None:
    run(DjangoSession("owned", user_id="alice").add_items, [text("user", "secret")])
    before = snapshot()
    intruder = DjangoSession("owned", user_id="mallory")
    args = ([text("user", "x")],) if operation == "add_items" else ()
    with pytest.raises(ConversationScopeError):
        run(getattr(intruder, operation), *args)
    assert snapshot() == before
    # Server code without a user id is trusted.
    assert contents(run(DjangoSession("owned").get_items)) == ["secret"]
    assert Conversation.objects.get().user_id == "alice"


# --- concurrency and retries (need real transactions) ---------------------------


@pytest.mark.django_db(transaction=True)
def test_concurrent_first_writes_keep_every_batch_whole() -> None:
    writers, batches_each = 6, 4
    session = DjangoSession("first-write")

    def write(writer: int) -> None:
        for batch in range(batches_each):
            run(session.add_items, [text("user", f"{writer}:{batch}:{n}") for n in range(3)])

    at_once(writers, write)
    assert_gap_free("first-write")
    stored = contents(run(session.get_items))
    assert len(stored) == writers * batches_each * 3
    # Each add_items call is one atomic batch: its three items are adjacent.
    for start in range(0, len(stored), 3):
        writer, batch, _ = stored[start].split(":")
        assert stored[start : start + 3] == [f"{writer}:{batch}:{n}" for n in range(3)]
    assert Conversation.objects.count() == 1


@pytest.mark.django_db(transaction=True)
def test_concurrent_pops_return_each_item_once() -> None:
    session = DjangoSession("pops")
    run(session.add_items, [text("user", str(n)) for n in range(8)])
    popped: list[Any] = []
    at_once(4, lambda _: popped.extend(run(session.pop_item) for _ in range(3)))
    values = sorted(contents([item for item in popped if item is not None]))
    assert values == [str(n) for n in range(8)]
    assert popped.count(None) == 4
    assert Conversation.objects.get().message_count == 0


@pytest.mark.server
@pytest.mark.django_db(transaction=True, databases=["default", "other"])
def test_a_connection_lost_between_calls_is_survived_without_duplicates() -> None:
    session = DjangoSession("retry")
    first = [text("user", "before")]
    run(session.add_items, first)
    kill_backend()
    items = [text("user", "once"), FUNCTION_CALL]
    run(session.add_items, items)
    assert run(session.get_items) == [*first, *items]
    assert_gap_free("retry")


# --- visible to the inspector ---------------------------------------------------


def test_conversations_show_in_the_inspector() -> None:
    session = DjangoSession("inspected", user_id="u1", metadata={"channel": "web"})
    run(session.add_items, [text("user", "Hi"), FUNCTION_CALL])
    run(session.add_items, [FUNCTION_OUTPUT])

    [summary] = list_conversation_summaries(10, "u1")
    assert (summary.session_id, summary.user_id, summary.message_count) == ("inspected", "u1", 3)
    assert summary.metadata == {"channel": "web"}
    conversation = get_conversation_with_messages(summary.ref)
    assert conversation is not None
    assert [m.position for m in conversation.messages] == [0, 1, 2]
    assert [m.message["role"] for m in conversation.messages] == [
        "user",
        "function_call",
        "function_call_output",
    ]
    assert [message_to_item(m.message) for m in conversation.messages] == [
        text("user", "Hi"),
        FUNCTION_CALL,
        FUNCTION_OUTPUT,
    ]
    run_ids = [m.run_id for m in conversation.messages]
    assert all(r.startswith("openai-agents-") for r in run_ids)
    assert run_ids[0] == run_ids[1] != run_ids[2]
    assert {m.turn for m in conversation.messages} == {1}


# --- the SDK's own SQLiteSession as the reference -------------------------------------

operations = st.lists(
    st.one_of(
        st.tuples(st.just("add"), st.lists(st.sampled_from(["a", "b", "call", "out"]), max_size=4)),
        st.tuples(st.just("get"), st.none() | st.integers(min_value=0, max_value=8)),
        st.tuples(st.just("pop"), st.none()),
        st.tuples(st.just("clear"), st.none()),
    ),
    max_size=12,
)
ITEMS = {
    "a": text("user", "a"),
    "b": output_message("b", "b"),
    "call": FUNCTION_CALL,
    "out": FUNCTION_OUTPUT,
}


@settings(
    max_examples=40,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(operations, st.none() | st.integers(min_value=0, max_value=5))
def test_every_operation_answers_as_the_sdks_sqlite_session(
    steps: list[tuple[str, Any]], default_limit: int | None
) -> None:
    settings_ = SessionSettings(limit=default_limit)
    ours = DjangoSession(f"ref-{uuid.uuid4().hex}", session_settings=settings_)
    theirs = SQLiteSession("reference", session_settings=settings_)
    try:
        for operation, argument in steps:
            results: tuple[Any, Any]
            if operation == "add":
                batch = [ITEMS[name] for name in argument]
                results = run(ours.add_items, batch), run(theirs.add_items, batch)
            elif operation == "get":
                results = run(ours.get_items, argument), run(theirs.get_items, argument)
            elif operation == "pop":
                results = run(ours.pop_item), run(theirs.pop_item)
            else:
                results = run(ours.clear_session), run(theirs.clear_session)
            assert results[0] == results[1], operation
        assert run(ours.get_items, None) == run(theirs.get_items, None)
    finally:
        theirs.close()


# --- a cancelled write returns once its outcome is known --------------------------------


@pytest.mark.parametrize("operation", ["add_items", "pop_item", "clear_session"])
def test_a_cancelled_write_finishes_before_the_cancellation_propagates(
    operation: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    session = DjangoSession("cancelled")
    if operation != "add_items":
        run(session.add_items, [text("user", "kept?")])
    target = {
        "add_items": APPEND,
        "pop_item": "anvia_django.integrations.openai_agents.pop_last_message",
        "clear_session": "anvia_django.integrations.openai_agents.clear_conversation",
    }[operation]
    real = _resolve(target)
    written, release = threading.Event(), threading.Event()

    def write_then_wait(*args: Any, **kwargs: Any) -> Any:
        result = real(*args, **kwargs)
        written.set()
        assert release.wait(10)
        return result

    monkeypatch.setattr(target, write_then_wait)
    args = ([text("user", "once")],) if operation == "add_items" else ()

    async def cancel_mid_write() -> bool:
        task = asyncio.ensure_future(getattr(session, operation)(*args))
        assert await asyncio.to_thread(written.wait, 10)
        task.cancel()
        await asyncio.sleep(0.05)
        task.cancel()
        await asyncio.sleep(0.05)
        still_waiting = not task.done()
        release.set()
        with pytest.raises(asyncio.CancelledError):
            await task
        return still_waiting

    assert run(cancel_mid_write) is True
    monkeypatch.undo()
    expected = [text("user", "once")] if operation == "add_items" else []
    assert run(session.get_items) == expected


def _resolve(dotted: str) -> Any:
    module, _, name = dotted.rpartition(".")
    return getattr(__import__(module, fromlist=[name]), name)
