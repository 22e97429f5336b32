"""Run records: one per run, with the usage the model reported, on both stores."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from io import StringIO
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.core.management import CommandError, call_command
from django.db import connection
from django.test.utils import CaptureQueriesContext
from rest_framework.test import APIClient

from anvia_django.core import AgentBuilder
from anvia_django.core.memory import (
    ConversationScopeError,
    InProcessMemoryStore,
    InvalidMemoryInputError,
    MemoryContext,
    MemoryRunInput,
    TokenUsage,
)
from anvia_django.models import AgentRun, Conversation
from anvia_django.persistence import list_runs, record_run, run_totals
from anvia_django.store import DjangoMemoryStore
from tests.core.doubles import ScriptedModel, assistant
from tests.helpers import run

from .models import EchoModel, MeteredModel

pytestmark = pytest.mark.django_db(transaction=False)

LOOKUP = assistant(None, ("c1", "lookup", {"q": "x"}))


def lookup(q: str) -> str:
    return f"found {q}"


def tool_run_model() -> MeteredModel:
    return MeteredModel(
        [
            (LOOKUP, TokenUsage(100, 7)),
            ({"role": "assistant", "content": "done"}, TokenUsage(120, 3, 125)),
        ]
    )


def stored_runs(store: object, session_id: str) -> list[Any]:
    if isinstance(store, InProcessMemoryStore):
        return store.runs(session_id)
    conversation = Conversation.objects.get(session_id=session_id)
    return list_runs(conversation.pk, limit=50)


STORES: dict[str, Callable[[], object]] = {
    "django": DjangoMemoryStore,
    "in-process": InProcessMemoryStore,
}


@pytest.mark.parametrize("make_store", STORES.values(), ids=list(STORES))
def test_a_run_is_recorded_with_the_usage_the_model_reported(
    make_store: Callable[[], Any],
) -> None:
    store = make_store()
    agent = (
        AgentBuilder("a", tool_run_model()).tool(lookup).memory(store, save_policy="turn").build()
    )
    response = run(agent.session("s-usage", user_id="u1").prompt("find x").send)
    assert response.usage == TokenUsage(220, 10, 232)  # 107 + 125: a reported total wins
    assert response.model == "metered-test-model"
    (record,) = stored_runs(store, "s-usage")
    assert record.run_id == response.run_id
    assert record.status == "succeeded"
    assert record.usage == response.usage
    assert record.model == "metered-test-model"
    assert record.message_count == len(response.messages) == 4
    assert record.started_at <= record.finished_at
    assert record.error_type is None


@pytest.mark.parametrize("make_store", STORES.values(), ids=list(STORES))
def test_a_failed_run_is_recorded_and_linked_to_its_error(make_store: Callable[[], Any]) -> None:
    store = make_store()
    model = MeteredModel([(LOOKUP, TokenUsage(50, 5)), RuntimeError("provider down")])
    agent = AgentBuilder("a", model).tool(lookup).memory(store).build()
    with pytest.raises(RuntimeError, match="provider down"):
        run(agent.session("s-fail").prompt("find x").send)
    (record,) = stored_runs(store, "s-fail")
    assert record.status == "failed"
    assert record.error_type == "RuntimeError"
    assert record.error_message == "provider down"
    assert record.usage == TokenUsage(50, 5, 55)  # what was spent before the failure
    assert record.message_count == 3  # user, assistant, tool result (policy "message")


def test_a_model_without_usage_gives_a_run_without_token_counts() -> None:
    agent = AgentBuilder("a", ScriptedModel([assistant("hi")])).memory(DjangoMemoryStore()).build()
    response = run(agent.session("s-plain").prompt("hi").send)
    (record,) = stored_runs(None, "s-plain")
    assert record.usage == TokenUsage()
    assert not record.usage.reported
    assert record.model is None
    assert response.usage == TokenUsage()


def test_totals_match_what_the_model_reported_over_many_runs() -> None:
    store = DjangoMemoryStore()
    agent = AgentBuilder("a", EchoModel()).memory(store).build()
    session = agent.session("s-totals")
    responses = [run(session.prompt(f"message number {i}").send) for i in range(6)]
    expected = sum((r.usage for r in responses), TokenUsage())
    totals = run_totals(Conversation.objects.get(session_id="s-totals").pk)
    assert (totals.runs, totals.failed_runs) == (6, 0)
    assert (totals.input_tokens, totals.output_tokens, totals.total_tokens) == (
        expected.input_tokens,
        expected.output_tokens,
        expected.total_tokens,
    )
    in_process = InProcessMemoryStore()
    again = AgentBuilder("a", EchoModel()).memory(in_process).build().session("s-totals")
    for i in range(6):
        run(again.prompt(f"message number {i}").send)
    assert in_process.run_totals("s-totals") == totals


def run_input(**changes: Any) -> MemoryRunInput:
    started = datetime(2026, 12, 1, 9, 0, tzinfo=UTC)
    values: dict[str, Any] = {
        "context": MemoryContext("s-rec", user_id="owner"),
        "run_id": "r1",
        "status": "succeeded",
        "started_at": started,
        "finished_at": started + timedelta(seconds=2),
        "model": "m",
        "usage": TokenUsage(10, 2),
        "message_count": 2,
    }
    values.update(changes)
    return MemoryRunInput(**values)


def test_a_retried_record_writes_nothing() -> None:
    record_run(run_input())
    with CaptureQueriesContext(connection) as queries:
        record_run(run_input())
    table = AgentRun._meta.db_table
    writes = [
        q["sql"]
        for q in queries.captured_queries
        if table in q["sql"] and q["sql"].lstrip().upper().startswith(("INSERT", "UPDATE"))
    ]
    assert writes == []
    assert AgentRun.objects.count() == 1
    record_run(run_input(message_count=3))  # a later, different record replaces it
    assert list(AgentRun.objects.values_list("message_count", flat=True)) == [3]


def test_recording_another_users_run_is_refused_and_writes_nothing() -> None:
    record_run(run_input())
    with pytest.raises(ConversationScopeError):
        record_run(run_input(context=MemoryContext("s-rec", user_id="mallory"), run_id="r2"))
    assert list(AgentRun.objects.values_list("run_id", flat=True)) == ["r1"]


@pytest.mark.parametrize(
    ("changes", "path"),
    [
        ({"status": "done"}, "status"),
        ({"run_id": ""}, "run_id"),
        ({"usage": TokenUsage(-1, 2)}, "usage.input_tokens"),
        ({"message_count": -1}, "message_count"),
        ({"started_at": datetime(2026, 12, 1, 9, 0)}, "started_at"),
        ({"finished_at": datetime(2026, 11, 1, tzinfo=UTC)}, "finished_at"),
        ({"model": "x" * 300}, "model"),
    ],
)
@pytest.mark.parametrize("make_store", STORES.values(), ids=list(STORES))
def test_bad_run_records_are_refused_before_anything_is_written(
    make_store: Callable[[], Any], changes: dict[str, Any], path: str
) -> None:
    store = make_store()
    with pytest.raises(InvalidMemoryInputError) as caught:
        run(store.record_run, run_input(**changes))
    assert caught.value.path == path
    assert not Conversation.objects.exists()
    if isinstance(store, InProcessMemoryStore):
        assert store.runs("s-rec") == []


def seed_runs(session_id: str, count: int, user_id: str = "u1") -> Conversation:
    start = datetime(2026, 12, 1, tzinfo=UTC)
    for index in range(count):
        record_run(
            run_input(
                context=MemoryContext(session_id, user_id=user_id),
                run_id=f"run-{index}",
                started_at=start + timedelta(minutes=index),
                finished_at=start + timedelta(minutes=index, seconds=1),
                usage=TokenUsage(10 * index, index),
                status="failed" if index % 4 == 3 else "succeeded",
            )
        )
    return Conversation.objects.get(session_id=session_id)


def test_the_api_lists_runs_with_totals_in_camel_case(staff: APIClient) -> None:
    conversation = seed_runs("s-api", 5)
    client = staff
    url = f"/anvia/api/conversations/{conversation.ref}/runs/"
    body = client.get(url, {"limit": 2}).json()
    assert body["totals"] == {
        "runCount": 5,
        "failedRunCount": 1,
        "inputTokens": 100,
        "outputTokens": 10,
        "totalTokens": 110,
    }
    assert [r["runId"] for r in body["runs"]] == ["run-4", "run-3"]
    newest = body["runs"][0]
    assert set(newest) == {
        "runId", "status", "startedAt", "finishedAt", "model", "inputTokens",
        "outputTokens", "totalTokens", "messageCount", "errorType", "errorMessage",
    }  # fmt: skip
    assert newest["startedAt"].endswith("+00:00")
    one = client.get(url, {"runId": "run-3"}).json()["runs"]
    assert [(r["runId"], r["status"]) for r in one] == [("run-3", "failed")]
    assert client.get(url, {"limit": 0}).status_code == 400
    assert "runId" in str(client.get(url, {"runId": ""}).json())
    assert client.get("/anvia/api/conversations/nope/runs/").status_code == 404
    assert client.post(url).status_code == 405


def test_the_runs_endpoint_costs_the_same_queries_for_3_or_30_runs(staff: APIClient) -> None:
    client = staff
    small, large = seed_runs("s-small", 3), seed_runs("s-large", 30)
    # Warm the caller's permission cache (whether it may see error messages).
    assert client.get(f"/anvia/api/conversations/{small.ref}/runs/").status_code == 200
    counts = []
    for conversation in (small, large):
        url = f"/anvia/api/conversations/{conversation.ref}/runs/"
        with CaptureQueriesContext(connection) as queries:
            assert client.get(url).status_code == 200
        counts.append(len(queries))
    assert counts[0] == counts[1]


def test_the_admin_conversation_page_shows_runs_and_totals() -> None:
    conversation = seed_runs("s-admin", 3)
    client = APIClient()
    client.force_login(User.objects.create_superuser("root", "root@example.com", "pw"))
    page = client.get(f"/admin/anvia_django/conversation/{conversation.pk}/change/")
    html = page.content.decode()
    assert 'id="anvia-runs"' in html
    assert "3 runs (0 failed)" in html
    assert "tokens: 30 in, 3 out, 33 total" in html
    listing = client.get("/admin/anvia_django/agentrun/", {"q": "run-2"}).content.decode()
    assert "run-2" in listing
    assert client.get("/admin/anvia_django/agentrun/add/").status_code == 403


def test_the_usage_command_sums_tokens_per_user_in_a_date_range() -> None:
    seed_runs("s-a", 4, user_id="alice")  # 0, 10, 20, 30 in; runs 1 min apart from midnight
    seed_runs("s-b", 2, user_id="bob")

    def usage(*args: str) -> str:
        out = StringIO()
        call_command("anvia_memory", "usage", *args, stdout=out)
        return out.getvalue()

    everything = usage()
    assert "alice" in everything
    assert "bob" in everything
    assert "all users" in everything
    alice = usage("--user", "alice").splitlines()
    assert alice[1].split() == ["alice", "4", "1", "60", "6", "66"]
    # Runs from 00:02 on: alice's last two.
    window = usage("--user", "alice", "--since", "2026-12-01T00:02").splitlines()
    assert window[1].split() == ["alice", "2", "1", "50", "5", "55"]
    assert "No runs" in usage("--until", "2026-11-30")
    assert usage("--until", "2026-12-01").count("alice") == 1  # a date includes its day
    with pytest.raises(CommandError, match="--since must be before --until"):
        usage("--since", "2026-12-02", "--until", "2026-12-01")
    with pytest.raises(CommandError):
        usage("--since", "yesterday")
