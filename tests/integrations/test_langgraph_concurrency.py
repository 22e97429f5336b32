"""Graphs on DjangoSaver at once: workers (processes on a server, threads
everywhere) on a thread each lose nothing; on one thread, runs at once may
fork it (each LangGraph run extends the checkpoint it read last), and
every checkpoint still extends its own parent: no history mixes two runs."""

from __future__ import annotations

from typing import Any

import pytest

from anvia_django.integrations.langgraph import DjangoSaver
from tests.concurrently import Job, run_at_once

from . import langgraph_workers
from .langgraph_support import texts, thread

WORKERS = 2
TURNS = 4


def message_ids(checkpoint: Any) -> list[str]:
    return [message.id for message in checkpoint.checkpoint["channel_values"].get("messages", [])]


@pytest.mark.django_db(transaction=True)
def test_workers_on_their_own_threads_lose_nothing(processes: bool) -> None:
    jobs: list[Job] = [
        (langgraph_workers.chat_turns, (w, f"thread-{w}", TURNS)) for w in range(WORKERS)
    ]
    assert run_at_once(jobs, processes=processes, timeout=300) == [TURNS] * WORKERS

    saver = DjangoSaver()
    for worker in range(WORKERS):
        latest = saver.get_tuple(thread(f"thread-{worker}"))
        assert latest is not None
        said = [text for text in texts(latest.checkpoint["channel_values"]) if ":" in text]
        assert said == [f"{worker}:{turn}" for turn in range(TURNS)]
        # Three checkpoints a turn: the input, the start, the answer.
        assert len(list(saver.list(thread(f"thread-{worker}")))) == 3 * TURNS


@pytest.mark.django_db(transaction=True)
def test_runs_on_one_thread_at_once_never_mix_a_history() -> None:
    # Threads only: the invariant is the saver's, processes add only cost.
    jobs: list[Job] = [(langgraph_workers.chat_turns, (w, "shared", TURNS)) for w in range(WORKERS)]
    assert run_at_once(jobs, processes=False, timeout=300) == [TURNS] * WORKERS

    saver = DjangoSaver()
    checkpoints = list(saver.list(thread("shared")))
    assert len(checkpoints) == 3 * TURNS * WORKERS  # nothing lost
    for checkpoint in checkpoints:
        if checkpoint.parent_config is None:
            continue
        parent = saver.get_tuple(checkpoint.parent_config)
        assert parent is not None
        # A checkpoint's messages are its parent's and then its step's own.
        ids = message_ids(checkpoint)
        assert ids[: len(message_ids(parent))] == message_ids(parent)
        assert len(ids) - len(message_ids(parent)) <= 1
