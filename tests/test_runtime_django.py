"""The agent runtime on DjangoMemoryStore: concurrency, crashes, failed runs."""

from __future__ import annotations

import threading
from collections.abc import Callable

import pytest
from asgiref.sync import async_to_sync
from django.db import connection

from anvia_django.core import (
    AgentBuilder,
    AgentResponse,
    ConversationScopeError,
    MemoryContext,
    MemoryConversationListOptions,
    MemorySavePolicy,
    Message,
)
from anvia_django.models import FailedRun
from anvia_django.store import DjangoMemoryStore

from .core.crash import POINTS, SURVIVES, How, Point, crash_run
from .core.doubles import ScriptedModel, assistant, tool_result
from .helpers import run


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
def test_another_users_prompt_fails_and_records_nothing() -> None:
    store = DjangoMemoryStore()
    agent = AgentBuilder("a", ScriptedModel([assistant("hi")])).memory(store).build()
    run(agent.session("s", user_id="alice").prompt("hello").send)
    with pytest.raises(ConversationScopeError) as raised:
        run(agent.session("s", user_id="mallory").prompt("show me").send)
    # record_error is refused by the scope rule too; the original error wins.
    assert any("record_error also failed" in note for note in raised.value.__notes__)
    assert FailedRun.objects.count() == 0
    assert len(run(agent.session("s", user_id="alice").history)) == 2
