"""Raw-driver baselines: the same schema and guarantees, as fast as the driver allows.

Both keep positions gap-free and each append atomic, like the store:

* PostgreSQL: one statement per append from an autocommit psycopg pool. The
  conversation upsert's row lock serialises writers to one session, and its
  ``RETURNING`` count feeds the message insert in the same statement.
* SQLite: one connection, ``BEGIN IMMEDIATE`` (the database write lock), the
  same upsert with ``RETURNING``, ``executemany`` of the messages, ``COMMIT``.
* MariaDB: MySQLdb (mysqlclient, a blocking driver) in a pool of threads,
  one connection each, called through ``run_in_executor`` as the store runs
  its calls in its own threads. One transaction per append:
  ``INSERT .. ON DUPLICATE KEY UPDATE .. RETURNING`` (MariaDB 10.5+; its
  exclusive row lock serialises writers to one session), a multi-row
  INSERT of the messages (MySQLdb's ``executemany``), ``COMMIT``.

They skip what only the store does (input validation, user scope checks,
idempotent retries, signals): the ratio to them is the price of all of that.
"""

from __future__ import annotations

import asyncio
import functools
import json
import secrets
import sqlite3
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from typing import Any, Protocol

from django.conf import settings

from anvia_django.core.memory.types import Message

from . import settings as bench_settings
from .database import mysql_connect, pg_conninfo

CONV = "anvia_django_conversation"
MSG = "anvia_django_memorymessage"
NEWEST_FIRST = "ORDER BY updated_at DESC, id DESC"
SUMMARY_COLUMNS = "ref, session_id, user_id, metadata, created_at, updated_at, message_count"

_UPSERT = (
    f"INSERT INTO {CONV} (ref, session_id, user_id, metadata, created_at, updated_at,"
    " message_count) VALUES ({p}, {p}, {p}, {p}, {p}, {p}, {p})"
    " ON CONFLICT (session_id, scope_key) DO UPDATE SET updated_at = EXCLUDED.updated_at,"
    f" message_count = {CONV}.message_count + EXCLUDED.message_count,"
    f" metadata = COALESCE(EXCLUDED.metadata, {CONV}.metadata)"
    " RETURNING id, message_count"
)
PG_APPEND = (
    "WITH conv AS (" + _UPSERT.format(p="%s") + ")"
    f" INSERT INTO {MSG} (conversation_id, position, run_id, turn, role, message, created_at)"
    " SELECT conv.id, conv.message_count - %s + m.ord - 1, %s, %s, m.role, m.message, %s"
    " FROM conv, unnest(%s::text[], %s::text[]) WITH ORDINALITY AS m(role, message, ord)"
)
PG_LOAD = (
    f"SELECT m.message FROM {MSG} m JOIN {CONV} c ON c.id = m.conversation_id"
    " WHERE c.session_id = %s ORDER BY m.position"
)
PG_MESSAGE_PAGE = (
    f"SELECT position, run_id, turn, created_at, message FROM {MSG}"
    " WHERE conversation_id = %s ORDER BY position LIMIT %s"
)
SQLITE_UPSERT = _UPSERT.format(p="?")
SQLITE_INSERT = (
    f"INSERT INTO {MSG} (conversation_id, position, run_id, turn, role, message, created_at)"
    " VALUES (?, ?, ?, ?, ?, ?, ?)"
)
SQLITE_LOAD = PG_LOAD.replace("%s", "?")
MARIADB_UPSERT = (
    f"INSERT INTO {CONV} (ref, session_id, user_id, metadata, created_at, updated_at,"
    " message_count) VALUES (%s, %s, %s, %s, %s, %s, %s)"
    " ON DUPLICATE KEY UPDATE updated_at = GREATEST(updated_at, %s),"
    " message_count = message_count + %s, metadata = COALESCE(%s, metadata)"
    " RETURNING id, message_count"
)
MARIADB_INSERT = (
    f"INSERT INTO {MSG} (conversation_id, position, run_id, turn, role, message, created_at)"
    " VALUES (%s, %s, %s, %s, %s, %s, %s)"
)


