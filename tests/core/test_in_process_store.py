"""InProcessMemoryStore: the conformance suite plus what only it offers."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from anvia_django.core import (
    InProcessMemoryStore,
    MemoryAppendInput,
    MemoryContext,
    MemoryConversation,
    MemoryConversationListOptions,
    MemoryConversationMessage,
    MemoryConversationSummary,
    MemoryErrorInput,
    Message,
)
from anvia_django.testing import MemoryStoreConformance


class TestConformance(MemoryStoreConformance):
    @pytest.fixture
    def store(self) -> InProcessMemoryStore:
        return InProcessMemoryStore()


def test_record_error_keeps_the_failed_run() -> None:
    store = InProcessMemoryStore()
    context = MemoryContext("s", "u")

    async def scenario() -> None:
        try:
            raise TimeoutError("model timed out")
        except TimeoutError as error:
            await store.record_error(MemoryErrorInput(context, "run-9", error, [_user("hi")]))

    asyncio.run(scenario())
    (failed,) = store.failed_runs("s")
    assert (failed.run_id, failed.error_type, failed.error_message, failed.messages) == (
        "run-9",
        "TimeoutError",
        "model timed out",
        [_user("hi")],
    )
    assert "TimeoutError: model timed out" in failed.traceback
    asyncio.run(store.clear(context))
    assert store.failed_runs("s") == []


@pytest.mark.parametrize("load_limit", [0, -3, True, 1.5, "10"])
def test_load_limit_must_be_a_positive_int(load_limit: object) -> None:
    with pytest.raises(ValueError, match="load_limit"):
        InProcessMemoryStore(load_limit=load_limit)  # type: ignore[arg-type]


# Runs as lists of message counts: [2, 3] is a run of 2 messages, then of 3.
runs = st.lists(st.integers(min_value=1, max_value=5), min_size=1, max_size=8)


@settings(max_examples=60, deadline=None)
@given(runs=runs, limit=st.integers(min_value=1, max_value=12))
def test_load_limit_windows_start_at_a_run(runs: list[int], limit: int) -> None:
    store = InProcessMemoryStore(load_limit=limit)
    context = MemoryContext("s")
    everything: list[Message] = []

    async def scenario() -> list[Message]:
        for run, size in enumerate(runs):
            batch = [_user(f"{run}.{i}") | {"run": run} for i in range(size)]
            everything.extend(batch)
            await store.append(MemoryAppendInput(context, f"run-{run}", 1, batch))
        return await store.load(context)

    window = asyncio.run(scenario())
    assert len(window) <= limit
    assert window == everything[len(everything) - len(window) :]
    if window:
        first_run = window[0]["run"]
        assert everything.index(window[0]) == next(
            i for i, m in enumerate(everything) if m["run"] == first_run
        )
    # As long a window as allowed: one more run would not have fitted.
    starts = [i for i, m in enumerate(everything) if i == 0 or m["run"] != everything[i - 1]["run"]]
    fitting = [s for s in starts if len(everything) - s <= limit]
    assert len(window) == (len(everything) - min(fitting) if fitting else 0)


@settings(max_examples=30, deadline=None)
@given(
    batches=st.lists(
        st.lists(st.text("ab🙂", max_size=5), min_size=1, max_size=3), min_size=1, max_size=10
    )
)
def test_concurrent_tasks_lose_nothing_and_keep_batches_whole(batches: list[list[str]]) -> None:
    store = InProcessMemoryStore()
    context = MemoryContext("s")

    async def scenario() -> list[Message]:
        async def append(n: int, texts: list[str]) -> None:
            await asyncio.sleep(0)
            batch = [_user(t) | {"batch": n} for t in texts]
            await store.append(MemoryAppendInput(context, f"run-{n}", 1, batch))

        await asyncio.gather(*(append(n, texts) for n, texts in enumerate(batches)))
        return await store.load(context)

    loaded = asyncio.run(scenario())
    assert len(loaded) == sum(map(len, batches))
    order = [m["batch"] for m in loaded]
    # Each batch's messages are contiguous and in their own order.
    assert order == sorted(order, key=order.index)
    for n, texts in enumerate(batches):
        assert [m["content"] for m in loaded if m["batch"] == n] == texts


def test_updated_at_orders_even_within_one_clock_tick() -> None:
    store = InProcessMemoryStore()

    async def scenario() -> list[str]:
        for run, session_id in enumerate(["a", "b", "c", "b"]):
            context = MemoryContext(session_id)
            await store.append(MemoryAppendInput(context, f"r{run}", 1, [_user("x")]))
        listed = await store.inspector.list_conversations(MemoryConversationListOptions(limit=3))
        return [s.session_id for s in listed]

    assert asyncio.run(scenario()) == ["b", "c", "a"]


def _user(content: str) -> Message:
    return {"role": "user", "content": content}


def test_a_conversation_built_positionally_in_the_contracts_order_gets_its_messages() -> None:
    now = datetime.now(UTC)
    message = MemoryConversationMessage(0, "run-1", 1, now, {"role": "user", "content": "hi"})
    conversation = MemoryConversation("ref", "s", None, None, now, now, 1, [message])
    assert conversation.messages == [message]
    assert conversation.scope_key == ""
    summary = MemoryConversationSummary("r", "s", None, None, now, now, 0, scope_key="k")
    assert summary.scope_key == "k"
