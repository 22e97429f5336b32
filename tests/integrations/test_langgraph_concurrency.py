"""Graphs on DjangoSaver at once: workers (processes on a server, threads
everywhere) on a thread each lose nothing; on one thread, of two runs that
read the same latest checkpoint the second to store is refused
(``ConcurrentRunError``), so the thread never forks unasked."""

from __future__ import annotations

import contextlib
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from functools import partial
from typing import Any

import pytest
from django.db import connection, transaction
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import CheckpointTuple, create_checkpoint, empty_checkpoint

from anvia_django.integrations.langgraph import ConcurrentRunError, DjangoSaver, conflicts
from anvia_django.integrations.langgraph.places import FOLLOWS_LATEST
from tests.concurrently import Job, run_at_once

from . import langgraph_workers
from .langgraph_support import chat_graph, texts, thread

WORKERS = 2
TURNS = 4
CHECKPOINTS_A_TURN = 3  # the input, the start, the answer


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
        assert len(list(saver.list(thread(f"thread-{worker}")))) == CHECKPOINTS_A_TURN * TURNS


@pytest.mark.django_db(transaction=True)
def test_runs_on_one_thread_at_once_never_fork_it() -> None:
    # Threads only: the invariant is the saver's, processes add only cost.
    # A turn another run refused runs again (langgraph_workers.chat_turns).
    jobs: list[Job] = [(langgraph_workers.chat_turns, (w, "shared", TURNS)) for w in range(WORKERS)]
    assert run_at_once(jobs, processes=False, timeout=300) == [TURNS] * WORKERS

    saver = DjangoSaver()
    checkpoints = list(saver.list(thread("shared")))
    assert_no_fork(checkpoints)
    for checkpoint in checkpoints:
        if checkpoint.parent_config is None:
            continue
        parent = saver.get_tuple(checkpoint.parent_config)
        assert parent is not None
        # A checkpoint's messages are its parent's and then its step's own.
        ids = message_ids(checkpoint)
        assert ids[: len(message_ids(parent))] == message_ids(parent)
        assert len(ids) - len(message_ids(parent)) <= 1
    latest = saver.get_tuple(thread("shared"))
    assert latest is not None
    said = set(texts(latest.checkpoint["channel_values"]))
    assert {f"{w}:{turn}" for w in range(WORKERS) for turn in range(TURNS)} <= said


def assert_one_line(checkpoints: list[Any]) -> None:
    """Every checkpoint but the first extends the one stored before it: no fork."""
    ids = sorted(checkpoint.config["configurable"]["checkpoint_id"] for checkpoint in checkpoints)
    parents = {
        checkpoint.config["configurable"]["checkpoint_id"]: (
            checkpoint.parent_config and checkpoint.parent_config["configurable"]["checkpoint_id"]
        )
        for checkpoint in checkpoints
    }
    assert [parents[child] for child in ids] == [None, *ids[:-1]]


class Meeting(DjangoSaver):
    """Runs on this saver, once they read their thread's latest checkpoint,
    wait for each other: two runs at once surely continue the same one."""

    def __init__(self, runs: int) -> None:
        super().__init__()
        self.met = threading.Barrier(runs)

    def get_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        found = super().get_tuple(config)
        self.met.wait(timeout=30)
        return found


def run_refusing(graph: Any, message: str) -> str:
    """ "done", or the refusal's message."""
    try:
        graph.invoke({"messages": [("user", message)]}, thread("twice"))
    except ConcurrentRunError as refused:
        return str(refused)
    return "done"


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("first", [False, True], ids=["later-runs", "first-runs"])
def test_the_same_thread_run_twice_at_once_refuses_one_run(
    monkeypatch: pytest.MonkeyPatch, first: bool
) -> None:
    # first: the thread has no checkpoint yet, so no config can say that a
    # run follows its latest: the saver remembers (conflicts.Following).
    before = [] if first else ["hello", "reply 1"]
    if not first:
        chat_graph(DjangoSaver()).invoke({"messages": [("user", "hello")]}, thread("twice"))
    checked = threading.Barrier(2)
    latest_after_lock = conflicts.latest_after_lock

    def check_then_wait(*args: Any) -> str | None:
        # Both runs past the check before either stores, unless the check's
        # lock keeps the second out until the first commits (SQLite's write
        # lock, the parent's row lock on a server). PostgreSQL checks and
        # stores in one statement (dialects/checkpoints.py), no window.
        latest = latest_after_lock(*args)
        with contextlib.suppress(threading.BrokenBarrierError):
            checked.wait(timeout=0.25)
        return latest

    monkeypatch.setattr(conflicts, "latest_after_lock", check_then_wait)
    graph = chat_graph(Meeting(2))
    with ThreadPoolExecutor(2) as pool:
        outcomes = list(pool.map(partial(run_refusing, graph), ["first", "second"]))

    assert "done" in outcomes
    (refusal,) = (outcome for outcome in outcomes if outcome != "done")
    assert "thread 'twice'" in refusal
    assert "Nothing was stored" in refusal
    winner = ["first", "second"][outcomes.index("done")]
    saver = DjangoSaver()
    latest = saver.get_tuple(thread("twice"))
    assert latest is not None
    said = texts(latest.checkpoint["channel_values"])
    assert said[:-1] == [*before, winner]  # the winner's reply last
    checkpoints = list(saver.list(thread("twice")))
    assert_no_fork(checkpoints)
    if not first:
        # The refused run stored nothing: it was refused at its first put.
        assert_one_line(checkpoints)
        assert len(checkpoints) == 2 * CHECKPOINTS_A_TURN

    # Run again, the refused run continues the thread.
    loser = ["first", "second"][outcomes.index(refusal)]
    chat_graph(DjangoSaver()).invoke({"messages": [("user", loser)]}, thread("twice"))
    latest = saver.get_tuple(thread("twice"))
    assert latest is not None
    assert texts(latest.checkpoint["channel_values"])[:-1] == [*said, loser]
    assert_no_fork(list(saver.list(thread("twice"))))


