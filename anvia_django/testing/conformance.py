"""The memory contract as a pytest mixin every store implementation runs.

Subclass :class:`MemoryStoreConformance` in a test module and provide a
``store`` fixture returning a fresh (or empty-enough) store. Sessions and
users get random ids per test, so a store shared between tests is fine.
Optional capabilities are detected (``record_error``, ``inspector``) or
switched off with the class attributes below.

No pytest-asyncio is needed: every test drives its coroutine with
:meth:`MemoryStoreConformance.run`, which uses asgiref's ``async_to_sync``
when available (so a Django store's ``sync_to_async`` calls run on the test
thread and see the test database) and ``asyncio.run`` otherwise.
"""

from __future__ import annotations

import asyncio
import math
import uuid
from collections.abc import Awaitable, Callable
from functools import partial
from typing import Any, ClassVar, TypeVar

import pytest

from anvia_django.core.memory import (
    ConversationScopeError,
    InvalidMemoryInputError,
    MemoryAppendInput,
    MemoryContext,
    MemoryConversationListOptions,
    MemoryErrorInput,
    MemoryInspector,
    MemoryStore,
    Message,
    get_inspector,
)

from .lifecycle import LifecycleConformance

T = TypeVar("T")

BAD_MESSAGES: list[tuple[str, Any]] = [
    ("not-a-dict", ["user", "hi"]),
    ("no-role", {"content": "hi"}),
    ("empty-role", {"role": "", "content": "hi"}),
    ("non-string-role", {"role": 3, "content": "hi"}),
    ("nan", {"role": "user", "content": math.nan}),
    ("infinity", {"role": "user", "score": math.inf}),
    ("set-value", {"role": "user", "content": {1, 2}}),
    ("object-value", {"role": "user", "content": object()}),
    ("non-string-key", {"role": "user", 1: "x"}),
    ("nul-character", {"role": "user", "content": "a\x00b"}),
    ("lone-surrogate", {"role": "user", "content": "a\ud800b"}),
]


def _ids() -> tuple[str, str]:
    return f"session-{uuid.uuid4().hex}", f"user-{uuid.uuid4().hex}"


