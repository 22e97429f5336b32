"""The hand-written listing and page SQL returns exactly what the ORM would."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from django.db import connection
from django.test import override_settings

from anvia_django.models import Conversation, MemoryMessage
from anvia_django.persistence import (
    ConversationKey,
    find_conversation,
    list_conversation_page,
    list_message_page,
)
from anvia_django.persistence.inspection import _conversation_rows, _conversation_rows_orm

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
def test_listing_pages_match_the_orm(use_tz: bool, user_id: str | None) -> None:
    make_conversations()
    with override_settings(USE_TZ=use_tz):
        alias = connection.alias
        after: ConversationKey | None = None
        seen: list[str] = []
        while True:
            rows = _conversation_rows(alias, 4, user_id, after)
            assert rows == _conversation_rows_orm(alias, 4, user_id, after)
            page = list_conversation_page(4, user_id, after=after)
            assert all(item.updated_at.tzinfo is UTC for item in page.items)
            seen += [item.session_id for item in page.items]
            if page.next_key is None:
                break
            after = page.next_key
    expected = Conversation.objects.order_by("-updated_at", "-id")
    if user_id is not None:
        expected = expected.filter(user_id=user_id)
    assert seen == list(expected.values_list("session_id", flat=True))


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
        page = list_message_page(conversation.pk, after=2, limit=3)
    assert [item.position for item in page.items] == [3, 4, 5]
    assert page.has_more
    assert [item.message for item in page.items] == [
        {"role": "user", "content": str(n)} for n in (3, 4, 5)
    ]
    assert page.items[0].created_at == BASE + timedelta(microseconds=3)
    assert page.items[0].created_at.tzinfo is UTC
