"""DjangoSession.record_run: run records for Runner runs with the SDK's
ScriptedModel, whose scripted usage is what the stored totals must equal."""

from __future__ import annotations

from datetime import datetime
from typing import Any

import pytest
from django.contrib.auth.models import User
from rest_framework.test import APIClient

from anvia_django.core.memory.errors import ConversationScopeError, InvalidMemoryInputError
from anvia_django.models import AgentRun, Conversation, FailedRun
from tests.helpers import run, snapshot

pytest.importorskip("agents")

from agents import Agent, MaxTurnsExceeded, Runner, function_tool
from agents.testing import ModelStep, ScriptedModel, assistant_message, function_call
from agents.usage import Usage

from anvia_django.integrations.openai_agents import DjangoSession

from .agents_runner import RUNNER_METHODS, drive

pytestmark = pytest.mark.django_db


def usage(input_tokens: int, output_tokens: int) -> Usage:
    return Usage(
        requests=1,
        input_tokens=input_tokens,
        output_tokens=output_tokens,
        total_tokens=input_tokens + output_tokens,
    )


class NamedScriptedModel(ScriptedModel):
    """A scripted model that names itself as the SDK's OpenAI models do."""

    model = "scripted-4o"


@function_tool
def lookup(order: str) -> str:
    """Where an order is."""
    return f"order {order} shipped"


def tool_run_model() -> ScriptedModel:
    return NamedScriptedModel(
        [
            ModelStep(
                output=[function_call("lookup", {"order": "42"}, call_id="c1")],
                usage=usage(120, 15),
            ),
            ModelStep(output=[assistant_message("It shipped.")], usage=usage(180, 9)),
        ]
    )


def api_runs(session_id: str) -> dict[str, Any]:
    client = APIClient()
    client.force_authenticate(User.objects.create_user("staff", is_staff=True))
    ref = Conversation.objects.get(session_id=session_id).ref
    response = client.get(f"/anvia/api/conversations/{ref}/runs/")
    assert response.status_code == 200
    body: dict[str, Any] = response.json()
    return body


@pytest.mark.parametrize("method", RUNNER_METHODS)
def test_a_run_is_recorded_with_the_usage_the_model_reported(method: str) -> None:
    session = DjangoSession("agents-run", user_id="u1")
    agent = Agent(name="support", model=tool_run_model(), tools=[lookup])

    result = drive(method, agent, "Where is order 42?", session=session)
    run_id = run(session.record_run, result)

    reported = result.context_wrapper.usage
    assert (reported.input_tokens, reported.output_tokens) == (300, 24)
    body = api_runs("agents-run")
    assert body["totals"] == {
        "runCount": 1,
        "failedRunCount": 0,
        "inputTokens": reported.input_tokens,
        "outputTokens": reported.output_tokens,
        "totalTokens": reported.total_tokens,
    }
    (stored,) = body["runs"]
    saved = Conversation.objects.get(session_id="agents-run").message_count
    assert saved == 4  # user, function call, its output, the answer
    assert stored["runId"] == run_id
    assert stored["status"] == "succeeded"
    assert stored["model"] == "scripted-4o"
    assert stored["messageCount"] == saved
    assert stored["errorType"] is None
    assert datetime.fromisoformat(stored["startedAt"]) <= datetime.fromisoformat(
        stored["finishedAt"]
    )


def test_each_run_counts_only_the_items_it_saved_and_totals_add_up() -> None:
    session = DjangoSession("agents-two-runs", user_id="u1")
    model = ScriptedModel(default_usage=usage(50, 5))
    model.extend([[assistant_message("one")], [assistant_message("two")]])
    agent = Agent(name="echo", model=model)

    first = run(Runner.run, agent, "1", session=session)
    run(session.record_run, first)
    second = run(Runner.run, agent, "2", session=session)
    run(session.record_run, second, model="named-by-caller")

    body = api_runs("agents-two-runs")
    assert [r["messageCount"] for r in body["runs"]] == [2, 2]
    assert [r["model"] for r in body["runs"]] == ["named-by-caller", None]
    assert (body["totals"]["inputTokens"], body["totals"]["totalTokens"]) == (100, 110)


def test_a_failed_run_is_recorded_with_its_error_and_partial_usage() -> None:
    session = DjangoSession("agents-failed", user_id="u1")
    agent = Agent(name="support", model=tool_run_model(), tools=[lookup])

    with pytest.raises(MaxTurnsExceeded) as raised:
        run(Runner.run, agent, "Where is order 42?", session=session, max_turns=1)
    run_id = run(session.record_run, raised.value)

    (stored,) = api_runs("agents-failed")["runs"]
    assert (stored["runId"], stored["status"]) == (run_id, "failed")
    assert (stored["inputTokens"], stored["outputTokens"]) == (120, 15)
    assert stored["errorType"] == "agents.exceptions.MaxTurnsExceeded"
    error = FailedRun.objects.get(run_id=run_id)
    assert [m["role"] for m in error.messages] == ["function_call", "function_call_output"]


def test_an_error_without_run_data_is_still_a_failed_run() -> None:
    session = DjangoSession("agents-crashed", user_id="u1")
    run(session.get_items)
    run_id = run(session.record_run, RuntimeError("provider down"))

    run_row = AgentRun.objects.get(run_id=run_id)
    assert (run_row.status, run_row.input_tokens, run_row.message_count) == ("failed", None, 0)
    assert FailedRun.objects.get(run_id=run_id).error_type == "RuntimeError"


def test_a_retried_record_writes_nothing_new() -> None:
    session = DjangoSession("agents-retry", user_id="u1")
    agent = Agent(name="echo", model=ScriptedModel([[assistant_message("hi")]]))
    result = run(Runner.run, agent, "hello", session=session)
    run_id = run(session.record_run, RuntimeError("lost reply"))
    before = snapshot()

    assert run(session.record_run, RuntimeError("lost reply"), run_id=run_id) == run_id

    assert snapshot() == before
    assert run(session.record_run, result) != run_id  # another run, another record
    assert AgentRun.objects.count() == 2


def test_another_users_session_is_refused_and_nothing_is_written() -> None:
    agent = Agent(name="echo", model=ScriptedModel([[assistant_message("hi")]]))
    result = run(Runner.run, agent, "hello", session=DjangoSession("agents-owned", user_id="u1"))
    before = snapshot()

    with pytest.raises(ConversationScopeError):
        run(DjangoSession("agents-owned", user_id="u2").record_run, RuntimeError("x"))
    with pytest.raises(InvalidMemoryInputError, match="run_id"):
        run(DjangoSession("agents-owned", user_id="u1").record_run, result, run_id="")

    assert snapshot() == before
