"""``InProcessMemoryStore``: the reference store, held in a Python dict.

It keeps every rule of the contract (validation, scope, idempotent retries,
windowed loads, failed runs outside the transcript, a read-only inspector),
so it doubles as a test double and as the model other stores are held to.
Nothing survives the process.
"""

from __future__ import annotations

import json
import secrets
import threading
from datetime import UTC, datetime, timedelta

from .errors import ConversationScopeError, InvalidMemoryInputError, describe_error
from .in_process_lifecycle import InProcessLifecycle
from .in_process_rows import Row, StoredConversation
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
)
from .window import window_start


class InProcessMemoryStore(InProcessLifecycle):
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
        self._conversations: dict[str, StoredConversation] = {}
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
            conversation.rows.extend(Row(input.run_id, input.turn, now, e) for e in encoded)

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

    def failed_runs(self, session_id: str) -> list[FailedRunRecord]:
        """The runs ``record_error`` kept for a session, oldest first."""
        with self._lock:
            conversation = self._conversations.get(session_id)
            return list(conversation.failed_runs) if conversation else []

    # The helpers below run with the lock held.

    def _scoped(self, context: MemoryContext) -> StoredConversation | None:
        conversation = self._conversations.get(context.session_id)
        if conversation is not None and context.user_id and context.user_id != conversation.user_id:
            raise ConversationScopeError(
                "This conversation belongs to another user; nothing was read or written."
            )
        return conversation

    def _create(self, context: MemoryContext, now: datetime) -> StoredConversation:
        self._sequence += 1
        conversation = StoredConversation(
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

    def _touch(
        self, conversation: StoredConversation, context: MemoryContext, now: datetime
    ) -> None:
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
        conversation: StoredConversation, input: MemoryAppendInput, encoded: list[str]
    ) -> bool:
        same = [r for r in conversation.rows if r.run_id == input.run_id and r.turn == input.turn]
        if len(same) < len(encoded):
            return False
        # The JSON text, as the Django store compares: True == 1 in Python.
        return [r.encoded for r in same[-len(encoded) :]] == encoded

    def _summary(self, conversation: StoredConversation) -> MemoryConversationSummary:
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
