"""Who can read stored conversations, and how much they see.

A non-staff user reads nothing through the API, the admin or a guessed ref;
refs are random, not sequential; the API answers only safe methods; and
responses carry exactly the contract's fields.
"""

from __future__ import annotations

import base64
import itertools
import string

import pytest
from django.contrib.auth import get_user_model
from django.test import Client

from anvia_django.core.memory import MemoryConversationListOptions
from anvia_django.models import REF_LENGTH, Conversation
from anvia_django.store import DjangoMemoryStore
from tests.api_client import LIST_URL, detail_url, messages_url
from tests.helpers import append_input, assistant, run, user

from .report import record

pytestmark = pytest.mark.django_db

SECRET = "stored-secret-content"
SUMMARY_KEYS = {
    "ref", "sessionId", "userId", "scopeKey", "metadata", "createdAt", "updatedAt", "messageCount"
}  # fmt: skip
MESSAGE_KEYS = {"position", "runId", "turn", "createdAt", "message"}
URL_SAFE = set(string.ascii_letters + string.digits + "-_")


def common_prefix(a: str, b: str) -> int:
    return next((i for i, (x, y) in enumerate(zip(a, b, strict=False)) if x != y), len(a))


@pytest.fixture
def refs() -> list[str]:
    store = DjangoMemoryStore()
    for n in range(20):
        run(store.append, append_input(f"sec-{n}", [user(SECRET), assistant("ok")], user_id="u"))
    summaries = run(store.inspector.list_conversations, MemoryConversationListOptions(100))
    return [summary.ref for summary in summaries]


def client_for(kind: str) -> Client:
    client = Client()
    if kind != "anonymous":
        person = get_user_model().objects.create_user(
            "plain", password="pw", is_staff=False, is_superuser=False
        )
        client.force_login(person)
    return client


@pytest.mark.parametrize("kind", ["anonymous", "logged-in non-staff"])
def test_non_staff_read_nothing_through_api_admin_or_guessed_refs(
    kind: str, refs: list[str]
) -> None:
    client = client_for(kind)
    urls = [LIST_URL, "/anvia/api/schema/", "/admin/anvia_django/conversation/"]
    for ref in refs[:3]:
        urls += [detail_url(ref), messages_url(ref)]
        pk = Conversation.objects.get(ref=ref).pk
        urls += [f"/admin/anvia_django/conversation/{pk}/change/"]
    # Guessing: neighbouring primary keys, session ids and sequential-looking refs.
    urls += [detail_url(str(n)) for n in range(1, 6)]
    urls += [detail_url("sec-0"), detail_url("A" * REF_LENGTH)]
    for url in urls:
        response = client.get(url)
        assert response.status_code in (302, 401, 403, 404), (url, response.status_code)
        assert SECRET.encode() not in response.content, url
        if response.status_code == 302:
            assert "/admin/login/" in response["Location"]
    record("security", requests=len(urls), leaks=0)


def test_refs_are_random_not_sequential(refs: list[str]) -> None:
    assert len(set(refs)) == len(refs)
    for ref in refs:
        assert len(ref) == REF_LENGTH
        assert set(ref) <= URL_SAFE
        assert ref not in {str(pk) for pk in Conversation.objects.values_list("pk", flat=True)}
    # Created one after another, yet no two share a long prefix (as counters
    # and time-ordered ids would).
    ordered = list(Conversation.objects.order_by("pk").values_list("ref", flat=True))
    shared = [common_prefix(x, y) for x, y in itertools.pairwise(ordered)]
    assert max(shared) < 6
    record("security", refs_checked=len(refs))


@pytest.fixture
def staff() -> Client:
    get_user_model().objects.create_user("boss", password="pw", is_staff=True)
    client = Client()
    client.force_login(get_user_model().objects.get(username="boss"))
    return client


@pytest.mark.parametrize("method", ["post", "put", "patch", "delete"])
def test_the_api_answers_only_safe_methods(method: str, staff: Client, refs: list[str]) -> None:
    before = Conversation.objects.count()
    for url in (LIST_URL, detail_url(refs[0]), messages_url(refs[0])):
        response = getattr(staff, method)(url, data="{}", content_type="application/json")
        assert response.status_code == 405, (method, url)
        assert SECRET.encode() not in response.content
    assert Conversation.objects.count() == before
    assert staff.options(LIST_URL).status_code in (200, 405)
    assert staff.head(LIST_URL).status_code == 200
    record("security", requests=3)


def test_responses_carry_only_the_contract_fields(staff: Client, refs: list[str]) -> None:
    listing = staff.get(LIST_URL).json()
    assert listing
    assert all(set(item) == SUMMARY_KEYS for item in listing)
    detail = staff.get(detail_url(refs[0])).json()
    assert set(detail) == SUMMARY_KEYS | {"messages"}
    assert all(set(message) == MESSAGE_KEYS for message in detail["messages"])
    page = staff.get(messages_url(refs[0])).json()
    assert all(set(message) == MESSAGE_KEYS for message in page)
    # Nothing of the failed-run records or internal ids leaks into them.
    text = str(detail)
    assert "traceback" not in text
    assert "conversation_id" not in text
    record("security", requests=3)


def test_basic_auth_with_a_wrong_password_reads_nothing(refs: list[str]) -> None:
    get_user_model().objects.create_user("boss2", password="right", is_staff=True)
    token = base64.b64encode(b"boss2:wrong").decode()
    response = Client().get(LIST_URL, HTTP_AUTHORIZATION=f"Basic {token}")
    assert response.status_code in (401, 403)
    assert SECRET.encode() not in response.content
    record("security", requests=1)
