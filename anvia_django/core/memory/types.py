"""The memory contract: value types and protocols shared by every store.

These mirror ``@anvia/core/memory`` (TypeScript) with snake_case names.
Timestamps are timezone-aware UTC ``datetime`` objects.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from datetime import datetime
from typing import Any, Literal, Protocol, runtime_checkable

Message = dict[str, Any]
"""A JSON object with a non-empty string ``"role"`` (OpenAI-like shape)."""

JsonObject = dict[str, Any]
"""A JSON-serialisable mapping with string keys."""

MemorySavePolicy = Literal["message", "turn", "run"]
SAVE_POLICIES: tuple[MemorySavePolicy, ...] = ("message", "turn", "run")


@dataclass(frozen=True, slots=True)
class MemoryContext:
    """Identifies the conversation a store call reads or writes."""

    session_id: str
    user_id: str | None = None
    metadata: JsonObject | None = None


@dataclass(frozen=True, slots=True)
class MemoryAppendInput:
    """Messages the runtime asks a store to persist at one save point."""

    context: MemoryContext
    run_id: str
    turn: int
    messages: list[Message]


@dataclass(frozen=True, slots=True)
class MemoryErrorInput:
    """A failed run: the error and the run's messages up to the failure."""

    context: MemoryContext
    run_id: str
    error: BaseException
    messages: list[Message]


@dataclass(frozen=True, slots=True)
class MemoryConversationListOptions:
    limit: int
    user_id: str | None = None


@dataclass(frozen=True, slots=True)
class MemoryConversationSummary:
    """One conversation as a developer tool lists it.

    ``ref`` is an opaque, store-specific reference; ``session_id`` stays the
    product's own conversation identifier.
    """

    ref: str
    session_id: str
    user_id: str | None
    metadata: JsonObject | None
    created_at: datetime
    updated_at: datetime
    message_count: int
    scope_key: str = field(default="", kw_only=True)
    """What tells it apart from other conversations with its session id
    (``ANVIA_DJANGO["SCOPE"]``); ``""`` for none. Keyword-only, an addition
    to the contract: a :class:`MemoryConversation` built positionally in the
    contract's field order still gets its ``messages``."""


@dataclass(frozen=True, slots=True)
class MemoryConversationMessage:
    position: int
    run_id: str
    turn: int
    created_at: datetime
    message: Message


@dataclass(frozen=True, slots=True)
class MemoryConversation(MemoryConversationSummary):
    """A summary plus its messages in storage position order."""

    messages: list[MemoryConversationMessage] = field(default_factory=list)

    @classmethod
    def from_summary(
        cls, summary: MemoryConversationSummary, messages: list[MemoryConversationMessage]
    ) -> MemoryConversation:
        values = {f.name: getattr(summary, f.name) for f in fields(MemoryConversationSummary)}
        return cls(**values, messages=messages)


@dataclass(frozen=True, slots=True)
class FailedRunRecord:
    """What a store's ``record_error`` kept about one failed run."""

    run_id: str
    error_type: str
    error_message: str
    traceback: str
    messages: list[Message]
    created_at: datetime


@dataclass(frozen=True, slots=True)
class MemoryOptions:
    save_policy: MemorySavePolicy | None = None


@dataclass(frozen=True, slots=True)
class ResolvedMemoryOptions:
    save_policy: MemorySavePolicy


@dataclass(frozen=True, slots=True)
class SessionOptions:
    user_id: str | None = None
    metadata: JsonObject | None = None


@runtime_checkable
class MemoryInspector(Protocol):
    """Read-only discovery for developer tools. Never mutates memory."""

    async def list_conversations(
        self, options: MemoryConversationListOptions
    ) -> list[MemoryConversationSummary]: ...

    async def get_conversation(self, ref: str) -> MemoryConversation | None: ...


@runtime_checkable
class MemoryStore(Protocol):
    """Application-owned persistence for durable agent sessions.

    Two capabilities are optional and looked up at run time, so they are not
    part of this protocol: an ``inspector`` attribute (a
    :class:`MemoryInspector`) and an async ``record_error`` method (see
    :class:`ErrorRecordingMemoryStore`).
    """

    async def load(self, context: MemoryContext) -> list[Message]: ...

    async def append(self, input: MemoryAppendInput) -> None: ...

    async def clear(self, context: MemoryContext) -> None: ...


@runtime_checkable
class ErrorRecordingMemoryStore(MemoryStore, Protocol):
    """A store that also keeps failed runs."""

    async def record_error(self, input: MemoryErrorInput) -> None: ...


@dataclass(frozen=True, slots=True)
class MemoryRegistration:
    """What ``AgentBuilder.memory(...)`` keeps: the store and its resolved options."""

    store: MemoryStore
    options: ResolvedMemoryOptions


def get_inspector(store: object) -> MemoryInspector | None:
    """The store's inspector, or ``None`` when it offers none."""
    inspector = getattr(store, "inspector", None)
    return inspector if isinstance(inspector, MemoryInspector) else None
