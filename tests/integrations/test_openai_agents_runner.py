"""DjangoSession driven by the Agents SDK's Runner (run, run_sync, run_streamed)
with the SDK's ScriptedModel: the behaviours of the SDK's Runner tests that use
a session (tests/memory/test_session.py, test_session_limit.py,
tests/extensions/memory/test_sqlalchemy_session.py and the tool-failure-history
tests), on SQLite and PostgreSQL."""

from __future__ import annotations

import asyncio
import json
import uuid
from typing import Any, cast

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from anvia_django.models import Conversation
from tests.helpers import run, snapshot

from .common import assert_gap_free, stored_rows

pytest.importorskip("agents")

from agents import (
    Agent,
    InputGuardrailTripwireTriggered,
    RunConfig,
    Runner,
    ToolGuardrailFunctionOutput,
    ToolInputGuardrailTripwireTriggered,
    UserError,
    function_tool,
    input_guardrail,
    tool_input_guardrail,
)
from agents.guardrail import GuardrailFunctionOutput
from agents.items import TResponseInputItem
from agents.memory import SessionSettings
from agents.testing import ScriptedModel, assistant_message, function_call

from anvia_django.integrations.openai_agents import DjangoSession

from .agents_runner import RUNNER_METHODS, drive, stream_to_end

pytestmark = pytest.mark.django_db

APPEND = "anvia_django.integrations.batches.append_messages"


def user(text: str) -> TResponseInputItem:
    return cast(TResponseInputItem, {"role": "user", "content": text})


def said(item: Any) -> str:
    """The text of a user item or of an assistant output message."""
    content = item.get("content")
    return content if isinstance(content, str) else content[0]["text"]


def shape(items: list[Any]) -> list[str]:
    return [
        f"{item['type']}:{item['call_id']}"
        if "call_id" in item
        else item.get("role") or item.get("type")
        for item in items
    ]


def scripted(*replies: str) -> ScriptedModel:
    return ScriptedModel([[assistant_message(reply)] for reply in replies])


# --- history across turns (test_session.py, test_sqlalchemy_session.py) --------------


@pytest.mark.parametrize("method", RUNNER_METHODS)
def test_each_turn_sees_the_stored_history_then_its_input(method: str) -> None:
    model = scripted("San Francisco", "California")
    agent = Agent(name="test", model=model)
    session = DjangoSession("golden-gate", user_id="u1")

    first = drive(method, agent, "What city is the Golden Gate Bridge in?", session=session)
    assert first.final_output == "San Francisco"
    stored_after_first = run(session.get_items)
    second = drive(method, agent, "What state is it in?", session=session)
    assert second.final_output == "California"

    assert model.calls[0].input == [user("What city is the Golden Gate Bridge in?")]
    assert model.calls[1].input == [*stored_after_first, user("What state is it in?")]
    assert [said(item) for item in run(session.get_items)] == [
        "What city is the Golden Gate Bridge in?",
        "San Francisco",
        "What state is it in?",
        "California",
    ]
    assert_gap_free("golden-gate")


@pytest.mark.parametrize("method", RUNNER_METHODS)
def test_sessions_keep_separate_histories(method: str) -> None:
    model = scripted("Cats, noted.", "Dogs, noted.", "You like cats.")
    agent = Agent(name="test", model=model)
    cats, dogs = DjangoSession("cats"), DjangoSession("dogs")
    drive(method, agent, "I like cats.", session=cats)
    drive(method, agent, "I like dogs.", session=dogs)
    drive(method, agent, "What do I like?", session=cats)
    assert [said(item) for item in model.calls[2].input] == [
        "I like cats.",
        "Cats, noted.",
        "What do I like?",
    ]
    assert len(run(dogs.get_items)) == 2


@pytest.mark.parametrize("method", RUNNER_METHODS)
def test_a_list_input_is_appended_after_the_history(method: str) -> None:
    session = DjangoSession("list-input")
    earlier = [user("Earlier message"), {"role": "assistant", "content": "Saved reply"}]
    run(session.add_items, earlier)
    model = scripted("ok")
    drive(method, Agent(name="test", model=model), [user("Test message")], session=session)
    assert model.calls[-1].input == [*earlier, user("Test message")]
    assert run(session.get_items)[:3] == [*earlier, user("Test message")]


@pytest.mark.parametrize("method", RUNNER_METHODS)
def test_session_input_callback_shapes_the_input_not_the_stored_history(method: str) -> None:
    session = DjangoSession("callback")
    history = [user("Hello there."), {"role": "assistant", "content": "Hi, I'm here to help."}]
    run(session.add_items, history)
    model = scripted("I'm a model", "again")
    agent = Agent(name="test", model=model)

    def users_only(history: list[Any], new: list[Any]) -> list[Any]:
        return [item for item in history if item.get("role") == "user"] + new

    config = RunConfig(session_input_callback=users_only)
    drive(method, agent, [user("What is your name?")], session=session, run_config=config)
    assert model.calls[-1].input == [history[0], user("What is your name?")]

    def repeat_first(history: list[Any], new: list[Any]) -> list[Any]:
        return [*history, history[0], *new]

    config = RunConfig(session_input_callback=repeat_first)
    drive(method, agent, "once", session=session, run_config=config)
    # A callback that repeats history does not store it again.
    stored = run(session.get_items)
    assert [said(item) for item in stored if item.get("role") == "user"] == [
        "Hello there.",
        "What is your name?",
        "once",
    ]
    assert len(stored) == 6


