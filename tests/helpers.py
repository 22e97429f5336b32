"""Shared helpers for the store tests."""

from __future__ import annotations

import contextvars
import re
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from asgiref.sync import async_to_sync

from anvia_django.core.memory import MemoryAppendInput, MemoryContext, Message
from anvia_django.models import AgentRun, Conversation, FailedRun, MemoryMessage, MemorySummary
from anvia_django.persistence.dialects.postgresql import APPEND_FUNCTION

T = TypeVar("T")


def writes(sql: str) -> bool:
    """Whether a statement writes: INSERT, UPDATE or DELETE, also inside a
    WITH query, or a call of PostgreSQL's append function."""
    return bool(re.search(r"\b(INSERT|UPDATE|DELETE)\b", sql.upper())) or APPEND_FUNCTION in sql


def run(fn: Callable[..., Awaitable[T]], *args: Any, **kwargs: Any) -> T:
    """Call an async store method from a sync test, on the test's connection.

    In a copy of the context: ``async_to_sync`` brings back a context
    variable per call (see ``pytest_runtest_protocol`` in tests/conftest.py),
    and a test making thousands of calls slowed down call by call."""
    return contextvars.copy_context().run(async_to_sync(fn), *args, **kwargs)


def stored(session_id: str) -> list[tuple[int, str, int, Any]]:
    """The session's messages as (position, run id, turn, message), in order.

    Read as model instances, which open sealed messages (a run with
    ``ANVIA_TEST_ENCRYPTION=1``)."""
    return [
        (row.position, row.run_id, row.turn, row.message)
        for row in MemoryMessage.objects.filter(conversation__session_id=session_id)
        .order_by("position")
        .only("conversation_id", "position", "run_id", "turn", "message")
    ]


def append_input(
    session_id: str,
    messages: list[Message],
    *,
    run_id: str = "run-1",
    turn: int = 1,
    user_id: str | None = None,
    metadata: dict[str, Any] | None = None,
) -> MemoryAppendInput:
    return MemoryAppendInput(
        context=MemoryContext(session_id, user_id=user_id, metadata=metadata),
        run_id=run_id,
        turn=turn,
        messages=messages,
    )


def snapshot(using: str = "default") -> dict[str, list[tuple[Any, ...]]]:
    """Every stored row, for asserting that a failed call changed nothing."""
    return {
        "conversations": list(Conversation.objects.using(using).order_by("pk").values_list()),
        "messages": list(MemoryMessage.objects.using(using).order_by("pk").values_list()),
        "failed_runs": list(FailedRun.objects.using(using).order_by("pk").values_list()),
        "runs": list(AgentRun.objects.using(using).order_by("pk").values_list()),
        "summaries": list(MemorySummary.objects.using(using).order_by("pk").values_list()),
    }


def user(text: str) -> Message:
    return {"role": "user", "content": text}


def assistant(text: str) -> Message:
    return {"role": "assistant", "content": text}
