"""W11: content search over many messages (issue 26).

Fills the messages table with bulk SQL run by the database itself (no rows
cross the wire), then times ``search_messages`` and
``search_conversation_page`` for a rare word, a word in 1% of messages, a
word in every text message, and a rare word with a common one. On
PostgreSQL the time is the server's (``EXPLAIN ANALYZE``'s execution time
of the query the store sent); elsewhere the wall time of the call.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from typing import Any

from django.conf import settings
from django.db import connection
from django.db.backends.base.base import BaseDatabaseWrapper
from django.test.utils import CaptureQueriesContext

from anvia_django.persistence import search_conversation_page, search_messages

from .database import analyze, empty_tables, mysql_connect, pg_conninfo
from .raw import CONV, MSG
from .timing import Row

PER_CONVERSATION = 100
TOPICS = 100
"""Topic words ``topic0`` .. ``topic99``: each is in 1% of the messages."""

# Every fourth message has no text (a tool call), as in a tool-using chat.
_PG_FILL = f"""
INSERT INTO {MSG} (conversation_id, position, run_id, turn, role, message, created_at)
SELECT c.id, g.p, 'run-' || (g.p / 4), 1 + g.p / 4,
       CASE WHEN g.p % 4 = 1 THEN 'assistant' ELSE 'user' END,
       CASE WHEN g.p % 4 = 1
         THEN '{{"role":"assistant","content":null,"tool_calls":[{{"id":"c","name":"lookup"}}]}}'
         ELSE '{{"role":"user","content":"Could you check whether order '
              || (c.id * {PER_CONVERSATION} + g.p) || ' has shipped? topic'
              || ((c.id * {PER_CONVERSATION} + g.p) % {TOPICS}) || ' and the tracking page"}}'
       END,
       now()
