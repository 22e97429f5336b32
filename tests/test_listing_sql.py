"""Listing, find-by-ref and message pages: the querysets' answers, page by page."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from django.test import override_settings

from anvia_django.models import Conversation, MemoryMessage
from anvia_django.persistence import (
    RowKey,
    find_conversation,
    list_conversation_page,
    list_message_page,
)

BASE = datetime(2025, 3, 1, 12, 0, tzinfo=UTC)


def make_conversations() -> None:
    # Ties in updated_at (every third pair), microseconds, owners and none.
    for index in range(30):
        Conversation.objects.create(
            session_id=f"s{index}",
            user_id=None if index % 4 == 0 else f"u{index % 3}",
            metadata={"n": index} if index % 2 else None,
            created_at=BASE,
            updated_at=BASE + timedelta(seconds=index // 2, microseconds=index % 3 * 7),
            message_count=index,
        )


@pytest.mark.django_db
@pytest.mark.parametrize("use_tz", [True, False])
@pytest.mark.parametrize("user_id", [None, "u1"])
@pytest.mark.parametrize("size", [1, 4, 50])
def test_keyset_pages_walk_the_newest_first_order_once(
    use_tz: bool, user_id: str | None, size: int
) -> None:
    make_conversations()
    expected = Conversation.objects.order_by("-updated_at", "-id")
    if user_id is not None:
        expected = expected.filter(user_id=user_id)
    with override_settings(USE_TZ=use_tz):
        after: RowKey | None = None
        pages: list[list[str]] = []
        while True:
            page = list_conversation_page(size, user_id, after=after)
            assert all(item.updated_at.tzinfo is UTC for item in page.items)
            pages.append([item.session_id for item in page.items])
            if page.next_key is None:
                break
            last = Conversation.objects.get(session_id=pages[-1][-1])
            assert page.next_key == RowKey(last.updated_at, last.pk)
            after = page.next_key
    assert [s for page in pages for s in page] == list(
        expected.values_list("session_id", flat=True)
    )
    assert all(len(page) == size for page in pages[:-1])
    assert 0 < len(pages[-1]) <= size


@pytest.mark.django_db
def test_a_listing_page_is_one_query_whatever_its_size_or_depth(
    django_assert_num_queries: object,
) -> None:
    make_conversations()
    key = list_conversation_page(7).next_key
    for limit, after in ((1, None), (25, None), (3, key), (25, key)):
        with django_assert_num_queries(1):  # type: ignore[operator]
            list_conversation_page(limit, "u2", after=after)


@pytest.mark.django_db
@pytest.mark.parametrize("use_tz", [True, False])
def test_find_and_message_pages_match_the_stored_rows(use_tz: bool) -> None:
    make_conversations()
    conversation = Conversation.objects.get(session_id="s5")
    for position in range(7):
        MemoryMessage.objects.create(
            conversation=conversation,
            position=position,
            run_id=f"r{position // 2}",
            turn=1,
            role="user",
            message={"role": "user", "content": str(position)},
            created_at=BASE + timedelta(microseconds=position),
        )
    with override_settings(USE_TZ=use_tz):
        found = find_conversation(conversation.ref)
        assert found is not None
        assert found.id == conversation.pk
        assert found.summary.metadata == {"n": 5}
        assert found.summary.updated_at == BASE + timedelta(seconds=2, microseconds=14)
        assert find_conversation(conversation.ref, "u2") is not None
        assert find_conversation(conversation.ref, "u1") is None
        assert find_conversation("unknown") is None
        page = list_message_page(conversation.pk, after=2, limit=3)
        last = list_message_page(conversation.pk, after=5, limit=3)
    assert [item.position for item in page.items] == [3, 4, 5]
    assert page.has_more
    assert page.next_after == 5
    assert [item.message for item in page.items] == [
        {"role": "user", "content": str(n)} for n in (3, 4, 5)
    ]
    assert page.items[0].created_at == BASE + timedelta(microseconds=3)
    assert page.items[0].created_at.tzinfo is UTC
    assert [item.position for item in last.items] == [6]
    assert not last.has_more
    assert last.next_after is None