# --- limits (test_session_limit.py, session-settings tests) ---------------------------------


@pytest.mark.parametrize("method", RUNNER_METHODS)
@pytest.mark.parametrize(
    ("session_limit", "run_limit", "seen"),
    [
        (None, 2, ["Message 3", "Reply 3"]),  # the RunConfig limit
        (None, 0, []),  # limit 0: no history at all
        (None, None, None),  # no limit anywhere: everything
        (None, 100, None),  # more than there is: everything
        (2, None, ["Message 3", "Reply 3"]),  # the session's own limit
        (100, 2, ["Message 3", "Reply 3"]),  # RunConfig overrides the session
    ],
)
def test_history_limits_from_the_session_and_the_run_config(
    method: str, session_limit: int | None, run_limit: int | None, seen: list[str] | None
) -> None:
    session = DjangoSession("limits", session_settings=SessionSettings(limit=session_limit))
    unlimited = DjangoSession("limits")
    model = scripted("Reply 1", "Reply 2", "Reply 3", "Reply 4")
    agent = Agent(name="test", model=model)
    for n in (1, 2, 3):
        drive(method, agent, f"Message {n}", session=unlimited)
    config = RunConfig(session_settings=SessionSettings(limit=run_limit))
    drive(method, agent, "Message 4", session=session, run_config=config)
    everything = [f"{kind} {n}" for n in (1, 2, 3) for kind in ("Message", "Reply")]
    expected = everything if seen is None else seen
    assert [said(item) for item in model.calls[-1].input] == [*expected, "Message 4"]


@settings(
    max_examples=25,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    turns=st.integers(min_value=0, max_value=5),
    session_limit=st.none() | st.integers(min_value=0, max_value=12),
    run_limit=st.none() | st.integers(min_value=0, max_value=12),
)
def test_the_model_sees_exactly_the_newest_limit_items(
    turns: int, session_limit: int | None, run_limit: int | None
) -> None:
    session_id = f"limit-{uuid.uuid4().hex}"
    stored = [user(f"{session_id} {n}") for n in range(turns * 2)]
    run(DjangoSession(session_id).add_items, stored)
    session = DjangoSession(session_id, session_settings={"limit": session_limit})
    model = scripted("ok")
    config = RunConfig(session_settings=SessionSettings(limit=run_limit))
    run(Runner.run, Agent(name="t", model=model), "now", session=session, run_config=config)
    limit = run_limit if run_limit is not None else session_limit
    history = stored if limit is None else stored[len(stored) - min(limit, len(stored)) :]
    assert model.calls[-1].input == [*history, user("now")]


@pytest.mark.parametrize("method", RUNNER_METHODS)
def test_a_limit_that_cuts_a_tool_call_off_its_output_drops_the_orphan(method: str) -> None:
    session = DjangoSession("tool-pair")
    history = cast(
        list[TResponseInputItem],
        [
            user("What is the weather?"),
            {"type": "function_call", "call_id": "c1", "name": "weather", "arguments": "{}"},
            {"type": "function_call_output", "call_id": "c1", "output": "sunny"},
            {"role": "assistant", "content": "It is sunny."},
        ],
    )
    run(session.add_items, history)
    assert run(session.get_items, 2) == history[-2:]
    model = scripted("Sunny too.")
    config = RunConfig(session_settings=SessionSettings(limit=2))
    drive(method, Agent(name="t", model=model), "Tomorrow?", session=session, run_config=config)
    assert model.calls[-1].input == [history[-1], user("Tomorrow?")]


# --- tools and failures (tool-failure-history tests) -------------------------------------


@function_tool
def lookup_order(order_id: int) -> str:
    """Look up an order."""
    return json.dumps({"order_id": order_id, "shipped": True})


@pytest.mark.parametrize("method", RUNNER_METHODS)
def test_a_tool_round_trip_is_stored_and_replayed(method: str) -> None:
    model = ScriptedModel(
        [
            [function_call("lookup_order", {"order_id": 42}, call_id="call_1")],
            [assistant_message("Order 42 has shipped.")],
            [assistant_message("You asked about order 42.")],
        ]
    )
    agent = Agent(name="support", model=model, tools=[lookup_order])
    session = DjangoSession("tools", user_id="u1")
    first = drive(method, agent, "Where is order 42?", session=session)
    assert first.final_output == "Order 42 has shipped."
    drive(method, agent, "What did I ask?", session=session)

    history = run(session.get_items)
    assert shape(history) == [
        "user",
        "function_call:call_1",
        "function_call_output:call_1",
        "assistant",
        "user",
        "assistant",
    ]
    assert json.loads(cast(dict[str, Any], history[2])["output"]) == {
        "order_id": 42,
        "shipped": True,
    }
    assert model.calls[2].input == history[:-1]
    assert [row[3] for row in stored_rows("tools")] == [
        "user",
        "function_call",
        "function_call_output",
        "assistant",
        "user",
        "assistant",
    ]


