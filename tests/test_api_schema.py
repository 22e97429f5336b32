"""The OpenAPI schema (drf-spectacular, the optional ``openapi`` extra)."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
import textwrap
from typing import Any

import pytest
from django.contrib.auth.models import User
from rest_framework.test import APIClient

pytestmark = pytest.mark.django_db

SCHEMA_URL = "/anvia/api/schema/"
LANGGRAPH_PATHS = {
    "/anvia/api/langgraph/threads/",
    "/anvia/api/langgraph/threads/{thread_id}/",
    "/anvia/api/langgraph/threads/{thread_id}/checkpoints/{checkpoint_id}/",
}


@pytest.fixture
def schema() -> dict[str, Any]:
    pytest.importorskip("drf_spectacular", reason="the openapi extra is not installed")
    client = APIClient()
    client.force_authenticate(User.objects.create_user("staff", is_staff=True))
    response = client.get(SCHEMA_URL, {"format": "json"})
    assert response.status_code == 200
    return response.json()  # type: ignore[no-any-return]


def test_the_schema_documents_the_three_get_endpoints_only(schema: dict[str, Any]) -> None:
    paths = schema["paths"]
    assert set(paths) == {
        "/anvia/api/conversations/",
        "/anvia/api/conversations/{ref}/",
        "/anvia/api/conversations/{ref}/messages/",
        "/anvia/api/conversations/{ref}/messages/{position}/media/{part}/",
        "/anvia/api/conversations/{ref}/runs/",
        "/anvia/api/conversations/{ref}/lineage/",
        "/anvia/api/conversations/{ref}/summaries/",
    } | (LANGGRAPH_PATHS if importlib.util.find_spec("langgraph") else set())
    assert all(set(operations) <= {"get", "parameters"} for operations in paths.values())


def test_the_schema_has_the_real_field_types(schema: dict[str, Any]) -> None:
    components = schema["components"]["schemas"]
    summary = components["ConversationSummary"]["properties"]
    assert set(summary) == {
        "ref", "sessionId", "userId", "scopeKey", "metadata", "createdAt", "updatedAt",
        "messageCount",
    }  # fmt: skip
    assert summary["sessionId"]["type"] == "string"
    assert summary["userId"] == {"type": "string", "readOnly": True, "nullable": True}
    assert summary["createdAt"]["format"] == "date-time"
    assert summary["messageCount"]["type"] == "integer"
    assert summary["metadata"]["type"] == "object"
    message = components["ConversationMessage"]["properties"]
    assert set(message) == {"position", "runId", "turn", "createdAt", "message"}
    assert message["message"]["required"] == ["role"]
    detail = components["Conversation"]["properties"]
    assert detail["messages"]["type"] == "array"


def test_the_schema_documents_parameters_and_the_link_header(schema: dict[str, Any]) -> None:
    listing = schema["paths"]["/anvia/api/conversations/"]["get"]
    names = {p["name"]: p for p in listing["parameters"]}
    assert {"limit", "userId", "cursor"} <= set(names)
    assert names["limit"]["schema"]["type"] == "integer"
    assert "Link" in listing["responses"]["200"]["headers"]
    assert "400" in listing["responses"]
    messages = schema["paths"]["/anvia/api/conversations/{ref}/messages/"]["get"]
    assert {"after", "limit"} <= {p["name"] for p in messages["parameters"]}


def test_the_schema_answers_to_the_inspector_permissions(client: Any) -> None:
    pytest.importorskip("drf_spectacular")
    assert client.get(SCHEMA_URL).status_code in (401, 403)


def test_the_api_works_without_drf_spectacular() -> None:
    script = textwrap.dedent(
        """
        import sys
        sys.modules["drf_spectacular"] = None  # as if the extra were not installed
        import django
        django.setup()
        from django.test.utils import setup_test_environment
        setup_test_environment()
        from django.test import Client
        from django.urls import reverse
        import anvia_django.urls
        from anvia_django.api.openapi import spectacular_available
        assert not spectacular_available()
        try:
            import anvia_django.api.schema
        except ImportError:
            pass
        else:
            raise AssertionError("the schema view needs drf-spectacular")
        print(reverse("anvia_django:conversation-list"))
        print(Client().get("/anvia/api/conversations/").status_code)
        """
    )
    result = subprocess.run(
        [sys.executable, "-c", script],
        capture_output=True,
        text=True,
        check=False,
        env={**__import__("os").environ, "DJANGO_SETTINGS_MODULE": "tests.settings"},
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["/anvia/api/conversations/", "403"]
