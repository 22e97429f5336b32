"""The agent runtime on DjangoMemoryStore: concurrency, crashes, failed runs."""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from asgiref.sync import async_to_sync
from django.contrib.auth.models import User
from django.db import connection
from django.test import RequestFactory

from anvia_django.core import (
    AgentBuilder,
    AgentResponse,
    ConversationScopeError,
    MemoryContext,
    MemoryConversationListOptions,
    MemorySavePolicy,
    Message,
)
from anvia_django.models import AgentRun, FailedRun
from anvia_django.store import DjangoMemoryStore

from .core.crash import POINTS, SURVIVES, How, Point, crash_run
from .core.doubles import ScriptedModel, assistant, tool_result
from .core.stub_server import StubServer, no_proxies, stub
from .helpers import run

__all__ = ["no_proxies", "stub"]  # fixtures used by the tests below


def lookup(order: str) -> str:
    """Look an order up."""
    return f"{order}: shipped"


def two_turn_agent(
    policy: MemorySavePolicy, tag: str, before_first_answer: Callable[[], object] | None = None
) -> AgentBuilder:
    ask = assistant(None, (f"call-{tag}", "lookup", {"order": tag}))

    def first(messages: list[Message]) -> Message:
        if before_first_answer is not None:
            before_first_answer()
        return ask

    model = ScriptedModel([first, assistant(f"{tag} has shipped")])
    return (
        AgentBuilder("support", model).tool(lookup).memory(DjangoMemoryStore(), save_policy=policy)
    )


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("policy", ["message", "turn", "run"])
def test_two_concurrent_runs_on_one_session_lose_nothing(policy: MemorySavePolicy) -> None:
    # Both runs load the (empty) history before either saves anything.
    barrier = threading.Barrier(2, timeout=30)
    responses: dict[str, AgentResponse] = {}
    failures: list[BaseException] = []

    def worker(tag: str) -> None:
        agent = two_turn_agent(policy, tag, barrier.wait).build()
        try:
            # async_to_sync keeps this thread's store calls on this thread's
            # own connection, so the two runs really hit the database at once.
            responses[tag] = async_to_sync(agent.session("shared").prompt(f"Track {tag}").send)()
        except BaseException as error:
            failures.append(error)
        finally:
            connection.close()

    threads = [threading.Thread(target=worker, args=(tag,)) for tag in ("A", "B")]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert failures == []

    store = DjangoMemoryStore()
    loaded = run(store.load, MemoryContext("shared"))
    (summary,) = run(store.inspector.list_conversations, MemoryConversationListOptions(limit=10))
    conversation = run(store.inspector.get_conversation, summary.ref)
    assert conversation is not None
    assert summary.message_count == len(loaded) == 8
    assert [m.position for m in conversation.messages] == list(range(8))
    for response in responses.values():
        # Every message of each run is there once, in the run's own order.
        mine = [m.message for m in conversation.messages if m.run_id == response.run_id]
        assert mine == response.messages
    assert responses["A"].messages[2] == tool_result("call-A", "lookup", "A: shipped")
    assert responses["B"].output == "B has shipped"


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("how", ["killed", "cancelled"])
@pytest.mark.parametrize("point", POINTS)
@pytest.mark.parametrize("policy", ["message", "turn", "run"])
def test_what_survives_a_crash(policy: MemorySavePolicy, point: Point, how: How) -> None:
    store = DjangoMemoryStore()
    run(crash_run, store, policy, point, how, "s")
    assert run(store.load, MemoryContext("s")) == SURVIVES[policy, point]
    assert FailedRun.objects.count() == 0


@pytest.mark.django_db(transaction=True)
def test_a_failed_run_is_recorded_outside_the_transcript() -> None:
    class ProviderDown(Exception):
        pass

    store = DjangoMemoryStore()
    ask = assistant(None, ("c1", "lookup", {"order": "A1"}))
    model = ScriptedModel([ask, ProviderDown("503 from provider")])
    agent = AgentBuilder("a", model).tool(lookup).memory(store, save_policy="turn").build()
    session = agent.session("s", user_id="alice")
    with pytest.raises(ProviderDown):
        run(session.prompt("Track A1").send)
    failed = FailedRun.objects.get()
    assert failed.error_message == "503 from provider"
    assert failed.error_type.endswith("ProviderDown")
    assert failed.messages == [
        {"role": "user", "content": "Track A1"},
        ask,
        tool_result("c1", "lookup", "A1: shipped"),
    ]
    assert run(session.history) == failed.messages  # turn 1 was saved; the failure was not


@pytest.mark.django_db(transaction=True)
def test_another_users_prompt_fails_and_records_nothing(caplog: pytest.LogCaptureFixture) -> None:
    store = DjangoMemoryStore()
    agent = AgentBuilder("a", ScriptedModel([assistant("hi")])).memory(store).build()
    run(agent.session("s", user_id="alice").prompt("hello").send)
    with (
        caplog.at_level(logging.WARNING, logger="anvia_django"),
        pytest.raises(ConversationScopeError) as raised,
    ):
        run(agent.session("s", user_id="mallory").prompt("show me").send)
    # Nothing is recorded under a context the store refuses, so nothing is
    # refused again and logged (once for the error, once for the run record).
    assert not getattr(raised.value, "__notes__", None)
    assert caplog.records == []
    assert FailedRun.objects.count() == 0
    assert AgentRun.objects.count() == 1  # alice's own run
    assert len(run(agent.session("s", user_id="alice").history)) == 2


def readme_snippet() -> str:
    guide = (Path(__file__).parent.parent / "docs" / "runtime.md").read_text()
    section = guide.split("## An agent with Django memory in 25 lines", 1)[1]
    return section.split("```python\n", 1)[1].split("```", 1)[0]


def test_the_guide_snippet_is_25_lines() -> None:
    code_lines = [line for line in readme_snippet().splitlines() if line.strip()]
    assert len(code_lines) <= 25


@pytest.mark.django_db(transaction=True)
def test_the_guide_snippet_works(stub: StubServer, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_BASE_URL", stub.url)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    call = {
        "id": "c1",
        "type": "function",
        "function": {"name": "order_status", "arguments": '{"order_id": "A1"}'},
    }
    stub.reply({"role": "assistant", "content": None, "tool_calls": [call]})
    stub.reply({"role": "assistant", "content": "A1 has shipped."})
    namespace: dict[str, Any] = {}
    exec(compile(readme_snippet(), "docs/runtime.md", "exec"), namespace)

    alice = User.objects.create_user("alice")
    request = RequestFactory().post("/chat/t1/", {"message": "Where is A1?"})

    async def auser() -> User:
        return alice

    request.auser = auser
    response = async_to_sync(namespace["chat"])(request, "t1")

    assert json.loads(response.content)["reply"] == "A1 has shipped."
    history = run(DjangoMemoryStore().load, MemoryContext("t1", user_id=str(alice.pk)))
    assert [m["role"] for m in history] == ["user", "assistant", "tool", "assistant"]
    assert history[2]["content"] == "shipped"
