"""The peers a Django team would otherwise pick, each through its own public API.

* OpenAI Agents SDK ``SQLiteSession`` (SQLite) and ``SQLAlchemySession``
  (SQLite through aiosqlite, PostgreSQL through asyncpg), one session object
  per conversation, as the SDK's docs create them.
* LangChain ``SQLChatMessageHistory`` (langchain-community; an async
  SQLAlchemy engine on either backend) and ``langchain-postgres``
  ``PostgresChatMessageHistory`` (one psycopg ``AsyncConnection`` per
  concurrent task: an async connection runs one query at a time).

On SQLite the store runs with a WAL journal and a 30 s busy timeout. The
Agents SDK configures its own connections (WAL; ``SQLAlchemySession`` also
a busy timeout and retries on a locked database). LangChain leaves that to
the application, so its engine gets the store's two settings through
SQLAlchemy's public API (``connect_args`` and a ``connect`` event), as its
user would: with sqlite3's 5 s default, sixteen tasks on a loaded machine
once failed with ``database is locked``.

Every peer keeps its own tables (SQLite: its own file), which the run
empties between repeats. Session objects and LangChain messages are built
before the clock starts: an application holds them already.
"""

from __future__ import annotations

import json
import sqlite3
import uuid
from pathlib import Path
from typing import Any, Protocol

from django.conf import settings

from anvia_django.core.memory.types import Message

from . import settings as bench_settings
from .database import pg_conninfo


class Peer(Protocol):
    name: str

    async def open(self, lanes: int) -> None: ...
    async def close(self) -> None: ...
    async def reset(self) -> None: ...
    async def append(self, session_id: str, lane: int, messages: list[Message]) -> None: ...
    async def load(self, session_id: str) -> list[Message]: ...


def _sqlite_file(name: str) -> Path:
    base = bench_settings.SQLITE_FILE
    return base.with_name(f"{base.stem}-{name}{base.suffix}")


def _remove_sqlite(path: Path) -> None:
    for suffix in ("", "-wal", "-shm"):
        path.with_name(path.name + suffix).unlink(missing_ok=True)


def _sqlite_delete(path: Path, tables: tuple[str, ...]) -> None:
    db = sqlite3.connect(path, isolation_level=None, timeout=30)
    try:
        for table in tables:
            db.execute(f"DELETE FROM {table}")
    finally:
        db.close()


def _pg_truncate(tables: tuple[str, ...]) -> None:
    import psycopg

    with psycopg.connect(pg_conninfo(), autocommit=True) as conn:
        conn.execute(f"TRUNCATE {', '.join(tables)} RESTART IDENTITY CASCADE")
        conn.execute(f"VACUUM ANALYZE {', '.join(tables)}")


def _sqlite_engine(path: Path) -> Any:
    """An aiosqlite engine configured as the store's SQLite database is."""
    from sqlalchemy import event
    from sqlalchemy.ext.asyncio import create_async_engine

    engine = create_async_engine(
        f"sqlite+aiosqlite:///{path}", connect_args={"timeout": bench_settings.SQLITE_TIMEOUT}
    )

    @event.listens_for(engine.sync_engine, "connect")
    def _wal(dbapi_connection: Any, _: Any) -> None:
        cursor = dbapi_connection.cursor()
        try:
            cursor.execute("PRAGMA journal_mode=WAL")
        finally:
            cursor.close()

    return engine


def _pg_url(driver: str) -> str:
    info = bench_settings.PG_CONNINFO
    auth = info["user"] + (f":{info['password']}" if info["password"] else "")
    return f"postgresql+{driver}://{auth}@{info['host']}:{info['port']}/{info['dbname']}"


class AgentsSQLiteSession:
    name = "Agents SQLiteSession"
    tables = ("agent_messages", "agent_sessions")

    def __init__(self) -> None:
        self.path = _sqlite_file("agents")
        self.sessions: dict[str, Any] = {}

    async def open(self, lanes: int) -> None:
        _remove_sqlite(self.path)

    async def close(self) -> None:
        for session in self.sessions.values():
            session.close()
        self.sessions.clear()

    async def reset(self) -> None:
        if self.path.exists():
            _sqlite_delete(self.path, self.tables)

    def _session(self, session_id: str) -> Any:
        from agents import SQLiteSession

        session = self.sessions.get(session_id)
        if session is None:
            session = self.sessions[session_id] = SQLiteSession(session_id, self.path)
        return session

    def prepare(self, session_id: str, lane: int, messages: list[Message]) -> None:
        self._session(session_id)

    async def append(self, session_id: str, lane: int, messages: list[Message]) -> None:
        await self.sessions[session_id].add_items(messages)

    async def load(self, session_id: str) -> list[Message]:
        items: list[Message] = await self._session(session_id).get_items()
        return items


