"""DjangoSession against the behaviour of the Agents SDK's own session tests
(tests/memory/test_session.py, tests/extensions/memory/test_sqlalchemy_session.py),
on SQLite and PostgreSQL, plus a Runner loop with a fake model."""

from __future__ import annotations

import inspect
import json
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from typing import Any, cast

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from anvia_django.core.memory import ConversationScopeError, InvalidMemoryInputError
from anvia_django.models import Conversation, MemoryMessage
from anvia_django.persistence import (
    get_conversation_with_messages,
    list_conversation_summaries,
)
from tests.helpers import run, snapshot

from .common import (
    assert_gap_free,
    at_once,
    json_values,
    kill_backend,
    stored_rows,
)

agents = pytest.importorskip("agents")

from agents import Agent, RunConfig, Runner, function_tool  # noqa: E402
from agents.items import ModelResponse, TResponseInputItem  # noqa: E402
from agents.memory import Session, SessionSettings  # noqa: E402
from agents.models.interface import Model  # noqa: E402
from agents.usage import Usage  # noqa: E402
from openai.types.responses import (  # noqa: E402
    ResponseFunctionToolCall,
    ResponseOutputMessage,
    ResponseOutputText,
)

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
    assert session.session_settings is None


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
    ]
    run(session.add_items, items)
    assert run(session.get_items) == items
    assert run(session.pop_item) == items[2]


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


# --- the Runner loop with a fake model --------------------------------------------


class ScriptedFakeModel(Model):
    """Returns canned outputs in order and records the input of every call."""

    def __init__(self, outputs: list[list[Any]]) -> None:
        self.outputs = list(outputs)
        self.inputs: list[list[Any]] = []

    async def get_response(
        self,
        system_instructions,
        input,
        model_settings,
        tools,
        output_schema,
        handoffs,
        tracing,
        **kwargs: Any,
    ) -> ModelResponse:
        self.inputs.append(json.loads(json.dumps(input)))
        return ModelResponse(output=self.outputs.pop(0), usage=Usage(), response_id=None)

    def stream_response(self, *args: Any, **kwargs: Any) -> AsyncIterator[Any]:
        raise NotImplementedError("these tests do not stream")


def reply(value: str) -> ResponseOutputMessage:
    return ResponseOutputMessage(
        id=f"msg_{len(value)}",
        type="message",
        role="assistant",
        status="completed",
        content=[ResponseOutputText(type="output_text", text=value, annotations=[])],
    )


@function_tool
def lookup_order(order_id: int) -> str:
    """Look up an order."""
    return json.dumps({"order_id": order_id, "shipped": True})


def test_runner_remembers_the_conversation_across_runs() -> None:
    model = ScriptedFakeModel(
        [
            [
                ResponseFunctionToolCall(
                    id="fc_1",
                    type="function_call",
                    call_id="call_1",
                    name="lookup_order",
                    arguments='{"order_id": 42}',
                )
            ],
            [reply("Order 42 has shipped.")],
            [reply("You asked about order 42.")],
        ]
    )
    agent = Agent(name="support", model=model, tools=[lookup_order])
    config = RunConfig(tracing_disabled=True)
    session = DjangoSession("runner", user_id="u1")

    first = run(Runner.run, agent, "Where is order 42?", session=session, run_config=config)
    assert first.final_output == "Order 42 has shipped."
    second = run(Runner.run, agent, "What did I ask?", session=session, run_config=config)
    assert second.final_output == "You asked about order 42."

    history = run(session.get_items)
    # The third model call saw the whole first run from the database, then the new question.
    assert model.inputs[2] == [*history[:-1]]
    assert [row[3] for row in stored_rows("runner")] == [
        "user",
        "function_call",
        "function_call_output",
        "assistant",
        "user",
        "assistant",
    ]
    assert cast(dict[str, Any], history[2])["output"] == '{"order_id": 42, "shipped": true}'
    assert_gap_free("runner")


def test_runner_sessions_are_isolated() -> None:
    model = ScriptedFakeModel([[reply("I like cats.")], [reply("I like dogs.")], [reply("Cats.")]])
    agent = Agent(name="test", model=model)
    config = RunConfig(tracing_disabled=True)
    cats, dogs = DjangoSession("cats"), DjangoSession("dogs")
    run(Runner.run, agent, "I like cats.", session=cats, run_config=config)
    run(Runner.run, agent, "I like dogs.", session=dogs, run_config=config)
    run(Runner.run, agent, "What do I like?", session=cats, run_config=config)
    assert "dogs" not in json.dumps(model.inputs[2])
    assert "I like cats." in json.dumps(model.inputs[2])
