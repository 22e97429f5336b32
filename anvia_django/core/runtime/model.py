"""The chat model protocol: the one thing a provider adapter implements."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from anvia_django.core.memory.run_records import TokenUsage
from anvia_django.core.memory.types import JsonObject, Message

from .errors import InvalidModelOutputError


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


@dataclass(frozen=True, slots=True)
class ModelReply:
    """An answer together with what the provider reported about it."""

    message: Message
    usage: TokenUsage | None = None
    model: str | None = None
    """The model that answered, as the provider names it."""


@runtime_checkable
class UsageReportingChatModel(ChatModel, Protocol):
    """A chat model that can also report token usage.

    Optional: the runtime calls ``complete_with_usage`` when a model has it
    and ``complete`` otherwise, so models without it keep working (their
    runs are recorded without usage).
    """

    async def complete_with_usage(
        self, messages: Sequence[Message], tools: Sequence[ToolSpec]
    ) -> ModelReply: ...


async def ask_model(
    model: ChatModel, messages: Sequence[Message], tools: Sequence[ToolSpec]
) -> ModelReply:
    """One model call, with usage when the model reports it."""
    with_usage = getattr(model, "complete_with_usage", None)
    if callable(with_usage):
        reply = await with_usage(messages, tools)
        if not isinstance(reply, ModelReply):
            raise InvalidModelOutputError(
                f"complete_with_usage returned {type(reply).__name__}, not a ModelReply."
            )
        return reply
    return ModelReply(await model.complete(messages, tools))


def model_name(model: ChatModel) -> str | None:
    """A model's name for run records: its ``model_name``, else a string ``model``."""
    for attribute in ("model_name", "model"):
        value = getattr(model, attribute, None)
        if isinstance(value, str) and value.strip():
            return value
    return None
