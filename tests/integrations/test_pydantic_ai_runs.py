"""Pydantic AI runs in the store's run records (API and admin), and rewind
and fork on Pydantic AI threads."""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.auth.models import Permission, User
from django.test import Client
from rest_framework.test import APIClient

from anvia_django.core.memory.branches import MemoryForkInput
from anvia_django.core.memory.types import MemoryContext
from anvia_django.models import Conversation
from anvia_django.store import DjangoMemoryStore
from tests.helpers import run

pytest.importorskip("pydantic_ai")

from pydantic_ai import Agent
from pydantic_ai.messages import ModelMessage, ModelRequest, UserPromptPart

from anvia_django.integrations.pydantic_ai import DjangoMemory, stored_to_messages
from anvia_django.integrations.pydantic_ai.stored_form import stored_run_id

from .pydantic_ai_support import Script, answer, call, drive

pytestmark = pytest.mark.django_db


def api(path: str) -> Any:
    client = APIClient()
    staff = User.objects.create_user("staff", is_staff=True)
    # A failed run's error message is for those who may view failed runs.
    staff.user_permissions.add(Permission.objects.get(codename="view_failedrun"))
    client.force_authenticate(staff)
    response = client.get(path)
    assert response.status_code == 200
    return response.json()


def tool_agent(script: Script) -> Agent[None, str]:
    agent = Agent(script.model())

    @agent.tool_plain
    def lookup(order: str) -> str:
        """Where an order is."""
        return f"order {order} shipped"

    return agent


def test_a_runs_usage_and_model_are_in_the_api_and_the_admin_run_list() -> None:
    script = Script(
        [
            call("lookup", {"order": "42"}, "c1", input_tokens=120, output_tokens=15),
            answer("It shipped.", input_tokens=180, output_tokens=9),
        ]
    )
    new = drive("run", tool_agent(script), "Where is 42?", capabilities=[DjangoMemory("s")])

    ref = Conversation.objects.get(session_id="s").ref
    body = api(f"/anvia/api/conversations/{ref}/runs/")
    assert body["totals"] == {
        "runCount": 1,
        "failedRunCount": 0,
        "inputTokens": 300,
        "outputTokens": 24,
        "totalTokens": 324,
    }
    (record,) = body["runs"]
    assert record["runId"] == new[0].run_id
    assert (record["status"], record["model"], record["messageCount"]) == (
        "succeeded",
        "scripted-1",
        4,
    )

    admin = Client()
    admin.force_login(User.objects.create_superuser("root", "root@example.com", "pw"))
    page = admin.get("/admin/anvia_django/agentrun/").content.decode()
    assert f">{new[0].run_id}<" in page
    assert "scripted-1" in page
    assert ">324<" in page


def test_a_failed_run_is_in_the_run_list_with_its_error() -> None:
    script = Script([call("lookup", {"order": "42"}, "c1"), ConnectionError("model down")])
    with pytest.raises(ConnectionError):
        drive("run", tool_agent(script), "Where?", capabilities=[DjangoMemory("s")])

    ref = Conversation.objects.get(session_id="s").ref
    (record,) = api(f"/anvia/api/conversations/{ref}/runs/")["runs"]
    assert (record["status"], record["errorType"], record["errorMessage"]) == (
        "failed",
        "ConnectionError",
        "model down",
    )
    assert (record["inputTokens"], record["outputTokens"]) == (10, 2)


def two_runs(session_id: str) -> tuple[Script, list[ModelMessage]]:
    script = Script([call("lookup", {"order": "42"}, "c1"), answer("Shipped."), answer("Yes.")])
    agent = tool_agent(script)
    memory = DjangoMemory(session_id, user_id="u1")
    first = drive("run", agent, "Where is 42?", capabilities=[memory])
    second = drive("run", agent, "Sure?", capabilities=[memory])
    return script, first + second


def test_rewind_removes_the_end_and_the_next_run_continues_from_there() -> None:
    _, history = two_runs("s")
    store = DjangoMemoryStore()
    context = MemoryContext("s", user_id="u1")
    entries = run(store.load_entries, context)
    # "Edit and regenerate": rewind to the second run's prompt.
    prompt_at = next(e.position for e in entries if stored_run_id(e.message) == history[4].run_id)
    assert prompt_at == 4

    assert run(store.rewind, context, prompt_at) == 2

    script = Script([answer("Rather: it shipped Monday.")])
    redo = drive(
        "run",
        Agent(script.model()),
        "When exactly?",
        capabilities=[DjangoMemory("s", user_id="u1")],
    )
    assert script.seen[0][:-1] == history[:prompt_at]
    assert stored_to_messages(run(store.load, context)) == history[:prompt_at] + redo


def test_a_fork_continues_on_its_own_and_leaves_the_source_as_it_was() -> None:
    _, history = two_runs("s")
    store = DjangoMemoryStore()
    source = MemoryContext("s", user_id="u1")

    run(store.fork, MemoryForkInput(source, "s-fork", 4))
    script = Script([answer("On the fork.")])
    forked = drive(
        "run", Agent(script.model()), "Branch", capabilities=[DjangoMemory("s-fork", user_id="u1")]
    )

    assert script.seen[0][:-1] == history[:4]
    fork_context = MemoryContext("s-fork", user_id="u1")
    assert stored_to_messages(run(store.load, fork_context)) == history[:4] + forked
    assert stored_to_messages(run(store.load, source)) == history
    # The fork's runs get a conversation id of their own.
    assert forked[0].conversation_id != history[0].conversation_id
    prompt = forked[0]
    assert isinstance(prompt, ModelRequest)
    assert isinstance(prompt.parts[0], UserPromptPart)
