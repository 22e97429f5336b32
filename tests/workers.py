"""Code that runs in child processes of the concurrency tests.

Each child configures Django itself (worker processes share nothing with
the parent) and points at the test database the parent created. Workers
begin together at a start gate (:func:`start_together`), once every one of
them is ready, however long starting took.
"""

from __future__ import annotations

import os
import time
from typing import Any


def setup_django(database_name: str) -> None:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "tests.settings")
    from django.conf import settings

    settings.DATABASES["default"]["NAME"] = database_name
    import django

    django.setup()
    if os.environ.get("ANVIA_TEST_ENCRYPTION") == "1":
        # As tests/conftest.py does in the parent: the children of a run
        # with encryption on write and read sealed messages too.
        from anvia_django import conf
        from tests.encryption.support import encryption

        conf.DEFAULTS["ENCRYPTION"] = encryption()["ENCRYPTION"]
        conf.app_settings.reload()


START_TIMEOUT = 120.0
"""Seconds a worker waits at the start gate for the others to be ready."""


def start_together(gate: Any) -> None:
    """Wait at ``gate``, a barrier with one party per worker of the test
    (:func:`tests.concurrently.start_gate`): all begin the race at once. A
    worker that never arrives breaks the barrier, and every worker fails
    instead of racing fewer others."""
    gate.wait(timeout=START_TIMEOUT)


def writer_messages(writer: int, index: int) -> list[dict[str, str]]:
    """The messages of ``writer``'s append number ``index``: one or two of them.

    Two-message appends let the checks see that an append is never split.
    """
    parts = 2 if index % 3 == 0 else 1
    return [{"role": "user", "content": f"{writer}:{index}:{part}"} for part in range(parts)]


def append_many(
    database_name: str | None, session_ids: list[str], writer: int, count: int, gate: Any
) -> int:
    """Make ``count`` appends as ``writer``, round-robin over the sessions.

    Append ``index`` goes to ``session_ids[(index + writer) % len(session_ids)]``.
    Returns how many appends were made. ``database_name`` None means "already
    set up" (a thread of the test process).
    """
    if database_name is not None:
        setup_django(database_name)
    from django.db import connection

    from anvia_django.core.memory import MemoryAppendInput, MemoryContext
    from anvia_django.persistence import append_messages

    start_together(gate)
    written = 0
    try:
        for index in range(count):
            session_id = session_ids[(index + writer) % len(session_ids)]
            append_messages(
                MemoryAppendInput(
                    context=MemoryContext(session_id),
                    run_id=f"writer-{writer}",
                    turn=index + 1,
                    messages=writer_messages(writer, index),
                )
            )
            written += 1
    finally:
        connection.close()
    return written


def clear_repeatedly(
    database_name: str | None, session_id: str, times: int, threshold: int, gate: Any
) -> int:
    """Clear the session up to ``times`` times, each once it holds ``threshold``
    messages; stop early when the writers have gone quiet for a second.

    Waiting for the session to fill (rather than sleeping) puts every clear
    in the middle of the writers' work, however fast the machine is.
    Returns how many clears were made.
    """
    if database_name is not None:
        setup_django(database_name)
    from django.db import connection

    from anvia_django.core.memory import MemoryContext
    from anvia_django.models import Conversation
    from anvia_django.persistence import clear_conversation

    start_together(gate)
    conversations = Conversation.objects.filter(session_id=session_id)
    cleared = 0
    try:
        last_count, last_change = 0, time.time() + 60  # give the writers time to start
        while cleared < times and time.time() - last_change < 1.0:
            count = conversations.values_list("message_count", flat=True).first() or 0
            if count != last_count or (count and last_change > time.time()):
                last_count, last_change = count, time.time()
            if count >= threshold:
                clear_conversation(MemoryContext(session_id))
                cleared += 1
            else:
                time.sleep(0.001)
    finally:
        connection.close()
    return cleared


def append_to_new_sessions(
    database_name: str | None, prefix: str, count: int, writer: int, gate: Any
) -> int:
    """Append once to each of ``prefix-0`` .. ``prefix-<count-1>``, in order.

    Every writer walks the same sessions in the same order, so each append
    races the other writers' to create its session. Returns the appends made.
    """
    if database_name is not None:
        setup_django(database_name)
    from django.db import connection

    from anvia_django.core.memory import MemoryAppendInput, MemoryContext
    from anvia_django.persistence import append_messages

    start_together(gate)
    try:
        for index in range(count):
            append_messages(
                MemoryAppendInput(
                    context=MemoryContext(f"{prefix}-{index}"),
                    run_id=f"writer-{writer}",
                    turn=index + 1,
                    messages=writer_messages(writer, index),
                )
            )
    finally:
        connection.close()
    return count
