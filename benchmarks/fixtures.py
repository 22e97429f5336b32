"""Test data: message shapes and bulk-loaded conversations (untimed)."""

from __future__ import annotations

import secrets
import sqlite3
from datetime import UTC, datetime, timedelta

from django.conf import settings

from anvia_django.core.memory.types import Message

from . import settings as bench_settings
from .database import analyze, mysql_connect, pg_conninfo
from .raw import CONV, MSG, encode

USERS = 100
"""Bulk conversations belong to ``user-0`` .. ``user-99``."""

_TEXT = (
    "Could you check whether order {i} has shipped, and if not, when it will? "
    "I ordered it last week and the tracking page still says 'processing'."
)


def chat_message(i: int) -> Message:
    """A realistic single message: roles alternate, about 150 bytes of text."""
    if i % 4 == 1:
        return {
            "role": "assistant",
            "content": None,
            "tool_calls": [{"id": f"call_{i}", "name": "lookup_order", "arguments": {"id": i}}],
        }
    if i % 4 == 2:
        return {
            "role": "tool",
            "tool_call_id": f"call_{i - 1}",
            "content": {"order": {"id": i, "status": "shipped", "items": [{"sku": "A-1"}]}},
        }
    role = "user" if i % 4 == 0 else "assistant"
    return {"role": role, "content": _TEXT.format(i=i)}


def turn_batch(k: int) -> list[Message]:
    """The four messages of one tool-using turn."""
    return [chat_message(4 * k + j) for j in range(4)]


def bulk_conversations(start: int, stop: int, messages_each: int = 0) -> None:
    """Insert conversations ``bulk-<start>`` .. ``bulk-<stop - 1>`` directly.

    ``updated_at`` is shuffled (a multiplicative permutation of the numbers),
    so the newest rows are not simply the last inserted.
    """
    base = datetime(2025, 1, 1, tzinfo=UTC)
    span = 1_000_003  # prime: i * 7919 mod span visits every slot once

    def stamp(i: int) -> datetime:
        return base + timedelta(seconds=(i * 7919) % span)

    rows = [
        (
            f"r{i:021d}",
            f"bulk-{i}",
            f"user-{i % USERS}",
            None,
            base,
            stamp(i),
            messages_each,
        )
        for i in range(start, stop)
    ]
    columns = "ref, session_id, user_id, metadata, created_at, updated_at, message_count"
    if settings.BACKEND == "postgres":
        import psycopg

        copy_sql = f"COPY {CONV} ({columns}) FROM STDIN"
        with (
            psycopg.connect(pg_conninfo()) as conn,
            conn.cursor() as cursor,
            cursor.copy(copy_sql) as copy,
        ):
            for row in rows:
                copy.write_row(row)
        analyze()
        return
    if settings.BACKEND == "mariadb":
        _mysql_insert(
            f"INSERT INTO {CONV} ({columns}) VALUES (%s, %s, %s, %s, %s, %s, %s)",
            [(*r[:4], r[4].replace(tzinfo=None), r[5].replace(tzinfo=None), r[6]) for r in rows],
        )
        analyze()
        return
    db = sqlite3.connect(bench_settings.SQLITE_FILE, isolation_level=None, timeout=30)
    try:
        db.execute("BEGIN IMMEDIATE")
        db.executemany(
            f"INSERT INTO {CONV} ({columns}) VALUES (?, ?, ?, ?, ?, ?, ?)",
            [
                (*r[:4], str(r[4].replace(tzinfo=None)), str(r[5].replace(tzinfo=None)), r[6])
                for r in rows
            ],
        )
        db.execute("COMMIT")
    finally:
        db.close()
    analyze()


