"""A conversation written through either framework adapter is readable in the
inspector API and the admin, like one written by the anvia runtime."""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.auth.models import User
from django.test import Client
from django.urls import reverse
from rest_framework.test import APIClient

from anvia_django.models import Conversation
from tests.api_client import LIST_URL, detail_url

pytestmark = pytest.mark.django_db


def write_through_openai_agents() -> list[dict[str, Any]]:
    pytest.importorskip("agents")
    from anvia_django.integrations.openai_agents import DjangoSession
    from tests.helpers import run

    items: list[Any] = [
        {"role": "user", "content": "Where is order 42?"},
        {"type": "function_call", "call_id": "c1", "name": "lookup", "arguments": "{}"},
        {"type": "function_call_output", "call_id": "c1", "output": "shipped"},
    ]
    run(DjangoSession("via-agents", user_id="u1").add_items, items)
    return items


def write_through_langchain() -> list[dict[str, Any]]:
    pytest.importorskip("langchain_core")
    from langchain_core.messages import AIMessage, HumanMessage

    from anvia_django.integrations.langchain import DjangoChatMessageHistory

    history = DjangoChatMessageHistory("via-langchain", user_id="u1")
    history.add_messages([HumanMessage("Where is order 42?"), AIMessage("It shipped.")])
    return [{"role": "user"}, {"role": "assistant"}]


@pytest.mark.parametrize(
    ("writer", "session_id"),
    [(write_through_openai_agents, "via-agents"), (write_through_langchain, "via-langchain")],
    ids=["openai-agents", "langchain"],
)
def test_adapter_conversations_show_in_the_api_and_the_admin(writer: Any, session_id: str) -> None:
    written = writer()
    admin_user = User.objects.create_superuser("admin", "admin@example.com", "pw")
    api = APIClient()
    api.force_authenticate(admin_user)

    listed = api.get(LIST_URL, {"userId": "u1"}).json()
    assert [c["sessionId"] for c in listed] == [session_id]
    assert listed[0]["messageCount"] == len(written)
    detail = api.get(detail_url(listed[0]["ref"])).json()
    assert [m["position"] for m in detail["messages"]] == list(range(len(written)))
    roles = [m["message"]["role"] for m in detail["messages"]]
    assert all(isinstance(role, str) and role for role in roles)

    browser = Client()
    browser.force_login(admin_user)
    conversation = Conversation.objects.get(session_id=session_id)
    page = browser.get(reverse("admin:anvia_django_conversation_change", args=[conversation.pk]))
    assert page.status_code == 200
    assert "Where is order 42?" in page.content.decode()
