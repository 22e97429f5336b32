"""``InProcessMemoryStore``: the reference store, held in a Python dict.

It keeps every rule of the contract (validation, scope, idempotent retries,
windowed loads, failed runs outside the transcript, a read-only inspector),
so it doubles as a test double and as the model other stores are held to.
Nothing survives the process.
"""

from __future__ import annotations

import itertools
import json
import secrets
import threading
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta

from .branches import (
    ForkLineage,
    Lineage,
    MemoryForkInput,
    check_position_within,
    validate_fork_input,
    validate_position,
)
from .compaction import (
    CompactionPlan,
    MemoryCompactionInput,
    SummaryRecord,
    compact_in_steps,
    kept_from,
    summary_message,
    summary_text,
    window_after_summary,
)
from .errors import ConversationScopeError, InvalidMemoryInputError, describe_error
from .runs import MemoryRunInput, RunRecord, RunTotals, TokenUsage, validate_run_input
from .types import (
    FailedRunRecord,
    JsonObject,
    MemoryAppendInput,
    MemoryContext,
    MemoryConversation,
    MemoryConversationListOptions,
    MemoryConversationMessage,
    MemoryConversationSummary,
    MemoryErrorInput,
    Message,
)
from .validation import (
    DEFAULT_LIMITS,
    InputLimits,
    validate_append,
    validate_context,
    validate_error_input,
    validate_message,
)
from .window import window_start

_SERIALS: itertools.count[int] = itertools.count()


@dataclass(frozen=True, slots=True)
class _Row:
    run_id: str
    turn: int
    created_at: datetime
    encoded: str
    """The message as compact JSON: every read decodes a fresh copy."""
    serial: int = field(default_factory=lambda: next(_SERIALS))
    """Unique per stored row, so a compaction can tell a rewound-and-refilled
    position from the one it planned on."""


@dataclass(frozen=True, slots=True)
class StoredSummary:
    covers_through: int
    encoded: str
    created_at: datetime


@dataclass(slots=True)
class _Conversation:
    ref: str
    session_id: str
    user_id: str | None
    metadata: str | None
    created_at: datetime
    updated_at: datetime
    sequence: int
    """Creation order, which breaks ties between equal ``updated_at``."""
    rows: list[_Row] = field(default_factory=list)
    failed_runs: list[FailedRunRecord] = field(default_factory=list)
    runs: dict[str, RunRecord] = field(default_factory=dict)
    summaries: list[StoredSummary] = field(default_factory=list)
    """Oldest first; the last one is what ``load`` shows."""
    forked_from: tuple[str, int] | None = None
    """The source's ref and how many of its messages were copied."""


