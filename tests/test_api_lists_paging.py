"""Cursor paging with a ``Link`` header on runs/, lineage/ and summaries/:
bodies keep their shape, every row is reached exactly once, and a page
costs the same queries however many rows there are."""

from __future__ import annotations

from typing import Any

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from rest_framework.test import APIClient

from anvia_django.models import Conversation

from .api_client import detail_url, next_url
from .inspector_data import make_conversations
from .inspector_records import make_forks, make_runs, make_summaries

pytestmark = pytest.mark.django_db


@pytest.fixture
def conversation() -> Conversation:
    (made,) = make_conversations(1, prefix="paged")
    return made


def pages(client: APIClient, url: str) -> list[tuple[Any, Any]]:
    """(body, response) of every page, following Link headers."""
    found = []
    current: str | None = url
    while current is not None:
        response = client.get(current)
        assert response.status_code == 200, response.content
        found.append((response.json(), response))
        current = next_url(response)
    return found


@pytest.mark.parametrize("same_start", [False, True])
def test_runs_page_through_every_run_once(
    staff: APIClient, conversation: Conversation, same_start: bool
) -> None:
    made = make_runs(conversation, 23, same_start=same_start)
    bodies = [body for body, _ in pages(staff, f"{detail_url(conversation.ref)}runs/?limit=5")]
    assert len(bodies) == 5
    assert all(set(body) == {"totals", "runs"} for body in bodies)
    assert all(body["totals"]["runCount"] == 23 for body in bodies)
    seen = [run["runId"] for body in bodies for run in body["runs"]]
    assert sorted(seen) == sorted(made)
    assert len(seen) == 23
    one_page = staff.get(f"{detail_url(conversation.ref)}runs/?limit=23")
    assert [run["runId"] for run in one_page.json()["runs"]] == seen  # the same order
    assert "Link" not in one_page.headers


def test_the_runs_cursor_keeps_the_run_filter(staff: APIClient, conversation: Conversation) -> None:
    make_runs(conversation, 3)
    response = staff.get(f"{detail_url(conversation.ref)}runs/", {"runId": "run-1", "limit": "1"})
    assert [run["runId"] for run in response.json()["runs"]] == ["run-1"]
    assert "Link" not in response.headers


@pytest.mark.parametrize("same_time", [False, True])
def test_lineage_pages_through_every_fork_once(
    staff: APIClient, conversation: Conversation, same_time: bool
) -> None:
    made = make_forks(conversation, 12, same_time=same_time)
    bodies = [body for body, _ in pages(staff, f"{detail_url(conversation.ref)}lineage/?limit=5")]
    assert len(bodies) == 3
    assert all(set(body) == {"forkedFrom", "forks"} for body in bodies)
    seen = [fork["sessionId"] for body in bodies for fork in body["forks"]]
    assert sorted(seen) == sorted(made)
    assert len(seen) == 12
    if not same_time:
        assert seen == list(reversed(made))  # newest first


def test_every_lineage_page_names_the_source(staff: APIClient, conversation: Conversation) -> None:
    make_forks(conversation, 3)
    fork = Conversation.objects.get(session_id="paged-0-fork-2")
    make_forks(fork, 3)
    bodies = [body for body, _ in pages(staff, f"{detail_url(fork.ref)}lineage/?limit=1")]
    assert len(bodies) == 3
    assert all(body["forkedFrom"]["ref"] == conversation.ref for body in bodies)


def test_summaries_page_through_every_summary_once(
    staff: APIClient, conversation: Conversation
) -> None:
    covered = make_summaries(conversation, 11)
    bodies = [body for body, _ in pages(staff, f"{detail_url(conversation.ref)}summaries/?limit=4")]
    assert [len(body) for body in bodies] == [4, 4, 3]
    seen = [summary["coversThrough"] for body in bodies for summary in body]
    assert seen == sorted(covered, reverse=True)
    assert set(bodies[0][0]) == {"coversThrough", "createdAt", "message"}


def test_a_full_last_page_has_no_link(staff: APIClient, conversation: Conversation) -> None:
    make_summaries(conversation, 4)
    found = pages(staff, f"{detail_url(conversation.ref)}summaries/?limit=2")
    assert len(found) == 2
    assert "Link" not in found[-1][1].headers


@pytest.mark.parametrize("endpoint", ["runs", "lineage", "summaries"])
@pytest.mark.parametrize("cursor", ["junk", "", "a" * 5000])
def test_a_cursor_not_issued_here_is_400_naming_cursor(
    staff: APIClient, conversation: Conversation, endpoint: str, cursor: str
) -> None:
    response = staff.get(f"{detail_url(conversation.ref)}{endpoint}/", {"cursor": cursor})
    assert response.status_code == 400
    assert set(response.json()) == {"cursor"}


def test_a_cursor_of_one_list_is_refused_by_another(
    staff: APIClient, conversation: Conversation
) -> None:
    make_runs(conversation, 3)
    make_summaries(conversation, 3)
    runs = staff.get(f"{detail_url(conversation.ref)}runs/?limit=1")
    link = next_url(runs)
    assert link is not None
    cursor = link.split("cursor=")[1].split("&")[0]
    for other in ("summaries", "lineage"):
        response = staff.get(f"{detail_url(conversation.ref)}{other}/", {"cursor": cursor})
        assert response.status_code == 400


@pytest.mark.parametrize(
    ("endpoint", "make"),
    [("runs", make_runs), ("lineage", make_forks), ("summaries", make_summaries)],
)
def test_a_page_costs_the_same_queries_whatever_the_rows(
    staff: APIClient, endpoint: str, make: Any
) -> None:
    small, big = make_conversations(2, prefix="cost")
    make(small, 2)
    make(big, 150)
    # Warm the caller's permission cache (runs: whether it may see error messages).
    assert staff.get(f"{detail_url(small.ref)}{endpoint}/").status_code == 200

    def count(conversation: Conversation, page: int) -> int:
        url: str | None = f"{detail_url(conversation.ref)}{endpoint}/?limit=2"
        for _ in range(page - 1):
            assert url is not None
            url = next_url(staff.get(url))
        assert url is not None
        with CaptureQueriesContext(connection) as captured:
            assert staff.get(url).status_code == 200
        return len(captured.captured_queries)

    assert count(small, 1) == count(big, 1) == count(big, 30)
