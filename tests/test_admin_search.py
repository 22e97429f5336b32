"""The admin's search box finds message text and links each hit to its message.

Transactional on MariaDB only: InnoDB's FULLTEXT index sees committed rows only.
"""

from __future__ import annotations

import re
from typing import Any

import pytest
from django.db import connection
from django.test import Client, override_settings
from django.test.utils import CaptureQueriesContext

from anvia_django.models import Conversation, MemoryMessage
from anvia_django.persistence import append_messages

from .helpers import append_input, assistant, user
from .test_admin import viewer
from .test_search import HOSTILE

pytestmark = [pytest.mark.django_db, pytest.mark.transactional_on("mysql")]

CONVERSATIONS = "/admin/anvia_django/conversation/"
MESSAGES = "/admin/anvia_django/memorymessage/"


@pytest.fixture
def client() -> Client:
    return viewer()


@pytest.fixture
def support_threads() -> None:
    chatter = [user(f"small talk {n}") for n in range(13)]
    append_messages(
        append_input("customer-7", [*chatter, user("Order 1042 never came")], user_id="c7")
    )
    append_messages(append_input("customer-8", [user("hello"), assistant("hi")], user_id="c8"))


def links_of(content: str, session_id: str) -> list[str]:
    return re.findall(rf'<a href="([^"]+)"[^>]*>{re.escape(session_id)}</a>', content)


@pytest.mark.usefixtures("support_threads")
@override_settings(ANVIA_DJANGO={"ADMIN_TRANSCRIPT_PAGE_SIZE": 10})
def test_a_text_search_links_to_the_message_in_its_transcript(client: Client) -> None:
    content = client.get(CONVERSATIONS, {"q": "1042"}).content.decode()
    conversation = Conversation.objects.get(session_id="customer-7")
    assert "customer-8" not in content
    (link,) = links_of(content, "customer-7")
    # The admin keeps the search in _changelist_filters; the page and anchor follow.
    assert link.startswith(f"{CONVERSATIONS}{conversation.pk}/change/?")
    assert "page=2#m-13" in link
    transcript = client.get(link.replace("&amp;", "&")).content.decode()
    assert 'id="message-13"' in transcript
    assert "Order 1042 never came" in transcript


@pytest.mark.usefixtures("support_threads")
def test_ids_are_still_searched_and_link_plainly(client: Client) -> None:
    content = client.get(CONVERSATIONS, {"q": "c8"}).content.decode()
    (link,) = links_of(content, "customer-8")
    assert "#m-" not in link
    assert "customer-7" not in content


@pytest.mark.usefixtures("support_threads")
def test_json_keys_are_not_text_in_the_admin(client: Client) -> None:
    content = client.get(CONVERSATIONS, {"q": "role"}).content.decode()
    assert "customer-7" not in content
    assert "customer-8" not in content


@pytest.mark.usefixtures("support_threads")
@override_settings(ANVIA_DJANGO={"ADMIN_TRANSCRIPT_PAGE_SIZE": 10})
def test_the_message_list_searches_text_and_links_into_the_transcript(client: Client) -> None:
    content = client.get(MESSAGES, {"q": "never came"}).content.decode()
    message = MemoryMessage.objects.get(conversation__session_id="customer-7", position=13)
    assert f"/memorymessage/{message.pk}/change/" in content
    assert f"/conversation/{message.conversation_id}/change/?page=2#m-13" in content
    assert "small talk" not in content


@pytest.mark.usefixtures("support_threads")
@pytest.mark.parametrize("q", [*HOSTILE, "x" * 500, "a\x00b"])
def test_hostile_searches_are_pages_not_500s(client: Client, q: str) -> None:
    assert client.get(CONVERSATIONS, {"q": q}).status_code == 200
    assert client.get(MESSAGES, {"q": q}).status_code == 200


def test_a_search_page_costs_the_same_queries_whatever_its_rows(client: Client) -> None:
    def count(url: str, params: dict[str, Any]) -> int:
        client.get(url, params)  # warm caches (content types, permissions)
        with CaptureQueriesContext(connection) as captured:
            assert client.get(url, params).status_code == 200
        return len(captured.captured_queries)

    append_messages(append_input("first", [user("needle")]))
    listing = count(CONVERSATIONS, {"q": "needle"})
    messages = count(MESSAGES, {"q": "needle"})
    for number in range(30):
        append_messages(append_input(f"more-{number}", [user("needle and thread")]))
    assert count(CONVERSATIONS, {"q": "needle"}) == listing
    assert count(MESSAGES, {"q": "needle"}) == messages


def test_ids_are_searched_exactly_case_included(client: Client) -> None:
    # Session and run ids are case-sensitive keys: "Case-A" and "case-a" are
    # two sessions, and an exact search (not "=field", which ignores case
    # and reads no index on PostgreSQL) finds one.
    append_messages(append_input("Case-A", [user("hello")], run_id="Run-A"))
    append_messages(append_input("case-a", [user("hello")], run_id="run-a"))
    for q in ("Case-A", "Run-A"):
        content = client.get(MESSAGES, {"q": q}).content.decode()
        assert links_of(content, "Case-A")
        assert not links_of(content, "case-a")
