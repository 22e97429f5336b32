"""DjangoChatMessageHistory against the behaviour of LangChain's chat history
tests (langchain-core's test_chat_history.py and the SQL-backed histories),
on SQLite and PostgreSQL, plus a RunnableWithMessageHistory loop with a fake
chat model."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from anvia_django.core.memory import ConversationScopeError, InvalidMemoryInputError
from anvia_django.models import Conversation, MemoryMessage
from anvia_django.persistence import (
    get_conversation_with_messages,
    list_conversation_summaries,
)
from anvia_django.store import DjangoMemoryStore
from tests.helpers import append_input, run, snapshot

from .common import (
    assert_gap_free,
    at_once,
    json_text,
    kill_backend,
    stored_rows,
)

pytest.importorskip("langchain_core")

from langchain_core.chat_history import BaseChatMessageHistory, InMemoryChatMessageHistory
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import (
    AIMessage,
    AIMessageChunk,
    BaseMessage,
    ChatMessage,
    FunctionMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
)
from langchain_core.prompts import ChatPromptTemplate, MessagesPlaceholder
from langchain_core.runnables import RunnableLambda
from langchain_core.runnables.history import RunnableWithMessageHistory

from anvia_django.integrations.langchain import (
    DjangoChatMessageHistory,
    message_to_stored,
    stored_to_message,
)

from .langchain_support import (
    IGNORE_DEPRECATION,
    IGNORE_IN_MEMORY_DEPRECATION,
    WorkerThreadHistory,
)

pytestmark = pytest.mark.django_db

APPEND = "anvia_django.integrations.batches.append_messages"

TOOL_EXCHANGE: list[BaseMessage] = [
    SystemMessage("You track orders."),
    HumanMessage("Where is order 42? 🚚", id="h1", name="alice"),
    AIMessage(
        "",
        id="a1",
        tool_calls=[{"id": "call_1", "name": "lookup_order", "args": {"order_id": 42}}],
        usage_metadata={"input_tokens": 12, "output_tokens": 7, "total_tokens": 19},
        response_metadata={"model_name": "fake", "finish_reason": "tool_calls"},
    ),
    ToolMessage(
        '{"shipped": true}', tool_call_id="call_1", name="lookup_order", artifact={"raw": [1, 2]}
    ),
    AIMessage([{"type": "text", "text": "Order 42 shipped. Ça roule! 🎉"}], id="a2"),
]


def texts(messages: list[BaseMessage]) -> list[Any]:
    return [m.content for m in messages]


# --- the interface -------------------------------------------------------------


def test_is_a_chat_message_history_with_sync_and_async_methods() -> None:
    history = DjangoChatMessageHistory("s1")
    assert isinstance(history, BaseChatMessageHistory)
    for name in ("add_messages", "clear"):
        assert getattr(DjangoChatMessageHistory, name) is not getattr(BaseChatMessageHistory, name)
    for name in ("aget_messages", "aadd_messages", "aclear"):
        assert getattr(DjangoChatMessageHistory, name) is not getattr(BaseChatMessageHistory, name)


def test_bad_session_ids_are_refused_at_construction() -> None:
    with pytest.raises(InvalidMemoryInputError, match="session_id"):
        DjangoChatMessageHistory("")


# --- add, read, clear, sync and async ----------------------------------------


def test_add_read_and_clear() -> None:
    history = DjangoChatMessageHistory("basic")
    assert history.messages == []
    history.add_user_message("Hello")
    history.add_ai_message("Hi there!")
    history.add_messages([HumanMessage("How are you?"), AIMessage("Fine.")])
    assert texts(history.messages) == ["Hello", "Hi there!", "How are you?", "Fine."]
    assert str(history) == "Human: Hello\nAI: Hi there!\nHuman: How are you?\nAI: Fine."
    history.clear()
    assert history.messages == []
    assert not Conversation.objects.exists()


def test_async_methods_share_the_storage() -> None:
    history = DjangoChatMessageHistory("async")
    run(history.aadd_messages, [HumanMessage("one")])
    history.add_messages([AIMessage("two")])
    assert texts(run(history.aget_messages)) == ["one", "two"]
    assert texts(history.messages) == ["one", "two"]
    run(history.aclear)
    assert run(history.aget_messages) == []


def test_adding_nothing_writes_nothing(django_assert_num_queries) -> None:
    history = DjangoChatMessageHistory("empty")
    with django_assert_num_queries(0):
        history.add_messages([])
        run(history.aadd_messages, [])
    assert not Conversation.objects.exists()


def test_reading_costs_one_query_whatever_the_length(django_assert_num_queries) -> None:
    history = DjangoChatMessageHistory("queries")
    history.add_messages([HumanMessage(str(n)) for n in range(50)])
    with django_assert_num_queries(1):
        assert len(history.messages) == 50


# --- order with tied timestamps, isolation --------------------------------------


def test_tied_timestamps_keep_insertion_order() -> None:
    history = DjangoChatMessageHistory("tied")
    history.add_messages([HumanMessage("first")])
    history.add_messages([AIMessage("second"), HumanMessage("third")])
    MemoryMessage.objects.update(created_at=datetime(2025, 10, 15, 17, 26, 39, tzinfo=UTC))
    assert texts(history.messages) == ["first", "second", "third"]


def test_sessions_are_isolated() -> None:
    cats, dogs = DjangoChatMessageHistory("cats"), DjangoChatMessageHistory("dogs")
    cats.add_messages([HumanMessage("I like cats")])
    dogs.add_messages([HumanMessage("I like dogs"), AIMessage("Woof")])
    dogs.clear()
    assert texts(cats.messages) == ["I like cats"]
    assert dogs.messages == []


# --- lossless mapping ---------------------------------------------------------


def test_every_message_type_round_trips_equal_tool_calls_included() -> None:
    history = DjangoChatMessageHistory("tools")
    messages = [
        *TOOL_EXCHANGE,
        ChatMessage(content="Looks good.", role="critic"),
        FunctionMessage(content="42", name="legacy_function"),
        AIMessageChunk(content="streamed part", id="c1"),
        HumanMessage("x", additional_kwargs={"k": [1, {"n": None}]}, response_metadata={"m": 1}),
    ]
    history.add_messages(messages)
    loaded = history.messages
    assert loaded == messages
    assert [type(m) for m in loaded] == [type(m) for m in messages]
    assert loaded[2].tool_calls == TOOL_EXCHANGE[2].tool_calls  # type: ignore[attr-defined]
    assert [row[3] for row in stored_rows("tools")] == [
        "system",
        "user",
        "assistant",
        "tool",
        "assistant",
        "critic",
        "function",
        "assistant",
        "user",
    ]
    # Stored in the shape the admin and inspector show.
    stored = MemoryMessage.objects.get(position=1).message
    assert stored["role"] == "user"
    assert stored["content"] == "Where is order 42? 🚚"
    assert stored["langchain"]["type"] == "human"


@settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    kind=st.sampled_from([HumanMessage, AIMessage, SystemMessage]),
    content=json_text
    | st.lists(st.fixed_dictionaries({"type": st.just("text"), "text": json_text})),
    name=st.none() | json_text,
    extra=st.dictionaries(json_text, json_text, max_size=3),
)
def test_any_message_round_trips(kind, content, name, extra) -> None:
    message = kind(content=content, name=name, additional_kwargs=extra)
    assert stored_to_message(message_to_stored(message)) == message


def test_messages_from_another_writer_are_read_too() -> None:
    # The same session written by the anvia runtime (OpenAI-like dicts).
    run(
        DjangoMemoryStore().append,
        append_input(
            "shared", [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}]
        ),
    )
    assert DjangoChatMessageHistory("shared").messages == [HumanMessage("hi"), AIMessage("hello")]


def test_unicode_and_large_messages_round_trip() -> None:
    history = DjangoChatMessageHistory("unicode 🌍")
    messages = [
        HumanMessage("naïve café 日本語 Ω≈ç√ 🎉 \u202e mirrored"),
        ToolMessage("x" * 10**6, tool_call_id="big"),
        AIMessage("🧪" * 50_000),
    ]
    history.add_messages(messages)
    assert history.messages == messages


def test_a_batch_with_a_bad_message_writes_nothing() -> None:
    history = DjangoChatMessageHistory("atomic")
    history.add_messages([HumanMessage("kept")])
    before = snapshot()
    with pytest.raises(InvalidMemoryInputError, match=r"messages\[1\]"):
        history.add_messages([HumanMessage("fine"), {"role": "user"}])  # type: ignore[list-item]
    with pytest.raises(InvalidMemoryInputError, match=r"messages\[1\]"):
        history.add_messages(
            [HumanMessage("fine"), AIMessage("x", additional_kwargs={"n": float("nan")})]
        )
    assert snapshot() == before


# --- owner scoping --------------------------------------------------------------


@pytest.mark.parametrize("operation", ["messages", "add_messages", "clear", "aget_messages"])
def test_another_users_history_is_refused_and_unchanged(operation: str) -> None:
    DjangoChatMessageHistory("owned", user_id="alice").add_messages([HumanMessage("secret")])
    before = snapshot()
    intruder = DjangoChatMessageHistory("owned", user_id="mallory")
    calls = {
        "messages": lambda: intruder.messages,
        "add_messages": lambda: intruder.add_messages([HumanMessage("x")]),
        "clear": intruder.clear,
        "aget_messages": lambda: run(intruder.aget_messages),
    }
    with pytest.raises(ConversationScopeError):
        calls[operation]()
    assert snapshot() == before
    assert texts(DjangoChatMessageHistory("owned").messages) == ["secret"]


# --- concurrency and retries (need real transactions) ---------------------------


@pytest.mark.django_db(transaction=True)
def test_concurrent_first_writes_keep_every_batch_whole() -> None:
    writers, batches_each = 6, 4

    def write(writer: int) -> None:
        history = DjangoChatMessageHistory("first-write")
        for batch in range(batches_each):
            pair = [HumanMessage(f"{writer}:{batch}:q"), AIMessage(f"{writer}:{batch}:a")]
            if writer % 2:
                run(history.aadd_messages, pair)
            else:
                history.add_messages(pair)

    at_once(writers, write)
    assert_gap_free("first-write")
    stored = texts(DjangoChatMessageHistory("first-write").messages)
    assert len(stored) == writers * batches_each * 2
    for start in range(0, len(stored), 2):
        prefix = stored[start].removesuffix(":q")
        assert stored[start : start + 2] == [f"{prefix}:q", f"{prefix}:a"]


@pytest.mark.server
@pytest.mark.django_db(transaction=True, databases=["default", "other"])
def test_a_connection_lost_between_calls_is_survived_without_duplicates() -> None:
    history = DjangoChatMessageHistory("retry")
    history.add_messages(TOOL_EXCHANGE[:1])
    kill_backend()
    history.add_messages(TOOL_EXCHANGE[1:3])
    assert history.messages == TOOL_EXCHANGE[:3]
    assert_gap_free("retry")


# --- visible to the inspector ---------------------------------------------------


def test_conversations_show_in_the_inspector() -> None:
    history = DjangoChatMessageHistory("inspected", user_id="u1", metadata={"app": "lc"})
    history.add_messages(TOOL_EXCHANGE[1:3])
    history.add_messages(TOOL_EXCHANGE[3:])

    [summary] = list_conversation_summaries(10, "u1")
    assert (summary.session_id, summary.message_count, summary.metadata) == (
        "inspected",
        4,
        {"app": "lc"},
    )
    conversation = get_conversation_with_messages(summary.ref)
    assert conversation is not None
    assert [m.message["role"] for m in conversation.messages] == [
        "user",
        "assistant",
        "tool",
        "assistant",
    ]
    assert [stored_to_message(m.message) for m in conversation.messages] == TOOL_EXCHANGE[1:]
    run_ids = [m.run_id for m in conversation.messages]
    assert all(r.startswith("langchain-") for r in run_ids)
    assert run_ids[0] == run_ids[1] != run_ids[2] == run_ids[3]
    assert {m.turn for m in conversation.messages} == {1}


# --- RunnableWithMessageHistory with a fake chat model --------------------------


# Sync invoke loads history in a worker thread, with its own database
# connection that sees committed data only: this test commits for real.
@pytest.mark.filterwarnings(IGNORE_DEPRECATION)
@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("mode", ["sync", "async"])
def test_runnable_with_message_history_remembers(mode: str) -> None:
    model = GenericFakeChatModel(
        messages=iter(
            [
                AIMessage("Hello Alice!", id="r1"),
                AIMessage("Your name is Alice.", id="r2"),
                AIMessage("Hi Bob.", id="r3"),
            ]
        )
    )
    prompts: list[list[BaseMessage]] = []

    def record(prompt: Any) -> Any:
        prompts.append(prompt.to_messages())
        return prompt

    prompt = ChatPromptTemplate.from_messages(
        [("system", "Be brief."), MessagesPlaceholder("history"), ("human", "{question}")]
    )
    chain = RunnableWithMessageHistory(
        prompt | RunnableLambda(record) | model,
        lambda session_id: WorkerThreadHistory(session_id, user_id="u1"),
        input_messages_key="question",
        history_messages_key="history",
    )

    def ask(session_id: str, question: str) -> Any:
        config: Any = {"configurable": {"session_id": session_id}}
        if mode == "sync":
            return chain.invoke({"question": question}, config=config)
        return run(chain.ainvoke, {"question": question}, config=config)

    assert ask("alice", "Hi, I am Alice.").content == "Hello Alice!"
    assert ask("alice", "What is my name?").content == "Your name is Alice."
    assert ask("bob", "Hi, I am Bob.").content == "Hi Bob."

    # The second call saw the first exchange, read back from the database.
    assert texts(prompts[1]) == ["Be brief.", "Hi, I am Alice.", "Hello Alice!", "What is my name?"]
    assert texts(prompts[2]) == ["Be brief.", "Hi, I am Bob."]
    alice = DjangoChatMessageHistory("alice").messages
    assert texts(alice) == [
        "Hi, I am Alice.",
        "Hello Alice!",
        "What is my name?",
        "Your name is Alice.",
    ]
    assert [m.id for m in alice if isinstance(m, AIMessage)] == ["r1", "r2"]
    assert [row[3] for row in stored_rows("alice")] == ["user", "assistant"] * 2
    assert Conversation.objects.get(session_id="alice").user_id == "u1"


# --- LangChain's InMemoryChatMessageHistory as the reference -----------------------


@pytest.mark.filterwarnings(IGNORE_IN_MEMORY_DEPRECATION)
@settings(
    max_examples=40,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    st.lists(
        st.one_of(
            st.tuples(
                st.sampled_from(["add_messages", "aadd_messages", "add_message"]),
                st.lists(st.sampled_from(range(len(TOOL_EXCHANGE))), max_size=3),
            ),
            st.tuples(st.sampled_from(["clear", "aclear", "messages", "aget_messages"]), st.none()),
        ),
        max_size=10,
    )
)
def test_every_operation_answers_as_the_in_memory_history(steps: list[tuple[str, Any]]) -> None:
    ours = DjangoChatMessageHistory(f"ref-{uuid.uuid4().hex}")
    reference = InMemoryChatMessageHistory()
    for operation, argument in steps:
        for history in (ours, reference):
            if operation == "add_message":
                for index in argument:
                    history.add_message(TOOL_EXCHANGE[index])
            elif operation == "add_messages":
                history.add_messages([TOOL_EXCHANGE[index] for index in argument])
            elif operation == "aadd_messages":
                run(history.aadd_messages, [TOOL_EXCHANGE[index] for index in argument])
            elif operation == "clear":
                history.clear()
            elif operation == "aclear":
                run(history.aclear)
        seen = run(ours.aget_messages) if operation == "aget_messages" else ours.messages
        assert seen == reference.messages
