"""The inspector HTTP API against SPEC section 5: access, shapes, errors."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.test import override_settings
from rest_framework.test import APIClient

from anvia_django.models import Conversation
from anvia_django.persistence import append_messages, record_failed_run

from .api_client import LIST_URL, detail_url, messages_url
from .helpers import append_input, assistant, user
from .inspector_data import make_conversations

pytestmark = pytest.mark.django_db

SUMMARY_KEYS = {
    "ref", "sessionId", "userId", "scopeKey", "metadata", "createdAt", "updatedAt", "messageCount"
}  # fmt: skip
MESSAGE_KEYS = {"position", "runId", "turn", "createdAt", "message"}


@pytest.fixture
def conversation() -> Conversation:
    append_messages(append_input("thread-1", [user("Hi")], user_id="u1", metadata={"k": "v"}))
    append_messages(append_input("thread-1", [assistant("Hello!")], turn=2, user_id="u1"))
    return Conversation.objects.get(session_id="thread-1")


def every_url(ref: str) -> list[str]:
    return [LIST_URL, detail_url(ref), messages_url(ref)]


def test_anonymous_callers_get_no_data(client: Any, conversation: Conversation) -> None:
    for url in every_url(conversation.ref):
        response = client.get(url)
        assert response.status_code in (401, 403)
        assert b"thread-1" not in response.content
        assert conversation.ref.encode() not in response.content


def test_authenticated_non_staff_is_refused(conversation: Conversation) -> None:
    client = APIClient()
    client.force_login(User.objects.create_user("plain", password="pw"))
    for url in every_url(conversation.ref):
        response = client.get(url)
        assert response.status_code == 403
        assert b"thread-1" not in response.content


@override_settings(
    REST_FRAMEWORK={
        "DEFAULT_PERMISSION_CLASSES": ["rest_framework.permissions.AllowAny"],
        "DEFAULT_RENDERER_CLASSES": ["rest_framework.renderers.BrowsableAPIRenderer"],
        "DEFAULT_PAGINATION_CLASS": "rest_framework.pagination.PageNumberPagination",
        "PAGE_SIZE": 1,
        "DATETIME_FORMAT": "%d/%m/%Y",
    },
    TIME_ZONE="Asia/Kolkata",
)
def test_project_drf_defaults_do_not_leak_in(
    client: Any, staff: APIClient, conversation: Conversation
) -> None:
    assert client.get(LIST_URL).status_code == 403
    response = staff.get(LIST_URL)
    assert response.status_code == 200
    assert response["Content-Type"] == "application/json"
    body = response.json()
    assert isinstance(body, list)
    assert body[0]["createdAt"].endswith("+00:00")


@override_settings(
    ANVIA_DJANGO={"INSPECTOR_PERMISSION_CLASSES": ["rest_framework.permissions.AllowAny"]}
)
def test_permission_classes_come_from_settings(client: Any, conversation: Conversation) -> None:
    assert client.get(LIST_URL).status_code == 200
    assert client.get(detail_url(conversation.ref)).status_code == 200


def test_list_has_exactly_the_contract_keys(staff: APIClient, conversation: Conversation) -> None:
    response = staff.get(LIST_URL)
    assert response.status_code == 200
    [summary] = response.json()
    assert set(summary) == SUMMARY_KEYS
    assert summary == {
        "ref": conversation.ref,
        "sessionId": "thread-1",
        "userId": "u1",
        # The suite's scope (session id alone) keys nothing besides the session.
        "scopeKey": "",
        "metadata": {"k": "v"},
        "createdAt": conversation.created_at.isoformat(),
        "updatedAt": conversation.updated_at.isoformat(),
        "messageCount": 2,
    }
    assert "Link" not in response.headers


def test_detail_is_the_summary_plus_messages_in_position_order(
    staff: APIClient, conversation: Conversation
) -> None:
    response = staff.get(detail_url(conversation.ref))
    assert response.status_code == 200
    body = response.json()
    assert set(body) == SUMMARY_KEYS | {"messages"}
    assert body["ref"] == conversation.ref
    assert body["messageCount"] == 2
    assert [set(m) for m in body["messages"]] == [MESSAGE_KEYS, MESSAGE_KEYS]
    assert [(m["position"], m["runId"], m["turn"], m["message"]) for m in body["messages"]] == [
        (0, "run-1", 1, user("Hi")),
        (1, "run-1", 2, assistant("Hello!")),
    ]
    assert "Link" not in response.headers


def test_timestamps_are_iso_8601_in_utc(staff: APIClient, conversation: Conversation) -> None:
    from datetime import datetime

    with override_settings(TIME_ZONE="America/New_York"):
        body = staff.get(detail_url(conversation.ref)).json()
    stamps = [body["createdAt"], body["updatedAt"], *(m["createdAt"] for m in body["messages"])]
    for stamp in stamps:
        parsed = datetime.fromisoformat(stamp)
        assert parsed.utcoffset() == timedelta(0)
        assert stamp.endswith("+00:00")


def test_null_user_and_metadata_are_json_null(staff: APIClient) -> None:
    append_messages(append_input("anonymous", [user("x")]))
    [summary] = staff.get(LIST_URL).json()
    assert summary["userId"] is None
    assert summary["metadata"] is None


def test_failed_runs_stay_out_of_the_transcript(
    staff: APIClient, conversation: Conversation
) -> None:
    from anvia_django.core.memory import MemoryContext, MemoryErrorInput

    record_failed_run(
        MemoryErrorInput(MemoryContext("thread-1"), "run-2", RuntimeError("x"), [user("lost")])
    )
    body = staff.get(detail_url(conversation.ref)).json()
    assert [m["message"] for m in body["messages"]] == [user("Hi"), assistant("Hello!")]


def test_list_is_newest_first_with_ties_by_newest_row(staff: APIClient) -> None:
    spread = make_conversations(3, prefix="spread")
    tied = make_conversations(3, prefix="tied", start=spread[-1].updated_at, step=timedelta(0))
    body = staff.get(LIST_URL).json()
    expected = [*reversed(tied), *reversed(spread[:-1])]
    # spread[-1] ties with the tied block and is the oldest row among them.
    expected.insert(3, spread[-1])
    assert [s["sessionId"] for s in body] == [c.session_id for c in expected]


def test_user_id_filters_the_list(staff: APIClient) -> None:
    make_conversations(2, user_id="alice", prefix="a")
    make_conversations(3, user_id="bob", prefix="b")
    make_conversations(1, prefix="nobody")
    alice = staff.get(LIST_URL, {"userId": "alice"}).json()
    assert sorted(s["sessionId"] for s in alice) == ["a-0", "a-1"]
    assert {s["userId"] for s in alice} == {"alice"}
    assert staff.get(LIST_URL, {"userId": "carol"}).json() == []
    assert len(staff.get(LIST_URL).json()) == 6


def test_limit_defaults_and_maximum_come_from_settings(staff: APIClient) -> None:
    make_conversations(12)
    with override_settings(ANVIA_DJANGO={"INSPECTOR_DEFAULT_LIMIT": 5, "INSPECTOR_MAX_LIMIT": 10}):
        assert len(staff.get(LIST_URL).json()) == 5
        assert len(staff.get(LIST_URL, {"limit": "10"}).json()) == 10
        assert staff.get(LIST_URL, {"limit": "11"}).status_code == 400
    assert len(staff.get(LIST_URL, {"limit": "3"}).json()) == 3


@pytest.mark.parametrize(
    "limit", ["0", "-1", "-50", "abc", "1.5", "", " 5", "5x", "0x10", "201", "9" * 40, "true"]
)
def test_invalid_limit_is_400_naming_limit(staff: APIClient, limit: str) -> None:
    make_conversations(1)
    response = staff.get(LIST_URL, {"limit": limit})
    assert response.status_code == 400
    body = response.json()
    assert list(body) == ["limit"]
    assert "limit" in body["limit"][0]


@pytest.mark.parametrize("limit", ["0", "-3", "many", "501"])
def test_invalid_message_limit_is_400_naming_limit(
    staff: APIClient, conversation: Conversation, limit: str
) -> None:
    response = staff.get(messages_url(conversation.ref), {"limit": limit})
    assert response.status_code == 400
    assert "limit" in response.json()["limit"][0]


@pytest.mark.parametrize("after", ["-1", "x", "1e3", "", str(2**63)])
def test_invalid_after_is_400_naming_after(
    staff: APIClient, conversation: Conversation, after: str
) -> None:
    response = staff.get(messages_url(conversation.ref), {"after": after})
    assert response.status_code == 400
    assert "after" in response.json()["after"][0]


@pytest.mark.parametrize("cursor", ["", "garbage", "WyIyMDI1IiwgMV0:forged:sig"])
def test_invalid_cursor_is_400_naming_cursor(staff: APIClient, cursor: str) -> None:
    response = staff.get(LIST_URL, {"cursor": cursor})
    assert response.status_code == 400
    assert "cursor" in response.json()["cursor"][0]


@pytest.mark.parametrize(
    "ref", ["unknownunknownunknown1", "a" * 33, "has space", "dots.dots", "%00", "é"]
)
def test_unknown_or_malformed_ref_is_404(staff: APIClient, ref: str) -> None:
    assert staff.get(detail_url(ref)).status_code == 404
    assert staff.get(messages_url(ref)).status_code == 404


def test_the_session_id_is_not_a_ref(staff: APIClient, conversation: Conversation) -> None:
    assert staff.get(detail_url("thread-1")).status_code == 404


@pytest.mark.parametrize("method", ["post", "put", "patch", "delete"])
def test_writes_are_405(staff: APIClient, conversation: Conversation, method: str) -> None:
    for url in every_url(conversation.ref):
        response = getattr(staff, method)(url, {}, format="json")
        assert response.status_code == 405, (method, url)
    assert Conversation.objects.get().message_count == 2


@pytest.mark.parametrize("bad", ["", "a\x00b", "u" * 256])
def test_a_user_id_no_store_could_hold_is_a_400_naming_it(staff: APIClient, bad: str) -> None:
    response = staff.get(LIST_URL, {"userId": bad})
    assert response.status_code == 400
    assert "userId" in response.json()
