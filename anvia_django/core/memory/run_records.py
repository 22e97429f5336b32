"""Run records: what each run of an agent did and what it cost.

A store that keeps runs has an async ``record_run(input: MemoryRunInput)``
method (see :class:`RunRecordingMemoryStore`); the runtime calls it once per
run, succeeded or failed, and stores without it keep working.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Literal, Protocol, runtime_checkable

from .errors import InvalidMemoryInputError
from .types import MemoryContext, MemoryStore
from .validation import (
    DEFAULT_LIMITS,
    INT64_MAX,
    InputLimits,
    validate_context,
    validate_identifier,
)

RunStatus = Literal["succeeded", "failed"]
RUN_STATUSES: tuple[RunStatus, ...] = ("succeeded", "failed")


@dataclass(frozen=True, slots=True)
class TokenUsage:
    """Token counts as a model reported them; ``None`` means "not reported"."""

    input_tokens: int | None = None
    output_tokens: int | None = None
    total_tokens: int | None = None

    def __post_init__(self) -> None:
        if self.total_tokens is None and None not in (self.input_tokens, self.output_tokens):
            # Some providers report the parts only; the total is then known.
            object.__setattr__(
                self, "total_tokens", (self.input_tokens or 0) + (self.output_tokens or 0)
            )

    def __add__(self, other: TokenUsage) -> TokenUsage:
        return TokenUsage(
            _plus(self.input_tokens, other.input_tokens),
            _plus(self.output_tokens, other.output_tokens),
            _plus(self.total_tokens, other.total_tokens),
        )

    @property
    def reported(self) -> bool:
        return any(
            n is not None for n in (self.input_tokens, self.output_tokens, self.total_tokens)
        )


def _plus(a: int | None, b: int | None) -> int | None:
    if a is None:
        return b
    return a if b is None else a + b


@dataclass(frozen=True, slots=True)
class MemoryRunInput:
    """One finished run, as the runtime reports it to a store."""

    context: MemoryContext
    run_id: str
    status: RunStatus
    started_at: datetime
    finished_at: datetime
    model: str | None = None
    usage: TokenUsage | None = None
    message_count: int = 0
    """How many of the run's messages were saved to the transcript."""


@dataclass(frozen=True, slots=True)
class RunRecord:
    """A stored run. ``error_type``/``error_message`` come from the failed
    run's error record (``record_error``), when there is one."""

    run_id: str
    status: RunStatus
    started_at: datetime
    finished_at: datetime
    model: str | None
    usage: TokenUsage
    message_count: int
    error_type: str | None = None
    error_message: str | None = None


@dataclass(frozen=True, slots=True)
class RunTotals:
    """Sums over runs; token sums count only what models reported."""

    runs: int = 0
    failed_runs: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    total_tokens: int = 0


@runtime_checkable
class RunRecordingMemoryStore(MemoryStore, Protocol):
    """A store that also keeps a record of every run."""

    async def record_run(self, input: MemoryRunInput) -> None: ...


def validate_run_input(input: object, limits: InputLimits = DEFAULT_LIMITS) -> MemoryRunInput:
    if not isinstance(input, MemoryRunInput):
        raise InvalidMemoryInputError(
            f"must be a MemoryRunInput, not {type(input).__name__}", path="input"
        )
    validate_context(input.context, limits)
    validate_identifier(input.run_id, "run_id", limits, optional=False)
    if input.status not in RUN_STATUSES:
        raise InvalidMemoryInputError(
            f"must be one of {', '.join(RUN_STATUSES)}, not {input.status!r}", path="status"
        )
    for name in ("started_at", "finished_at"):
        moment = getattr(input, name)
        if not isinstance(moment, datetime) or moment.tzinfo is None:
            raise InvalidMemoryInputError("must be a timezone-aware datetime", path=name)
    if input.finished_at < input.started_at:
        raise InvalidMemoryInputError("must not be before started_at", path="finished_at")
    validate_identifier(input.model, "model", limits, optional=True)
    _count(input.message_count, "message_count", maximum=2**31 - 1)
    if input.usage is not None:
        if not isinstance(input.usage, TokenUsage):
            raise InvalidMemoryInputError(
                f"must be a TokenUsage, not {type(input.usage).__name__}", path="usage"
            )
        for name in ("input_tokens", "output_tokens", "total_tokens"):
            value = getattr(input.usage, name)
            if value is not None:
                _count(value, f"usage.{name}", maximum=INT64_MAX)
    return input


def _count(value: object, path: str, *, maximum: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidMemoryInputError(f"must be an int, not {type(value).__name__}", path=path)
    if not 0 <= value <= maximum:
        raise InvalidMemoryInputError(f"must be between 0 and {maximum}", path=path)
