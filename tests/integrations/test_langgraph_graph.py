"""A compiled LangGraph graph on DjangoSaver: a conversation resumes on a
new saver (as after a restart), a human approves an interrupted turn
(human in the loop), and a thread forks from an earlier checkpoint.

The graphs run through LangGraph's async API: ``async_to_sync`` gives the
saver's calls the test's thread, so each test stays in its transaction;
one runs a sync graph, whose checkpoints LangGraph writes from its own
worker threads.
"""

from __future__ import annotations

import threading
from typing import Any

import pytest
from asgiref.sync import async_to_sync
from django.db.backends.signals import connection_created
from langgraph.types import Command

from anvia_django.integrations.langgraph import DjangoSaver
from anvia_django.integrations.langgraph.models import LangGraphCheckpoint

from .langgraph_support import chat_graph, fake_model, texts, thread


@pytest.mark.django_db
def test_a_conversation_resumes_on_a_new_saver() -> None:
    first = chat_graph(DjangoSaver())
    async_to_sync(first.ainvoke)({"messages": [("user", "hi")]}, thread("t1"))

    # A new process: a new saver, a new graph, the model's next reply.
    model = fake_model()
    model.i = 1
    again = chat_graph(DjangoSaver(), model)
    state = async_to_sync(again.ainvoke)({"messages": [("user", "and again")]}, thread("t1"))

    assert texts(state) == ["hi", "reply 1", "and again", "reply 2"]
    other = async_to_sync(again.aget_state)(thread("t2"))
    assert other.values == {}


@pytest.mark.django_db
def test_a_human_approves_an_interrupted_turn() -> None:
    graph = chat_graph(DjangoSaver(), review=True)
    paused = async_to_sync(graph.ainvoke)({"messages": [("user", "refund me")]}, thread("t1"))

    assert paused["__interrupt__"][0].value == {"question": "send this reply?"}
    # The approval comes later, to another saver and graph.
    later = chat_graph(DjangoSaver(), review=True)
    waiting = async_to_sync(later.aget_state)(thread("t1"))
    assert waiting.next == ("reviewer",)
    done = async_to_sync(later.ainvoke)(Command(resume="approved by Ana"), thread("t1"))

    assert done["approved"] == "approved by Ana"
    assert texts(done) == ["refund me", "reply 1"]
    assert async_to_sync(later.aget_state)(thread("t1")).next == ()


@pytest.mark.django_db
def test_a_thread_forks_from_an_earlier_checkpoint() -> None:
    graph = chat_graph(DjangoSaver())
    for text in ("one", "two", "three"):
        async_to_sync(graph.ainvoke)({"messages": [("user", text)]}, thread("t1"))

    async def history() -> list[Any]:
        return [state async for state in graph.aget_state_history(thread("t1"))]

    before = async_to_sync(history)()
    # The checkpoint after the first turn's answer: two messages, nothing next.
    after_one = next(s for s in before if len(s.values.get("messages", [])) == 2 and not s.next)
    fork = async_to_sync(graph.ainvoke)(
        {"messages": [("user", "something else")]}, after_one.config
    )

    assert texts(fork) == ["one", "reply 1", "something else", "reply 4"]
    # The latest state is the fork's; the old branch is still there.
    latest = async_to_sync(graph.aget_state)(thread("t1"))
    assert texts(latest.values) == texts(fork)
    after = async_to_sync(history)()
    assert {s.config["configurable"]["checkpoint_id"] for s in before} < {
        s.config["configurable"]["checkpoint_id"] for s in after
    }
    old_end = before[0]
    assert texts(old_end.values) == ["one", "reply 1", "two", "reply 2", "three", "reply 3"]
    assert LangGraphCheckpoint.objects.filter(thread_id="t1").count() == len(after)


@pytest.mark.django_db(transaction=True)
def test_a_sync_graph_opens_connections_on_the_store_threads_only() -> None:
    """A sync graph writes its checkpoints from LangGraph's own worker
    threads, new for each run: those calls run on the store's threads,
    whose connections are closed with them, not on one connection per
    worker thread left open."""
    opened_on: list[str] = []

    def record(sender: Any, connection: Any, **kwargs: Any) -> None:
        opened_on.append(threading.current_thread().name)

    connection_created.connect(record)
    try:
        graph = chat_graph(DjangoSaver())
        graph.invoke({"messages": [("user", "hi")]}, thread("t1"))
        state = graph.invoke({"messages": [("user", "and again")]}, thread("t1"))
    finally:
        connection_created.disconnect(record)

    assert texts(state) == ["hi", "reply 1", "and again", "reply 2"]
    # The main thread reads the thread's state itself (its own connection,
    # if the test's was closed before); every other connection is a store
    # thread's.
    workers = {name for name in opened_on if name != "MainThread"}
    assert workers
    assert all(name.startswith("anvia-db-") for name in workers), opened_on
