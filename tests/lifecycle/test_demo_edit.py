"""The example chat page: "edit" on a user message forks the conversation."""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from django.test import Client
from django.test.utils import modify_settings, override_settings

from anvia_django.models import AgentRun, Conversation
from anvia_django.persistence import append_messages
from example_project.demo import views
from tests.helpers import append_input, user

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("example_project")]


@pytest.fixture
def example_project() -> Iterator[None]:
    with (
        modify_settings(INSTALLED_APPS={"append": "example_project.demo"}),
        override_settings(ROOT_URLCONF="example_project.urls"),
    ):
        yield


@pytest.fixture(autouse=True)
def browser() -> Client:
    """One visitor's browser for the whole test: the demo scopes its
    conversations to the visitor id in the Django session."""
    global BROWSER
    BROWSER = Client()
    return BROWSER


BROWSER = Client()


def post(path: str, body: dict[str, Any]) -> Any:
    return BROWSER.post(path, data=json.dumps(body), content_type="application/json")


def history(session_id: str) -> Any:
    response = BROWSER.get("/chat/history/", {"sessionId": session_id})
    assert response.status_code == 200
    return response.json()


def test_editing_a_message_forks_and_keeps_the_original() -> None:
    original = f"web-{uuid.uuid4()}"
    first = post("/chat/send/", {"sessionId": original, "message": "Where is order 1042?"}).json()
    post("/chat/send/", {"sessionId": original, "message": "What did I ask earlier?"})
    read = history(original)
    before = read["messages"]
    assert read["positions"] == list(range(len(before)))  # what "edit" sends back
    position = len(first["messages"])
    assert before[position] == user("What did I ask earlier?")

    edited = post(
        "/chat/edit/", {"sessionId": original, "position": position, "message": "Where is 1043?"}
    )
    assert edited.status_code == 200
    body = edited.json()
    fork = body["sessionId"]
    assert fork != original
    assert views.SESSION_ID.fullmatch(fork)
    assert body["messages"][0] == user("Where is 1043?")
    assert body["usage"]["totalTokens"] > 0

    assert history(original)["messages"] == before
    forked = history(fork)
    assert forked["messages"] == first["messages"] + body["messages"]
    assert forked["lineage"] == {
        "forkedFrom": {"sessionId": original, "position": position},
        "forks": [],
    }
    assert history(original)["lineage"]["forks"] == [{"sessionId": fork, "position": position}]
    row = Conversation.objects.get(session_id=fork)
    visitor = BROWSER.session[views.VISITOR_KEY]
    assert (row.user_id, row.metadata) == (visitor, {"channel": "web"})
    assert AgentRun.objects.filter(conversation=row).count() == 1


@pytest.mark.parametrize(
    ("position", "message", "error"),
    [
        (1, "x", "position"),
        (99, "x", "position"),
        (-1, "x", "position"),
        (True, "x", "position"),
        (0, " ", "message"),
    ],
)
def test_a_bad_edit_is_refused_and_forks_nothing(position: Any, message: str, error: str) -> None:
    original = f"web-{uuid.uuid4()}"
    post("/chat/send/", {"sessionId": original, "message": "hello"})
    response = post(
        "/chat/edit/", {"sessionId": original, "position": position, "message": message}
    )
    assert response.status_code == 400
    assert error in response.json()["error"]
    assert Conversation.objects.count() == 1


def test_editing_another_users_session_is_refused() -> None:
    session_id = f"web-{uuid.uuid4()}"
    append_messages(append_input(session_id, [user("private")], user_id="someone-else"))
    response = post("/chat/edit/", {"sessionId": session_id, "position": 0, "message": "x"})
    assert response.status_code == 404
    assert Conversation.objects.count() == 1


def test_the_page_offers_edit_and_shows_the_fork() -> None:
    html = Client().get("/").content.decode()
    assert 'id="lineage"' in html
    assert "/chat/edit/" in html
    assert "open the original" in html
    assert asyncio.iscoroutinefunction(views.chat_edit)
    assert Client().get("/chat/edit/").status_code == 405
