"""DjangoChatMessageHistory's run records under RunnableWithMessageHistory,
with a fake chat model whose usage_metadata the stored totals must equal."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from django.contrib.auth.models import User
from rest_framework.test import APIClient

from anvia_django.models import AgentRun, Conversation
from tests.helpers import run, snapshot

pytest.importorskip("langchain_core")

from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage
from langchain_core.runnables.history import RunnableWithMessageHistory

from anvia_django.integrations.langchain import (
    DjangoChatMessageHistory,
    user_conversation_fields,
)

from .langchain_support import IGNORE_DEPRECATION

pytestmark = [pytest.mark.django_db, pytest.mark.filterwarnings(IGNORE_DEPRECATION)]

REPLIES = [
    AIMessage(
        "Order 42 shipped.",
        usage_metadata={"input_tokens": 31, "output_tokens": 6, "total_tokens": 37},
        response_metadata={"model_name": "fake-chat-1"},
    ),
    AIMessage(
        "It arrives Friday.",
        usage_metadata={"input_tokens": 52, "output_tokens": 5, "total_tokens": 57},
        response_metadata={"model": "fake-chat-2"},
    ),
]


def chat_with_history(replies: list[AIMessage]) -> RunnableWithMessageHistory:
    model = GenericFakeChatModel(messages=iter(replies))
    return RunnableWithMessageHistory(
        model,
        lambda user_id, conversation_id: DjangoChatMessageHistory(conversation_id, user_id=user_id),
        history_factory_config=user_conversation_fields(),
    )


def ask(chain: RunnableWithMessageHistory, text: str, how: str) -> Any:
    config: Any = {"configurable": {"user_id": "u1", "conversation_id": "c1"}}
    if how == "invoke":
        return chain.invoke([HumanMessage(text)], config=config)
    return run(chain.ainvoke, [HumanMessage(text)], config=config)


def api(path: str) -> Any:
    client = APIClient()
    client.force_authenticate(User.objects.get_or_create(username="staff", is_staff=True)[0])
    response = client.get(path)
    assert response.status_code == 200
    return response.json()


@pytest.mark.parametrize("how", ["invoke", "ainvoke"])
def test_each_invocation_is_a_run_with_the_usage_the_model_reported(how: str) -> None:
    chain = chat_with_history(list(REPLIES))
    answers = [ask(chain, "Where is order 42?", how), ask(chain, "When will it arrive?", how)]

    ref = Conversation.objects.get(session_id="c1", user_id="u1").ref
    body = api(f"/anvia/api/conversations/{ref}/runs/")
    reported = [a.usage_metadata for a in answers]
    assert body["totals"] == {
        "runCount": 2,
        "failedRunCount": 0,
        "inputTokens": sum(u["input_tokens"] for u in reported),
        "outputTokens": sum(u["output_tokens"] for u in reported),
        "totalTokens": sum(u["total_tokens"] for u in reported),
    }
    newest, oldest = body["runs"]
    assert [newest["model"], oldest["model"]] == ["fake-chat-2", "fake-chat-1"]
    assert [newest["totalTokens"], oldest["totalTokens"]] == [57, 37]
    assert {newest["status"], oldest["status"]} == {"succeeded"}
    assert [newest["messageCount"], oldest["messageCount"]] == [2, 2]
    # Each run's messages carry its run id: the transcript links to the runs.
    messages = api(f"/anvia/api/conversations/{ref}/messages/")
    assert [m["runId"] for m in messages] == [oldest["runId"]] * 2 + [newest["runId"]] * 2


def test_a_streamed_answer_without_usage_is_a_run_without_token_counts() -> None:
    chain = chat_with_history([AIMessage("Order 42 shipped.")])
    config: Any = {"configurable": {"user_id": "u1", "conversation_id": "c1"}}
    for _chunk in chain.stream([HumanMessage("Where is order 42?")], config=config):
        pass

    (stored,) = AgentRun.objects.all()
    assert (stored.status, stored.message_count, stored.total_tokens) == ("succeeded", 2, None)
    assert stored.started_at <= stored.finished_at


ADDS: dict[str, Callable[[DjangoChatMessageHistory, list[BaseMessage]], None]] = {
    "add_messages": lambda history, messages: history.add_messages(messages),
    "aadd_messages": lambda history, messages: run(history.aadd_messages, messages),
}


@pytest.mark.parametrize("add", ADDS)
def test_batches_without_an_answer_or_with_recording_off_record_no_run(add: str) -> None:
    ADDS[add](DjangoChatMessageHistory("lc-no-answer"), [HumanMessage("hi")])
    off = DjangoChatMessageHistory("lc-off", record_runs=False)
    ADDS[add](off, [HumanMessage("hi"), REPLIES[0]])

    assert Conversation.objects.get(session_id="lc-off").message_count == 2
    assert not AgentRun.objects.exists()


@pytest.mark.parametrize("add", ADDS)
def test_a_run_record_that_fails_leaves_its_messages_unwritten(
    add: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    history = DjangoChatMessageHistory("lc-atomic", user_id="u1")
    history.add_messages([HumanMessage("first")])
    before = snapshot()

    def refuse(*args: Any, **kwargs: Any) -> None:
        raise RuntimeError("run table unavailable")

    monkeypatch.setattr("anvia_django.integrations.run_tally.record_run", refuse)
    with pytest.raises(RuntimeError, match="run table unavailable"):
        ADDS[add](history, [HumanMessage("hi"), REPLIES[0]])

    assert snapshot() == before
