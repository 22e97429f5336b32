"""The OpenAI Agents SDK's sessions, plain and wrapped in its ``EncryptedSession``,
for :mod:`benchmarks.encryption_cost`: the same workload through its public API.

On SQLite its ``SQLiteSession`` (its own file, its own connections); on
PostgreSQL its ``SQLAlchemySession`` over asyncpg, as :mod:`benchmarks.peers`
runs it. ``EncryptedSession`` derives a Fernet key per session (HKDF of the
master key) when it is built, and stores each item as a Fernet token inside
a JSON envelope. Session objects are built before the clock starts, as in
:mod:`benchmarks.peers`: an application holds them already.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import Any

from django.conf import settings

from .peers import _pg_drop, _pg_url, _remove_sqlite, _sqlite_file

TABLES = ("agent_messages", "agent_sessions")
TTL = 24 * 3600
"""Longer than any run: no item may expire while it is measured."""


class AgentsSessions:
    """Session objects by ``(mode, session id)``; ``mode`` is ``"off"`` or ``"on"``."""

    def __init__(self, key: str) -> None:
        self.key = key
        self.loop = asyncio.new_event_loop()
        self.path = _sqlite_file("agents-encryption")
        self.engine: Any = None
        self.sessions: dict[tuple[str, str], Any] = {}

    @property
    def name(self) -> str:
        plain = "SQLAlchemySession" if settings.BACKEND == "postgres" else "SQLiteSession"
        return f"Agents SDK {plain}"

    def open(self) -> None:
        if settings.BACKEND == "postgres":
            from agents.extensions.memory import SQLAlchemySession
            from sqlalchemy.ext.asyncio import create_async_engine

            _pg_drop(TABLES)
            self.engine = create_async_engine(_pg_url("asyncpg"), pool_size=1)
            setup = SQLAlchemySession("__setup__", engine=self.engine, create_tables=True)
            self.run(setup.get_items())
        else:
            _remove_sqlite(self.path)

    def close(self) -> None:
        for session in self.sessions.values():
            close = getattr(session, "close", None)
            if close is not None and settings.BACKEND != "postgres":
                close()
        self.sessions.clear()
        if self.engine is not None:
            self.run(self.engine.dispose())
        self.loop.close()

    def run(self, awaitable: Awaitable[Any]) -> Any:
        return self.loop.run_until_complete(awaitable)

    def session(self, mode: str, session_id: str) -> Any:
        found = self.sessions.get((mode, session_id))
        if found is None:
            found = self.sessions[(mode, session_id)] = self._build(mode, session_id)
        return found

    def _build(self, mode: str, session_id: str) -> Any:
        sid = f"{mode}-{session_id}"
        if settings.BACKEND == "postgres":
            from agents.extensions.memory import SQLAlchemySession

            plain: Any = SQLAlchemySession(sid, engine=self.engine)
        else:
            from agents import SQLiteSession

            plain = SQLiteSession(sid, self.path)
        if mode == "off":
            return plain
        from agents.extensions.memory import EncryptedSession

        return EncryptedSession(sid, underlying_session=plain, encryption_key=self.key, ttl=TTL)

    def timed(self, calls: int, call: Callable[[int], Awaitable[None]]) -> float:
        """Mean µs per call of ``calls`` calls, run in this loop."""

        async def run_all() -> float:
            started = time.perf_counter()
            for i in range(calls):
                await call(i)
            return (time.perf_counter() - started) / calls * 1e6

        result: float = self.run(run_all())
        return result
