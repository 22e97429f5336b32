"""Opaque listing cursors: a signed keyset position.

Signing keeps cursors opaque and tamper-evident: a client can only hand back
a cursor this server issued, and cannot forge one to probe row ids. Each
list signs with its own salt, so a cursor of one list is refused by another.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Any, TypeVar

from django.core import signing
from rest_framework.exceptions import ValidationError

from anvia_django.persistence import RowKey

# Unchanged since the first release: cursors handed out before stay valid.
_CONVERSATIONS = "anvia_django.api.conversation-cursor"
_RUNS = "anvia_django.api.run-cursor"
_FORKS = "anvia_django.api.fork-cursor"
_SUMMARIES = "anvia_django.api.summary-cursor"
_THREADS = "anvia_django.api.langgraph-thread-cursor"
_CHECKPOINTS = "anvia_django.api.langgraph-checkpoint-cursor"

K = TypeVar("K")


def encode_cursor(key: RowKey) -> str:
    return _sign(_CONVERSATIONS, [key.moment.isoformat(), key.id])


def decode_cursor(token: str) -> RowKey:
    return _decode(_CONVERSATIONS, token, _row_key)


def encode_run_cursor(key: RowKey) -> str:
    return _sign(_RUNS, [key.moment.isoformat(), key.id])


def decode_run_cursor(token: str) -> RowKey:
    return _decode(_RUNS, token, _row_key)


def encode_fork_cursor(key: RowKey) -> str:
    return _sign(_FORKS, [key.moment.isoformat(), key.id])


def decode_fork_cursor(token: str) -> RowKey:
    return _decode(_FORKS, token, _row_key)


def encode_summary_cursor(covers_through: int) -> str:
    return _sign(_SUMMARIES, [covers_through])


def decode_summary_cursor(token: str) -> int:
    return _decode(_SUMMARIES, token, _position)


def encode_thread_cursor(latest_checkpoint_id: str, thread_id: str) -> str:
    """A LangGraph thread list's position: the last thread's newest checkpoint and id."""
    return _sign(_THREADS, [latest_checkpoint_id, thread_id])


def decode_thread_cursor(token: str) -> tuple[str, str]:
    return _decode(_THREADS, token, _two_strings)


def encode_checkpoint_cursor(checkpoint_id: str, checkpoint_ns: str) -> str:
    """A LangGraph thread history's position: the last checkpoint's id and namespace."""
    return _sign(_CHECKPOINTS, [checkpoint_id, checkpoint_ns])


def decode_checkpoint_cursor(token: str) -> tuple[str, str]:
    return _decode(_CHECKPOINTS, token, _two_strings)


def _two_strings(values: Any) -> tuple[str, str]:
    first, second = values
    if not (isinstance(first, str) and isinstance(second, str)):
        raise TypeError("not a pair of strings")
    return first, second


def _row_key(values: Any) -> RowKey:
    moment, row_id = values
    return RowKey(moment=datetime.fromisoformat(moment), id=int(row_id))


def _position(values: Any) -> int:
    (position,) = values
    if isinstance(position, bool) or not isinstance(position, int):
        raise TypeError("not a position")
    return position


def _sign(salt: str, values: list[Any]) -> str:
    return signing.dumps(values, salt=salt, compress=False)


def _decode(salt: str, token: str, build: Callable[[Any], K]) -> K:
    try:
        return build(signing.loads(token, salt=salt))
    except (signing.BadSignature, TypeError, ValueError):
        raise ValidationError(
            {"cursor": ["cursor: not a cursor this server issued; start again without it"]}
        ) from None
