"""Compaction workers for the concurrency tests (threads or spawned processes)."""

from __future__ import annotations

import asyncio

from tests.workers import setup_django, wait_until

SLOW_SUMMARY_SECONDS = 0.5


def compact_once(database_name: str | None, session_id: str, start_at: float) -> int:
    """Compact ``session_id`` with a slow summariser; 1 if this worker's summary was kept.

    The summariser sleeps, so every worker has planned before any writes:
    they all plan the same range, and the write's re-check decides.
    """
    if database_name is not None:
        setup_django(database_name)
    from asgiref.sync import async_to_sync
    from django.db import connection

    from anvia_django.core.memory import MemoryCompactionInput, MemoryContext, Message
    from anvia_django.store import DjangoMemoryStore

    async def slow_summary(previous: str | None, messages: list[Message]) -> str:
        await asyncio.sleep(SLOW_SUMMARY_SECONDS)
        return f"{len(messages)} messages"

    wait_until(start_at)
    try:
        request = MemoryCompactionInput(MemoryContext(session_id), slow_summary, keep_messages=4)
        # async_to_sync: the store's database calls run on this thread, whose
        # connection the finally clause closes.
        covered = async_to_sync(DjangoMemoryStore().compact)(request)
    finally:
        connection.close()
    return 0 if covered is None else 1
