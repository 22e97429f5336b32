"""LangChain's per-user pattern: RunnableWithMessageHistory with
``history_factory_config`` user_id + conversation_id, where every user
numbers their conversations from "1". Under the default scope (session id +
user id) the plain constructor serves as ``get_session_history``."""

from __future__ import annotations

from typing import Any

import pytest

from anvia_django.core.memory import InvalidMemoryInputError
from anvia_django.models import Conversation
from tests.helpers import run

pytest.importorskip("langchain_core")

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage
from langchain_core.runnables import RunnableLambda
from langchain_core.runnables.history import RunnableWithMessageHistory

from anvia_django.integrations.langchain import (
    DjangoChatMessageHistory,
    user_conversation_fields,
)

from .langchain_support import IGNORE_DEPRECATION, WorkerThreadHistory

pytestmark = [
    pytest.mark.django_db,
    pytest.mark.filterwarnings(IGNORE_DEPRECATION),
    pytest.mark.usefixtures("default_scope"),
]


def echo(params: dict[str, Any]) -> list[BaseMessage]:
    messages = [*params["history"], *params["messages"]]
    said = [m.content for m in messages if isinstance(m, HumanMessage)]
    return [AIMessage("you said: " + "\n".join(str(text) for text in said))]


def per_user_chain(history_class: type[DjangoChatMessageHistory]) -> Any:
    def get_session_history(user_id: str, conversation_id: str) -> DjangoChatMessageHistory:
        return history_class(conversation_id, user_id=user_id)

    return RunnableWithMessageHistory(
        RunnableLambda(echo),
        get_session_history,
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

    first = DjangoChatMessageHistory("1", user_id="user1").messages
    assert first == [
        HumanMessage("hello"),
        AIMessage("you said: hello"),
        HumanMessage("goodbye"),
        AIMessage("you said: hello\ngoodbye"),
    ]
    other = DjangoChatMessageHistory("1", user_id="user2").messages
    assert other == [HumanMessage("meow"), AIMessage("you said: meow")]
    # The ids as the callers gave them, readable in the admin and the API.
    stored = sorted(Conversation.objects.values_list("session_id", "user_id", "scope_key"))
    assert stored == [("1", "user1", "user1"), ("1", "user2", "user2"), ("2", "user1", "user1")]


def test_a_missing_key_in_the_config_is_langchains_error() -> None:
    chain = per_user_chain(DjangoChatMessageHistory)
    with pytest.raises(ValueError, match="conversation_id"):
        chain.invoke({"messages": [HumanMessage("hi")]}, {"configurable": {"user_id": "u1"}})
    assert not Conversation.objects.exists()


@pytest.mark.parametrize(
    ("user_id", "conversation_id", "path"),
    [
        ("", "1", "user_id"),
        ("u1", "  ", "session_id"),
        ("u1", 7, "session_id"),
        ("u1", "c" * 256, "session_id"),
    ],
)
def test_bad_keys_are_refused_naming_the_part(
    user_id: Any, conversation_id: Any, path: str
) -> None:
    chain = per_user_chain(DjangoChatMessageHistory)
    config: Any = {"configurable": {"user_id": user_id, "conversation_id": conversation_id}}
    with pytest.raises(InvalidMemoryInputError, match=path):
        chain.invoke({"messages": [HumanMessage("hi")]}, config)
    assert not Conversation.objects.exists()
