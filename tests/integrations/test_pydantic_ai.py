"""DjangoMemory on real Pydantic AI runs (FunctionModel): what each save
policy stores and when, failed, cancelled and retried runs, and loading."""

from __future__ import annotations

from typing import Any

import pytest
from asgiref.sync import sync_to_async

from anvia_django.core.memory.errors import ConversationScopeError, InvalidMemoryInputError
from anvia_django.core.memory.types import (
    MemoryAppendInput,
    MemoryContext,
    MemorySavePolicy,
    Message,
)
from anvia_django.models import AgentRun, Conversation
from anvia_django.persistence import list_failed_runs
from anvia_django.store import DjangoMemoryStore
from tests.helpers import run, stored

pytest.importorskip("pydantic_ai")

from pydantic_ai import Agent, ModelRetry
from pydantic_ai.messages import ModelMessage, ModelRequest, ModelResponse, ToolReturnPart

from anvia_django.integrations.pydantic_ai import DjangoMemory, stored_to_messages

from .pydantic_ai_support import METHODS, Script, answer, call, drive, drive_async

pytestmark = pytest.mark.django_db

POLICIES: list[MemorySavePolicy] = ["message", "turn", "run"]


class SpyStore(DjangoMemoryStore):
    """The Django store, keeping (turn, number of messages) of each append."""

    def __init__(self) -> None:
        super().__init__()
        self.appends: list[tuple[int, int]] = []

    async def append(self, input: MemoryAppendInput) -> None:
        await super().append(input)
        self.appends.append((input.turn, len(input.messages)))


def tool_agent(script: Script, *, fail: BaseException | None = None) -> Agent[None, str]:
    agent = Agent(script.model())
    attempts: list[str] = []

    @agent.tool_plain
    def lookup(order: str) -> str:
        """Where an order is."""
        attempts.append(order)
        if fail is not None:
            raise fail
        if order == "retry-me" and attempts.count(order) == 1:
            raise ModelRetry("Give the order number without letters.")
        return f"order {order} shipped"

    return agent


def loaded(session_id: str, user_id: str | None = "u1") -> list[ModelMessage]:
    messages = run(DjangoMemoryStore().load, MemoryContext(session_id, user_id=user_id))
    return stored_to_messages(messages)


def turns_and_roles(session_id: str) -> list[tuple[int, str]]:
    return [(turn, message["role"]) for _, _, turn, message in stored(session_id)]


# The documented rule, for a run of two turns (a tool call, then the answer):
# which appends each policy makes, as (turn, messages in it).
APPENDS = {
    "message": [(1, 1), (1, 1), (1, 1), (2, 1)],
    "turn": [(1, 3), (2, 1)],
    "run": [(2, 4)],
}
# How many of the run's messages are stored when the model is asked for
# turn 1 and for turn 2.
STORED_WHEN_ASKED = {"message": [1, 3], "turn": [0, 3], "run": [0, 0]}


@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize("save", POLICIES)
def test_each_policy_stores_the_run_when_its_rule_says(method: str, save: MemorySavePolicy) -> None:
    seen_stored: list[int] = []

    def count_then(response: ModelResponse) -> Any:
        async def step(messages: list[ModelMessage]) -> ModelResponse:
            # On the test's thread (its connection, its transaction).
            seen_stored.append(await sync_to_async(lambda: len(stored("s")))())
            return response

        return step

    script = Script(
        [count_then(call("lookup", {"order": "42"}, "c1")), count_then(answer("It shipped."))]
    )
    store = SpyStore()
    agent = tool_agent(script)
    memory = DjangoMemory("s", user_id="u1", save=save, store=store)

    if method == "run_sync":
        # The model runs in the event loop's thread; read from the test's.
        script.steps = [call("lookup", {"order": "42"}, "c1"), answer("It shipped.")]
    new = drive(method, agent, "Where is order 42?", capabilities=[memory])

    assert store.appends == APPENDS[save]
    # One append per run keeps the run's messages under its last turn, as
    # the store's runtime does.
    turns = [2, 2, 2, 2] if save == "run" else [1, 1, 1, 2]
    assert turns_and_roles("s") == list(
        zip(turns, ["user", "assistant", "tool", "assistant"], strict=True)
    )
    assert loaded("s") == new
    if method != "run_sync":
        assert seen_stored == STORED_WHEN_ASKED[save]
    (record,) = AgentRun.objects.filter(conversation__session_id="s")
    assert (record.status, record.message_count, record.model_name) == (
        "succeeded",
        4,
        "scripted-1",
    )


