"""Compaction: a summary in place of the oldest messages, the transcript kept whole."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.db import connection
from django.test.utils import CaptureQueriesContext
from rest_framework.test import APIClient

from anvia_django.core import SUMMARY_PROMPT, AgentBuilder
from anvia_django.core.memory import (
    ConversationScopeError,
    InProcessMemoryStore,
    MemoryAppendInput,
    MemoryCompactionInput,
    MemoryContext,
    Message,
    estimate_tokens,
)
from anvia_django.models import Conversation, MemorySummary
from anvia_django.persistence import append_messages, rewind_conversation
from anvia_django.store import DjangoMemoryStore
from tests.concurrently import run_at_once
from tests.core.doubles import ScriptedModel, assistant
from tests.helpers import run, snapshot, user

from . import workers

pytestmark = pytest.mark.django_db

STORES: dict[str, Callable[[], Any]] = {
    "django": DjangoMemoryStore,
    "in-process": InProcessMemoryStore,
}
SUMMARY_PREFIX = "Summary of the earlier conversation:\n"


def fill(
    store: Any, session_id: str, runs: int, per_run: int = 10, user_id: str = "u1", first: int = 0
) -> None:
    """``runs`` runs of ``per_run`` messages: a user message, then assistant replies."""
    context = MemoryContext(session_id, user_id=user_id)
    for index in range(first, first + runs):
        messages = [user(f"q{index}")] + [assistant(f"a{index}.{n}") for n in range(per_run - 1)]
        run(store.append, MemoryAppendInput(context, f"run-{index}", 1, messages))


class Summariser:
    """Records what it is given; answers with a deterministic summary."""

    def __init__(self, fail: bool = False) -> None:
        self.calls: list[tuple[str | None, list[Message]]] = []
        self.fail = fail

    async def __call__(self, previous: str | None, messages: list[Message]) -> str:
        self.calls.append((previous, messages))
        if self.fail:
            raise RuntimeError("the summariser's model is down")
        return f"{len(messages)} messages, up to {messages[-1]['content']}"


def ref_of(store: Any, session_id: str) -> str:
    if isinstance(store, InProcessMemoryStore):
        return str(store._conversations[session_id].ref)
    return str(Conversation.objects.get(session_id=session_id).ref)


@pytest.mark.parametrize("make_store", STORES.values(), ids=list(STORES))
def test_a_5000_message_session_loads_under_budget_and_stays_whole(
    make_store: Callable[[], Any],
) -> None:
    store = make_store()
    fill(store, "long", runs=500)  # 5,000 messages
    summariser = Summariser()
    model = ScriptedModel([assistant("fresh answer")])
    agent = (
        AgentBuilder("a", model)
        .memory(store)
        .compaction(max_messages=100, summariser=summariser)
        .build()
    )
    session = agent.session("long", user_id="u1")
    run(session.prompt("and now?").send)

    ((previous, folded),) = summariser.calls
    assert previous is None
    assert len(folded) == 5000 - 50  # half the budget kept verbatim, aligned to runs
    seen = model.calls[0]
    assert len(seen) <= 100
    assert seen[0] == {"role": "system", "content": SUMMARY_PREFIX + "4950 messages, up to a494.8"}
    assert seen[1] == user("q495")  # the kept part starts at a run's first message
    loaded = run(store.load_compacted, MemoryContext("long", user_id="u1"))
    assert len(loaded) <= 100
    assert loaded[1:] == [m for m in loaded[1:] if m.get("role") != "system"]
    assert len(run(store.load, MemoryContext("long"))) == 5002  # load() keeps it all
    conversation = run(store.inspector.get_conversation, ref_of(store, "long"))
    assert conversation.message_count == 5002
    assert len(conversation.messages) == 5002
    assert conversation.messages[0].message == user("q0")


@pytest.mark.parametrize("make_store", STORES.values(), ids=list(STORES))
def test_a_second_compaction_folds_the_first_summary_in(make_store: Callable[[], Any]) -> None:
    store = make_store()
    fill(store, "s", runs=10, per_run=2)
    context = MemoryContext("s", user_id="u1")
    summariser = Summariser()
    request = MemoryCompactionInput(context, summariser, keep_messages=4)
    assert run(store.compact, request) == 15  # runs 0-7 folded, runs 8-9 kept
    assert run(store.compact, request) is None  # nothing left over the budget
    fill(store, "s", runs=10, per_run=2, first=10)  # positions 20..39
    assert run(store.compact, request) == 35
    (first, _), (second, folded) = summariser.calls
    assert first is None
    assert second == "16 messages, up to a7.0"
    assert [m["content"] for m in folded][:2] == ["q8", "a8.0"]
    loaded = run(store.load_compacted, context)
    assert loaded[0]["content"] == SUMMARY_PREFIX + "20 messages, up to a17.0"
    assert loaded[1:] == [user("q18"), assistant("a18.0"), user("q19"), assistant("a19.0")]


@pytest.mark.parametrize("make_store", STORES.values(), ids=list(STORES))
def test_a_token_budget_keeps_the_newest_messages_within_it(
    make_store: Callable[[], Any],
) -> None:
    store = make_store()
    fill(store, "s", runs=40, per_run=2)
    context = MemoryContext("s")
    run(
        store.compact,
        MemoryCompactionInput(context, Summariser(), keep_messages=10**6, keep_tokens=60),
    )
    loaded = run(store.load_compacted, context)
    assert sum(estimate_tokens(m) for m in loaded[1:]) <= 60
    assert loaded[-1] == assistant("a39.0")


@pytest.mark.parametrize("make_store", STORES.values(), ids=list(STORES))
def test_a_failing_summariser_changes_nothing(make_store: Callable[[], Any]) -> None:
    store = make_store()
    fill(store, "s", runs=10, per_run=2)
    context = MemoryContext("s")
    before, loaded = snapshot(), run(store.load_compacted, context)
    with pytest.raises(RuntimeError, match="model is down"):
        run(store.compact, MemoryCompactionInput(context, Summariser(fail=True), keep_messages=4))
    assert snapshot() == before
    assert not MemorySummary.objects.exists()
    assert run(store.load_compacted, context) == loaded


def test_a_run_goes_on_with_the_full_history_when_compaction_fails(
    caplog: pytest.LogCaptureFixture,
) -> None:
    store = DjangoMemoryStore()
    fill(store, "s", runs=10, per_run=2)
    model = ScriptedModel([assistant("ok")])
    agent = (
        AgentBuilder("a", model)
        .memory(store)
        .compaction(max_messages=6, summariser=Summariser(fail=True))
        .build()
    )
    with caplog.at_level(logging.WARNING, "anvia_django.runtime"):
        response = run(agent.session("s").prompt("hi").send)
    assert response.output == "ok"
    assert len(model.calls[0]) == 21
    assert "compaction failed" in caplog.text
    assert not MemorySummary.objects.exists()


@pytest.mark.parametrize("make_store", STORES.values(), ids=list(STORES))
def test_rewinding_into_a_summary_drops_it(make_store: Callable[[], Any]) -> None:
    store = make_store()
    fill(store, "s", runs=10, per_run=2)
    context = MemoryContext("s")
    run(store.compact, MemoryCompactionInput(context, Summariser(), keep_messages=4))
    run(store.rewind, context, 10)
    assert run(store.load_compacted, context) == [
        m for i in range(5) for m in (user(f"q{i}"), assistant(f"a{i}.0"))
    ]


def test_a_rewind_between_plan_and_write_wins() -> None:
    store = DjangoMemoryStore()
    fill(store, "s", runs=10, per_run=2)
    context = MemoryContext("s")

    async def summarise_while_someone_rewinds(previous: str | None, messages: list[Message]) -> str:
        await _in_thread(lambda: rewind_conversation(context, 2))
        await _in_thread(
            lambda: append_messages(MemoryAppendInput(context, "r", 1, [user("x")] * 30))
        )
        return "stale"

    request = MemoryCompactionInput(context, summarise_while_someone_rewinds, keep_messages=4)
    assert run(store.compact, request) is None
    assert not MemorySummary.objects.exists()
    assert len(run(store.load_compacted, context)) == 32


async def _in_thread(call: Callable[[], Any]) -> Any:
    from asgiref.sync import sync_to_async

    return await sync_to_async(call)()


def test_another_user_cannot_load_through_a_summary() -> None:
    store = DjangoMemoryStore()
    fill(store, "s", runs=10, per_run=2, user_id="owner")
    run(store.compact, MemoryCompactionInput(MemoryContext("s"), Summariser(), keep_messages=4))
    with pytest.raises(ConversationScopeError):
        run(store.load_compacted, MemoryContext("s", user_id="mallory"))
    assert run(store.load_compacted, MemoryContext("s", user_id="owner"))[0]["role"] == "system"


@pytest.mark.parametrize("make_store", STORES.values(), ids=list(STORES))
@pytest.mark.parametrize("limit", [1, 3, 5])
def test_load_limit_counts_the_summary(make_store: Callable[[], Any], limit: int) -> None:
    store = make_store()
    fill(store, "s", runs=10, per_run=2)
    run(store.compact, MemoryCompactionInput(MemoryContext("s"), Summariser(), keep_messages=4))
    store.load_limit = limit
    loaded = run(store.load_compacted, MemoryContext("s"))
    assert len(loaded) <= limit
    assert loaded[0]["role"] == "system"
    assert all(m["role"] != "system" for m in loaded[1:])
    if len(loaded) > 1:
        assert loaded[1]["role"] == "user"  # the window opens at a run's first message


def test_loading_a_compacted_session_costs_two_queries_whatever_its_length(
    django_assert_num_queries: Any,
) -> None:
    store = DjangoMemoryStore()
    for session_id, runs in (("short", 5), ("long", 200)):
        fill(store, session_id, runs=runs, per_run=2)
        request = MemoryCompactionInput(MemoryContext(session_id), Summariser(), keep_messages=4)
        run(store.compact, request)
        with django_assert_num_queries(2):
            run(store.load_compacted, MemoryContext(session_id))


def test_the_default_summariser_is_the_agents_model_with_the_shipped_prompt() -> None:
    store = DjangoMemoryStore()
    fill(store, "s", runs=10, per_run=2)
    model = ScriptedModel([assistant("They asked ten questions."), assistant("answer")])
    agent = AgentBuilder("a", model).memory(store).compaction(max_messages=8).build()
    run(agent.session("s").prompt("more").send)
    summary_request, answer_request = model.calls
    assert summary_request[0] == {"role": "system", "content": SUMMARY_PROMPT}
    assert "user: q0" in summary_request[1]["content"]
    assert answer_request[0]["content"] == SUMMARY_PREFIX + "They asked ten questions."


def test_builder_checks_the_budget_and_the_store() -> None:
    model = ScriptedModel([])
    with pytest.raises(ValueError, match="max_messages"):
        AgentBuilder("a", model).compaction()
    with pytest.raises(ValueError, match="max_tokens"):
        AgentBuilder("a", model).compaction(max_tokens=1)

    class NoCompaction:
        async def load(self, context: MemoryContext) -> list[Message]:
            return []

        async def append(self, input: MemoryAppendInput) -> None:
            return None

        async def clear(self, context: MemoryContext) -> None:
            return None

    with pytest.raises(TypeError, match="compact"):
        AgentBuilder("a", model).memory(NoCompaction()).compaction(max_messages=10).build()


def test_summaries_are_visible_in_the_api_and_the_admin() -> None:
    store = DjangoMemoryStore()
    fill(store, "s", runs=10, per_run=2)
    run(store.compact, MemoryCompactionInput(MemoryContext("s"), Summariser(), keep_messages=4))
    conversation = Conversation.objects.get(session_id="s")
    client = APIClient()
    client.force_login(User.objects.create_superuser("root", "root@example.com", "pw"))
    body = client.get(f"/anvia/api/conversations/{conversation.ref}/summaries/").json()
    assert len(body) == 1
    assert body[0]["coversThrough"] == 15
    assert body[0]["message"]["content"].endswith("16 messages, up to a7.0")
    assert body[0]["createdAt"].endswith("+00:00")
    # The transcript is whole in the API.
    messages = client.get(f"/anvia/api/conversations/{conversation.ref}/messages/").json()
    assert len(messages) == 20
    page = client.get(f"/admin/anvia_django/conversation/{conversation.pk}/change/")
    assert "Compaction summaries" in page.content.decode()
    assert "covers #0\N{EN DASH}#15" in page.content.decode()
    with CaptureQueriesContext(connection) as small:
        client.get(f"/anvia/api/conversations/{conversation.ref}/summaries/")
    for more in range(1, 4):
        fill(store, "s", runs=10, per_run=2, first=10 * more)
        run(store.compact, MemoryCompactionInput(MemoryContext("s"), Summariser(), keep_messages=4))
    with CaptureQueriesContext(connection) as large:
        listed = client.get(f"/anvia/api/conversations/{conversation.ref}/summaries/").json()
    assert len(listed) == 4
    assert len(small) == len(large)


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize(
    "processes",
    [
        pytest.param(True, marks=pytest.mark.postgres, id="processes"),
        pytest.param(False, id="threads"),
    ],
)
def test_workers_compacting_at_once_leave_one_summary(processes: bool) -> None:
    fill(DjangoMemoryStore(), "shared", runs=20, per_run=2)
    kept = run_at_once([(workers.compact_once, ("shared",))] * 3, processes=processes)
    assert sorted(kept) == [0, 0, 1]
    (summary,) = MemorySummary.objects.all()  # instances: sealed ones are opened
    assert (summary.covers_through, summary.message) == (
        35,
        {"role": "system", "content": SUMMARY_PREFIX + "36 messages"},
    )
    assert Conversation.objects.get().message_count == 40
