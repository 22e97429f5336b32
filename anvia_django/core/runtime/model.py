"""The chat model protocol: the one thing a provider adapter implements."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from anvia_django.core.memory.types import JsonObject, Message


@dataclass(frozen=True, slots=True)
class ToolSpec:
    """What a model is told about one tool: its name, purpose and JSON schema."""

    name: str
    description: str
    parameters: JsonObject


@runtime_checkable
class ChatModel(Protocol):
    """A chat model: given the conversation and the tools, answer one turn.

    ``messages`` start with the agent's instructions as a ``system`` message
    (when it has any), then the session history, then this run's messages.
    The answer is an assistant message ``{"role": "assistant", "content": ...}``,
    optionally with ``tool_calls: [{"id", "name", "arguments": {...}}]``.
    Implementations must not mutate ``messages``: they are the stored history.
    """

    async def complete(self, messages: Sequence[Message], tools: Sequence[ToolSpec]) -> Message: ...