class AgentsSQLAlchemySession:
    name = "Agents SQLAlchemySession"
    tables = ("agent_messages", "agent_sessions")

    def __init__(self) -> None:
        self.path = _sqlite_file("agents-sqlalchemy")
        self.engine: Any = None
        self.sessions: dict[str, Any] = {}

    def _url(self) -> str:
        if settings.BACKEND == "postgres":
            return _pg_url("asyncpg")
        return f"sqlite+aiosqlite:///{self.path}"

    async def open(self, lanes: int) -> None:
        from sqlalchemy.ext.asyncio import create_async_engine

        if settings.BACKEND != "postgres":
            _remove_sqlite(self.path)
        else:
            _pg_drop(self.tables)
        # A pool as wide as the tasks, as an application serving them would size it.
        kwargs = {"pool_size": lanes} if settings.BACKEND == "postgres" else {}
        self.engine = create_async_engine(self._url(), **kwargs)
        # A setup session creates the tables; the timed ones skip that check,
        # as the SDK recommends for production (create_tables=False).
        from agents.extensions.memory import SQLAlchemySession

        setup = SQLAlchemySession("__setup__", engine=self.engine, create_tables=True)
        await setup.get_items()

    async def close(self) -> None:
        self.sessions.clear()
        if self.engine is not None:
            await self.engine.dispose()

    async def reset(self) -> None:
        if settings.BACKEND == "postgres":
            _pg_truncate(self.tables)
        else:
            _sqlite_delete(self.path, self.tables)

    def _session(self, session_id: str) -> Any:
        from agents.extensions.memory import SQLAlchemySession

        session = self.sessions.get(session_id)
        if session is None:
            session = self.sessions[session_id] = SQLAlchemySession(session_id, engine=self.engine)
        return session

    def prepare(self, session_id: str, lane: int, messages: list[Message]) -> None:
        self._session(session_id)

    async def append(self, session_id: str, lane: int, messages: list[Message]) -> None:
        await self.sessions[session_id].add_items(messages)

    async def load(self, session_id: str) -> list[Message]:
        items: list[Message] = await self._session(session_id).get_items()
        return items


def to_langchain(message: Message) -> Any:
    """The LangChain message an application would hold for one of ours."""
    from langchain_core.messages import AIMessage, HumanMessage, ToolMessage

    if message["role"] == "user":
        return HumanMessage(content=message["content"])
    if message["role"] == "tool":
        return ToolMessage(
            content=json.dumps(message["content"]), tool_call_id=message["tool_call_id"]
        )
    calls = [
        {"id": c["id"], "name": c["name"], "args": c["arguments"]}
        for c in message.get("tool_calls", [])
    ]
    return AIMessage(content=message["content"] or "", tool_calls=calls)


def from_langchain(message: Any) -> Message:
    """The inverse of :func:`to_langchain`, for the correctness checks."""
    if message.type == "human":
        return {"role": "user", "content": message.content}
    if message.type == "tool":
        return {
            "role": "tool",
            "tool_call_id": message.tool_call_id,
            "content": json.loads(message.content),
        }
    if message.tool_calls:
        return {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {"id": c["id"], "name": c["name"], "arguments": c["args"]}
                for c in message.tool_calls
            ],
        }
    return {"role": "assistant", "content": message.content}


class _LangChainMessages:
    """LangChain messages built once per message list of the schedule."""

    def __init__(self) -> None:
        self.converted: dict[int, tuple[list[Message], list[Any]]] = {}

    def convert(self, messages: list[Message]) -> list[Any]:
        known = self.converted.get(id(messages))
        if known is None:
            # Keep the list alive with its conversion, so its id is never reused.
            known = self.converted[id(messages)] = (messages, [to_langchain(m) for m in messages])
        return known[1]


