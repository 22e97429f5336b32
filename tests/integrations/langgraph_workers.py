"""A worker running a LangGraph chat graph on DjangoSaver
(``test_langgraph_concurrency``)."""

from __future__ import annotations

import asyncio
from typing import Any

from tests.workers import setup_django, start_together


def chat_turns(
    database_name: str | None, worker: int, thread_id: str, turns: int, gate: Any
) -> int:
    """``turns`` turns of the chat graph on ``thread_id`` ("<worker>:<turn>"
    from the user), started together with the other workers at ``gate``;
    how many turns finished. A turn another run on the thread refused
    (``ConcurrentRunError``) runs again."""
    if database_name is not None:
        setup_django(database_name)
    from django.db import connections

    from anvia_django.integrations.langgraph import ConcurrentRunError, DjangoSaver
    from anvia_django.store import close_db_threads

    from .langgraph_support import chat_graph, thread

    graph = chat_graph(DjangoSaver())

    async def chat() -> int:
        for turn in range(turns):
            message = {"messages": [("user", f"{worker}:{turn}")]}
            while True:
                try:
                    await graph.ainvoke(message, thread(thread_id))
                    break
                except ConcurrentRunError:
                    # Another run on this thread went first: run the turn
                    # again, after its checkpoints.
                    continue
        return turns

    start_together(gate)
    try:
        return asyncio.run(chat())
    finally:
        close_db_threads()
        if database_name is not None:
            connections.close_all()