@pytest.mark.parametrize("save", POLICIES)
def test_the_next_run_sees_the_stored_history_then_its_prompt(save: MemorySavePolicy) -> None:
    script = Script([call("lookup", {"order": "42"}, "c1"), answer("It shipped."), answer("Yes.")])
    agent = tool_agent(script)
    memory = DjangoMemory("s", user_id="u1", save=save)
    first = drive("run", agent, "Where is order 42?", capabilities=[memory])

    second = drive("run", agent, "Sure?", capabilities=[memory])

    sent = script.seen[-1]
    assert sent[:-1] == first
    assert isinstance(sent[-1], ModelRequest)
    assert sent[-1].parts[0].content == "Sure?"  # type: ignore[union-attr]
    assert loaded("s") == first + second
    # One Pydantic AI conversation id for every run of the session.
    assert {m.conversation_id for m in first + second} == {first[0].conversation_id}


@pytest.mark.parametrize("save", POLICIES)
def test_a_model_retry_is_stored_as_the_tool_return_that_asked_for_it(
    save: MemorySavePolicy,
) -> None:
    script = Script(
        [
            call("lookup", {"order": "retry-me"}, "c1"),
            call("lookup", {"order": "42"}, "c2"),
            answer("Done."),
        ]
    )
    agent = tool_agent(script)

    new = drive("run", agent, "Where?", capabilities=[DjangoMemory("s", user_id="u1", save=save)])

    assert loaded("s") == new
    retried = new[2].parts[0]
    assert isinstance(retried, ToolReturnPart)
    assert (retried.outcome, retried.content) == (
        "retried",
        "Give the order number without letters.",
    )
    expected = [3] * 6 if save == "run" else [1, 1, 1, 2, 2, 3]
    assert [turn for turn, _ in turns_and_roles("s")] == expected


# What each policy has saved when turn 1's tool raises (user, tool call).
SAVED_BEFORE_THE_TOOL_FAILED = {"message": 2, "turn": 0, "run": 0}


@pytest.mark.parametrize("save", POLICIES)
def test_a_tool_that_raises_fails_the_run_and_records_it(save: MemorySavePolicy) -> None:
    script = Script([call("lookup", {"order": "42"}, "c1"), answer("unused")])
    agent = tool_agent(script, fail=RuntimeError("warehouse offline"))

    with pytest.raises(RuntimeError, match="warehouse offline"):
        drive("run", agent, "Where?", capabilities=[DjangoMemory("s", user_id="u1", save=save)])

    saved = SAVED_BEFORE_THE_TOOL_FAILED[save]
    assert len(stored("s")) == saved
    conversation = Conversation.objects.get(session_id="s")
    (failure,) = list_failed_runs(conversation.pk, limit=5)
    assert failure.error_type == "RuntimeError"
    partial = stored_to_messages(failure.messages)
    # The prompt, the call, and the request Pydantic AI marks interrupted.
    assert [type(m) for m in partial] == [ModelRequest, ModelResponse, ModelRequest]
    assert partial[2].state == "interrupted"
    assert {m.run_id for m in partial} == {failure.run_id}
    (record,) = AgentRun.objects.filter(conversation=conversation)
    assert (record.status, record.run_id, record.message_count) == ("failed", failure.run_id, saved)
    assert (record.input_tokens, record.output_tokens) == (10, 2)


