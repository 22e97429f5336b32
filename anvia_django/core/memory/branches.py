"""Rewind and fork: the optional store capabilities behind "edit and regenerate".

``rewind`` removes a conversation's messages from a position onwards;
``fork`` starts a new conversation from the first N messages of another and
remembers where it came from. A store offers either by having the method;
the runtime raises :class:`MemoryCapabilityError` for a store without it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from .errors import InvalidMemoryInputError
from .types import MemoryContext, MemoryConversationSummary, MemoryStore
from .validation import (
    DEFAULT_LIMITS,
    InputLimits,
    encode_json,
    validate_context,
    validate_identifier,
)


@dataclass(frozen=True, slots=True)
class MemoryForkInput:
    """Fork ``source`` after its first ``position`` messages into ``session_id``.

    ``user_id`` owns the new conversation. ``None`` means the source's
    owner; another user may be named only by trusted server code (a source
    context without ``user_id``).

    ``metadata`` replaces the source's (``None``: a copy of it). The fork
    stays in its source's scope: metadata that would put it in another
    (another tenant, under a scope of metadata keys) is refused unless
    ``cross_scope`` says the caller means it.
    """

    source: MemoryContext
    session_id: str
    position: int
    user_id: str | None = None
    metadata: dict[str, object] | None = None
    cross_scope: bool = False


@dataclass(frozen=True, slots=True)
class ForkLineage:
    """Where a conversation came from, or one of its forks.

    ``ref`` and ``session_id`` are ``None`` when that conversation has since
    been deleted (or the reader may not see it).
    """

    ref: str | None
    session_id: str | None
    position: int
    """How many messages of the source the fork copied."""


@dataclass(frozen=True, slots=True)
class Lineage:
    forked_from: ForkLineage | None
    forks: list[ForkLineage]
    """Newest first."""


@runtime_checkable
class RewindableMemoryStore(MemoryStore, Protocol):
    async def rewind(self, context: MemoryContext, to_position: int) -> int: ...


@runtime_checkable
class ForkableMemoryStore(MemoryStore, Protocol):
    async def fork(self, input: MemoryForkInput) -> MemoryConversationSummary: ...


def validate_position(value: object, path: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidMemoryInputError(f"must be an int, not {type(value).__name__}", path=path)
    if value < 0:
        raise InvalidMemoryInputError(f"must be 0 or more, not {value}", path=path)
    return value


def check_position_within(value: int, message_count: int, path: str) -> None:
    """Positions name a point in the transcript: 0..message_count inclusive."""
    if value > message_count:
        raise InvalidMemoryInputError(
            f"is {value}, past the end of the transcript ({message_count} messages)", path=path
        )


def validate_fork_input(input: object, limits: InputLimits = DEFAULT_LIMITS) -> MemoryForkInput:
    if not isinstance(input, MemoryForkInput):
        raise InvalidMemoryInputError(
            f"must be a MemoryForkInput, not {type(input).__name__}", path="input"
        )
    validate_context(input.source, limits)
    validate_identifier(input.session_id, "session_id", limits, optional=False)
    validate_identifier(input.user_id, "user_id", limits, optional=True)
    if input.session_id == input.source.session_id:
        raise InvalidMemoryInputError("must differ from the source's session id", path="session_id")
    validate_position(input.position, "position")
    if input.metadata is not None:
        if not isinstance(input.metadata, dict):
            raise InvalidMemoryInputError(
                f"must be a JSON object, not {type(input.metadata).__name__}", path="metadata"
            )
        encode_json(input.metadata, "metadata", limits)
    if not isinstance(input.cross_scope, bool):
        raise InvalidMemoryInputError(
            f"must be True or False, not {type(input.cross_scope).__name__}", path="cross_scope"
        )
    return input