FROM {CONV} c CROSS JOIN generate_series(0, {PER_CONVERSATION - 1}) AS g(p)
"""


def fill(messages: int) -> None:
    """``messages`` messages in ``messages / PER_CONVERSATION`` conversations."""
    empty_tables()
    conversations = max(1, messages // PER_CONVERSATION)
    if settings.BACKEND == "postgres":
        import psycopg

        with psycopg.connect(pg_conninfo()) as conn:
            conn.execute(
                f"INSERT INTO {CONV} (ref, session_id, user_id, created_at, updated_at,"
                " message_count) SELECT 'r' || lpad(g::text, 21, '0'), 'search-' || g,"
                " 'user-' || (g %% 100), now(), now() - g * interval '1 second',"
                f" {PER_CONVERSATION} FROM generate_series(1, %s) AS g",
                [conversations],
            )
            conn.execute(_PG_FILL)
    elif settings.BACKEND == "mariadb":
        conn = mysql_connect()
        try:
            cursor = conn.cursor()
            cursor.execute(
                f"INSERT INTO {CONV} (ref, session_id, user_id, created_at, updated_at,"
                " message_count) SELECT CONCAT('r', LPAD(seq, 21, '0')),"
                " CONCAT('search-', seq), CONCAT('user-', seq % 100), NOW(6),"
                f" NOW(6) - INTERVAL seq SECOND, {PER_CONVERSATION}"
                f" FROM seq_1_to_{conversations}"
            )
            cursor.execute(_mysql_fill())
            conn.commit()
        finally:
            conn.close()
    else:
        import sqlite3

        from . import settings as bench_settings

        db = sqlite3.connect(bench_settings.SQLITE_FILE, isolation_level=None, timeout=30)
        try:
            db.execute("BEGIN IMMEDIATE")
            db.execute(
                f"WITH RECURSIVE g(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM g WHERE n < ?)"
                f" INSERT INTO {CONV} (ref, session_id, user_id, created_at, updated_at,"
                " message_count) SELECT printf('r%021d', n), 'search-' || n,"
                " 'user-' || (n % 100), datetime('now'), datetime('now', '-' || n || ' seconds'),"
                f" {PER_CONVERSATION} FROM g",
                [conversations],
            )
            db.execute(_sqlite_fill())
            db.execute("COMMIT")
        finally:
            db.close()
    analyze()


def _text(number: str, concat: Callable[..., str]) -> str:
    return concat(
        '\'{"role":"user","content":"Could you check whether order \'',
        number,
        "' has shipped? topic'",
        f"(({number}) % {TOPICS})",
        "' and the tracking page\"}'",
    )


_TOOL_CALL = '\'{"role":"assistant","content":null,"tool_calls":[{"id":"c","name":"lookup"}]}\''


def _mysql_fill() -> str:
    number = f"c.id * {PER_CONVERSATION} + g.seq"
    text = _text(number, lambda *parts: f"CONCAT({', '.join(parts)})")
    return (
        f"INSERT INTO {MSG} (conversation_id, position, run_id, turn, role, message, created_at)"
        f" SELECT c.id, g.seq, CONCAT('run-', g.seq DIV 4), 1 + g.seq DIV 4,"
        " IF(g.seq % 4 = 1, 'assistant', 'user'),"
        f" IF(g.seq % 4 = 1, {_TOOL_CALL}, {text}), NOW(6)"
        f" FROM {CONV} c CROSS JOIN seq_0_to_{PER_CONVERSATION - 1} g"
    )


def _sqlite_fill() -> str:
    number = f"(c.id * {PER_CONVERSATION} + g.p)"
    text = _text(number, lambda *parts: " || ".join(parts))
    return (
        f"WITH RECURSIVE g(p) AS (SELECT 0 UNION ALL SELECT p + 1 FROM g"
        f" WHERE p < {PER_CONVERSATION - 1})"
        f" INSERT INTO {MSG} (conversation_id, position, run_id, turn, role, message, created_at)"
        f" SELECT c.id, g.p, 'run-' || (g.p / 4), 1 + g.p / 4,"
        " CASE WHEN g.p % 4 = 1 THEN 'assistant' ELSE 'user' END,"
        f" CASE WHEN g.p % 4 = 1 THEN {_TOOL_CALL} ELSE {text} END, datetime('now')"
        f" FROM {CONV} c CROSS JOIN g"
    )


def searches() -> list[tuple[str, Callable[[], object]]]:
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT MIN(id), MAX(id) FROM {CONV}")
        low, high = cursor.fetchone()
    # The order number of one text message (position 2) of a middle conversation.
    rare = str((low + high) // 2 * PER_CONVERSATION + 2)
    return [
        ("a rare word (1 message)", lambda: search_messages(rare, limit=50)),
        ("a word in 1% of messages", lambda: search_messages("topic7", limit=50)),
        ("a word in every text message", lambda: search_messages("shipped", limit=50)),
        ("a rare word and a common one", lambda: search_messages(f"order {rare}", limit=50)),
        ("conversations with a 1% word", lambda: search_conversation_page("topic7", 50)),
    ]


def search_rows(messages: int, repeats: int) -> list[Row]:
    """Fill, then time each search ``repeats`` times; medians."""
    started = time.monotonic()
    fill(messages)
    print(f"   W11 fill of {messages:,} messages: {time.monotonic() - started:.0f} s", flush=True)
    rows = []
    for what, call in searches():
        found = call()  # warm: caches, plans
        hits = len(getattr(found, "items", []))
        times = [_server_time(call) for _ in range(repeats)]
        where = "server time" if settings.BACKEND == "postgres" else "wall time"
        rows.append(
            Row(
                "W11",
                f"search {what} among {messages:,} messages ({where}, {hits} hits)",
                1,
                statistics.median(times),
                None,
                repeats,
            )
        )
    return rows


def _server_time(call: Callable[[], object]) -> float:
    if settings.BACKEND != "postgres":
        started = time.perf_counter()
        call()
        return time.perf_counter() - started
    with CaptureQueriesContext(connection) as captured:
        call()
    return server_seconds(connection, captured.captured_queries)


def server_seconds(connection: BaseDatabaseWrapper, queries: list[dict[str, Any]]) -> float:
    """PostgreSQL's planning and execution time of ``queries`` (Django's
    captured queries), each run again under ``EXPLAIN ANALYZE``."""
    total = 0.0
    with connection.cursor() as cursor:
        for query in queries:
            cursor.execute(f"EXPLAIN (ANALYZE, FORMAT JSON) {query['sql']}")
            plan = cursor.fetchone()[0]
            plan = plan[0] if isinstance(plan, list) else plan
            total += (plan["Planning Time"] + plan["Execution Time"]) / 1000
    return total