def test_the_run_after_a_failed_one_closes_out_the_calls_it_left_open() -> None:
    failing = Script([call("lookup", {"order": "42"}, "c1"), answer("unused")])
    with pytest.raises(RuntimeError):
        drive(
            "run",
            tool_agent(failing, fail=RuntimeError("warehouse offline")),
            "Where?",
            capabilities=[DjangoMemory("s", user_id="u1")],
        )
    stored_before = stored("s")  # the prompt and the unanswered call
    script = Script([answer("Sorry, try again later.")])

    new = drive(
        "run", Agent(script.model()), "Any news?", capabilities=[DjangoMemory("s", user_id="u1")]
    )

    closed = script.seen[0][2].parts[0]
    assert isinstance(closed, ToolReturnPart)
    assert (closed.tool_call_id, closed.metadata) == (
        "c1",
        {"pydantic_ai_synthesized_tool_return": True},
    )
    # The stand-in answer is not stored; the run's own messages are.
    assert stored("s")[:2] == stored_before
    assert loaded("s")[2:] == new


@pytest.mark.parametrize("save", POLICIES)
def test_a_model_that_raises_fails_the_run_with_what_was_saved_kept(save: MemorySavePolicy) -> None:
    script = Script([call("lookup", {"order": "42"}, "c1"), ConnectionError("model down")])
    agent = tool_agent(script)

    with pytest.raises(ConnectionError):
        drive("run", agent, "Where?", capabilities=[DjangoMemory("s", user_id="u1", save=save)])

    # message: user, call, tool return (each before the next request); turn:
    # turn 1 once its tool return was about to be sent; run: nothing.
    assert len(stored("s")) == {"message": 3, "turn": 3, "run": 0}[save]
    (failure,) = list_failed_runs(Conversation.objects.get(session_id="s").pk, limit=5)
    assert len(failure.messages) == 3


# Saved when the consumer stops reading the final answer's stream: the tool
# exchange is complete by then, the answer is not.
SAVED_BEFORE_THE_STREAM_CLOSED = {"message": 3, "turn": 3, "run": 0}


@pytest.mark.parametrize("save", POLICIES)
def test_a_run_cancelled_mid_stream_keeps_what_was_saved_and_writes_nothing_else(
    save: MemorySavePolicy,
) -> None:
    script = Script([call("lookup", {"order": "42"}, "c1"), answer("It shipped, on Monday.")])
    agent = tool_agent(script)
    memory = DjangoMemory("s", user_id="u1", save=save)

    async def read_one_chunk() -> None:
        async with agent.run_stream("Where?", capabilities=[memory]) as streamed:
            async for _text in streamed.stream_text(delta=True, debounce_by=None):
                break

    run(read_one_chunk)

    assert len(stored("s")) == SAVED_BEFORE_THE_STREAM_CLOSED[save]
    conversation = Conversation.objects.filter(session_id="s").first()
    assert conversation is None or list_failed_runs(conversation.pk, limit=5) == []
    assert not AgentRun.objects.exists()


@pytest.mark.parametrize("save", POLICIES)
def test_a_retried_run_id_stores_nothing_twice(save: MemorySavePolicy) -> None:
    script = Script(
        [
            call("lookup", {"order": "42"}, "c1"),
            answer("It shipped."),
            call("lookup", {"order": "42"}, "c9"),
            answer("Shipped."),
        ]
    )
    agent = tool_agent(script)
    memory = DjangoMemory("s", user_id="u1", save=save)
    first = drive("run", agent, "Where?", capabilities=[memory], run_id="task-7")
    rows = stored("s")
    record = AgentRun.objects.values().get()

    retry = drive("run", agent, "Where?", capabilities=[memory], run_id="task-7")

    assert stored("s") == rows
    assert AgentRun.objects.values().get() == record
    # The retry saw the history before the run, as the first attempt did.
    assert script.seen[2] == [retry[0]]
    assert loaded("s") == first


def test_a_retry_after_a_partial_first_attempt_adds_nothing() -> None:
    script = Script(
        [
            call("lookup", {"order": "42"}, "c1"),
            ConnectionError("lost"),
            call("lookup", {"order": "42"}, "c2"),
            answer("Shipped."),
        ]
    )
    agent = tool_agent(script)
    memory = DjangoMemory("s", user_id="u1", save="message")
    with pytest.raises(ConnectionError):
        drive("run", agent, "Where?", capabilities=[memory], run_id="task-8")
    rows = stored("s")

    drive("run", agent, "Where?", capabilities=[memory], run_id="task-8")

    assert stored("s") == rows
    (record,) = AgentRun.objects.all()
    assert record.status == "failed"


