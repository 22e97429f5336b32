"""``DjangoMemoryStore``: the memory contract on the project's own database.

The async methods wrap the synchronous functions in
:mod:`anvia_django.persistence` (``transaction.atomic`` has no async form),
each in one hop to a sync thread: the caller's own one inside a request or
``async_to_sync``, else one of the store's threads
(:mod:`anvia_django.persistence.threads.dispatch`). Either way every statement runs
on Django's connection for that thread, through its cursor wrappers.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .core.memory.branches import MemoryForkInput
from .core.memory.compaction import CompactionPlan, MemoryCompactionInput, compact_in_steps
from .core.memory.entries import HistoryEntry
from .core.memory.run_records import MemoryRunInput
from .core.memory.scope import ConversationScope, parse_scope
from .core.memory.types import (
    MemoryAppendInput,
    MemoryContext,
    MemoryConversation,
    MemoryConversationListOptions,
    MemoryConversationSummary,
    MemoryErrorInput,
    Message,
)
from .persistence import (
    append_messages,
    clear_conversation,
    fork_conversation,
    get_conversation_with_messages,
    list_conversation_summaries,
    load_entries,
    load_messages,
    load_through_summary,
    plan_compaction,
    record_failed_run,
    record_run,
    rewind_conversation,
    write_summary,
)
from .persistence.databases import write_alias
from .persistence.threads.dispatch import close_db_threads, run_in_db_thread
from .persistence.threads.group_commit import group_for

__all__ = ["DjangoMemoryInspector", "DjangoMemoryStore", "close_db_threads"]


class DjangoMemoryInspector:
    """Read-only discovery of stored conversations; writes nothing."""

    def __init__(self, using: str | None = None) -> None:
        self.using = using

    async def list_conversations(
        self, options: MemoryConversationListOptions
    ) -> list[MemoryConversationSummary]:
        return await run_in_db_thread(
            list_conversation_summaries, options.limit, options.user_id, using=self.using
        )

    async def get_conversation(self, ref: str) -> MemoryConversation | None:
        return await run_in_db_thread(get_conversation_with_messages, ref, using=self.using)


class DjangoMemoryStore:
    """A :class:`~anvia_django.core.memory.MemoryStore` backed by Django models.

    ``using`` picks a database alias (``None`` follows the routers).
    ``load_limit`` makes :meth:`load` return only the newest messages, at most
    that many, starting at the first message of a run. ``scope`` says what
    tells conversations apart besides the session id, in any form
    ``ANVIA_DJANGO["SCOPE"]`` takes (``None``: that setting).
    """

    def __init__(
        self,
        using: str | None = None,
        *,
        load_limit: int | None = None,
        scope: ConversationScope | Mapping[str, Any] | str | None = None,
    ) -> None:
        if load_limit is not None and (
            isinstance(load_limit, bool) or not isinstance(load_limit, int) or load_limit < 1
        ):
            raise ValueError(f"load_limit must be a positive integer or None, not {load_limit!r}")
        try:
            # A store's own scope is checked now; None reads the setting at each call.
            self.scope = None if scope is None else parse_scope(scope)
        except ValueError as error:
            raise ValueError(f"scope: {error}") from None
        self.using = using
        self.load_limit = load_limit
        self.inspector = DjangoMemoryInspector(using=using)

    def __repr__(self) -> str:
        scope = "" if self.scope is None else f", scope={self.scope.describe()!r}"
        return f"DjangoMemoryStore(using={self.using!r}, load_limit={self.load_limit!r}{scope})"

    async def load(self, context: MemoryContext) -> list[Message]:
        return await run_in_db_thread(
            load_messages, context, using=self.using, limit=self.load_limit, scope=self.scope
        )

    async def append(self, input: MemoryAppendInput) -> None:
        alias = write_alias(self.using)
        # The scope positional: a group reads each append's own (group_commit.py).
        await run_in_db_thread(
            append_messages, input, self.scope, using=alias, together=group_for(alias)
        )

    async def clear(self, context: MemoryContext) -> None:
        await run_in_db_thread(clear_conversation, context, using=self.using, scope=self.scope)

    async def record_error(self, input: MemoryErrorInput) -> None:
        await run_in_db_thread(record_failed_run, input, using=self.using, scope=self.scope)

    async def record_run(self, input: MemoryRunInput) -> None:
        await run_in_db_thread(record_run, input, using=self.using, scope=self.scope)

    async def rewind(self, context: MemoryContext, to_position: int) -> int:
        """Remove the session's messages from ``to_position`` on; return how many."""
        return await run_in_db_thread(
            rewind_conversation, context, to_position, using=self.using, scope=self.scope
        )

    async def fork(self, input: MemoryForkInput) -> MemoryConversationSummary:
        """A new conversation from the first ``input.position`` messages of another."""
        return await run_in_db_thread(fork_conversation, input, using=self.using, scope=self.scope)

    async def load_compacted(self, context: MemoryContext) -> list[Message]:
        """What an agent with compaction loads: the newest summary, then the
        messages after the range it covers (:meth:`load` when there is none)."""
        return await run_in_db_thread(
            load_through_summary,
            context,
            using=self.using,
            limit=self.load_limit,
            scope=self.scope,
        )

    async def load_entries(
        self, context: MemoryContext, *, compacted: bool = False
    ) -> list[HistoryEntry]:
        """What :meth:`load` (``compacted``: :meth:`load_compacted`) returns,
        each message with its stored position; a summary has none."""
        return await run_in_db_thread(
            load_entries,
            context,
            compacted=compacted,
            using=self.using,
            limit=self.load_limit,
            scope=self.scope,
        )

    async def compact(self, input: MemoryCompactionInput) -> int | None:
        """Fold the oldest part of the transcript into a summary (see
        :class:`~anvia_django.core.memory.compaction.MemoryCompactionInput`);
        return the last position it covers, or ``None`` if nothing was written."""

        async def plan() -> CompactionPlan | None:
            return await run_in_db_thread(
                plan_compaction,
                input.context,
                keep_messages=input.keep_messages,
                keep_tokens=input.keep_tokens,
                using=self.using,
                scope=self.scope,
            )

        async def write(planned: CompactionPlan, text: str) -> bool:
            return await run_in_db_thread(
                write_summary, planned, text, using=self.using, scope=self.scope
            )

        return await compact_in_steps(input, plan, write)
