"""``?q=`` on the API's conversation and message lists: filtering only.

Transactional on MariaDB only: InnoDB's FULLTEXT index sees committed rows only.
"""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.auth.models import User
from django.test import override_settings
from rest_framework.test import APIClient

from anvia_django.models import Conversation
from anvia_django.persistence import append_messages

from .api_client import LIST_URL, messages_url, next_url
from .helpers import append_input, assistant, user
from .test_search import HOSTILE

pytestmark = [pytest.mark.django_db, pytest.mark.transactional_on("mysql")]

SUMMARY_KEYS = {
    "ref", "sessionId", "userId", "scopeKey", "metadata", "createdAt", "updatedAt", "messageCount"
}  # fmt: skip
MESSAGE_KEYS = {"position", "runId", "turn", "createdAt", "message"}
OWNER_MODE = {
    "INSPECTOR_OWNER_MODE": True,
    "INSPECTOR_PERMISSION_CLASSES": ["rest_framework.permissions.IsAuthenticated"],
}


def client_of(account: User) -> APIClient:
    client = APIClient()
    client.force_login(account)
    return client


@pytest.fixture
def alice() -> User:
    return User.objects.create_user("alice")


@pytest.fixture
def threads(alice: User) -> None:
    append_messages(
        append_input(
            "alice-thread",
            [user("my order 1042 is late"), assistant("order 1042 ships tomorrow")],
            user_id=str(alice.pk),
        )
    )
    append_messages(append_input("other-thread", [user("order 1042? mine too")], user_id="eve"))
    append_messages(append_input("quiet-thread", [user("nothing to see")], user_id="eve"))


@pytest.mark.usefixtures("threads")
def test_q_filters_the_conversation_list_and_keeps_its_shape(staff: APIClient) -> None:
    response = staff.get(LIST_URL, {"q": "1042"})
    assert response.status_code == 200
    body = response.json()
    assert [item["sessionId"] for item in body] == ["other-thread", "alice-thread"]
    assert all(set(item) == SUMMARY_KEYS for item in body)
    unfiltered = {item["sessionId"]: item for item in staff.get(LIST_URL).json()}
    assert all(item == unfiltered[item["sessionId"]] for item in body)


def test_q_pages_the_conversation_list_with_the_same_cursor(staff: APIClient) -> None:
    for number in range(5):
        append_messages(append_input(f"s{number}", [user(f"needle {number}")]))
    append_messages(append_input("hay", [user("hay")]))
    seen: list[str] = []
    url: str | None = f"{LIST_URL}?q=needle&limit=2"
    while url is not None:
        response = staff.get(url)
        seen += [item["sessionId"] for item in response.json()]
        url = next_url(response)
        assert url is None or "q=needle" in url
    assert seen == [f"s{number}" for number in reversed(range(5))]


@pytest.mark.usefixtures("threads")
def test_q_filters_the_message_list_and_keeps_its_shape(staff: APIClient) -> None:
    ref = Conversation.objects.get(session_id="alice-thread").ref
    body = staff.get(messages_url(ref), {"q": "tomorrow"}).json()
    assert [item["position"] for item in body] == [1]
    assert set(body[0]) == MESSAGE_KEYS
    assert body[0]["message"] == assistant("order 1042 ships tomorrow")


def test_q_pages_the_message_list_by_position(staff: APIClient) -> None:
    append_messages(
        append_input("long", [user(f"needle {n}" if n % 2 else "hay") for n in range(7)])
    )
    ref = Conversation.objects.get(session_id="long").ref
    response = staff.get(messages_url(ref), {"q": "needle", "limit": "2"})
    assert [item["position"] for item in response.json()] == [1, 3]
    following = next_url(response)
    assert following is not None
    response = staff.get(following)
    assert [item["position"] for item in response.json()] == [5]
    assert next_url(response) is None


@pytest.mark.usefixtures("threads")
def test_json_keys_are_not_found(staff: APIClient) -> None:
    assert staff.get(LIST_URL, {"q": "role"}).json() == []
    assert staff.get(LIST_URL, {"q": "content"}).json() == []


@pytest.mark.usefixtures("threads")
@pytest.mark.parametrize("q", HOSTILE)
def test_hostile_q_is_an_answer_never_a_500(staff: APIClient, q: str) -> None:
    ref = Conversation.objects.get(session_id="alice-thread").ref
    for url in (LIST_URL, messages_url(ref)):
        response = staff.get(url, {"q": q})
        assert response.status_code == 200, response.content
        assert isinstance(response.json(), list)


@pytest.mark.usefixtures("threads")
@pytest.mark.parametrize(
    ("q", "says"),
    [("", "must not be empty"), (" ", "must not be empty"), ("x" * 201, "the maximum is 200")],
)
def test_a_q_no_backend_could_take_is_a_400_naming_q(staff: APIClient, q: str, says: str) -> None:
    ref = Conversation.objects.get(session_id="alice-thread").ref
    for url in (LIST_URL, messages_url(ref)):
        response = staff.get(url, {"q": q})
        assert response.status_code == 400
        (message,) = response.json()["q"]
        assert says in message


@pytest.mark.usefixtures("threads")
def test_a_q_with_u0000_is_a_400(staff: APIClient) -> None:
    assert staff.get(f"{LIST_URL}?q=a%00b").status_code == 400


@pytest.mark.usefixtures("threads")
@override_settings(ANVIA_DJANGO=OWNER_MODE)
def test_owner_mode_finds_only_the_callers_messages(alice: User) -> None:
    client = client_of(alice)
    body = client.get(LIST_URL, {"q": "1042"}).json()
    assert [item["sessionId"] for item in body] == ["alice-thread"]
    assert client.get(LIST_URL, {"q": "mine"}).json() == []
    theirs = Conversation.objects.get(session_id="other-thread").ref
    assert client.get(messages_url(theirs), {"q": "1042"}).status_code == 404
    assert client.get(LIST_URL, {"q": "1042", "userId": "eve"}).json() == []


@pytest.mark.usefixtures("threads")
@override_settings(
    ANVIA_DJANGO={**OWNER_MODE, "INSPECTOR_USER_RESOLVER": "tests.test_api_owner.nobody_resolver"}
)
def test_owner_mode_without_an_owner_finds_nothing(alice: User) -> None:
    assert client_of(alice).get(LIST_URL, {"q": "1042"}).json() == []


@pytest.mark.usefixtures("threads")
def test_a_search_page_is_a_constant_number_of_queries(
    staff: APIClient, django_assert_max_num_queries: Any
) -> None:
    staff.get(LIST_URL, {"q": "1042"})  # sessions and auth warmed up
    with django_assert_max_num_queries(4) as few:
        staff.get(LIST_URL, {"q": "1042"})
    for number in range(20):
        append_messages(append_input(f"more-{number}", [user("order 1042 again")]))
    with django_assert_max_num_queries(len(few.captured_queries)):
        assert len(staff.get(LIST_URL, {"q": "1042", "limit": "50"}).json()) == 22
