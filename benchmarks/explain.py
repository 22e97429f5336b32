"""Query plans of the store's own list and load queries, as it sends them."""

from __future__ import annotations

from collections.abc import Callable

from django.conf import settings
from django.db import connection
from django.test.utils import CaptureQueriesContext

from anvia_django.core.memory.types import MemoryContext
from anvia_django.persistence import list_conversation_summaries, load_messages


def store_query_plans(long_session: str, user_id: str) -> list[tuple[str, str, str]]:
    """(what, sql, plan) for every query behind list and load calls."""
    calls: list[tuple[str, Callable[[], object]]] = [
        ("list 50 newest, overall", lambda: list_conversation_summaries(50)),
        ("list 50 newest, one user", lambda: list_conversation_summaries(50, user_id)),
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


def _plan(sql: str) -> str:
    with connection.cursor() as cursor:
        if settings.BACKEND == "postgres":
            cursor.execute(f"EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF, SUMMARY OFF) {sql}")
            return "\n".join(row[0] for row in cursor.fetchall())
        cursor.execute(f"EXPLAIN QUERY PLAN {sql}")
        return "\n".join(str(row[-1]) for row in cursor.fetchall())