class LangChainSQLHistory(_LangChainMessages):
    name = "LangChain SQLChatMessageHistory"
    tables = ("message_store",)

    def __init__(self) -> None:
        super().__init__()
        self.path = _sqlite_file("langchain-sql")
        self.engine: Any = None
        self.histories: dict[str, Any] = {}

    async def open(self, lanes: int) -> None:
        from sqlalchemy.ext.asyncio import create_async_engine

        if settings.BACKEND == "postgres":
            _pg_drop(self.tables)
            self.engine = create_async_engine(_pg_url("asyncpg"), pool_size=lanes)
        else:
            _remove_sqlite(self.path)
            self.engine = _sqlite_engine(self.path)
        from langchain_community.chat_message_histories import SQLChatMessageHistory

        # Its first call creates the table; the timed histories skip that check.
        await SQLChatMessageHistory("__setup__", connection=self.engine).aget_messages()

    async def close(self) -> None:
        self.histories.clear()
        if self.engine is not None:
            await self.engine.dispose()

    async def reset(self) -> None:
        if settings.BACKEND == "postgres":
            _pg_truncate(self.tables)
        else:
            _sqlite_delete(self.path, self.tables)

    def _history(self, session_id: str) -> Any:
        from langchain_community.chat_message_histories import SQLChatMessageHistory

        history = self.histories.get(session_id)
        if history is None:
            history = self.histories[session_id] = SQLChatMessageHistory(
                session_id, connection=self.engine
            )
            history._table_created = True  # created in open(); skips a per-object check
        return history

    def prepare(self, session_id: str, lane: int, messages: list[Message]) -> None:
        self._history(session_id)
        self.convert(messages)

    async def append(self, session_id: str, lane: int, messages: list[Message]) -> None:
        await self.histories[session_id].aadd_messages(self.convert(messages))

    async def load(self, session_id: str) -> list[Message]:
        return [from_langchain(m) for m in await self._history(session_id).aget_messages()]


class LangChainPostgresHistory(_LangChainMessages):
    name = "langchain-postgres"
    table = "lc_pg_message_store"

    def __init__(self) -> None:
        super().__init__()
        self.connections: list[Any] = []
        self.histories: dict[tuple[str, int], Any] = {}

    async def open(self, lanes: int) -> None:
        import psycopg
        from langchain_postgres import PostgresChatMessageHistory

        _pg_drop((self.table,))
        self.connections = [
            await psycopg.AsyncConnection.connect(pg_conninfo()) for _ in range(lanes)
        ]
        await PostgresChatMessageHistory.acreate_tables(self.connections[0], self.table)

    async def close(self) -> None:
        self.histories.clear()
        for conn in self.connections:
            await conn.close()
        self.connections = []

    async def reset(self) -> None:
        # Its reads leave a transaction open (the connections are not in
        # autocommit), whose table lock would block the TRUNCATE.
        for conn in self.connections:
            await conn.rollback()
        _pg_truncate((self.table,))

    def _history(self, session_id: str, lane: int) -> Any:
        from langchain_postgres import PostgresChatMessageHistory

        key = (session_id, lane)
        history = self.histories.get(key)
        if history is None:
            # Its session ids must be UUIDs: derive one from ours.
            history = self.histories[key] = PostgresChatMessageHistory(
                self.table,
                str(uuid.uuid5(uuid.NAMESPACE_URL, session_id)),
                async_connection=self.connections[lane % len(self.connections)],
            )
        return history

    def prepare(self, session_id: str, lane: int, messages: list[Message]) -> None:
        self._history(session_id, lane)
        self.convert(messages)

    async def append(self, session_id: str, lane: int, messages: list[Message]) -> None:
        await self.histories[session_id, lane].aadd_messages(self.convert(messages))

    async def load(self, session_id: str) -> list[Message]:
        return [from_langchain(m) for m in await self._history(session_id, 0).aget_messages()]


def _pg_drop(tables: tuple[str, ...]) -> None:
    import psycopg

    with psycopg.connect(pg_conninfo(), autocommit=True) as conn:
        conn.execute(f"DROP TABLE IF EXISTS {', '.join(tables)} CASCADE")


def available_peers() -> list[Any]:
    """The peers of this backend whose packages are installed (none on MariaDB:
    their MySQL drivers, aiomysql or asyncmy, are not in the bench extra)."""
    if settings.BACKEND == "mariadb":
        return []
    candidates: list[tuple[str, type[Any]]] = [
        ("agents", AgentsSQLAlchemySession),
        ("langchain_community", LangChainSQLHistory),
    ]
    if settings.BACKEND == "postgres":
        candidates.append(("langchain_postgres", LangChainPostgresHistory))
    else:
        candidates.insert(0, ("agents", AgentsSQLiteSession))
    peers = []
    for module, peer in candidates:
        try:
            __import__(module)
        except ImportError:
            continue
        peers.append(peer())
    return peers
