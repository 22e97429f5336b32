"""A checkpoint's values as readers see them, in the admin and the API:
loaded through LangGraph's serializer (``reads.with_values``), a list of
messages as a transcript (each message in the stored form the LangChain
integration gives it, as the conversations' messages look), anything else
as a JSON-safe value.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import date, datetime, time
from decimal import Decimal
from enum import Enum
from typing import Any
from uuid import UUID

from langchain_core.messages import BaseMessage
from langgraph.checkpoint.base import CheckpointTuple
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer
from pydantic import BaseModel

from anvia_django.integrations.langchain import message_to_stored
from anvia_django.persistence.databases import read_alias

from .reads import StoredCheckpoint, with_values
from .threads import CheckpointSummary

SERDE = JsonPlusSerializer()
"""The serializer values are loaded with: ``DjangoSaver``'s default."""


def decoded(stored: StoredCheckpoint, *, using: str | None) -> CheckpointTuple:
    """``stored`` with its channel values and pending writes loaded (three queries at most)."""
    return with_values(SERDE, [stored], using=using)[0]


def is_messages(value: Any) -> bool:
    """A non-empty list of LangChain messages (the ``messages`` channel)."""
    return (
        isinstance(value, list) and bool(value) and all(isinstance(v, BaseMessage) for v in value)
    )


def transcript(messages: Sequence[BaseMessage]) -> list[dict[str, Any]]:
    """Messages as the conversation messages endpoint shows them: their
    ``position`` and the stored form as ``message`` (``role``, ``content``
    and the rest under ``langchain``)."""
    return [
        {"position": position, "message": json_safe(message_to_stored(message))}
        for position, message in enumerate(messages)
    ]


def json_safe(value: Any) -> Any:
    """``value`` as JSON can carry it: messages in their stored form,
    Pydantic models and dataclasses as objects, tuples and sets as lists,
    dates in ISO 8601; anything else as its ``repr``."""
    if value is None or isinstance(value, str | bool | int):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else repr(value)
    if isinstance(value, BaseMessage):
        return json_safe(message_to_stored(value))
    if isinstance(value, Mapping):
        return {str(key): json_safe(item) for key, item in value.items()}
    if isinstance(value, list | tuple | set | frozenset):
        return [json_safe(item) for item in value]
    if isinstance(value, datetime | date | time):
        return value.isoformat()
    if isinstance(value, UUID | Decimal):
        return str(value)
    if isinstance(value, Enum):
        return json_safe(value.value)
    if isinstance(value, BaseModel):
        return json_safe(value.model_dump(mode="json"))
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {
            field.name: json_safe(getattr(value, field.name)) for field in dataclasses.fields(value)
        }
    return repr(value)


@dataclass(frozen=True, slots=True)
class ShownWrite:
    task_id: str
    channel: str
    value: Any


@dataclass(frozen=True, slots=True)
class ShownCheckpoint(CheckpointSummary):
    """A checkpoint decoded: the channels holding messages as transcripts,
    every other channel and each pending write's value JSON-safe."""

    channel_values: dict[str, Any]
    transcripts: dict[str, list[dict[str, Any]]]
    pending_writes: list[ShownWrite]


def shown_checkpoint(
    summary: CheckpointSummary, stored: StoredCheckpoint, *, using: str | None = None
) -> ShownCheckpoint:
    """The checkpoint ``threads.checkpoint_row`` found, decoded from the same database."""
    loaded = decoded(stored, using=read_alias(using))
    values: dict[str, Any] = {}
    transcripts: dict[str, list[dict[str, Any]]] = {}
    for channel, value in sorted(loaded.checkpoint["channel_values"].items()):
        if is_messages(value):
            transcripts[channel] = transcript(value)
        else:
            values[channel] = json_safe(value)
    writes = [
        ShownWrite(task_id, channel, json_safe(value))
        for task_id, channel, value in loaded.pending_writes or []
    ]
    known = {field.name: getattr(summary, field.name) for field in dataclasses.fields(summary)}
    return ShownCheckpoint(
        **known, channel_values=values, transcripts=transcripts, pending_writes=writes
    )