class MemoryStoreConformance(LifecycleConformance):
    """Contract tests for a :class:`~anvia_django.core.memory.MemoryStore`
    (and, when it has them, its optional run records, rewind, fork and
    compaction: see :mod:`anvia_django.testing.lifecycle`)."""

    supports_scope: ClassVar[bool] = True
    """Another user's context never reaches a user's conversation."""
    supports_idempotent_retry: ClassVar[bool] = True
    """A repeated append (same run_id, turn, messages) writes nothing."""

    def run(self, scenario: Callable[[], Awaitable[T]]) -> T:
        """Run ``scenario()`` to completion from synchronous test code."""
        try:
            from asgiref.sync import async_to_sync
        except ImportError:  # pragma: no cover - asgiref ships with Django
            return asyncio.run(_call(scenario))
        return async_to_sync(scenario)()

    def inspector_of(self, store: MemoryStore) -> MemoryInspector:
        inspector = get_inspector(store)
        if inspector is None:
            pytest.skip("the store has no inspector")
        return inspector

    # Transcript

    def test_round_trip_keeps_order_and_content(self, store: MemoryStore) -> None:
        session_id, user_id = _ids()
        context = MemoryContext(session_id, user_id, {"channel": "web"})
        first: list[Message] = [
            {"role": "user", "content": "Où est ma commande ? 📦"},
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [{"id": "c1", "name": "lookup", "arguments": {"n": 42}}],
            },
        ]
        second: list[Message] = [
            {"role": "tool", "tool_call_id": "c1", "name": "lookup", "content": "shipped"},
            {"role": "assistant", "content": "", "extra": {"f": 1.5, "b": [True, None, -7]}},
        ]

        async def scenario() -> list[Message]:
            await store.append(MemoryAppendInput(context, "run-1", 1, first))
            await store.append(MemoryAppendInput(context, "run-1", 2, second))
            return await store.load(context)

        assert self.run(scenario) == first + second

    def test_unknown_session_loads_empty(self, store: MemoryStore) -> None:
        session_id, _ = _ids()

        async def scenario() -> list[Message]:
            return await store.load(MemoryContext(session_id))

        assert self.run(scenario) == []

    def test_sessions_are_independent(self, store: MemoryStore) -> None:
        (one, _), (two, _) = _ids(), _ids()

        async def scenario() -> tuple[list[Message], list[Message]]:
            await store.append(MemoryAppendInput(MemoryContext(one), "r", 1, [_user("to one")]))
            await store.append(MemoryAppendInput(MemoryContext(two), "r", 1, [_user("to two")]))
            return await store.load(MemoryContext(one)), await store.load(MemoryContext(two))

        assert self.run(scenario) == ([_user("to one")], [_user("to two")])

    def test_stored_messages_are_not_shared_with_callers(self, store: MemoryStore) -> None:
        session_id, _ = _ids()
        context = MemoryContext(session_id)
        message = {"role": "user", "content": "original", "parts": [1]}

        async def scenario() -> list[Message]:
            await store.append(MemoryAppendInput(context, "r", 1, [message]))
            message["content"] = "changed by the caller"
            loaded = await store.load(context)
            loaded[0]["parts"].append(2)
            return await store.load(context)

        assert self.run(scenario) == [{"role": "user", "content": "original", "parts": [1]}]

    def test_empty_append_writes_nothing(self, store: MemoryStore) -> None:
        session_id, user_id = _ids()
        context = MemoryContext(session_id, user_id)

        async def scenario() -> tuple[list[Message], list[str]]:
            await store.append(MemoryAppendInput(context, "r", 1, []))
            listed: list[str] = []
            inspector = get_inspector(store)
            if inspector is not None:
                options = MemoryConversationListOptions(limit=10, user_id=user_id)
                listed = [s.session_id for s in await inspector.list_conversations(options)]
            return await store.load(context), listed

        assert self.run(scenario) == ([], [])

    def test_concurrent_appends_lose_nothing(self, store: MemoryStore) -> None:
        session_id, _ = _ids()
        context = MemoryContext(session_id)
        batches = [[_user(f"{n}-a"), _user(f"{n}-b")] for n in range(12)]

        async def scenario() -> list[Message]:
            await asyncio.gather(
                *(
                    store.append(MemoryAppendInput(context, f"run-{n}", 1, batch))
                    for n, batch in enumerate(batches)
                )
            )
            return await store.load(context)

        loaded = self.run(scenario)
        assert sorted(m["content"] for m in loaded) == sorted(
            m["content"] for batch in batches for m in batch
        )
        # Each batch stays contiguous: an append is one unit.
        for batch in batches:
            start = loaded.index(batch[0])
            assert loaded[start : start + 2] == batch

    # Clear

    def test_clear_removes_the_transcript(self, store: MemoryStore) -> None:
        session_id, user_id = _ids()
        context = MemoryContext(session_id, user_id)

        async def scenario() -> tuple[list[Message], list[Message]]:
            await store.append(MemoryAppendInput(context, "r1", 1, [_user("old")]))
            await store.clear(context)
            after_clear = await store.load(context)
            await store.append(MemoryAppendInput(context, "r2", 1, [_user("new")]))
            return after_clear, await store.load(context)

        assert self.run(scenario) == ([], [_user("new")])

    def test_clearing_an_unknown_session_is_not_an_error(self, store: MemoryStore) -> None:
        session_id, user_id = _ids()
        context = MemoryContext(session_id, user_id)

        async def scenario() -> list[Message]:
            await store.clear(context)
            return await store.load(context)

        assert self.run(scenario) == []

    # Validation

    @pytest.mark.parametrize(("case", "bad"), BAD_MESSAGES, ids=[c for c, _ in BAD_MESSAGES])
    def test_bad_message_raises_value_error_and_writes_nothing(
        self, store: MemoryStore, case: str, bad: Any
    ) -> None:
        session_id, _ = _ids()
        context = MemoryContext(session_id)

        async def scenario() -> list[Message]:
            await store.append(MemoryAppendInput(context, "r1", 1, [_user("kept")]))
            with pytest.raises(ValueError):  # noqa: PT011 - subclasses name the part
                await store.append(MemoryAppendInput(context, "r2", 1, [_user("fine"), bad]))
            return await store.load(context)

        assert self.run(scenario) == [_user("kept")]

    @pytest.mark.parametrize("session_id", ["", "   ", "\t\n"])
    def test_empty_session_id_raises_value_error(self, store: MemoryStore, session_id: str) -> None:
        context = MemoryContext(session_id)

        async def scenario() -> None:
            with pytest.raises(ValueError, match="session_id"):
                await store.append(MemoryAppendInput(context, "r", 1, [_user("x")]))
            with pytest.raises(ValueError, match="session_id"):
                await store.load(context)

        self.run(scenario)

    @pytest.mark.parametrize("turn", [0, -1])
    def test_turns_are_one_based(self, store: MemoryStore, turn: int) -> None:
        session_id, _ = _ids()
        context = MemoryContext(session_id)

        async def scenario() -> list[Message]:
            with pytest.raises(ValueError, match="turn"):
                await store.append(MemoryAppendInput(context, "r", turn, [_user("x")]))
            return await store.load(context)

        assert self.run(scenario) == []

    # Retries

    def test_retried_append_is_idempotent(self, store: MemoryStore) -> None:
        if not self.supports_idempotent_retry:
            pytest.skip("the store does not deduplicate retried appends")
        session_id, _ = _ids()
        context = MemoryContext(session_id)
        user, reply = _user("hi"), {"role": "assistant", "content": "hello"}

        async def scenario() -> list[Message]:
            await store.append(MemoryAppendInput(context, "run", 1, [user]))
            await store.append(MemoryAppendInput(context, "run", 1, [reply]))
            await store.append(MemoryAppendInput(context, "run", 1, [reply]))  # the retry
            # Equal messages in another turn or run are new messages, not retries.
            await store.append(MemoryAppendInput(context, "run", 2, [reply]))
            await store.append(MemoryAppendInput(context, "other", 1, [user, reply]))
            await store.append(MemoryAppendInput(context, "other", 1, [user, reply]))
            return await store.load(context)

        assert self.run(scenario) == [user, reply, reply, user, reply]

    # Scope

    def test_another_user_can_neither_read_nor_write(self, store: MemoryStore) -> None:
        """Another user's context with the same session id either names a
        conversation of its own (a scope with the user id, the adapters'
        default) or is refused (``ConversationScopeError``): either way it
        never reads, changes or clears the owner's messages."""
        if not self.supports_scope:
            pytest.skip("the store does not scope conversations to users")
        session_id, alice = _ids()
        owner = MemoryContext(session_id, alice)
        intruder = MemoryContext(session_id, f"{alice}-other")

        async def attempt(call: Awaitable[T]) -> T | None:
            try:
                return await call
            except ConversationScopeError:
                return None

        async def scenario() -> tuple[list[Message], list[Message] | None, list[Message]]:
            await store.append(MemoryAppendInput(owner, "r1", 1, [_user("mine")]))
            seen = await attempt(store.load(intruder))
            await attempt(store.append(MemoryAppendInput(intruder, "r2", 1, [_user("theirs")])))
            after_append = await store.load(owner)
            await attempt(store.clear(intruder))
            return after_append, seen, await store.load(owner)

        after_append, seen, after_clear = self.run(scenario)
        assert seen in (None, []), "another user read the owner's messages"
        assert after_append == [_user("mine")]
        assert after_clear == [_user("mine")]

    def tenant_store(self, store: MemoryStore) -> MemoryStore | None:
        """A store like ``store`` whose scope is the user id plus the
        ``tenant_id`` metadata key; ``None`` skips the tenant tests."""
        return None

    def test_tenants_sharing_a_session_id_never_meet(self, store: MemoryStore) -> None:
        tenants = self.tenant_store(store)
        if tenants is None:
            pytest.skip("the store has no tenant scope")
        session_id, _ = _ids()
        # Server code: no user id, only the tenant tells them apart.
        acme = MemoryContext(session_id, metadata={"tenant_id": "acme"})
        globex = MemoryContext(session_id, metadata={"tenant_id": "globex"})

        async def scenario() -> tuple[list[Message], list[Message], list[Message]]:
            await tenants.append(MemoryAppendInput(acme, "r1", 1, [_user("acme's")]))
            await tenants.append(MemoryAppendInput(globex, "r1", 1, [_user("globex's")]))
            both = await tenants.load(acme), await tenants.load(globex)
            await tenants.clear(globex)
            return *both, await tenants.load(acme)

        assert self.run(scenario) == ([_user("acme's")], [_user("globex's")], [_user("acme's")])

    def test_a_context_without_the_tenant_key_is_refused(self, store: MemoryStore) -> None:
        tenants = self.tenant_store(store)
        if tenants is None:
            pytest.skip("the store has no tenant scope")
        session_id, user_id = _ids()
        for metadata in (None, {"other": "x"}, {"tenant_id": 7}):
            context = MemoryContext(session_id, user_id, metadata)
            append = MemoryAppendInput(context, "r", 1, [_user("x")])
            with pytest.raises(InvalidMemoryInputError, match="tenant_id"):
                self.run(partial(tenants.append, append))
            with pytest.raises(InvalidMemoryInputError, match="tenant_id"):
                self.run(partial(tenants.load, context))

    def test_scope_error_is_a_permission_error(self) -> None:
        assert issubclass(ConversationScopeError, PermissionError)

    # Failed runs

    def test_record_error_is_kept_out_of_load(self, store: MemoryStore) -> None:
        record_error = getattr(store, "record_error", None)
        if record_error is None:
            pytest.skip("the store has no record_error")
        session_id, user_id = _ids()
        context = MemoryContext(session_id, user_id)
        partial = [_user("kept"), {"role": "assistant", "content": "half"}]

        async def scenario() -> tuple[list[Message], int | None]:
            await store.append(MemoryAppendInput(context, "r1", 1, [_user("kept")]))
            try:
                raise RuntimeError("the model went away")
            except RuntimeError as error:
                await record_error(MemoryErrorInput(context, "r2", error, partial))
            count = None
            inspector = get_inspector(store)
            if inspector is not None:
                options = MemoryConversationListOptions(limit=5, user_id=user_id)
                count = (await inspector.list_conversations(options))[0].message_count
            return await store.load(context), count

        loaded, count = self.run(scenario)
        assert loaded == [_user("kept")]
        assert count in (None, 1)

    # Inspector

    def test_inspector_lists_newest_first_and_honours_limit(self, store: MemoryStore) -> None:
        inspector = self.inspector_of(store)
        _, user_id = _ids()
        sessions = [f"{user_id}-{n}" for n in range(3)]

        async def scenario() -> tuple[list[str], list[str], list[str]]:
            for run, session_id in enumerate([*sessions, sessions[0]]):
                context = MemoryContext(session_id, user_id)
                await store.append(MemoryAppendInput(context, f"r{run}", 1, [_user(session_id)]))
            await store.append(
                MemoryAppendInput(MemoryContext(f"{user_id}-x"), "r", 1, [_user("x")])
            )
            listed = await inspector.list_conversations(
                MemoryConversationListOptions(limit=10, user_id=user_id)
            )
            limited = await inspector.list_conversations(
                MemoryConversationListOptions(limit=2, user_id=user_id)
            )
            everyone = await inspector.list_conversations(MemoryConversationListOptions(limit=200))
            return (
                [s.session_id for s in listed],
                [s.session_id for s in limited],
                [s.session_id for s in everyone],
            )

        listed, limited, everyone = self.run(scenario)
        assert listed == [sessions[0], sessions[2], sessions[1]]
        assert limited == listed[:2]
        assert f"{user_id}-x" in everyone

    @pytest.mark.parametrize("limit", [0, -1, True, 2.0, "5", None])
    def test_inspector_refuses_an_invalid_limit(self, store: MemoryStore, limit: Any) -> None:
        inspector = self.inspector_of(store)

        async def scenario() -> None:
            with pytest.raises(ValueError, match="limit"):
                await inspector.list_conversations(MemoryConversationListOptions(limit=limit))

        self.run(scenario)

    def test_inspector_gets_a_conversation_by_ref(self, store: MemoryStore) -> None:
        inspector = self.inspector_of(store)
        session_id, user_id = _ids()
        context = MemoryContext(session_id, user_id, {"plan": "pro"})
        messages = [_user("a"), {"role": "assistant", "content": "b"}, _user("c")]

        async def scenario() -> Any:
            await store.append(MemoryAppendInput(context, "r1", 1, messages[:2]))
            await store.append(MemoryAppendInput(context, "r2", 1, messages[2:]))
            options = MemoryConversationListOptions(limit=1, user_id=user_id)
            (summary,) = await inspector.list_conversations(options)
            return summary, await inspector.get_conversation(summary.ref)

        summary, conversation = self.run(scenario)
        assert summary.ref != session_id
        assert (summary.session_id, summary.user_id, summary.metadata) == (
            session_id,
            user_id,
            {"plan": "pro"},
        )
        assert summary.message_count == 3
        assert summary.created_at <= summary.updated_at
        assert summary.updated_at.utcoffset() is not None
        assert conversation is not None
        assert (conversation.ref, conversation.message_count) == (summary.ref, 3)
        assert [(m.position, m.run_id, m.turn, m.message) for m in conversation.messages] == [
            (0, "r1", 1, messages[0]),
            (1, "r1", 1, messages[1]),
            (2, "r2", 1, messages[2]),
        ]

    def test_inspector_returns_none_for_unknown_or_malformed_refs(self, store: MemoryStore) -> None:
        inspector = self.inspector_of(store)
        session_id, _ = _ids()

        async def scenario() -> list[object]:
            await store.append(MemoryAppendInput(MemoryContext(session_id), "r", 1, [_user("x")]))
            refs = [session_id, "", "unknown", "../../etc", "x" * 5000, "\x00", "1 OR 1=1"]
            return [await inspector.get_conversation(ref) for ref in refs]

        assert self.run(scenario) == [None] * 7


def _user(content: str) -> Message:
    return {"role": "user", "content": content}


async def _call(scenario: Callable[[], Awaitable[T]]) -> T:
    return await scenario()
