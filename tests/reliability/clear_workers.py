"""Child processes of tests/reliability/test_clear_beside_writers.py.

Each configures Django itself (see tests/workers.py) and counts how often
the store retried after a deadlock or serialization failure, by wrapping
the pause it takes before each retry.
"""

from __future__ import annotations

import random
import time
from typing import Any

from tests.workers import setup_django, start_together, writer_messages


def _count_conflicts() -> list[int]:
    from anvia_django.persistence import reconnect

    counted = [0]
    pause = reconnect.conflict_pause

    def counting(attempt: int) -> float:
        counted[0] += 1
        return pause(attempt)

    reconnect.conflict_pause = counting
    return counted


def write_and_fail(
    database_name: str,
    session_ids: list[str],
    writer: int,
    duration: float,
    clears_done: Any,
    gate: Any,
) -> tuple[dict[str, list[int]], int]:
    """For ``duration`` seconds from the start, append to the sessions in turn and record a failed
    run after every third append; once ``clears_done`` is set, append and
    record one failed run more to every session.

    Returns the indices of the appends that returned, per session, and how
    many conflicts the store retried.
    """
    setup_django(database_name)
    from django.db import connection

    from anvia_django.core.memory import MemoryAppendInput, MemoryContext, MemoryErrorInput
    from anvia_django.persistence import append_messages, record_failed_run

    conflicts = _count_conflicts()
    returned: dict[str, list[int]] = {session_id: [] for session_id in session_ids}
    index = 0

    def append(session_id: str, *, error: bool) -> None:
        nonlocal index
        messages = writer_messages(writer, index)
        context = MemoryContext(session_id)
        run_id = f"writer-{writer}"
        append_messages(MemoryAppendInput(context, run_id, index + 1, messages))
        returned[session_id].append(index)
        if error:
            failure = RuntimeError(f"{writer}:{index}")
            record_failed_run(MemoryErrorInput(context, run_id, failure, messages))
        index += 1

    start_together(gate)
    until = time.time() + duration
    try:
        while time.time() < until:
            append(session_ids[(index + writer) % len(session_ids)], error=index % 3 == 0)
        assert clears_done.wait(timeout=600), "the clearing process never finished"
        for session_id in session_ids:
            append(session_id, error=True)
    finally:
        connection.close()
    return returned, conflicts[0]


def clear_until(
    database_name: str,
    session_ids: list[str],
    duration: float,
    clears_done: Any,
    gate: Any,
) -> tuple[int, int]:
    """Clear the sessions in random order, with short random pauses, for
    ``duration`` seconds from the start (each at least once); then set
    ``clears_done``. Returns the
    clears made and the conflicts the store retried."""
    setup_django(database_name)
    from django.db import connection

    from anvia_django.core.memory import MemoryContext
    from anvia_django.persistence import clear_conversation

    conflicts = _count_conflicts()
    cleared = 0
    start_together(gate)
    until = time.time() + duration
    try:
        # At least one pass, also when a pass takes longer than the
        # window (a loaded machine, the smoke size's short window).
        while True:
            for session_id in random.sample(session_ids, len(session_ids)):
                clear_conversation(MemoryContext(session_id))
                cleared += 1
                time.sleep(random.uniform(0, 0.005))
            if time.time() >= until:
                break
    finally:
        clears_done.set()
        connection.close()
    return cleared, conflicts[0]
