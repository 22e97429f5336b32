"""Positions in a loaded history: what ``rewind`` and ``fork`` need, right
also when compaction or a load limit cut the start of the history off."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from anvia_django.core import AgentBuilder
from anvia_django.core.memory import (
    ConversationScopeError,
    HistoryEntry,
    InProcessMemoryStore,
    MemoryAppendInput,
    MemoryCapabilityError,
    MemoryCompactionInput,
    MemoryContext,
    Message,
    PositionedMemoryStore,
)
from anvia_django.models import Conversation
from anvia_django.store import DjangoMemoryStore
from tests.helpers import run, user

from .models import EchoModel

STORES: dict[str, Callable[..., Any]] = {
    "django": DjangoMemoryStore,
    "in-process": InProcessMemoryStore,
}


async def summarise(previous: str | None, messages: list[Message]) -> str:
    return f"{len(messages)} earlier messages"


def compacting_session(store: Any, session_id: str = "long") -> Any:
    agent = (
        AgentBuilder("echo", EchoModel())
        .memory(store)
        .compaction(max_messages=6, summariser=summarise)
        .build()
    )
    return agent.session(session_id, user_id="alice")


def full_transcript(store: Any, session_id: str) -> list[Message]:
    """Every stored message, position = index (a plain load without a limit)."""
    loaded: list[Message] = run(store.load, MemoryContext(session_id, user_id="alice"))
    return loaded


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("make_store", STORES.values(), ids=STORES.keys())
def test_under_compaction_positions_are_the_stored_ones(make_store: Callable[[], Any]) -> None:
    store = make_store()
    session = compacting_session(store)
    for number in range(5):
        run(session.prompt(f"Question {number}").send)

    history = run(session.history)
    entries: list[HistoryEntry] = run(session.history_entries)
    assert [entry.message for entry in entries] == history  # history() is unchanged
    summary, *messages = entries
    assert summary.is_summary
    assert summary.position is None
    assert summary.covers_through is not None
    assert [e.position for e in messages] == list(
        range(summary.covers_through + 1, summary.covers_through + 1 + len(messages))
    )
    everything = full_transcript(store, "long")
    assert all(everything[e.position] == e.message for e in messages if e.position is not None)

    # The documented way to find the newest question, and why len() is wrong.
    question_at = [e.position for e in entries if e.message["role"] == "user"][-1]
    assert question_at is not None
    assert everything[question_at] == user("Question 4")
    assert len(history) - 2 != question_at  # what docs/lifecycle.md used to do

    assert run(session.rewind, question_at) == 2
    assert full_transcript(store, "long") == everything[:question_at]
    branch_at = [e.position for e in entries if e.message["role"] == "user"][-2]
    assert branch_at is not None
    branch = run(session.fork, "long-b", up_to=branch_at)
    assert full_transcript(store, "long-b") == everything[:branch_at]
    last = run(branch.history_entries)[-1]  # the summary, when it covers all that was kept
    assert (last.covers_through if last.is_summary else last.position) == branch_at - 1


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("make_store", STORES.values(), ids=STORES.keys())
def test_without_compaction_entries_are_the_load_with_positions(
    make_store: Callable[..., Any],
) -> None:
    store = make_store(load_limit=5)
    agent = AgentBuilder("echo", EchoModel()).memory(store).build()
    session = agent.session("windowed", user_id="alice")
    for number in range(4):
        run(session.prompt(f"Question {number}").send)

    entries = run(session.history_entries)
    assert [entry.message for entry in entries] == run(session.history)
    # The window of at most 5 starts at a run: the newest two runs, 4 messages.
    assert [entry.position for entry in entries] == [4, 5, 6, 7]


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("make_store", STORES.values(), ids=STORES.keys())
def test_scope_and_unknown_sessions(make_store: Callable[[], Any]) -> None:
    store = make_store()
    assert isinstance(store, PositionedMemoryStore)
    run(store.append, MemoryAppendInput(MemoryContext("s", user_id="alice"), "r", 1, [user("x")]))
    with pytest.raises(ConversationScopeError):
        run(store.load_entries, MemoryContext("s", user_id="mallory"))
    assert run(store.load_entries, MemoryContext("nothing-here", user_id="alice")) == []
    trusted = run(store.load_entries, MemoryContext("s"))
    assert trusted == [HistoryEntry(0, user("x"))]


def test_a_store_that_cannot_tell_positions_says_so() -> None:
    class LoadOnly:
        async def load(self, context: MemoryContext) -> list[Message]:
            return []

        async def append(self, input: MemoryAppendInput) -> None: ...

        async def clear(self, context: MemoryContext) -> None: ...

    session = AgentBuilder("echo", EchoModel()).memory(LoadOnly()).build().session("s")
    with pytest.raises(MemoryCapabilityError, match="load_entries"):
        run(session.history_entries)


@pytest.mark.django_db
@settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    runs=st.lists(st.integers(min_value=1, max_value=4), min_size=1, max_size=8),
    limit=st.none() | st.integers(min_value=1, max_value=12),
    keep=st.none() | st.integers(min_value=1, max_value=10),
)
def test_entries_match_both_stores_loads_for_any_transcript(
    runs: list[int], limit: int | None, keep: int | None
) -> None:
    """Whatever the runs, the load limit and the compaction: the messages are
    what ``load`` / ``load_compacted`` return and each position holds its
    message, on the Django store and the reference store alike."""
    Conversation.objects.all().delete()
    stores = (DjangoMemoryStore(load_limit=limit), InProcessMemoryStore(load_limit=limit))
    context = MemoryContext("p", user_id="alice")
    everything = [user(f"m{index}.{n}") for index, size in enumerate(runs) for n in range(size)]
    for store in stores:
        start = 0
        for index, size in enumerate(runs):
            batch = everything[start : start + size]
            run(store.append, MemoryAppendInput(context, f"run-{index}", 1, batch))
            start += size
        if keep is not None:
            run(store.compact, MemoryCompactionInput(context, summarise, keep_messages=keep))

    found = []
    for store in stores:
        compacted = run(store.load_entries, context, compacted=True)
        assert [e.message for e in compacted] == run(store.load_compacted, context)
        plain = run(store.load_entries, context)
        assert [e.message for e in plain] == run(store.load, context)
        for entry in [*compacted, *plain]:
            if entry.position is not None:
                assert everything[entry.position] == entry.message
        found.append((compacted, plain))
    assert found[0] == found[1]