def test_an_explicit_history_is_used_as_given_and_the_run_still_saved() -> None:
    script = Script([answer("One."), answer("Two.")])
    agent = Agent(script.model())
    memory = DjangoMemory("s", user_id="u1")
    stored_first = drive("run", agent, "First", capabilities=[memory])
    own_history = drive("run", Agent(Script([answer("Elsewhere.")]).model()), "Given")

    second = drive("run", agent, "Second", capabilities=[memory], message_history=own_history)

    assert script.seen[-1][:-1] == own_history  # not the stored history
    assert loaded("s") == stored_first + second


def test_messages_of_another_runtime_in_the_session_are_loaded_as_pydantic_ai_messages() -> None:
    plain: list[Message] = [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "Hi"},
        {
            "role": "assistant",
            "content": "",
            "tool_calls": [{"id": "t1", "name": "lookup", "arguments": {"order": "1"}}],
        },
        {"role": "tool", "tool_call_id": "t1", "name": "lookup", "content": "shipped"},
        {"role": "assistant", "content": [{"type": "text", "text": "It shipped."}]},
        {"role": "openai-item", "openai_agents_item": {"type": "reasoning"}},
    ]
    run(
        DjangoMemoryStore().append,
        MemoryAppendInput(MemoryContext("s", user_id="u1"), "core-1", 1, plain),
    )
    script = Script([answer("Yes.")])

    drive("run", Agent(script.model()), "Still?", capabilities=[DjangoMemory("s", user_id="u1")])

    history = script.seen[0][:-1]
    # The system and user messages are one request once Pydantic AI has
    # merged the consecutive requests; the unknown role is left out.
    request, call_response, tool_return, reply = history
    assert [part.content for part in request.parts] == ["Be brief.", "Hi"]  # type: ignore[union-attr]
    assert call_response.parts[0].args == {"order": "1"}  # type: ignore[union-attr]
    assert tool_return.parts[0].content == "shipped"  # type: ignore[union-attr]
    assert reply.parts[0].content == "It shipped."  # type: ignore[union-attr]


def test_another_users_session_is_refused_and_nothing_is_written() -> None:
    drive(
        "run",
        Agent(Script([answer("Hi.")]).model()),
        "Hi",
        capabilities=[DjangoMemory("s", user_id="u1")],
    )
    before = stored("s")

    with pytest.raises(ConversationScopeError):
        drive(
            "run",
            Agent(Script([answer("x")]).model()),
            "Hi",
            capabilities=[DjangoMemory("s", user_id="u2")],
        )

    assert stored("s") == before
    assert AgentRun.objects.count() == 1


@pytest.mark.parametrize(
    ("kwargs", "error"),
    [
        ({"session_id": " "}, InvalidMemoryInputError),
        ({"session_id": "s", "save": "sometimes"}, ValueError),
        ({"session_id": "s", "user_id": 7}, InvalidMemoryInputError),
    ],
)
def test_bad_arguments_are_refused_when_the_capability_is_made(
    kwargs: dict[str, Any], error: type[Exception]
) -> None:
    with pytest.raises(error):
        DjangoMemory(**kwargs)


def test_one_capability_serves_concurrent_runs_of_one_agent_separately() -> None:
    memory = DjangoMemory("s", user_id="u1", save="turn")
    agent = Agent(Script([answer(str(n)) for n in range(4)]).model(), capabilities=[memory])

    async def two_sessions() -> None:
        other = DjangoMemory("t", user_id="u1")
        for _ in range(2):
            await drive_async("run", agent, "a")
            await drive_async("run", agent, "b", capabilities=[other])

    run(two_sessions)

    # A run's capability overrides the agent's one of the same id.
    assert len(stored("s")) == 4
    assert len(stored("t")) == 4