@pytest.mark.parametrize("streaming", [False, True])
def test_a_failing_tool_keeps_its_completed_sibling_in_the_session(streaming: bool) -> None:
    effects: list[str] = []
    ticket_done = asyncio.Event()

    @function_tool
    async def create_ticket() -> str:
        """Create a ticket."""
        effects.append("ticket")
        ticket_done.set()
        return "ticket T-1"

    @function_tool(failure_error_function=None)
    async def send_email() -> str:
        """Send an email."""
        await ticket_done.wait()
        raise ValueError("synthetic tool failure")

    model = ScriptedModel(
        [
            [
                function_call("send_email", {}, call_id="email"),
                function_call("create_ticket", {}, call_id="ticket"),
            ],
            [assistant_message("done")],
        ]
    )
    agent = Agent(name="support", model=model, tools=[send_email, create_ticket])
    session = DjangoSession("sibling")

    async def go() -> None:
        if streaming:
            await stream_to_end(agent, "go", session=session)
        else:
            await Runner.run(agent, "go", session=session)

    with pytest.raises(UserError):
        run(go)
    assert effects == ["ticket"]
    assert shape(run(session.get_items)) == [
        "user",
        "function_call:ticket",
        "function_call_output:ticket",
    ]
    # The next run starts from what was kept, and does not run the tool again.
    run(Runner.run, agent, "finish", session=session)
    assert shape(model.calls[-1].input) == [
        "user",
        "function_call:ticket",
        "function_call_output:ticket",
        "user",
    ]
    assert effects == ["ticket"]


@pytest.mark.parametrize("streaming", [False, True])
def test_a_tripped_input_guardrail_stores_only_the_input(streaming: bool) -> None:
    @input_guardrail
    async def reject(context: Any, agent: Any, input: Any) -> GuardrailFunctionOutput:
        return GuardrailFunctionOutput(output_info="blocked", tripwire_triggered=True)

    model = scripted("never seen by the user")
    agent = Agent(name="guarded", model=model, input_guardrails=[reject])
    session = DjangoSession("guarded")

    async def go() -> None:
        if streaming:
            await stream_to_end(agent, "go", session=session)
        else:
            await Runner.run(agent, "go", session=session)

    with pytest.raises(InputGuardrailTripwireTriggered):
        run(go)
    assert shape(run(session.get_items)) == ["user"]


@pytest.mark.parametrize("streaming", [False, True])
def test_a_failing_session_write_surfaces_and_does_not_hang(
    streaming: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    def fail(*args: Any, **kwargs: Any) -> None:
        raise RuntimeError("simulated database failure")

    monkeypatch.setattr(APPEND, fail)
    agent = Agent(name="t", model=scripted("not reached"))
    session = DjangoSession("failing")
    before = snapshot()

    async def go() -> None:
        if streaming:
            await asyncio.wait_for(stream_to_end(agent, "Hello", session=session), timeout=10)
        else:
            await Runner.run(agent, "Hello", session=session)

    with pytest.raises(RuntimeError, match="simulated database failure"):
        run(go)
    assert snapshot() == before
    assert not Conversation.objects.exists()


@pytest.mark.parametrize("streaming", [False, True])
def test_a_failed_save_of_tool_output_keeps_the_tool_error_primary(
    streaming: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    real_append = _append_messages()

    def fail_on_tool_output(append: Any, *, using: Any) -> Any:
        if any(message["role"] == "function_call_output" for message in append.messages):
            raise RuntimeError("simulated database failure")
        return real_append(append, using=using)

    monkeypatch.setattr(APPEND, fail_on_tool_output)
    finished = asyncio.Event()

    @function_tool
    async def completed_tool() -> str:
        """Completes."""
        finished.set()
        return "completed"

    @tool_input_guardrail
    async def reject(data: Any) -> ToolGuardrailFunctionOutput:
        await finished.wait()
        return ToolGuardrailFunctionOutput.raise_exception(output_info="blocked")

    @function_tool(tool_input_guardrails=[reject])
    async def blocked_tool() -> str:
        """Never runs."""
        raise AssertionError("a blocked tool must not run")

    model = ScriptedModel(
        [
            [
                function_call("completed_tool", {}, call_id="done"),
                function_call("blocked_tool", {}, call_id="blocked"),
            ]
        ]
    )
    agent = Agent(name="support", model=model, tools=[completed_tool, blocked_tool])
    session = DjangoSession("primary-error")

    async def go() -> None:
        if streaming:
            await stream_to_end(agent, "go", session=session)
        else:
            await Runner.run(agent, "go", session=session)

    with pytest.raises(ToolInputGuardrailTripwireTriggered):
        run(go)
    assert shape(run(session.get_items)) == ["user"]
    assert_gap_free("primary-error")


def _append_messages() -> Any:
    from anvia_django.persistence import append_messages

    return append_messages
