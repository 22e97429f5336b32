"""Rewind: removing a conversation's messages from a position onwards."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from django.db import connection, transaction
from django.test.utils import CaptureQueriesContext

from anvia_django import signals
from anvia_django.core import AgentBuilder
from anvia_django.core.memory import (
    ConversationScopeError,
    InProcessMemoryStore,
    InvalidMemoryInputError,
    MemoryAppendInput,
    MemoryCapabilityError,
    MemoryContext,
)
from anvia_django.models import AgentRun, Conversation, MemoryMessage
from anvia_django.persistence import append_messages, rewind_conversation
from anvia_django.store import DjangoMemoryStore
from example_project.demo.agent import build_agent
from tests.core.doubles import ScriptedModel, assistant
from tests.helpers import append_input, run, snapshot, user

pytestmark = pytest.mark.django_db

STORES: dict[str, Callable[[], Any]] = {
    "django": DjangoMemoryStore,
    "in-process": InProcessMemoryStore,
}


def fill(store: Any, session_id: str, count: int, user_id: str | None = "u1") -> None:
    context = MemoryContext(session_id, user_id=user_id)
    for index in range(count):
        run(store.append, MemoryAppendInput(context, f"run-{index // 2}", 1, [user(str(index))]))


@pytest.mark.parametrize("make_store", STORES.values(), ids=list(STORES))
@pytest.mark.parametrize("to_position", [0, 1, 4, 6])
def test_rewind_keeps_the_first_messages_and_positions_continue(
    make_store: Callable[[], Any], to_position: int
) -> None:
    store = make_store()
    fill(store, "s", 6)
    context = MemoryContext("s", user_id="u1")
    assert run(store.rewind, context, to_position) == 6 - to_position
    assert run(store.load, context) == [user(str(i)) for i in range(to_position)]
    run(store.append, MemoryAppendInput(context, "later", 1, [user("new")]))
    conversation = run(store.inspector.get_conversation, _ref(store, "s"))
    assert [m.position for m in conversation.messages] == list(range(to_position + 1))
    assert conversation.message_count == to_position + 1
    assert conversation.messages[-1].message == user("new")


def _ref(store: Any, session_id: str) -> str:
    if isinstance(store, InProcessMemoryStore):
        return str(store._conversations[session_id].ref)
    return str(Conversation.objects.get(session_id=session_id).ref)


def test_rewinding_to_the_end_writes_nothing() -> None:
    fill(DjangoMemoryStore(), "s", 3)
    with CaptureQueriesContext(connection) as queries:
        assert rewind_conversation(MemoryContext("s"), 3) == 0
    assert not [q for q in queries if q["sql"].lstrip().upper().startswith(("DELETE", "UPDATE"))]


@pytest.mark.parametrize("make_store", STORES.values(), ids=list(STORES))
@pytest.mark.parametrize("bad", [-1, 4, 10**20, True, "2", 1.0, None])
def test_a_bad_position_is_named_and_changes_nothing(
    make_store: Callable[[], Any], bad: Any
) -> None:
    store = make_store()
    fill(store, "s", 3)
    before = snapshot()
    with pytest.raises(InvalidMemoryInputError) as caught:
        run(store.rewind, MemoryContext("s"), bad)
    assert caught.value.path == "to_position"
    assert snapshot() == before
    assert len(run(store.load, MemoryContext("s"))) == 3


@pytest.mark.parametrize("make_store", STORES.values(), ids=list(STORES))
def test_an_unknown_session_rewinds_to_zero_only(make_store: Callable[[], Any]) -> None:
    store = make_store()
    assert run(store.rewind, MemoryContext("nobody"), 0) == 0
    with pytest.raises(InvalidMemoryInputError, match="to_position"):
        run(store.rewind, MemoryContext("nobody"), 1)
    assert not Conversation.objects.exists()


@pytest.mark.parametrize("make_store", STORES.values(), ids=list(STORES))
def test_another_user_cannot_rewind(make_store: Callable[[], Any]) -> None:
    store = make_store()
    fill(store, "s", 3, user_id="owner")
    before = snapshot()
    with pytest.raises(ConversationScopeError):
        run(store.rewind, MemoryContext("s", user_id="mallory"), 0)
    assert snapshot() == before
    assert run(store.rewind, MemoryContext("s"), 2) == 1  # trusted server code may


@pytest.mark.django_db(transaction=True)
def test_the_signal_follows_the_commit_only() -> None:
    events: list[dict[str, Any]] = []

    def receive(sender: type, signal: object, **kwargs: Any) -> None:
        events.append(kwargs)

    def rewind_in_failing_transaction() -> None:
        with transaction.atomic():
            rewind_conversation(MemoryContext("s"), 1)
            raise RuntimeError("the caller's transaction fails")

    signals.messages_rewound.connect(receive)
    try:
        for index in range(4):
            append_messages(append_input("s", [user(str(index))], user_id="u", run_id=f"r{index}"))
        with pytest.raises(RuntimeError):
            rewind_in_failing_transaction()
        assert events == []
        assert MemoryMessage.objects.count() == 4  # rolled back with the caller's transaction
        rewind_conversation(MemoryContext("s"), 1)
    finally:
        signals.messages_rewound.disconnect(receive)
    (event,) = events
    ref = Conversation.objects.get().ref
    expected = {"session_id": "s", "ref": ref, "user_id": "u", "to_position": 1, "removed": 3}
    assert event == {**expected, "using": "default"}
    assert Conversation.objects.get().message_count == 1


def test_a_store_without_rewind_gets_a_clear_error() -> None:
    class Minimal:
        async def load(self, context: MemoryContext) -> list[Any]:
            return []

        async def append(self, input: MemoryAppendInput) -> None:
            return None

        async def clear(self, context: MemoryContext) -> None:
            return None

    agent = AgentBuilder("a", ScriptedModel([])).memory(Minimal()).build()
    with pytest.raises(MemoryCapabilityError, match="Minimal cannot rewind"):
        run(agent.session("s").rewind, 0)


def test_edit_and_regenerate_through_the_runtime_with_the_offline_model() -> None:
    agent = build_agent()  # the demo's offline model, tools and DjangoMemoryStore
    session = agent.session("web-edit", user_id="visitor")
    first = run(session.prompt("Where is order 1042?").send)
    second = run(session.prompt("What did I ask you before?").send)
    history = run(session.history)
    edited_at = len(first.messages)  # the second user message's position
    assert history[edited_at] == {"role": "user", "content": "What did I ask you before?"}

    # "Edit" the second question: drop it and what followed, then ask again.
    assert run(session.rewind, edited_at) == len(second.messages)
    regenerated = run(session.prompt("Hello there").send)

    assert run(session.history) == first.messages + regenerated.messages
    conversation = Conversation.objects.get(session_id="web-edit")
    assert conversation.message_count == len(first.messages) + len(regenerated.messages)
    positions = list(
        MemoryMessage.objects.filter(conversation=conversation)
        .order_by("position")
        .values_list("position", flat=True)
    )
    assert positions == list(range(conversation.message_count))
    # Every run keeps its record, the regenerated one included.
    runs = set(AgentRun.objects.filter(conversation=conversation).values_list("run_id", flat=True))
    assert runs == {first.run_id, second.run_id, regenerated.run_id}
    assert regenerated.usage.total_tokens


def test_model_history_after_a_rewind_is_what_remains() -> None:
    model = ScriptedModel([assistant("one"), assistant("two"), assistant("three")])
    agent = AgentBuilder("a", model).memory(DjangoMemoryStore()).build()
    session = agent.session("s")
    run(session.prompt("a").send)
    run(session.prompt("b").send)
    run(session.rewind, 2)
    run(session.prompt("c").send)
    assert model.calls[-1] == [user("a"), assistant("one"), user("c")]
