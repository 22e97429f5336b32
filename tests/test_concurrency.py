"""Many writers, one session: positions stay gap-free and nothing is lost.

PostgreSQL: OS processes, each with its own connection. SQLite: threads on
one database file, in the documented ``transaction_mode = "IMMEDIATE"``.
"""

from __future__ import annotations

import multiprocessing
import threading
import time
from collections import defaultdict
from typing import Any

import pytest
from django.db import connection, connections

from anvia_django.core.memory import MemoryAppendInput, MemoryContext
from anvia_django.models import Conversation, MemoryMessage
from anvia_django.persistence import append_messages

from . import workers

WRITERS = 8
APPENDS_PER_WRITER = 25


def assert_history_is_whole(session_ids: list[str], writers: int, appends: int) -> None:
    for session_id in session_ids:
        conversation = Conversation.objects.get(session_id=session_id)
        rows = list(
            MemoryMessage.objects.filter(conversation=conversation)
            .order_by("position")
            .values_list("position", "message")
        )
        messages: list[tuple[int, dict[str, Any]]] = rows
        assert [position for position, _ in messages] == list(range(writers * appends))
        assert conversation.message_count == len(rows)
        by_writer: dict[int, list[int]] = defaultdict(list)
        for _, message in messages:
            writer, index = map(int, message["content"].split(":"))
            by_writer[writer].append(index)
        # Every message exactly once, and each writer's messages in its own order.
        assert dict(by_writer) == {w: list(range(appends)) for w in range(writers)}


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("sessions", [1, 5])
def test_processes_appending_at_once(sessions: int) -> None:
    session_ids = [f"shared-{n}" for n in range(sessions)]
    database_name = connection.settings_dict["NAME"]
    connections.close_all()
    start_at = time.time() + 2.0
    context = multiprocessing.get_context("spawn")
    with context.Pool(WRITERS) as pool:
        results = [
            pool.apply_async(
                workers.append_many,
                (database_name, session_ids, writer, APPENDS_PER_WRITER, start_at),
            )
            for writer in range(WRITERS)
        ]
        written = [result.get(timeout=300) for result in results]
    assert written == [APPENDS_PER_WRITER * sessions] * WRITERS
    assert_history_is_whole(session_ids, WRITERS, APPENDS_PER_WRITER)


@pytest.mark.django_db(transaction=True)
def test_threads_appending_at_once() -> None:
    errors: list[BaseException] = []
    barrier = threading.Barrier(WRITERS)

    def write(writer: int) -> None:
        try:
            barrier.wait()
            for index in range(APPENDS_PER_WRITER):
                append_messages(
                    MemoryAppendInput(
                        context=MemoryContext("threads"),
                        run_id=f"writer-{writer}",
                        turn=index + 1,
                        messages=[{"role": "user", "content": f"{writer}:{index}"}],
                    )
                )
        except BaseException as exc:  # reported below, in the test's thread
            errors.append(exc)
        finally:
            connection.close()

    threads = [threading.Thread(target=write, args=(w,)) for w in range(WRITERS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    assert_history_is_whole(["threads"], WRITERS, APPENDS_PER_WRITER)
