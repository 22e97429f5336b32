"""Query plans of the store's own list and load queries, as it sends them."""

from __future__ import annotations

from collections.abc import Callable

from django.conf import settings
from django.db import connection
from django.test.utils import CaptureQueriesContext

from anvia_django.core.memory.types import MemoryContext
from anvia_django.persistence import (
    list_conversation_page,
    list_conversation_summaries,
    list_message_page,
    load_messages,
    resolve_conversation,
)


def store_query_plans(long_session: str, user_id: str) -> list[tuple[str, str, str]]:
    """(what, sql, plan) for every query behind list, page and load calls."""
    middle = list_conversation_page(200).next_key
    long = resolve_conversation(long_session)
    assert long is not None
    found = _conversation_id(long.ref)
    calls: list[tuple[str, Callable[[], object]]] = [
        ("list 50 newest, overall", lambda: list_conversation_summaries(50)),
        ("list 50 newest, one user", lambda: list_conversation_summaries(50, user_id)),
        ("list page 5 (keyset after row 200)", lambda: list_conversation_page(50, after=middle)),
        ("find a conversation by ref (API detail)", lambda: _conversation_id(long.ref)),
        (
            "a page of messages after position 500",
            lambda: list_message_page(found, after=500, limit=100),
        ),
        ("load a session", lambda: load_messages(MemoryContext(long_session))),
    ]
    plans = []
    for what, call in calls:
        with CaptureQueriesContext(connection) as captured:
            call()
        for query in captured.captured_queries:
            sql = query["sql"]
            plans.append((what, sql, _plan(sql)))
    return plans


def _conversation_id(ref: str) -> int:
    from anvia_django.persistence import find_conversation

    found = find_conversation(ref)
    assert found is not None
    return found.id


def _plan(sql: str) -> str:
    with connection.cursor() as cursor:
        if settings.BACKEND == "postgres":
            cursor.execute(f"EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF, SUMMARY OFF) {sql}")
            return "\n".join(row[0] for row in cursor.fetchall())
        if settings.BACKEND == "mariadb":
            cursor.execute(f"EXPLAIN {sql}")
            names = [column[0] for column in cursor.description]
            return "\n".join(
                ", ".join(f"{n}={v}" for n, v in zip(names, row, strict=True) if v is not None)
                for row in cursor.fetchall()
            )
        cursor.execute(f"EXPLAIN QUERY PLAN {sql}")
        return "\n".join(str(row[-1]) for row in cursor.fetchall())
