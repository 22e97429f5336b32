"""DjangoChatMessageHistory under RunnableWithMessageHistory, with LangChain's
InMemoryChatMessageHistory as the reference: every input/output shape of
langchain-core's runnables/test_history.py, through invoke, stream, ainvoke
and astream, must give the same outputs and leave the same history."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from tests.helpers import run

pytest.importorskip("langchain_core")

from langchain_core.chat_history import (
    BaseChatMessageHistory,
    InMemoryChatMessageHistory,
)
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage
from langchain_core.runnables import RunnableLambda
from langchain_core.runnables.history import RunnableWithMessageHistory

from anvia_django.integrations.langchain import DjangoChatMessageHistory

from .langchain_support import (
    IGNORE_DEPRECATION,
    IGNORE_IN_MEMORY_DEPRECATION,
    WorkerThreadHistory,
)

pytestmark = [
    pytest.mark.django_db,
    pytest.mark.filterwarnings(IGNORE_DEPRECATION),
    pytest.mark.filterwarnings(IGNORE_IN_MEMORY_DEPRECATION),
]

TURNS = ["hello", "good bye", "hi again"]


def heard(params: Any) -> str:
    """What an echo model says: every human message it was given."""
    if isinstance(params, list):
        messages = params
    else:
        messages = list(params.get("history", []))
        messages += params["messages"] if "messages" in params else [HumanMessage(params["input"])]
    return "you said: " + "\n".join(str(m.content) for m in messages if isinstance(m, HumanMessage))


# shape: (RunnableWithMessageHistory keys, the input for a turn, the echo's output)
SHAPES: dict[str, tuple[dict[str, str], Callable[[str], Any], Callable[[str], Any]]] = {
    "messages in, text out": ({}, lambda text: [HumanMessage(text)], str),
    "messages in, message out": ({}, lambda text: [HumanMessage(text)], AIMessage),
    "text in, message out": ({}, str, AIMessage),
    "dict in": ({"input_messages_key": "messages"}, lambda t: {"messages": [HumanMessage(t)]}, str),
    "dict with a history key": (
        {"input_messages_key": "input", "history_messages_key": "history"},
        lambda text: {"input": text},
        str,
    ),
    "message out": (
        {"input_messages_key": "input", "history_messages_key": "history"},
        lambda text: {"input": text},
        AIMessage,
    ),
    "messages out": (
        {"input_messages_key": "input", "history_messages_key": "history"},
        lambda text: {"input": text},
        lambda said: [AIMessage(said)],
    ),
    "dict out": (
        {
            "input_messages_key": "input",
            "history_messages_key": "history",
            "output_messages_key": "output",
        },
        lambda text: {"input": text},
        lambda said: {"output": [AIMessage(said)]},
    ),
}

SYNC = pytest.mark.django_db(transaction=True)  # LangChain reads history in pool threads
MODES = [
    pytest.param("invoke", marks=SYNC),
    pytest.param("stream", marks=SYNC),
    "ainvoke",
    "astream",
]


def converse(
    mode: str, shape: str, factory: Callable[..., BaseChatMessageHistory], *, keyed: bool = True
) -> list[Any]:
    keys, make_input, make_output = SHAPES[shape]
    echo = RunnableLambda(lambda params: make_output(heard(params)))
    chain = RunnableWithMessageHistory(echo, factory, **keys)  # type: ignore[arg-type]
    config: Any = {"configurable": {"session_id": "1"}} if keyed else None
    outputs = []
    for text in TURNS:
        value = make_input(text)
        if mode == "invoke":
            outputs.append(chain.invoke(value, config))
        elif mode == "stream":
            outputs.append([*chain.stream(value, config)])
        elif mode == "ainvoke":
            outputs.append(run(chain.ainvoke, value, config))
        else:
            outputs.append(run(collect, chain.astream(value, config)))
    return outputs


async def collect(stream: Any) -> list[Any]:
    return [chunk async for chunk in stream]


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("shape", list(SHAPES))
def test_every_shape_behaves_as_with_the_in_memory_history(mode: str, shape: str) -> None:
    reference: dict[str, InMemoryChatMessageHistory] = {}

    def in_memory(session_id: str) -> InMemoryChatMessageHistory:
        return reference.setdefault(session_id, InMemoryChatMessageHistory())

    def stored(session_id: str) -> DjangoChatMessageHistory:
        return WorkerThreadHistory(session_id, user_id="u1")

    expected = converse(mode, shape, in_memory)
    assert converse(mode, shape, stored) == expected
    messages: list[BaseMessage] = DjangoChatMessageHistory("1").messages
    assert messages == reference["1"].messages
    assert len(messages) == 2 * len(TURNS)
    assert expected[-1] != expected[0]  # the later turns did see the history


@pytest.mark.parametrize("mode", MODES)
def test_a_factory_without_a_session_id_needs_no_config(mode: str) -> None:
    reference = InMemoryChatMessageHistory()
    expected = converse(mode, "messages in, text out", lambda: reference, keyed=False)
    outputs = converse(
        mode, "messages in, text out", lambda: WorkerThreadHistory("fixed"), keyed=False
    )
    assert outputs == expected
    assert DjangoChatMessageHistory("fixed").messages == reference.messages
