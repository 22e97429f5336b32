"""A small chat graph for the LangGraph tests: a fake chat model (no
network) answers, then a reviewer node waits for a human's approval
(``interrupt``) before the turn ends."""

from __future__ import annotations

from itertools import count
from typing import Any

from langchain_core.language_models.fake_chat_models import FakeMessagesListChatModel
from langchain_core.messages import AIMessage
from langgraph.graph import START, MessagesState, StateGraph
from langgraph.types import interrupt

from anvia_django.integrations.langgraph import DjangoSaver


class State(MessagesState):
    approved: str


def fake_model(replies: int = 20) -> FakeMessagesListChatModel:
    """Answers "reply 1", "reply 2", ... in order."""
    return FakeMessagesListChatModel(
        responses=[AIMessage(f"reply {n}") for n in range(1, replies + 1)]
    )


def chat_graph(
    saver: DjangoSaver, model: FakeMessagesListChatModel | None = None, *, review: bool = False
) -> Any:
    """The graph, compiled with ``saver`` (``Any``: LangGraph's overloads
    ask mypy for arguments ``async_to_sync`` cannot see)."""
    chat_model = model or fake_model()
    turns = count(1)

    def chat(state: State) -> dict[str, Any]:
        next(turns)
        return {"messages": [chat_model.invoke(state["messages"])]}

    def reviewer(state: State) -> dict[str, Any]:
        return {"approved": interrupt({"question": "send this reply?"})}

    builder = StateGraph(State)
    builder.add_node("chat", chat)
    builder.add_edge(START, "chat")
    if review:
        builder.add_node("reviewer", reviewer)
        builder.add_edge("chat", "reviewer")
    return builder.compile(checkpointer=saver)


def texts(state: Any) -> list[str]:
    return [message.content for message in state["messages"]]


def thread(thread_id: str, **configurable: Any) -> Any:
    return {"configurable": {"thread_id": thread_id, **configurable}}