def assert_no_fork(checkpoints: list[Any]) -> None:
    """No checkpoint has two children (a first run refused at its second
    put leaves its first checkpoint, a child of none)."""
    parents = [
        checkpoint.parent_config["configurable"]["checkpoint_id"]
        for checkpoint in checkpoints
        if checkpoint.parent_config is not None
    ]
    assert len(parents) == len(set(parents))


class ReadsThenWaits(DjangoSaver):
    """A saver whose run, once it has read its thread, waits for ``go``."""

    def __init__(self) -> None:
        super().__init__()
        self.read = threading.Event()
        self.go = threading.Event()

    def get_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        found = super().get_tuple(config)
        self.read.set()
        assert self.go.wait(timeout=30)
        return found


@pytest.mark.django_db(transaction=True)
def test_a_first_run_is_refused_after_another_run_stored_a_whole_turn() -> None:
    # The late run read the thread empty; the other run then stored all its
    # checkpoints before the late one stored its first.
    late = ReadsThenWaits()
    with ThreadPoolExecutor(1) as pool:
        outcome = pool.submit(run_refusing, chat_graph(late), "late")
        assert late.read.wait(timeout=30)
        chat_graph(DjangoSaver()).invoke({"messages": [("user", "early")]}, thread("twice"))
        late.go.set()
        refusal = outcome.result(timeout=30)

    assert "thread 'twice'" in refusal
    assert "found the thread without checkpoints" in refusal
    saver = DjangoSaver()
    checkpoints = list(saver.list(thread("twice")))
    assert len(checkpoints) == CHECKPOINTS_A_TURN  # the late run stored none
    assert_one_line(checkpoints)


def next_checkpoint(step: int) -> Any:
    checkpoint = create_checkpoint(empty_checkpoint(), None, step)
    checkpoint["channel_values"] = {"count": step}
    checkpoint["channel_versions"] = {"count": step}
    return checkpoint


@pytest.mark.django_db(transaction=True)
def test_a_put_queued_on_the_parents_lock_is_refused_inside_a_callers_transaction() -> None:
    # The window the check closes, forced: another run's put holds the
    # parent's lock (its transaction still open) when this put asks for it,
    # and commits a child only then. This put reads the latest after the
    # lock (PostgreSQL: a statement of its own inside
    # anvia_django_langgraph_put; MariaDB: a locking read; SQLite: the write
    # lock) and is refused; run inside the caller's transaction, it leaves
    # that transaction usable.
    saver = DjangoSaver()
    root: Any = {"configurable": {"thread_id": "t", "checkpoint_ns": ""}}
    parent = saver.put(root, next_checkpoint(1), {"step": 1}, {"count": 1})
    following: Any = {"configurable": {**parent["configurable"], FOLLOWS_LATEST: True}}
    holding = threading.Event()

    def other_run() -> str:
        try:
            with transaction.atomic():
                stored = DjangoSaver().put(following, next_checkpoint(2), {"step": 2}, {"count": 2})
                holding.set()
                time.sleep(0.5)  # this put is queued on the lock meanwhile
            return str(stored["configurable"]["checkpoint_id"])
        finally:
            connection.close()

    with ThreadPoolExecutor(1) as pool:
        child = pool.submit(other_run)
        assert holding.wait(timeout=30)
        with transaction.atomic():
            with pytest.raises(ConcurrentRunError) as refused:
                saver.put(following, next_checkpoint(3), {"step": 3}, {"count": 3})
            # The caller's transaction goes on: a branch on purpose is stored.
            named: Any = {"configurable": dict(parent["configurable"])}
            branch = saver.put(named, next_checkpoint(4), {"step": 4}, {"count": 4})
        child_id = child.result(timeout=30)

    assert refused.value.latest == child_id
    stored = {
        found.config["configurable"]["checkpoint_id"]: found.checkpoint["channel_values"]["count"]
        for found in saver.list(root)
    }
    assert stored == {
        parent["configurable"]["checkpoint_id"]: 1,
        child_id: 2,
        branch["configurable"]["checkpoint_id"]: 4,
    }
