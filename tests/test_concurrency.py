"""Many writers at once: nothing lost, nothing duplicated, nothing reordered.

PostgreSQL and MariaDB/MySQL: OS processes, each with its own connection
(8 of them on one new session is where a careless upsert deadlocks). Every backend:
threads, each with its own connection (on SQLite, one database file in the
documented ``transaction_mode = "IMMEDIATE"`` with a busy ``timeout``; no
error may reach the caller). A concurrent ``clear`` leaves the session
empty or holding only whole appends made after it.

``ANVIA_RELIABILITY=long`` makes every writer append ten times as often.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

import pytest

from anvia_django.models import Conversation, MemoryMessage

from . import workers
from .concurrently import Job, run_at_once
from .reliability.budget import scaled
from .reliability.report import record

WRITERS = 8
APPENDS_PER_WRITER = scaled(ci=100, long=1000)


def kept_appends(session_id: str) -> dict[int, list[int]]:
    """Each writer's append indices in the session, in position order.

    Checks on the way that positions are 0..n-1, the stored count equals the
    rows, and every append is whole and contiguous.
    """
    conversation = Conversation.objects.filter(session_id=session_id).first()
    if conversation is None:
        return {}
    # Model instances, which open sealed messages (ANVIA_TEST_ENCRYPTION=1).
    rows: list[tuple[int, dict[str, Any]]] = [
        (row.position, row.message)
        for row in MemoryMessage.objects.filter(conversation=conversation)
        .order_by("position")
        .only("conversation_id", "position", "message")
    ]
    assert [position for position, _ in rows] == list(range(len(rows))), "a gap or duplicate"
    assert conversation.message_count == len(rows)
    by_writer: dict[int, list[int]] = defaultdict(list)
    cursor = 0
    while cursor < len(rows):
        writer, index, _ = map(int, rows[cursor][1]["content"].split(":"))
        expected = workers.writer_messages(writer, index)
        got = [message for _, message in rows[cursor : cursor + len(expected)]]
        assert got == expected, f"append {writer}:{index} was split or interleaved"
        by_writer[writer].append(index)
        cursor += len(expected)
    return dict(by_writer)


def assert_nothing_lost(session_ids: list[str], *, processes: int, kind: str) -> None:
    expected: dict[str, dict[int, list[int]]] = {s: defaultdict(list) for s in session_ids}
    for writer in range(WRITERS):
        for index in range(APPENDS_PER_WRITER):
            session_id = session_ids[(index + writer) % len(session_ids)]
            expected[session_id][writer].append(index)
    lost = duplicated = messages = 0
    for session_id in session_ids:
        kept = kept_appends(session_id)
        for writer, indices in expected[session_id].items():
            got = kept.get(writer, [])
            lost += len(set(indices) - set(got))
            duplicated += len(got) - len(set(got))
            # Exactly once each, and in the writer's own order.
            assert got == indices, f"writer {writer} in {session_id}"
        messages += MemoryMessage.objects.filter(conversation__session_id=session_id).count()
    record(
        f"concurrency ({kind})",
        runs=1,
        writers=processes,
        sessions=len(session_ids),
        appends=WRITERS * APPENDS_PER_WRITER,
        messages=messages,
        lost=lost,
        duplicated=duplicated,
    )


def writer_jobs(session_ids: list[str]) -> list[Job]:
    return [(workers.append_many, (session_ids, w, APPENDS_PER_WRITER)) for w in range(WRITERS)]


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("sessions", [1, 50])
def test_writers_appending_at_once(processes: bool, sessions: int) -> None:
    kind = "processes" if processes else "threads"
    session_ids = [f"{kind}-{n}" for n in range(sessions)]
    written = run_at_once(writer_jobs(session_ids), processes=processes)
    assert written == [APPENDS_PER_WRITER] * WRITERS
    assert_nothing_lost(session_ids, processes=WRITERS, kind=kind)


NEW_SESSIONS = scaled(ci=40, long=400, smoke=15)


@pytest.mark.django_db(transaction=True)
def test_writers_racing_to_create_each_new_session(processes: bool) -> None:
    # Every append is a first append to its session, raced by the others:
    # where creating the row takes the wrong locks, writers deadlock here.
    jobs: list[Job] = [
        (workers.append_to_new_sessions, ("fresh", NEW_SESSIONS, w)) for w in range(WRITERS)
    ]
    assert run_at_once(jobs, processes=processes) == [NEW_SESSIONS] * WRITERS
    for index in range(NEW_SESSIONS):
        kept = kept_appends(f"fresh-{index}")
        assert kept == {writer: [index] for writer in range(WRITERS)}, f"fresh-{index}"
    record(
        f"new sessions raced ({'processes' if processes else 'threads'})",
        runs=1,
        writers=WRITERS,
        sessions=NEW_SESSIONS,
        appends=WRITERS * NEW_SESSIONS,
    )


CLEARS = 5


def assert_only_whole_appends_after_a_clear(session_id: str, clears: int, *, kind: str) -> None:
    kept = kept_appends(session_id)
    if kind == "processes":
        # SQLite's busy handler may starve the clearing thread until the
        # writers are done; separate processes on PostgreSQL queue fairly.
        assert kept, "the last clear came after the writers had finished"
    for writer, indices in kept.items():
        # A writer appends in order, so what survived the last clear is
        # a run of its latest appends: a suffix of its sequence.
        assert indices == list(range(indices[0], APPENDS_PER_WRITER)), f"writer {writer}"
    record(
        f"clear against appends ({kind})",
        runs=1,
        clears=clears,
        appends=WRITERS * APPENDS_PER_WRITER,
        kept_appends=sum(len(indices) for indices in kept.values()),
    )


@pytest.mark.django_db(transaction=True)
def test_clear_against_appends(processes: bool) -> None:
    session_id = "cleared-while-written"
    # Spread the clears over the first half of the writing.
    threshold = WRITERS * APPENDS_PER_WRITER // (2 * CLEARS)
    jobs = [*writer_jobs([session_id]), (workers.clear_repeatedly, (session_id, CLEARS, threshold))]
    *written, clears = run_at_once(jobs, processes=processes)
    assert written == [APPENDS_PER_WRITER] * WRITERS
    assert clears >= 1
    assert_only_whole_appends_after_a_clear(
        session_id, clears, kind="processes" if processes else "threads"
    )
