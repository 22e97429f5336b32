"""Owner mode: an authenticated user reads only their own conversations."""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.auth.models import User
from django.test import override_settings
from rest_framework.request import Request
from rest_framework.test import APIClient

from anvia_django.models import Conversation

from .api_client import LIST_URL, detail_url, messages_url
from .inspector_data import make_conversations, make_messages

pytestmark = pytest.mark.django_db

OWNER_MODE = {
    "INSPECTOR_OWNER_MODE": True,
    "INSPECTOR_PERMISSION_CLASSES": ["rest_framework.permissions.IsAuthenticated"],
}


def username_resolver(request: Request) -> str | None:
    return request.user.get_username() or None


def nobody_resolver(request: Request) -> str | None:
    return None


@pytest.fixture
def alice() -> User:
    return User.objects.create_user("alice")


@pytest.fixture
def data(alice: User) -> dict[str, list[Conversation]]:
    mine = make_conversations(3, user_id=str(alice.pk), prefix="mine")
    for conversation in mine:
        make_messages(conversation, 3)
    return {
        "mine": mine,
        "theirs": make_conversations(2, user_id="someone-else", prefix="theirs"),
        "unowned": make_conversations(2, prefix="unowned"),
    }


def as_user(user: User) -> APIClient:
    client = APIClient()
    client.force_login(user)
    return client


@override_settings(ANVIA_DJANGO=OWNER_MODE)
def test_a_user_lists_only_their_own(alice: User, data: dict[str, Any]) -> None:
    client = as_user(alice)
    body = client.get(LIST_URL).json()
    assert sorted(s["sessionId"] for s in body) == ["mine-0", "mine-1", "mine-2"]
    assert client.get(LIST_URL, {"userId": str(alice.pk)}).json() == body
    assert client.get(LIST_URL, {"userId": "someone-else"}).json() == []


@override_settings(ANVIA_DJANGO=OWNER_MODE)
def test_another_users_ref_is_404(alice: User, data: dict[str, Any]) -> None:
    client = as_user(alice)
    for conversation in [*data["theirs"], *data["unowned"]]:
        assert client.get(detail_url(conversation.ref)).status_code == 404
        assert client.get(messages_url(conversation.ref)).status_code == 404
    mine = data["mine"][0]
    assert client.get(detail_url(mine.ref)).json()["sessionId"] == mine.session_id
    assert len(client.get(messages_url(mine.ref)).json()) == 3


@override_settings(ANVIA_DJANGO=OWNER_MODE)
def test_staff_are_scoped_too(data: dict[str, Any]) -> None:
    client = as_user(User.objects.create_user("boss", is_staff=True, is_superuser=True))
    assert client.get(LIST_URL).json() == []
    assert client.get(detail_url(data["theirs"][0].ref)).status_code == 404


@override_settings(
    ANVIA_DJANGO={
        **OWNER_MODE,
        "INSPECTOR_PERMISSION_CLASSES": ["rest_framework.permissions.AllowAny"],
    }
)
def test_it_fails_closed_without_a_resolved_user(client: Any, data: dict[str, Any]) -> None:
    assert client.get(LIST_URL).status_code == 200
    assert client.get(LIST_URL).json() == []
    assert client.get(LIST_URL, {"userId": "someone-else"}).json() == []
    assert client.get(detail_url(data["unowned"][0].ref)).status_code == 404


@override_settings(
    ANVIA_DJANGO={**OWNER_MODE, "INSPECTOR_USER_RESOLVER": "tests.test_api_owner.nobody_resolver"}
)
def test_a_resolver_returning_none_shows_nothing(alice: User, data: dict[str, Any]) -> None:
    client = as_user(alice)
    assert client.get(LIST_URL).json() == []
    assert client.get(detail_url(data["mine"][0].ref)).status_code == 404


def test_the_resolver_is_configurable(alice: User) -> None:
    make_conversations(1, user_id="alice", prefix="by-name")
    make_conversations(1, user_id=str(alice.pk), prefix="by-pk")
    settings = {**OWNER_MODE, "INSPECTOR_USER_RESOLVER": username_resolver}
    with override_settings(ANVIA_DJANGO=settings):
        body = as_user(alice).get(LIST_URL).json()
    assert [s["sessionId"] for s in body] == ["by-name-0"]


@override_settings(ANVIA_DJANGO=OWNER_MODE)
def test_anonymous_callers_are_refused_by_the_permission_classes(
    client: Any, data: dict[str, Any]
) -> None:
    assert client.get(LIST_URL).status_code == 403
