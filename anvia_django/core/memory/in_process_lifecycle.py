"""The optional capabilities of ``InProcessMemoryStore``: run records, rewind,
fork, compaction, and the read-outs tests use (runs, summaries, lineage).

A mixin over the store's state and helpers, kept apart so each module has
one job; every method holds the store's lock while it touches state.
"""

from __future__ import annotations

import json
import threading
from dataclasses import replace
from datetime import datetime
from typing import TYPE_CHECKING

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
from .entries import HistoryEntry, StoredRow, windowed_entries
from .errors import ConversationScopeError, InvalidMemoryInputError
from .in_process_rows import SERIALS, StoredConversation, StoredSummary
from .run_records import MemoryRunInput, RunRecord, RunTotals, TokenUsage, validate_run_input
from .types import MemoryContext, MemoryConversationSummary, Message
from .validation import InputLimits, validate_context, validate_message


class InProcessLifecycle:
    limits: InputLimits
    load_limit: int | None
    _lock: threading.Lock
    _conversations: dict[str, StoredConversation]

    if TYPE_CHECKING:  # provided by InProcessMemoryStore

        async def load(self, context: MemoryContext) -> list[Message]: ...

        def _scoped(self, context: MemoryContext) -> StoredConversation | None: ...

        def _create(self, context: MemoryContext, now: datetime) -> StoredConversation: ...

        def _touch(
            self, conversation: StoredConversation, context: MemoryContext, now: datetime
        ) -> None: ...

        def _now(self) -> datetime: ...

        def _summary(self, conversation: StoredConversation) -> MemoryConversationSummary: ...

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
                replace(row, created_at=now, serial=next(SERIALS))
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

    async def load_entries(
        self, context: MemoryContext, *, compacted: bool = False
    ) -> list[HistoryEntry]:
        """What :meth:`load` (``compacted``: :meth:`load_compacted`) returns,
        each message with its stored position; a summary has none."""
        validate_context(context, self.limits)
        with self._lock:
            conversation = self._scoped(context)
            rows = list(conversation.rows) if conversation else []
            newest = conversation.summaries[-1] if conversation and conversation.summaries else None
        summary: HistoryEntry | None = None
        first = 0
        if compacted and newest is not None:
            summary = HistoryEntry(None, json.loads(newest.encoded), newest.covers_through)
            first = newest.covers_through + 1
        stored = [
            StoredRow(position, row.run_id, json.loads(row.encoded))
            for position, row in enumerate(rows)
            if position >= first
        ]
        return windowed_entries(stored, self.load_limit, summary)

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
