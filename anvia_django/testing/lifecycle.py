"""Conformance for the optional capabilities: run records, rewind, fork, compaction.

Mixed into :class:`~anvia_django.testing.MemoryStoreConformance`; a store
without one of the methods (``record_run``, ``rewind``, ``fork``,
``compact``) has that part skipped.
"""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime, timedelta
from typing import Any, TypeVar

import pytest

from anvia_django.core.memory import (
    ConversationScopeError,
    InvalidMemoryInputError,
    MemoryAppendInput,
    MemoryCompactionInput,
    MemoryContext,
    MemoryConversationListOptions,
    MemoryForkInput,
    MemoryRunInput,
    MemoryStore,
    Message,
    TokenUsage,
    get_inspector,
)

T = TypeVar("T")


def _capability(store: MemoryStore, name: str) -> Callable[..., Awaitable[Any]]:
    method = getattr(store, name, None)
    if not callable(method):
        pytest.skip(f"the store has no {name}()")
    return method  # type: ignore[no-any-return]


def _session() -> tuple[str, str]:
    return f"session-{uuid.uuid4().hex}", f"user-{uuid.uuid4().hex}"


def _user(content: str) -> Message:
    return {"role": "user", "content": content}


async def _fill(store: MemoryStore, context: MemoryContext, count: int) -> None:
    for index in range(count):
        await store.append(MemoryAppendInput(context, f"run-{index}", 1, [_user(str(index))]))


async def _as_intruder(call: Awaitable[Any]) -> None:
    """Another user's call on a session: a store refuses it, or (scoped by
    user) runs it on that user's own conversation. Either way the owner's
    conversation is unchanged, which the callers check."""
    with contextlib.suppress(ConversationScopeError):
        await call


class LifecycleConformance:
    """Contract tests for the optional capabilities of a store."""

    def run(self, scenario: Callable[[], Awaitable[T]]) -> T:  # pragma: no cover - overridden
        raise NotImplementedError

    # Run records

    def test_a_retried_run_record_is_kept_once(self, store: MemoryStore) -> None:
        record_run = _capability(store, "record_run")
        session_id, user_id = _session()
        started = datetime(2026, 1, 1, tzinfo=UTC)
        run = MemoryRunInput(
            MemoryContext(session_id, user_id),
            "run-1",
            "succeeded",
            started,
            started + timedelta(seconds=1),
            model="m",
            usage=TokenUsage(3, 4),
            message_count=2,
        )

        async def scenario() -> None:
            await record_run(run)
            await record_run(run)
            # Another user's record: refused, or kept in a conversation of its own.
            await _as_intruder(
                record_run(
                    MemoryRunInput(
                        MemoryContext(session_id, "intruder"), "run-2", "failed", started, started
                    )
                )
            )
            with pytest.raises(InvalidMemoryInputError):
                await record_run(
                    MemoryRunInput(MemoryContext(session_id), "run-3", "done", started, started)  # type: ignore[arg-type]
                )

        self.run(scenario)
        runs = getattr(store, "runs", None)
        if callable(runs):
            (kept,) = runs(session_id)
            assert kept.usage == TokenUsage(3, 4, 7)

    # Rewind

    def test_rewind_removes_from_a_position_and_positions_continue(
        self, store: MemoryStore
    ) -> None:
        rewind = _capability(store, "rewind")
        session_id, user_id = _session()
        context = MemoryContext(session_id, user_id)

        async def scenario() -> tuple[int, list[Message], int | None]:
            await _fill(store, context, 5)
            removed = await rewind(context, 2)
            await store.append(MemoryAppendInput(context, "later", 1, [_user("new")]))
            count = None
            inspector = get_inspector(store)
            if inspector is not None:
                options = MemoryConversationListOptions(limit=5, user_id=user_id)
                count = (await inspector.list_conversations(options))[0].message_count
            return removed, await store.load(context), count

        removed, loaded, count = self.run(scenario)
        assert removed == 3
        assert loaded == [_user("0"), _user("1"), _user("new")]
        assert count in (None, 3)

    def test_rewind_refuses_bad_positions_and_other_users(self, store: MemoryStore) -> None:
        rewind = _capability(store, "rewind")
        session_id, user_id = _session()
        context = MemoryContext(session_id, user_id)

        async def scenario() -> list[Message]:
            await _fill(store, context, 2)
            for bad in (-1, 3, True, "1"):
                with pytest.raises(InvalidMemoryInputError) as caught:
                    await rewind(context, bad)
                assert caught.value.path == "to_position"
            await _as_intruder(rewind(MemoryContext(session_id, "intruder"), 0))
            assert await rewind(context, 2) == 0
            return await store.load(context)

        assert self.run(scenario) == [_user("0"), _user("1")]

    # Fork

    def test_fork_copies_a_prefix_and_keeps_the_source(self, store: MemoryStore) -> None:
        fork = _capability(store, "fork")
        session_id, user_id = _session()
        branch_id, _ = _session()
        context = MemoryContext(session_id, user_id)

        async def scenario() -> tuple[Any, list[Message], list[Message]]:
            await _fill(store, context, 4)
            summary = await fork(MemoryForkInput(context, branch_id, 2))
            branch = MemoryContext(branch_id, user_id)
            await store.append(MemoryAppendInput(branch, "edit", 1, [_user("edited")]))
            # Refused, or the intruder's own (empty) session has nothing to fork.
            with pytest.raises((ConversationScopeError, InvalidMemoryInputError)):
                await fork(
                    MemoryForkInput(MemoryContext(session_id, "intruder"), "x" + branch_id, 1)
                )
            with pytest.raises(InvalidMemoryInputError):
                await fork(MemoryForkInput(context, branch_id, 1))  # taken
            return summary, await store.load(context), await store.load(branch)

        summary, source, branch = self.run(scenario)
        assert (summary.session_id, summary.user_id, summary.message_count) == (
            branch_id,
            user_id,
            2,
        )
        assert source == [_user(str(i)) for i in range(4)]
        assert branch == [_user("0"), _user("1"), _user("edited")]

    # Compaction

    def test_compaction_summarises_the_oldest_part_and_keeps_the_transcript(
        self, store: MemoryStore
    ) -> None:
        compact = _capability(store, "compact")
        session_id, user_id = _session()
        context = MemoryContext(session_id, user_id)
        seen: list[tuple[str | None, list[Message]]] = []

        async def summarise(previous: str | None, messages: list[Message]) -> str:
            seen.append((previous, messages))
            return f"the first {len(messages)} messages"

        async def failing(previous: str | None, messages: list[Message]) -> str:
            raise RuntimeError("no summary today")

        async def scenario() -> tuple[list[Message], list[Message], int | None]:
            await _fill(store, context, 10)
            before = await store.load(context)
            with pytest.raises(RuntimeError):
                await compact(MemoryCompactionInput(context, failing, keep_messages=3))
            load_compacted = _capability(store, "load_compacted")
            assert await load_compacted(context) == before
            covered = await compact(MemoryCompactionInput(context, summarise, keep_messages=3))
            assert await store.load(context) == before  # the whole transcript, still
            assert covered == 6
            count = None
            inspector = get_inspector(store)
            if inspector is not None:
                options = MemoryConversationListOptions(limit=5, user_id=user_id)
                count = (await inspector.list_conversations(options))[0].message_count
            return before, await load_compacted(context), count

        before, loaded, count = self.run(scenario)
        assert seen == [(None, before[:7])]
        assert loaded[0]["role"] == "system"
        assert loaded[0]["content"].endswith("the first 7 messages")
        assert loaded[1:] == before[7:]
        assert count in (None, 10)
