"""Paging the inspector API: keyset cursors, message pages, constant queries."""

from __future__ import annotations

from datetime import timedelta

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from rest_framework.test import APIClient

from anvia_django.models import Conversation, FailedRun, MemoryMessage
from anvia_django.persistence import append_messages

from .api_client import LIST_URL, detail_url, follow_all, messages_url, next_url
from .helpers import append_input, assistant, user
from .inspector_data import EPOCH, make_conversations, make_messages, message_at

pytestmark = pytest.mark.django_db


def newest_first(conversations: list[Conversation]) -> list[str]:
    ordered = sorted(conversations, key=lambda c: (c.updated_at, c.id), reverse=True)
    return [c.ref for c in ordered]


def test_link_header_pages_through_every_conversation_once(staff: APIClient) -> None:
    conversations = make_conversations(23)
    pages = follow_all(staff, f"{LIST_URL}?limit=5")
    assert [len(page) for page in pages] == [5, 5, 5, 5, 3]
    assert [s["ref"] for page in pages for s in page] == newest_first(conversations)


def test_the_next_link_keeps_the_other_parameters(staff: APIClient) -> None:
    make_conversations(4, user_id="alice", prefix="a")
    make_conversations(4, user_id="bob", prefix="b")
    response = staff.get(LIST_URL, {"limit": "3", "userId": "alice"})
    link = next_url(response)
    assert link is not None
    assert link.startswith("http://testserver/anvia/api/conversations/?")
    assert "limit=3" in link
    assert "userId=alice" in link
    second = staff.get(link).json()
    assert [s["sessionId"] for s in second] == ["a-0"]


def test_a_full_last_page_has_no_next_link(staff: APIClient) -> None:
    make_conversations(6)
    pages = follow_all(staff, f"{LIST_URL}?limit=3")
    assert [len(page) for page in pages] == [3, 3]


def test_rows_appended_between_pages_are_neither_repeated_nor_lost(staff: APIClient) -> None:
    for index in range(20):
        append_messages(append_input(f"s-{index}", [user(f"q{index}")]))
    before = newest_first(list(Conversation.objects.all()))
    seen: list[str] = []
    url: str | None = f"{LIST_URL}?limit=6"
    round_ = 0
    while url is not None:
        response = staff.get(url)
        seen += [s["ref"] for s in response.json()]
        url = next_url(response)
        round_ += 1
        # New sessions arrive, and an already listed one gets a new message:
        # both move to the front, behind the cursor.
        append_messages(append_input(f"new-{round_}", [user("new")]))
        append_messages(append_input(f"s-{19 - round_}", [assistant("more")], turn=2))
    assert len(seen) == len(set(seen))
    assert seen == before
    assert Conversation.objects.count() == 20 + round_


@settings(
    max_examples=25,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    gaps=st.lists(st.sampled_from([0, 0, 1, 1000, 1_000_000]), min_size=0, max_size=30),
    limit=st.integers(min_value=1, max_value=8),
)
def test_any_page_size_yields_the_exact_ordering(
    staff: APIClient, gaps: list[int], limit: int
) -> None:
    # Microsecond steps and exact ties, so the (updated_at, id) keyset must
    # break ties by id and keep microseconds through the cursor.
    Conversation.objects.all().delete()
    moment = EPOCH
    rows = []
    for index, gap in enumerate(gaps):
        moment += timedelta(microseconds=gap)
        rows.append(
            Conversation(
                session_id=f"p-{index}", created_at=moment, updated_at=moment, message_count=0
            )
        )
    Conversation.objects.bulk_create(rows)
    pages = follow_all(staff, f"{LIST_URL}?limit={limit}")
    assert [s["ref"] for page in pages for s in page] == newest_first(
        list(Conversation.objects.all())
    )
    assert all(len(page) == limit for page in pages[:-1])


def test_ten_thousand_conversations_page_in_constant_queries(
    staff: APIClient, django_assert_num_queries
) -> None:
    conversations = make_conversations(10_000, step=timedelta(milliseconds=1))
    refs: list[str] = []
    url: str | None = f"{LIST_URL}?limit=200"
    while url is not None:
        with django_assert_num_queries(1):
            response = staff.get(url)
        refs += [s["ref"] for s in response.json()]
        url = next_url(response)
    assert len(refs) == 10_000
    assert refs == newest_first(conversations)


@pytest.mark.parametrize("count", [5, 500])
def test_list_query_count_does_not_grow(
    staff: APIClient, django_assert_num_queries, count: int
) -> None:
    make_conversations(count)
    with django_assert_num_queries(1):
        response = staff.get(LIST_URL, {"limit": "200"})
    assert len(response.json()) == min(count, 200)


@pytest.mark.parametrize("count", [5, 500])
def test_detail_and_messages_query_counts_do_not_grow(
    staff: APIClient, django_assert_num_queries, count: int
) -> None:
    [conversation] = make_conversations(1)
    make_messages(conversation, count)
    FailedRun.objects.create(
        conversation=conversation, run_id="r", error_type="E", created_at=EPOCH
    )
    with django_assert_num_queries(2):
        detail = staff.get(detail_url(conversation.ref))
    assert len(detail.json()["messages"]) == min(count, 100)
    with django_assert_num_queries(2):
        page = staff.get(messages_url(conversation.ref), {"limit": "500"})
    assert len(page.json()) == count


def test_detail_holds_the_first_page_and_links_to_the_rest(staff: APIClient) -> None:
    [conversation] = make_conversations(1)
    make_messages(conversation, 250)
    response = staff.get(detail_url(conversation.ref))
    body = response.json()
    assert body["messageCount"] == 250
    assert [m["position"] for m in body["messages"]] == list(range(100))
    link = next_url(response)
    assert link == (
        f"http://testserver/anvia/api/conversations/{conversation.ref}/messages/?after=99&limit=100"
    )
    rest = follow_all(staff, link)
    assert [len(page) for page in rest] == [100, 50]
    positions = [m["position"] for page in rest for m in page]
    assert positions == list(range(100, 250))
    assert [m["message"] for m in rest[-1]] == [message_at(p) for p in range(200, 250)]


def test_messages_page_from_after_with_limit(staff: APIClient) -> None:
    [conversation] = make_conversations(1)
    make_messages(conversation, 30)
    pages = follow_all(staff, f"{messages_url(conversation.ref)}?after=9&limit=7")
    assert [len(page) for page in pages] == [7, 7, 6]
    assert [m["position"] for page in pages for m in page] == list(range(10, 30))
    assert staff.get(messages_url(conversation.ref), {"after": "29"}).json() == []
    assert staff.get(messages_url(conversation.ref), {"after": "5000"}).json() == []
    first = staff.get(messages_url(conversation.ref)).json()
    assert [m["position"] for m in first] == list(range(30))


def test_messages_appended_while_paging_are_reached(staff: APIClient) -> None:
    append_messages(append_input("live", [user("a"), assistant("b"), user("c")]))
    conversation = Conversation.objects.get()
    first = staff.get(messages_url(conversation.ref), {"limit": "2"})
    append_messages(append_input("live", [assistant("d")], turn=2))
    pages = follow_all(staff, next_url(first) or "")
    assert [m["message"]["content"] for m in first.json()] == ["a", "b"]
    assert [m["message"]["content"] for page in pages for m in page] == ["c", "d"]
    assert MemoryMessage.objects.count() == 4
