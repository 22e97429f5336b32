"""An unknown query parameter answers 400 naming it, on every endpoint of
the conversation viewset; every documented one keeps working (issue 35)."""

from __future__ import annotations

import importlib.util
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.test import override_settings
from rest_framework.test import APIClient

from anvia_django.api.params import KNOWN_QUERY_PARAMS
from anvia_django.models import Conversation
from anvia_django.persistence import append_messages

from .api_client import LIST_URL, detail_url, messages_url, next_url
from .helpers import append_input, assistant, user

pytestmark = pytest.mark.django_db

TENANTS = {"SCOPE": {"user_id": True, "metadata_keys": ["tenant_id"]}}
UNKNOWN = "not a parameter of this endpoint"


@pytest.fixture
def refs() -> list[str]:
    with override_settings(ANVIA_DJANGO=TENANTS):
        for tenant in ("acme", "globex"):
            metadata = {"tenant_id": tenant}
            append_messages(
                append_input(
                    "chat", [user("hello"), assistant(tenant)], user_id="u1", metadata=metadata
                )
            )
    return list(Conversation.objects.order_by("pk").values_list("ref", flat=True))


@override_settings(ANVIA_DJANGO=TENANTS)
def test_every_endpoint_refuses_what_it_does_not_read(staff: APIClient, refs: list[str]) -> None:
    ref = refs[0]
    for url, wrong in (
        (LIST_URL, "user_id"),
        (detail_url(ref), "limit"),
        (messages_url(ref), "cursor"),
        (f"{detail_url(ref)}runs/", "after"),
        (f"{detail_url(ref)}lineage/", "q"),
        (f"{detail_url(ref)}summaries/", "userId"),
        (f"{messages_url(ref)}0/media/0/", "limit"),
    ):
        response = staff.get(url, {wrong: "1", "x" * 100: "1"})
        assert response.status_code == 400, url
        body = response.json()
        assert set(body) == {wrong, "x" * 40 + "..."}, url
        assert UNKNOWN in body[wrong][0]


def test_the_permission_classes_answer_first(client: Any, refs: list[str]) -> None:
    assert client.get(LIST_URL, {"nonsense": "1"}).status_code in (401, 403)


def test_each_action_takes_what_the_schema_documents(refs: list[str]) -> None:
    pytest.importorskip("drf_spectacular", reason="the openapi extra is not installed")
    staff = APIClient()
    staff.force_authenticate(User.objects.create_user("staff", is_staff=True))
    with override_settings(ANVIA_DJANGO=TENANTS):
        schema = staff.get("/anvia/api/schema/", {"format": "json"}).json()
    actions = {
        "/anvia/api/conversations/": "list",
        "/anvia/api/conversations/{ref}/": "retrieve",
        "/anvia/api/conversations/{ref}/messages/": "messages",
        "/anvia/api/conversations/{ref}/messages/{position}/media/{part}/": "media",
        "/anvia/api/conversations/{ref}/runs/": "runs",
        "/anvia/api/conversations/{ref}/lineage/": "lineage",
        "/anvia/api/conversations/{ref}/summaries/": "summaries",
    }
    expected = {
        path: set(KNOWN_QUERY_PARAMS[action]) | ({"tenantId"} if action == "list" else set())
        for path, action in actions.items()
    }
    if importlib.util.find_spec("langgraph"):  # its threads' endpoints
        from anvia_django.api.langgraph import THREAD_QUERY_PARAMS

        threads = "/anvia/api/langgraph/threads/"
        expected[threads] = set(THREAD_QUERY_PARAMS["list"])
        expected[threads + "{thread_id}/"] = set(THREAD_QUERY_PARAMS["retrieve"])
        expected[threads + "{thread_id}/checkpoints/{checkpoint_id}/"] = set(
            THREAD_QUERY_PARAMS["checkpoint"]
        )
    assert set(schema["paths"]) == set(expected)
    for path, known in expected.items():
        documented = {
            parameter["name"]
            for parameter in schema["paths"][path]["get"].get("parameters", [])
            if parameter["in"] == "query"
        }
        assert documented - {"format"} == known, path


@pytest.mark.transactional_on("mysql")  # InnoDB's FULLTEXT index sees committed rows only
@override_settings(ANVIA_DJANGO=TENANTS)
def test_every_documented_parameter_still_works(staff: APIClient, refs: list[str]) -> None:
    ref = refs[0]
    listing = {"limit": "1", "userId": "u1", "q": "hello", "format": "json"}
    first = staff.get(LIST_URL, listing)
    assert first.status_code == 200, first.content
    cursor_page = next_url(first)
    assert cursor_page is not None
    assert "cursor=" in cursor_page
    assert staff.get(cursor_page).status_code == 200
    assert staff.get(LIST_URL, {"tenantId": "globex", "format": "api"}).status_code == 200
    messages = staff.get(messages_url(ref), {"after": "0", "limit": "1", "q": "hello"})
    assert messages.status_code == 200, messages.content
    assert staff.get(detail_url(ref), {"format": "json"}).status_code == 200
    for endpoint, params in (
        ("runs/", {"limit": "1", "runId": "run-1"}),
        ("lineage/", {"limit": "1"}),
        ("summaries/", {"limit": "1"}),
    ):
        response = staff.get(f"{detail_url(ref)}{endpoint}", params)
        assert response.status_code == 200, (endpoint, response.content)
        # A cursor is read, and refused for what it is: not for being unknown.
        refused = staff.get(f"{detail_url(ref)}{endpoint}", {"cursor": "forged"})
        assert list(refused.json()) == ["cursor"], endpoint
    # The media endpoint reads ?item= (no such media here: 404, not 400).
    assert staff.get(f"{messages_url(ref)}0/media/0/", {"item": "0"}).status_code == 404