class InProcessMemoryStore:
    """A :class:`MemoryStore` (with ``record_error`` and an inspector) in memory.

    Safe under concurrent asyncio tasks and threads. ``load_limit`` makes
    :meth:`load` return at most that many of the newest messages, starting at
    the first message of a run.
    """

    def __init__(
        self, *, load_limit: int | None = None, limits: InputLimits = DEFAULT_LIMITS
    ) -> None:
        if load_limit is not None and (
            isinstance(load_limit, bool) or not isinstance(load_limit, int) or load_limit < 1
        ):
            raise ValueError(f"load_limit must be a positive integer or None, not {load_limit!r}")
        self.load_limit = load_limit
        self.limits = limits
        # A threading lock, not an asyncio.Lock: no critical section awaits,
        # so it never blocks the loop for long, and unlike asyncio.Lock it is
        # not tied to one event loop (tests and async_to_sync use several).
        self._lock = threading.Lock()
        self._conversations: dict[str, _Conversation] = {}
        self._sequence = 0
        self._last_time = datetime.min.replace(tzinfo=UTC)
        self.inspector = InProcessMemoryInspector(self)

    async def load(self, context: MemoryContext) -> list[Message]:
        validate_context(context, self.limits)
        with self._lock:
            conversation = self._scoped(context)
            rows = list(conversation.rows) if conversation else []
        if self.load_limit is not None:
            tail = rows[-(self.load_limit + 1) :]
            rows = tail[window_start([r.run_id for r in tail], self.load_limit) :]
        return [json.loads(row.encoded) for row in rows]

    async def append(self, input: MemoryAppendInput) -> None:
        encoded = validate_append(input, self.limits)
        if not encoded:
            return
        with self._lock:
            conversation = self._scoped(input.context)
            if conversation is not None and self._is_retry(conversation, input, encoded):
                return
            now = self._now()
            conversation = conversation or self._create(input.context, now)
            self._touch(conversation, input.context, now)
            conversation.rows.extend(_Row(input.run_id, input.turn, now, e) for e in encoded)

    async def clear(self, context: MemoryContext) -> None:
        validate_context(context, self.limits)
        with self._lock:
            if self._scoped(context) is not None:
                del self._conversations[context.session_id]

    async def record_error(self, input: MemoryErrorInput) -> None:
        encoded = validate_error_input(input, self.limits)
        error = describe_error(input.error)
        with self._lock:
            now = self._now()
            # Like the Django store, a failed first run creates the
            # conversation, so it is scoped to its user and visible to tools.
            conversation = self._scoped(input.context) or self._create(input.context, now)
            self._touch(conversation, input.context, now)
            conversation.failed_runs.append(
                FailedRunRecord(
                    run_id=input.run_id,
                    error_type=error.type,
                    error_message=error.message,
                    traceback=error.traceback,
                    messages=[json.loads(e) for e in encoded],
                    created_at=now,
                )
            )

    async def record_run(self, input: MemoryRunInput) -> None:
        validate_run_input(input, self.limits)
        with self._lock:
            # Bookkeeping: an existing conversation's updated_at stays.
            conversation = self._scoped(input.context)
            if conversation is None:
                now = self._now()
                conversation = self._create(input.context, now)
                self._touch(conversation, input.context, now)
            failed = next(
                (f for f in reversed(conversation.failed_runs) if f.run_id == input.run_id), None
            )
            linked = failed if input.status == "failed" else None
            # Keyed by run id: a retried record replaces the first, alike.
            conversation.runs[input.run_id] = RunRecord(
                run_id=input.run_id,
                status=input.status,
                started_at=input.started_at,
                finished_at=input.finished_at,
                model=input.model,
                usage=input.usage or TokenUsage(),
                message_count=input.message_count,
                error_type=linked.error_type if linked else None,
                error_message=linked.error_message if linked else None,
            )

    async def rewind(self, context: MemoryContext, to_position: int) -> int:
        """Remove the session's messages from ``to_position`` on; return how many."""
        validate_context(context, self.limits)
        validate_position(to_position, "to_position")
        with self._lock:
            conversation = self._scoped(context)
            rows = conversation.rows if conversation else []
            check_position_within(to_position, len(rows), "to_position")
            if conversation is None or to_position == len(rows):
                return 0
            removed = len(rows) - to_position
            del rows[to_position:]
            conversation.summaries = [
                s for s in conversation.summaries if s.covers_through < to_position
            ]
            conversation.updated_at = self._now()
            return removed

    async def fork(self, input: MemoryForkInput) -> MemoryConversationSummary:
        """A new conversation from the first ``input.position`` messages of another."""
        validate_fork_input(input, self.limits)
        with self._lock:
            source = self._scoped(input.source)
            if source is None:
                raise InvalidMemoryInputError(
                    "has no conversation to fork", path="source.session_id"
                )
            user_id = input.user_id if input.user_id is not None else source.user_id
            if input.source.user_id and user_id != input.source.user_id:
                raise ConversationScopeError(
                    "A fork belongs to the user of its source; only trusted server code "
                    "may give it to another user. Nothing was written."
                )
            check_position_within(input.position, len(source.rows), "position")
            if input.session_id in self._conversations:
                raise InvalidMemoryInputError(
                    "already names a conversation; a fork needs a new session id",
                    path="session_id",
                )
            now = self._now()
            fork = self._create(MemoryContext(input.session_id, user_id), now)
            fork.metadata = (
                json.dumps(input.metadata) if input.metadata is not None else source.metadata
            )
            # Copies made now, as the Django store stamps them.
            fork.rows = [
                replace(row, created_at=now, serial=next(_SERIALS))
                for row in source.rows[: input.position]
            ]
            fork.summaries = [s for s in source.summaries if s.covers_through < input.position]
            fork.forked_from = (source.ref, input.position)
            return self._summary(fork)

    async def load_compacted(self, context: MemoryContext) -> list[Message]:
        """The newest summary, then the messages after the range it covers
        (:meth:`load` when there is none): what an agent with compaction loads."""
        validate_context(context, self.limits)
        with self._lock:
            conversation = self._scoped(context)
            summary = (
                conversation.summaries[-1] if conversation and conversation.summaries else None
            )
            rows = list(conversation.rows) if conversation and summary else []
        if summary is None:
            return await self.load(context)
        after = [(r.run_id, json.loads(r.encoded)) for r in rows[summary.covers_through + 1 :]]
        return window_after_summary(json.loads(summary.encoded), after, self.load_limit)

    async def compact(self, input: MemoryCompactionInput) -> int | None:
        """Fold the oldest part of the transcript into a summary; return the
        last position it covers, or ``None`` if nothing was written."""

        async def plan() -> CompactionPlan | None:
            validate_context(input.context, self.limits)
            with self._lock:
                conversation = self._scoped(input.context)
                if conversation is None:
                    return None
                previous = conversation.summaries[-1] if conversation.summaries else None
                first = previous.covers_through + 1 if previous else 0
                rows = conversation.rows[first:]
            messages = [json.loads(r.encoded) for r in rows]
            start = kept_from(
                messages,
                [r.run_id for r in rows],
                keep_messages=input.keep_messages,
                keep_tokens=input.keep_tokens,
            )
            if start == 0:
                return None
            return CompactionPlan(
                context=input.context,
                previous_summary=summary_text(json.loads(previous.encoded)) if previous else None,
                previous_covers_through=previous.covers_through if previous else None,
                messages=messages[:start],
                covers_through=first + start - 1,
                anchor=str(rows[start - 1].serial),
            )

        async def write(planned: CompactionPlan, text: str) -> bool:
            encoded = validate_message(summary_message(text), "summary", self.limits)
            with self._lock:
                conversation = self._scoped(planned.context)
                if conversation is None:
                    return False
                newest = conversation.summaries[-1] if conversation.summaries else None
                if (newest.covers_through if newest else None) != planned.previous_covers_through:
                    return False
                k = planned.covers_through
                if (
                    k >= len(conversation.rows)
                    or str(conversation.rows[k].serial) != planned.anchor
                ):
                    return False
                conversation.summaries.append(StoredSummary(k, encoded, self._now()))
                return True

        return await compact_in_steps(input, plan, write)

    def summaries(self, session_id: str) -> list[SummaryRecord]:
        """The session's summaries, newest first."""
        with self._lock:
            conversation = self._conversations.get(session_id)
            stored = list(conversation.summaries) if conversation else []
        return [
            SummaryRecord(s.covers_through, json.loads(s.encoded), s.created_at)
            for s in reversed(stored)
        ]

    def lineage(self, session_id: str) -> Lineage:
        """Where the session was forked from, and its forks (newest first)."""
        with self._lock:
            conversation = self._conversations.get(session_id)
            if conversation is None:
                return Lineage(None, [])
            by_ref = {c.ref: c for c in self._conversations.values()}
            forked_from = None
            if conversation.forked_from is not None:
                ref, position = conversation.forked_from
                source = by_ref.get(ref)
                forked_from = ForkLineage(
                    ref if source else None, source.session_id if source else None, position
                )
            forks = [
                c
                for c in self._conversations.values()
                if c.forked_from is not None and c.forked_from[0] == conversation.ref
            ]
            forks.sort(key=lambda c: c.sequence, reverse=True)
            return Lineage(
                forked_from,
                [
                    ForkLineage(c.ref, c.session_id, c.forked_from[1])
                    for c in forks
                    if c.forked_from
                ],
            )

    def runs(self, session_id: str) -> list[RunRecord]:
        """The session's run records, newest first (by start time)."""
        with self._lock:
            conversation = self._conversations.get(session_id)
            records = list(conversation.runs.values()) if conversation else []
        return sorted(records, key=lambda r: r.started_at, reverse=True)

    def run_totals(self, session_id: str) -> RunTotals:
        """Sums over the session's runs, as the Django store reports them."""
        records = self.runs(session_id)
        usage = sum((r.usage for r in records), TokenUsage())
        return RunTotals(
            runs=len(records),
            failed_runs=sum(r.status == "failed" for r in records),
            input_tokens=usage.input_tokens or 0,
            output_tokens=usage.output_tokens or 0,
            total_tokens=usage.total_tokens or 0,
        )

    def failed_runs(self, session_id: str) -> list[FailedRunRecord]:
        """The runs ``record_error`` kept for a session, oldest first."""
        with self._lock:
            conversation = self._conversations.get(session_id)
            return list(conversation.failed_runs) if conversation else []

    # The helpers below run with the lock held.

    def _scoped(self, context: MemoryContext) -> _Conversation | None:
        conversation = self._conversations.get(context.session_id)
        if conversation is not None and context.user_id and context.user_id != conversation.user_id:
            raise ConversationScopeError(
                "This conversation belongs to another user; nothing was read or written."
            )
        return conversation

    def _create(self, context: MemoryContext, now: datetime) -> _Conversation:
        self._sequence += 1
        conversation = _Conversation(
            ref=secrets.token_urlsafe(18),
            session_id=context.session_id,
            user_id=context.user_id,
            metadata=None,
            created_at=now,
            updated_at=now,
            sequence=self._sequence,
        )
        self._conversations[context.session_id] = conversation
        return conversation

    def _touch(self, conversation: _Conversation, context: MemoryContext, now: datetime) -> None:
        conversation.updated_at = now
        if context.metadata is not None:
            conversation.metadata = json.dumps(context.metadata)

    def _now(self) -> datetime:
        # Strictly increasing, so "newest first" is well defined even when
        # the clock is coarse or steps back.
        now = max(datetime.now(UTC), self._last_time + timedelta(microseconds=1))
        self._last_time = now
        return now

    @staticmethod
    def _is_retry(
        conversation: _Conversation, input: MemoryAppendInput, encoded: list[str]
    ) -> bool:
        same = [r for r in conversation.rows if r.run_id == input.run_id and r.turn == input.turn]
        if len(same) < len(encoded):
            return False
        # The JSON text, as the Django store compares: True == 1 in Python.
        return [r.encoded for r in same[-len(encoded) :]] == encoded

    def _summary(self, conversation: _Conversation) -> MemoryConversationSummary:
        return MemoryConversationSummary(
            ref=conversation.ref,
            session_id=conversation.session_id,
            user_id=conversation.user_id,
            metadata=_decode(conversation.metadata),
            created_at=conversation.created_at,
            updated_at=conversation.updated_at,
            message_count=len(conversation.rows),
        )


