"""Compaction: a summary in place of the oldest part of a long transcript.

A store that compacts has an async ``compact(input: MemoryCompactionInput)``
method. It works in three steps so that no lock is held while a model
writes the summary: plan (read what to fold in), summarise (the caller's
callable, outside any transaction), write (under the conversation's lock,
re-checking that nobody compacted or rewound the range meanwhile). The
transcript itself is never shortened, and ``load`` keeps returning all of
it; ``load_compacted`` (what an agent with compaction loads) returns the newest summary
followed by the messages after the range it covers.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from .errors import InvalidMemoryInputError
from .types import MemoryContext, MemoryStore, Message
from .validation import dumps
from .window import window_start

Summariser = Callable[[str | None, list[Message]], Awaitable[str]]
"""``summarise(previous_summary, messages)``: the new summary's text, covering
the previous summary (``None`` on the first compaction) and ``messages``."""

SUMMARY_PREFIX = "Summary of the earlier conversation:\n"


@dataclass(frozen=True, slots=True)
class MemoryCompactionInput:
    """Compact ``context``'s transcript, keeping the newest part verbatim.

    The kept part is at most ``keep_messages`` messages and (when given) at
    most ``keep_tokens`` estimated tokens, and starts at the first message
    of a run; everything before it is folded into the summary.
    """

    context: MemoryContext
    summarise: Summariser
    keep_messages: int
    keep_tokens: int | None = None


@dataclass(frozen=True, slots=True)
class CompactionPlan:
    """What one compaction folds in; made by a store, checked again on write."""

    context: MemoryContext
    previous_summary: str | None
    previous_covers_through: int | None
    messages: list[Message]
    covers_through: int
    """The last position the new summary covers."""
    anchor: str
    """Store-specific proof that positions 0..covers_through are still the
    ones planned on (a rewind replaces them)."""


@dataclass(frozen=True, slots=True)
class SummaryRecord:
    """A stored summary, as the inspector shows it."""

    covers_through: int
    message: Message
    created_at: object
    """A timezone-aware ``datetime``."""


@runtime_checkable
class CompactingMemoryStore(MemoryStore, Protocol):
    """A store that compacts. ``load`` keeps returning the whole transcript;
    ``load_compacted`` is what an agent with compaction loads."""

    async def compact(self, input: MemoryCompactionInput) -> int | None: ...

    async def load_compacted(self, context: MemoryContext) -> list[Message]: ...


def estimate_tokens(message: Message) -> int:
    """About four characters of JSON per token, plus a little per message."""
    return len(dumps(message)) // 4 + 4


def validate_compaction_input(input: object) -> MemoryCompactionInput:
    if not isinstance(input, MemoryCompactionInput):
        raise InvalidMemoryInputError(
            f"must be a MemoryCompactionInput, not {type(input).__name__}", path="input"
        )
    if not callable(input.summarise):
        raise InvalidMemoryInputError("must be an async callable", path="summarise")
    _positive(input.keep_messages, "keep_messages")
    if input.keep_tokens is not None:
        _positive(input.keep_tokens, "keep_tokens")
    return input


def _positive(value: object, path: str) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise InvalidMemoryInputError("must be a positive integer", path=path)


def kept_from(
    messages: Sequence[Message],
    run_ids: Sequence[str],
    *,
    keep_messages: int,
    keep_tokens: int | None,
) -> int:
    """The index of the first message kept verbatim: the newest messages
    within both budgets, starting at the first message of a run (so the
    kept part never opens inside a tool-call exchange)."""
    start = len(messages)
    tokens = 0
    while start > 0 and len(messages) - start < keep_messages:
        cost = estimate_tokens(messages[start - 1])
        if keep_tokens is not None and tokens + cost > keep_tokens:
            break
        tokens += cost
        start -= 1
    # Never open mid-run: move forward to the next run boundary.
    while 0 < start < len(messages) and run_ids[start] == run_ids[start - 1]:
        start += 1
    return start


def summary_message(text: str) -> Message:
    return {"role": "system", "content": SUMMARY_PREFIX + text}


def check_summary_text(text: object) -> str:
    if not isinstance(text, str) or not text.strip():
        raise InvalidMemoryInputError("the summariser must return non-empty text", path="summary")
    return text


def summary_text(message: Message | None) -> str | None:
    """The summariser's text back out of a stored summary message."""
    if message is None:
        return None
    content = str(message.get("content") or "")
    return content.removeprefix(SUMMARY_PREFIX)


async def compact_in_steps(
    input: MemoryCompactionInput,
    plan: Callable[[], Awaitable[CompactionPlan | None]],
    write: Callable[[CompactionPlan, str], Awaitable[bool]],
) -> int | None:
    """A store's ``compact``: plan, summarise outside any lock, write.

    Returns the last position the new summary covers, or ``None`` when
    nothing needed folding or another worker changed the range first. A
    summariser that raises leaves everything as it was, and raises.
    """
    validate_compaction_input(input)
    planned = await plan()
    if planned is None:
        return None
    summary = await input.summarise(planned.previous_summary, list(planned.messages))
    text = check_summary_text(summary)
    return planned.covers_through if await write(planned, text) else None


def window_after_summary(
    summary: Message, tail: list[tuple[str, Message]], limit: int | None
) -> list[Message]:
    """What ``load_compacted`` returns for a compacted session: the summary, then the
    messages after it (``(run_id, message)`` pairs), windowed by ``limit``
    with the summary taking one place."""
    if limit is not None:
        room = limit - 1
        if room == 0:
            return [summary]
        tail = tail[-(room + 1) :]
        tail = tail[window_start([run_id for run_id, _ in tail], room) :]
    return [summary, *(message for _, message in tail)]