def encode(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def summary_json(row: tuple[Any, ...]) -> dict[str, Any]:
    """A ``SUMMARY_COLUMNS`` row (JSON decoded, datetimes aware) in the API's shape."""
    ref, session_id, user_id, metadata, created_at, updated_at, message_count = row
    return {
        "ref": ref,
        "sessionId": session_id,
        "userId": user_id,
        "metadata": metadata,
        "createdAt": created_at.astimezone(UTC).isoformat(),
        "updatedAt": updated_at.astimezone(UTC).isoformat(),
        "messageCount": message_count,
    }


def message_json(row: tuple[Any, ...]) -> dict[str, Any]:
    position, run_id, turn, created_at, message = row
    return {
        "position": position,
        "runId": run_id,
        "turn": turn,
        "createdAt": created_at.astimezone(UTC).isoformat(),
        "message": json.loads(message),
    }


def _keyset(user_id: str | None, after: tuple[datetime, int] | None, p: str) -> str:
    conditions = []
    if user_id is not None:
        conditions.append(f"user_id = {p}")
    if after is not None:
        conditions.append(f"(updated_at < {p} OR (updated_at = {p} AND id < {p}))")
    return f"WHERE {' AND '.join(conditions)} " if conditions else ""


def _keyset_params(
    user_id: str | None, after: tuple[datetime, int] | None, moment: Any, limit: int
) -> tuple[Any, ...]:
    params: tuple[Any, ...] = (user_id,) if user_id is not None else ()
    if after is not None:
        params += (moment, moment, after[1])
    return (*params, limit + 1)


def _page_body(rows: list[tuple[Any, ...]], limit: int) -> str:
    # The id column only tells whether a next page exists (the Link header).
    return json.dumps([summary_json(row[1:]) for row in rows[:limit]], separators=(",", ":"))


def _detail_body(summary: tuple[Any, ...], messages: list[tuple[Any, ...]], limit: int) -> str:
    body = summary_json(summary)
    body["messages"] = [message_json(row) for row in messages[:limit]]
    return json.dumps(body, separators=(",", ":"))


class Baseline(Protocol):
    name: str

    async def open(self, pool_size: int) -> None: ...
    async def close(self) -> None: ...
    async def append(
        self, session_id: str, user_id: str | None, run_id: str, turn: int, messages: list[Message]
    ) -> None: ...
    async def load(self, session_id: str) -> list[Message]: ...
    async def list(self, limit: int, user_id: str | None) -> list[tuple[Any, ...]]: ...
    async def list_page(
        self, limit: int, user_id: str | None, after: tuple[datetime, int] | None = None
    ) -> str: ...
    async def detail(self, ref: str, limit: int) -> str: ...


class PostgresBaseline:
    name = "psycopg 3 pool"

    def __init__(self) -> None:
        from psycopg_pool import AsyncConnectionPool

        self.pool = AsyncConnectionPool(
            pg_conninfo(), min_size=1, max_size=16, kwargs={"autocommit": True}, open=False
        )

    async def open(self, pool_size: int) -> None:
        await self.pool.open()
        await self.pool.resize(min_size=pool_size, max_size=max(pool_size, 16))
        await self.pool.wait()

    async def close(self) -> None:
        await self.pool.close()

    async def append(
        self, session_id: str, user_id: str | None, run_id: str, turn: int, messages: list[Message]
    ) -> None:
        now = datetime.now(UTC)
        params = (
            *(secrets.token_urlsafe(16), session_id, user_id, None, now, now, len(messages)),
            *(len(messages), run_id, turn, now),
            [m["role"] for m in messages],
            [encode(m) for m in messages],
        )
        async with self.pool.connection() as conn:
            await conn.execute(PG_APPEND, params)

    async def load(self, session_id: str) -> list[Message]:
        async with self.pool.connection() as conn:
            cursor = await conn.execute(PG_LOAD, (session_id,))
            return [json.loads(row[0]) for row in await cursor.fetchall()]

    async def list(self, limit: int, user_id: str | None) -> list[tuple[Any, ...]]:
        where = "WHERE user_id = %s " if user_id is not None else ""
        params: tuple[Any, ...] = (user_id, limit) if user_id is not None else (limit,)
        sql = f"SELECT {SUMMARY_COLUMNS} FROM {CONV} {where}{NEWEST_FIRST} LIMIT %s"
        async with self.pool.connection() as conn:
            cursor = await conn.execute(sql, params)
            rows = await cursor.fetchall()
        # The JSON columns are text (the app's ExactJSONField): decode them.
        return [(*row[:3], json.loads(row[3]) if row[3] else None, *row[4:]) for row in rows]

    async def list_page(
        self, limit: int, user_id: str | None, after: tuple[datetime, int] | None = None
    ) -> str:
        sql = (
            f"SELECT id, {SUMMARY_COLUMNS} FROM {CONV} {_keyset(user_id, after, '%s')}"
            f"{NEWEST_FIRST} LIMIT %s"
        )
        params = _keyset_params(user_id, after, after[0] if after else None, limit)
        async with self.pool.connection() as conn:
            cursor = await conn.execute(sql, params)
            rows = await cursor.fetchall()
        decoded = [(*row[:4], json.loads(row[4]) if row[4] else None, *row[5:]) for row in rows]
        return _page_body(decoded, limit)

    async def detail(self, ref: str, limit: int) -> str:
        async with self.pool.connection() as conn:
            cursor = await conn.execute(
                f"SELECT id, {SUMMARY_COLUMNS} FROM {CONV} WHERE ref = %s", (ref,)
            )
            row = await cursor.fetchone()
            assert row is not None
            cursor = await conn.execute(PG_MESSAGE_PAGE, (row[0], limit + 1))
            messages = await cursor.fetchall()
        summary = (*row[1:4], json.loads(row[4]) if row[4] else None, *row[5:])
        return _detail_body(summary, messages, limit)


class SqliteBaseline:
    """Plain ``sqlite3`` called straight from the event loop: no thread hop."""

    name = "sqlite3"

    def __init__(self) -> None:
        self.conn: sqlite3.Connection | None = None

    async def open(self, pool_size: int) -> None:
        self.conn = sqlite3.connect(bench_settings.SQLITE_FILE, isolation_level=None, timeout=30)
        self.conn.execute(bench_settings.SQLITE_INIT)

    async def close(self) -> None:
        if self.conn is not None:
            self.conn.close()
            self.conn = None

    def _db(self) -> sqlite3.Connection:
        assert self.conn is not None, "open() first"
        return self.conn

    async def append(
        self, session_id: str, user_id: str | None, run_id: str, turn: int, messages: list[Message]
    ) -> None:
        conn = self._db()
        now = str(datetime.now(UTC).replace(tzinfo=None))
        count = len(messages)
        conn.execute("BEGIN IMMEDIATE")
        try:
            conversation_id, total = conn.execute(
                SQLITE_UPSERT,
                (secrets.token_urlsafe(16), session_id, user_id, None, now, now, count),
            ).fetchone()
            first = total - count
            conn.executemany(
                SQLITE_INSERT,
                [
                    (conversation_id, first + i, run_id, turn, m["role"], encode(m), now)
                    for i, m in enumerate(messages)
                ],
            )
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        conn.execute("COMMIT")

    async def load(self, session_id: str) -> list[Message]:
        rows = self._db().execute(SQLITE_LOAD, (session_id,)).fetchall()
        return [json.loads(row[0]) for row in rows]

    async def list(self, limit: int, user_id: str | None) -> list[tuple[Any, ...]]:
        where = "WHERE user_id = ? " if user_id is not None else ""
        params: tuple[Any, ...] = (user_id, limit) if user_id is not None else (limit,)
        sql = (
            f"SELECT {SUMMARY_COLUMNS} FROM {CONV} {where}ORDER BY updated_at DESC, id DESC LIMIT ?"
        )
        rows = self._db().execute(sql, params).fetchall()
        # sqlite3 returns text: decode JSON and timestamps, as psycopg does in C,
        # so both baselines hand back the same values the store does.
        return [
            (
                *row[:3],
                json.loads(row[3]) if row[3] else None,
                datetime.fromisoformat(row[4]).replace(tzinfo=UTC),
                datetime.fromisoformat(row[5]).replace(tzinfo=UTC),
                row[6],
            )
            for row in rows
        ]

    async def list_page(
        self, limit: int, user_id: str | None, after: tuple[datetime, int] | None = None
    ) -> str:
        sql = (
            f"SELECT id, {SUMMARY_COLUMNS} FROM {CONV} {_keyset(user_id, after, '?')}"
            f"{NEWEST_FIRST} LIMIT ?"
        )
        moment = str(after[0].astimezone(UTC).replace(tzinfo=None)) if after else None
        rows = self._db().execute(sql, _keyset_params(user_id, after, moment, limit)).fetchall()
        return _page_body([(row[0], *_sqlite_summary(row[1:])) for row in rows], limit)

    async def detail(self, ref: str, limit: int) -> str:
        conn = self._db()
        row = conn.execute(f"SELECT id, {SUMMARY_COLUMNS} FROM {CONV} WHERE ref = ?", (ref,))
        found = row.fetchone()
        assert found is not None
        messages = conn.execute(PG_MESSAGE_PAGE.replace("%s", "?"), (found[0], limit + 1))
        decoded = [
            (*m[:3], datetime.fromisoformat(m[3]).replace(tzinfo=UTC), m[4])
            for m in messages.fetchall()
        ]
        return _detail_body(_sqlite_summary(found[1:]), decoded, limit)


def _sqlite_summary(row: tuple[Any, ...]) -> tuple[Any, ...]:
    return (
        *row[:3],
        json.loads(row[3]) if row[3] else None,
        datetime.fromisoformat(row[4]).replace(tzinfo=UTC),
        datetime.fromisoformat(row[5]).replace(tzinfo=UTC),
        row[6],
    )


def _aware(value: datetime) -> datetime:
    # Django stores UTC in naive DATETIME(6) columns on MySQL/MariaDB.
    return value.replace(tzinfo=UTC)


def _text(value: str | bytes) -> str:
    return value.decode() if isinstance(value, bytes) else value


def _mariadb_summary(row: tuple[Any, ...]) -> tuple[Any, ...]:
    return (
        *row[:3],
        json.loads(row[3]) if row[3] else None,
        _aware(row[4]),
        _aware(row[5]),
        row[6],
    )


class MariaDBBaseline:
    """MySQLdb in a thread pool: one connection per thread, as the store has."""

    name = "MySQLdb (mysqlclient) in a thread pool"

    def __init__(self) -> None:
        self.executor: ThreadPoolExecutor | None = None
        self.local = threading.local()
        self.connections: list[Any] = []
        self.lock = threading.Lock()

    async def open(self, pool_size: int) -> None:
        self.executor = ThreadPoolExecutor(pool_size, thread_name_prefix="raw-mariadb")

    async def close(self) -> None:
        if self.executor is not None:
            self.executor.shutdown(wait=True)
            self.executor = None
        for conn in self.connections:
            conn.close()
        self.connections.clear()

    def _db(self) -> Any:
        conn = getattr(self.local, "conn", None)
        if conn is None:
            conn = mysql_connect()
            self.local.conn = conn
            with self.lock:
                self.connections.append(conn)
        return conn

    async def _call(self, work: Callable[..., Any], *args: Any) -> Any:
        assert self.executor is not None, "open() first"
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self.executor, functools.partial(work, *args))

    def _query(self, sql: str, params: tuple[Any, ...]) -> list[tuple[Any, ...]]:
        conn = self._db()
        cursor = conn.cursor()
        try:
            cursor.execute(sql, params)
            return list(cursor.fetchall())
        finally:
            cursor.close()
            conn.commit()  # end the read's snapshot, as Django's autocommit does

    def _append(
        self, session_id: str, user_id: str | None, run_id: str, turn: int, messages: list[Message]
    ) -> None:
        conn = self._db()
        now = datetime.now(UTC).replace(tzinfo=None)
        count = len(messages)
        inserted = (secrets.token_urlsafe(16), session_id, user_id, None, now, now, count)
        updated = (now, count, None)
        cursor = conn.cursor()
        try:
            cursor.execute(MARIADB_UPSERT, (*inserted, *updated))
            conversation_id, total = cursor.fetchone()
            first = total - count
            cursor.executemany(
                MARIADB_INSERT,
                [
                    (conversation_id, first + i, run_id, turn, m["role"], encode(m), now)
                    for i, m in enumerate(messages)
                ],
            )
        except BaseException:
            conn.rollback()
            raise
        finally:
            cursor.close()
        conn.commit()

    async def append(
        self, session_id: str, user_id: str | None, run_id: str, turn: int, messages: list[Message]
    ) -> None:
        await self._call(self._append, session_id, user_id, run_id, turn, messages)

    def _load(self, session_id: str) -> list[Message]:
        return [json.loads(_text(row[0])) for row in self._query(PG_LOAD, (session_id,))]

    async def load(self, session_id: str) -> list[Message]:
        result: list[Message] = await self._call(self._load, session_id)
        return result

    def _list(self, limit: int, user_id: str | None) -> list[tuple[Any, ...]]:
        where = "WHERE user_id = %s " if user_id is not None else ""
        params: tuple[Any, ...] = (user_id, limit) if user_id is not None else (limit,)
        sql = f"SELECT {SUMMARY_COLUMNS} FROM {CONV} {where}{NEWEST_FIRST} LIMIT %s"
        return [_mariadb_summary(row) for row in self._query(sql, params)]

    async def list(self, limit: int, user_id: str | None) -> list[tuple[Any, ...]]:
        result: list[tuple[Any, ...]] = await self._call(self._list, limit, user_id)
        return result

    def _list_page(
        self, limit: int, user_id: str | None, after: tuple[datetime, int] | None
    ) -> str:
        sql = (
            f"SELECT id, {SUMMARY_COLUMNS} FROM {CONV} {_keyset(user_id, after, '%s')}"
            f"{NEWEST_FIRST} LIMIT %s"
        )
        moment = after[0].astimezone(UTC).replace(tzinfo=None) if after else None
        rows = self._query(sql, _keyset_params(user_id, after, moment, limit))
        return _page_body([(row[0], *_mariadb_summary(row[1:])) for row in rows], limit)

    async def list_page(
        self, limit: int, user_id: str | None, after: tuple[datetime, int] | None = None
    ) -> str:
        result: str = await self._call(self._list_page, limit, user_id, after)
        return result

    def _detail(self, ref: str, limit: int) -> str:
        conn = self._db()
        cursor = conn.cursor()
        try:
            cursor.execute(f"SELECT id, {SUMMARY_COLUMNS} FROM {CONV} WHERE ref = %s", (ref,))
            found = cursor.fetchone()
            assert found is not None
            cursor.execute(PG_MESSAGE_PAGE, (found[0], limit + 1))
            messages = [(*m[:3], _aware(m[3]), _text(m[4])) for m in cursor.fetchall()]
        finally:
            cursor.close()
            conn.commit()
        return _detail_body(_mariadb_summary(found[1:]), messages, limit)

    async def detail(self, ref: str, limit: int) -> str:
        result: str = await self._call(self._detail, ref, limit)
        return result


def make_baseline() -> Baseline:
    if settings.BACKEND == "postgres":
        return PostgresBaseline()
    if settings.BACKEND == "mariadb":
        return MariaDBBaseline()
    return SqliteBaseline()
