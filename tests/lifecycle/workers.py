"""Compaction workers for the concurrency tests (threads or worker processes)."""

from __future__ import annotations

import asyncio
from typing import Any

from tests.workers import setup_django, start_together

SUMMARIES_TIMEOUT = 60.0
"""Seconds a summariser waits for the other workers' summarisers."""


def compact_once(database_name: str | None, session_id: str, gate: Any) -> int:
    """Compact ``session_id``; 1 if this worker's summary was kept.

    The summariser waits at ``gate`` (a barrier of every worker) until all
    workers are summarising, so every worker has planned before any
    writes: they all plan the same range, and the write's re-check decides.
    A compaction that kept the others from planning meanwhile breaks the
    barrier and fails every worker.
    """
    if database_name is not None:
        setup_django(database_name)
    from asgiref.sync import async_to_sync
    from django.db import connection

    from anvia_django.core.memory import MemoryCompactionInput, MemoryContext, Message
    from anvia_django.store import DjangoMemoryStore

    async def slow_summary(previous: str | None, messages: list[Message]) -> str:
        await asyncio.to_thread(gate.wait, SUMMARIES_TIMEOUT)
        return f"{len(messages)} messages"

    start_together(gate)
    try:
        request = MemoryCompactionInput(MemoryContext(session_id), slow_summary, keep_messages=4)
        # async_to_sync: the store's database calls run on this thread, whose
        # connection the finally clause closes.
        covered = async_to_sync(DjangoMemoryStore().compact)(request)
    finally:
        connection.close()
    return 0 if covered is None else 1
