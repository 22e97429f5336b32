"""An agent: a model, instructions, tools and (optionally) memory."""

from __future__ import annotations

from dataclasses import dataclass

from anvia_django.core.memory.errors import InvalidMemoryInputError, MemoryNotConfiguredError
from anvia_django.core.memory.types import JsonObject, MemoryContext, MemoryRegistration

from .compaction import CompactionPolicy
from .model import ChatModel
from .session import AgentSession
from .tools import Tool


@dataclass(frozen=True, slots=True)
class Agent:
    """Built by :class:`AgentBuilder`; immutable and safe to share."""

    name: str
    model: ChatModel
    instructions: str | None
    tools: tuple[Tool, ...]
    memory: MemoryRegistration | None
    max_turns: int
    compaction: CompactionPolicy | None = None

    def session(
        self, session_id: str, user_id: str | None = None, metadata: JsonObject | None = None
    ) -> AgentSession:
        """The conversation ``session_id``, scoped to ``user_id`` when given."""
        if self.memory is None:
            raise MemoryNotConfiguredError(
                f"Agent {self.name!r} has no memory; call AgentBuilder.memory(store) first."
            )
        # Checked here, before any store call; stores check the rest (length,
        # characters) against their own limits.
        _require_text(session_id, "session_id", optional=False)
        _require_text(user_id, "user_id", optional=True)
        if metadata is not None and not isinstance(metadata, dict):
            raise InvalidMemoryInputError(
                f"must be a JSON object, not {type(metadata).__name__}", path="metadata"
            )
        return AgentSession(self, MemoryContext(session_id, user_id, metadata))


def _require_text(value: object, name: str, *, optional: bool) -> None:
    if value is None and optional:
        return
    if not isinstance(value, str):
        raise InvalidMemoryInputError(f"must be a string, not {type(value).__name__}", path=name)
    if not value.strip():
        raise InvalidMemoryInputError("must not be empty or whitespace", path=name)