def bulk_messages(session_id: str, count: int) -> None:
    """Give one (bulk or new) conversation ``count`` messages, directly."""
    now = datetime.now(UTC)
    messages = [chat_message(i) for i in range(count)]
    if settings.BACKEND == "postgres":
        import psycopg

        with psycopg.connect(pg_conninfo()) as conn:
            conversation_id = _pg_conversation(conn, session_id, count, now)
            with (
                conn.cursor() as cursor,
                cursor.copy(
                    f"COPY {MSG} (conversation_id, position, run_id, turn, role, message,"
                    " created_at) FROM STDIN"
                ) as copy,
            ):
                for i, m in enumerate(messages):
                    copy.write_row(
                        (
                            conversation_id,
                            i,
                            f"run-{i // 4}",
                            i % 4 // 2 + 1,
                            m["role"],
                            encode(m),
                            now,
                        )
                    )
        analyze()
        return
    if settings.BACKEND == "mariadb":
        _mariadb_messages(session_id, messages, now.replace(tzinfo=None))
        analyze()
        return
    stamp = str(now.replace(tzinfo=None))
    db = sqlite3.connect(bench_settings.SQLITE_FILE, isolation_level=None, timeout=30)
    try:
        db.execute("BEGIN IMMEDIATE")
        conversation_id = db.execute(
            f"INSERT INTO {CONV} (ref, session_id, user_id, metadata, created_at, updated_at,"
            " message_count) VALUES (?, ?, NULL, NULL, ?, ?, ?)"
            " ON CONFLICT (session_id, scope_key)"
            " DO UPDATE SET message_count = EXCLUDED.message_count RETURNING id",
            (secrets.token_urlsafe(16), session_id, stamp, stamp, count),
        ).fetchone()[0]
        db.executemany(
            f"INSERT INTO {MSG} (conversation_id, position, run_id, turn, role, message,"
            " created_at) VALUES (?, ?, ?, ?, ?, ?, ?)",
            [
                (conversation_id, i, f"run-{i // 4}", i % 4 // 2 + 1, m["role"], encode(m), stamp)
                for i, m in enumerate(messages)
            ],
        )
        db.execute("COMMIT")
    finally:
        db.close()
    analyze()


def _pg_conversation(conn: object, session_id: str, count: int, now: datetime) -> int:
    row = conn.execute(  # type: ignore[attr-defined]
        f"INSERT INTO {CONV} (ref, session_id, user_id, metadata, created_at, updated_at,"
        " message_count) VALUES (%s, %s, NULL, NULL, %s, %s, %s)"
        " ON CONFLICT (session_id, scope_key)"
        " DO UPDATE SET message_count = EXCLUDED.message_count RETURNING id",
        (secrets.token_urlsafe(16), session_id, now, now, count),
    ).fetchone()
    return int(row[0])


def _mysql_insert(sql: str, rows: list[tuple[object, ...]], batch: int = 5_000) -> None:
    """Insert in one transaction; MySQLdb's executemany makes multi-row INSERTs."""
    conn = mysql_connect()
    try:
        cursor = conn.cursor()
        for start in range(0, len(rows), batch):
            cursor.executemany(sql, rows[start : start + batch])
        conn.commit()
    finally:
        conn.close()


def _mariadb_messages(session_id: str, messages: list[Message], now: datetime) -> None:
    conn = mysql_connect()
    try:
        cursor = conn.cursor()
        cursor.execute(
            f"INSERT INTO {CONV} (ref, session_id, user_id, metadata, created_at, updated_at,"
            " message_count) VALUES (%s, %s, NULL, NULL, %s, %s, %s)"
            " ON DUPLICATE KEY UPDATE message_count = %s RETURNING id",
            (secrets.token_urlsafe(16), session_id, now, now, len(messages), len(messages)),
        )
        conversation_id = cursor.fetchone()[0]
        rows = [
            (conversation_id, i, f"run-{i // 4}", i % 4 // 2 + 1, m["role"], encode(m), now)
            for i, m in enumerate(messages)
        ]
        for start in range(0, len(rows), 5_000):
            cursor.executemany(
                f"INSERT INTO {MSG} (conversation_id, position, run_id, turn, role, message,"
                " created_at) VALUES (%s, %s, %s, %s, %s, %s, %s)",
                rows[start : start + 5_000],
            )
        conn.commit()
    finally:
        conn.close()
