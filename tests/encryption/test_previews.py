"""The admin's list previews read a bounded part of each message: a prefix
cut in SQL where the message is plain, the whole envelope only up to
``SEALED_PREVIEW_LIMIT`` where it is sealed (it opens only whole); and a
page costs the same queries for many rows as for few, sealed or not."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.db import connection
from django.test import Client, override_settings
from django.test.utils import CaptureQueriesContext

from anvia_django.admin.previews import SOURCE_CHARS
from anvia_django.models import Conversation, MemoryMessage
from anvia_django.persistence import append_messages, with_message_preview, with_preview_columns
from anvia_django.persistence.inspector.listing_columns import SEALED_PREVIEW_LIMIT
from tests.encryption.support import encryption
from tests.helpers import append_input, assistant, user

pytestmark = pytest.mark.django_db

CONVERSATIONS = "/admin/anvia_django/conversation/"
MESSAGES = "/admin/anvia_django/memorymessage/"
LONG = "word " * (SEALED_PREVIEW_LIMIT // 4)  # its envelope is past the limit


@pytest.fixture(params=["plain", "sealed"])
def codec(request: pytest.FixtureRequest) -> Iterator[str]:
    plain = {"ENCRYPTION": None}  # also when the whole run is encrypted
    with override_settings(ANVIA_DJANGO=encryption() if request.param == "sealed" else plain):
        yield request.param


@pytest.fixture
def staff() -> Client:
    client = Client()
    client.force_login(User.objects.create_superuser("root", password="pw"))
    return client


def fetched_lengths() -> dict[str, list[int]]:
    """How many characters of each message the lists' queries fetch."""
    conversations = with_preview_columns(Conversation.objects.all(), preview_chars=SOURCE_CHARS)
    messages = with_message_preview(MemoryMessage.objects.all(), preview_chars=SOURCE_CHARS)
    return {
        "conversations": sorted(len(row.first_user_message) for row in conversations),  # type: ignore[attr-defined]
        "messages": sorted(len(row.preview_text) for row in messages),  # type: ignore[attr-defined]
    }


def test_lists_fetch_a_bounded_part_of_each_message(codec: str, staff: Client) -> None:
    append_messages(append_input("long", [user(LONG)], user_id="u1"))
    append_messages(append_input("short", [user("short question"), assistant("ok")], user_id="u2"))
    fetched = fetched_lengths()
    if codec == "plain":
        assert fetched["conversations"][-1] == SOURCE_CHARS
        assert fetched["messages"][-1] == SOURCE_CHARS
    else:
        # Sealed: the short ones whole (they open only whole), the long one's start only.
        assert max(fetched["conversations"]) <= SEALED_PREVIEW_LIMIT
        assert max(fetched["messages"]) <= SEALED_PREVIEW_LIMIT
        assert SOURCE_CHARS in fetched["conversations"]
    for url in (CONVERSATIONS, MESSAGES):
        page = staff.get(url).content.decode()
        assert "short question" in page
        if codec == "plain":
            assert "word word word" in page
        else:
            assert "word word" not in page
            assert "too long to preview" in page


def test_list_pages_cost_the_same_queries_for_many_rows_as_for_few(
    codec: str, staff: Client, django_assert_num_queries: Any
) -> None:
    def add(count: int, start: int) -> None:
        for n in range(start, start + count):
            turns = [user(f"question {n}"), assistant(f"answer {n}")]
            append_messages(append_input(f"s-{n}", turns, user_id=f"u-{n}"))

    add(2, 0)
    counts = {}
    for url in (CONVERSATIONS, MESSAGES):
        staff.get(url)  # warm the content type and permission caches
        with CaptureQueriesContext(connection) as captured:
            assert staff.get(url).status_code == 200
        counts[url] = len(captured.captured_queries)
    add(20, 2)
    for url in (CONVERSATIONS, MESSAGES):
        with django_assert_num_queries(counts[url]):
            page = staff.get(url).content.decode()
        assert "question 21" in page
