"""Two worker processes run Pydantic AI agents on the same threads at once.

"by-run" (save="run"): every run is one append, so the history has no gap,
no duplicate, and each run's messages together. "by-turn" (save="turn"):
runs of one thread interleave turn by turn, as they happened; each turn
stays whole and each run's turns in order.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

import pytest

from anvia_django.core.memory.types import MemoryContext
from anvia_django.store import DjangoMemoryStore
from tests.concurrently import Job, run_at_once
from tests.helpers import run, stored

pytest.importorskip("pydantic_ai")

from anvia_django.integrations.pydantic_ai import stored_to_messages

from . import pydantic_ai_workers

WORKERS = 2
RUNS = 8
MESSAGES_PER_RUN = 4  # the prompt, the tool call, its return, the answer


def rows_by_run(session_id: str) -> dict[str, list[tuple[int, int, Any]]]:
    rows = stored(session_id)
    assert [position for position, *_ in rows] == list(range(WORKERS * RUNS * MESSAGES_PER_RUN))
    by_run: dict[str, list[tuple[int, int, Any]]] = defaultdict(list)
    for position, run_id, turn, message in rows:
        by_run[run_id].append((position, turn, message))
    assert len(by_run) == WORKERS * RUNS
    return by_run


def prompt_of(messages: list[tuple[int, int, Any]]) -> str:
    text: str = messages[0][2]["content"][0]["text"]
    return text


@pytest.mark.django_db(transaction=True)
def test_two_processes_running_one_thread_each_keep_every_run_whole() -> None:
    jobs: list[Job] = [(pydantic_ai_workers.run_agents, (w, RUNS)) for w in range(WORKERS)]
    assert run_at_once(jobs, processes=True, timeout=300) == [RUNS] * WORKERS

    by_run = rows_by_run("by-run")
    for messages in by_run.values():
        positions = [position for position, _, _ in messages]
        assert positions == list(range(positions[0], positions[0] + MESSAGES_PER_RUN))
    assert sorted(prompt_of(m) for m in by_run.values()) == sorted(
        f"{w}:{i}" for w in range(WORKERS) for i in range(RUNS)
    )
    # Each worker's runs in the order it made them.
    for worker in range(WORKERS):
        own = sorted(
            (m[0][0], prompt_of(m))
            for m in by_run.values()
            if prompt_of(m).startswith(f"{worker}:")
        )
        assert [prompt for _, prompt in own] == [f"{worker}:{i}" for i in range(RUNS)]

    by_turn = rows_by_run("by-turn")
    for messages in by_run.values():
        assert len(messages) == MESSAGES_PER_RUN
    for messages in by_turn.values():
        # Turn 1 (prompt, call, return) is one append, turn 2 (the answer) another.
        assert [turn for _, turn, _ in messages] == [1, 1, 1, 2]
        first = [position for position, turn, _ in messages if turn == 1]
        assert first == list(range(first[0], first[0] + 3))
        assert messages[3][0] > first[-1]
    # The workers' runs did overlap (else this test would prove nothing):
    # some run's answer came after another run's first turn.
    assert any(messages[3][0] != messages[2][0] + 1 for messages in by_turn.values())
    # Every stored message loads back as a Pydantic AI message.
    for session_id in ("by-run", "by-turn"):
        loaded = run(DjangoMemoryStore().load, MemoryContext(session_id))
        assert len(stored_to_messages(loaded)) == WORKERS * RUNS * MESSAGES_PER_RUN
