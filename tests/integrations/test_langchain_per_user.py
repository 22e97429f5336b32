"""LangChain's per-user pattern (issue 13, case 4): RunnableWithMessageHistory
with ``history_factory_config`` user_id + conversation_id, where every user
numbers their conversations from "1", on SQLite and PostgreSQL."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from anvia_django.core.memory import ConversationScopeError, InvalidMemoryInputError
from anvia_django.models import Conversation
from tests.helpers import run

from .common import json_text

pytest.importorskip("langchain_core")

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage
from langchain_core.runnables import RunnableLambda
from langchain_core.runnables.history import RunnableWithMessageHistory

from anvia_django.integrations.keys import user_conversation_session_id
from anvia_django.integrations.langchain import (
    DjangoChatMessageHistory,
    user_conversation_fields,
)

from .langchain_support import IGNORE_DEPRECATION, WorkerThreadHistory

pytestmark = [pytest.mark.django_db, pytest.mark.filterwarnings(IGNORE_DEPRECATION)]


def echo(params: dict[str, Any]) -> list[BaseMessage]:
    messages = [*params["history"], *params["messages"]]
    said = [m.content for m in messages if isinstance(m, HumanMessage)]
    return [AIMessage("you said: " + "\n".join(str(text) for text in said))]


def per_user_chain(history_class: type[DjangoChatMessageHistory]) -> Any:
    return RunnableWithMessageHistory(
        RunnableLambda(echo),
        history_class.for_user_conversation,
        input_messages_key="messages",
        history_messages_key="history",
        history_factory_config=user_conversation_fields(),
    )


@pytest.mark.parametrize(
    "mode", [pytest.param("invoke", marks=pytest.mark.django_db(transaction=True)), "ainvoke"]
)
def test_each_user_has_their_own_conversation_1(mode: str) -> None:
    chain = per_user_chain(WorkerThreadHistory)

    def say(user_id: str, conversation_id: str, text: str) -> Any:
        value = {"messages": [HumanMessage(text)]}
        config: Any = {"configurable": {"user_id": user_id, "conversation_id": conversation_id}}
        if mode == "invoke":
            return chain.invoke(value, config)
        return run(chain.ainvoke, value, config)

    assert say("user1", "1", "hello") == [AIMessage("you said: hello")]
    assert say("user1", "1", "goodbye") == [AIMessage("you said: hello\ngoodbye")]
    # Before: ConversationScopeError, the session id "1" belonging to user1.
    assert say("user2", "1", "meow") == [AIMessage("you said: meow")]
    assert say("user1", "2", "new") == [AIMessage("you said: new")]

    first = DjangoChatMessageHistory.for_user_conversation("user1", "1").messages
    assert first == [
        HumanMessage("hello"),
        AIMessage("you said: hello"),
        HumanMessage("goodbye"),
        AIMessage("you said: hello\ngoodbye"),
    ]
    other = DjangoChatMessageHistory.for_user_conversation("user2", "1").messages
    assert other == [HumanMessage("meow"), AIMessage("you said: meow")]
    owners = dict(Conversation.objects.values_list("session_id", "user_id"))
    assert owners == {
        user_conversation_session_id("user1", "1"): "user1",
        user_conversation_session_id("user2", "1"): "user2",
        user_conversation_session_id("user1", "2"): "user1",
    }


def test_a_missing_key_in_the_config_is_langchains_error() -> None:
    chain = per_user_chain(DjangoChatMessageHistory)
    with pytest.raises(ValueError, match="conversation_id"):
        chain.invoke({"messages": [HumanMessage("hi")]}, {"configurable": {"user_id": "u1"}})
    assert not Conversation.objects.exists()


@pytest.mark.parametrize(
    ("user_id", "conversation_id", "path"),
    [
        ("", "1", "user_id"),
        ("u1", "  ", "conversation_id"),
        (None, "1", "user_id"),
        ("u1", 7, "conversation_id"),
        ("u" * 200, "c" * 60, "conversation_id"),  # together longer than a session id
    ],
)
def test_bad_keys_are_refused_naming_the_part(
    user_id: Any, conversation_id: Any, path: str
) -> None:
    with pytest.raises(InvalidMemoryInputError, match=path):
        DjangoChatMessageHistory.for_user_conversation(user_id, conversation_id)


def test_owner_scoping_still_holds_for_derived_session_ids() -> None:
    alice = DjangoChatMessageHistory.for_user_conversation("alice", "1")
    alice.add_messages([HumanMessage("secret")])
    forged = DjangoChatMessageHistory(user_conversation_session_id("alice", "1"), user_id="mallory")
    with pytest.raises(ConversationScopeError):
        forged.messages  # noqa: B018
    assert DjangoChatMessageHistory.for_user_conversation("mallory", "1").messages == []


ids = json_text.filter(lambda text: text.strip() != "" and len(text) <= 100)


@settings(
    max_examples=200,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(st.tuples(ids, ids), st.tuples(ids, ids))
def test_distinct_pairs_never_share_a_session_id(
    one: tuple[str, str], two: tuple[str, str]
) -> None:
    first, second = user_conversation_session_id(*one), user_conversation_session_id(*two)
    assert (first == second) is (one == two)
    # Readable in the admin: both parts appear as given.
    assert one[0] in first
    assert first.endswith(one[1])
