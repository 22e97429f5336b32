"""Helpers shared by the integration suites."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from django.db import connection
from hypothesis import strategies as st

from anvia_django.models import Conversation, MemoryMessage

# JSON values our validation accepts (no NaN, no U+0000, no lone surrogates).
json_text = st.text(st.characters(exclude_categories=["Cs"], exclude_characters="\x00"))
json_scalars = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**63), max_value=2**63 - 1)
    | st.floats(allow_nan=False, allow_infinity=False)
    | json_text
)
json_values = st.recursive(
    json_scalars,
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(json_text, children, max_size=4)
    ),
    max_leaves=12,
)


def at_once(workers: int, work: Callable[[int], Any]) -> None:
    """Run ``work(0..workers-1)`` in threads released together; re-raise any error."""
    errors: list[BaseException] = []
    barrier = threading.Barrier(workers)

    def target(worker: int) -> None:
        try:
            barrier.wait()
            work(worker)
        except BaseException as exc:  # reported in the test's thread
            errors.append(exc)
        finally:
            connection.close()

    threads = [threading.Thread(target=target, args=(w,)) for w in range(workers)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []


def stored_rows(session_id: str) -> list[tuple[int, str, int, str]]:
    """``(position, run_id, turn, role)`` of every stored message, in order."""
    return list(
        MemoryMessage.objects.filter(conversation__session_id=session_id)
        .order_by("position")
        .values_list("position", "run_id", "turn", "role")
    )


def assert_gap_free(session_id: str) -> None:
    conversation = Conversation.objects.get(session_id=session_id)
    positions = [row[0] for row in stored_rows(session_id)]
    assert positions == list(range(len(positions)))
    assert conversation.message_count == len(positions)


def kill_backend() -> None:
    """End the test connection on the server (PostgreSQL or MariaDB/MySQL)
    from another connection, as a server restart or an idle timeout would."""
    from django.db import connection, connections

    connection.ensure_connection()
    assert connection.connection is not None
    with connections["other"].cursor() as cursor:
        if connection.vendor == "mysql":
            cursor.execute("KILL CONNECTION %s", [connection.connection.thread_id()])
        else:
            pid = connection.connection.info.backend_pid
            cursor.execute("SELECT pg_terminate_backend(%s)", [pid])