class InProcessMemoryInspector:
    """The read-only view of an :class:`InProcessMemoryStore`."""

    def __init__(self, store: InProcessMemoryStore) -> None:
        self._store = store

    async def list_conversations(
        self, options: MemoryConversationListOptions
    ) -> list[MemoryConversationSummary]:
        limit = options.limit
        if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
            raise InvalidMemoryInputError("must be a positive integer", path="limit")
        store = self._store
        with store._lock:
            chosen = [
                c
                for c in store._conversations.values()
                if options.user_id is None or c.user_id == options.user_id
            ]
            chosen.sort(key=lambda c: (c.updated_at, c.sequence), reverse=True)
            return [store._summary(c) for c in chosen[:limit]]

    async def get_conversation(self, ref: str) -> MemoryConversation | None:
        if not isinstance(ref, str):
            return None
        store = self._store
        with store._lock:
            found = next((c for c in store._conversations.values() if c.ref == ref), None)
            if found is None:
                return None
            summary = store._summary(found)
            messages = [
                MemoryConversationMessage(
                    position=position,
                    run_id=row.run_id,
                    turn=row.turn,
                    created_at=row.created_at,
                    message=json.loads(row.encoded),
                )
                for position, row in enumerate(found.rows)
            ]
        return MemoryConversation.from_summary(summary, messages)


def _decode(encoded: str | None) -> JsonObject | None:
    if encoded is None:
        return None
    decoded: JsonObject = json.loads(encoded)
    return decoded
