"""Child-process code of the re-encryption tests (see tests/workers.py):
writers that append until told to stop, and a re-encryption that stops in
the middle of a batch to be killed."""

from __future__ import annotations

import os
import time
from typing import Any

OWNER_CHECKED_SCOPE = {"user_id": False, "metadata_keys": []}
"""The suite's scope (tests/conftest.py, which a child cannot import before
Django is set up)."""

WRITERS = 8
USERS = 4
SESSIONS_PER_WRITER = 3


def setup_django(database_name: str, anvia: dict[str, Any]) -> None:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "tests.settings")
    from django.conf import settings

    settings.DATABASES["default"]["NAME"] = database_name
    # The suite's scope, so the parent finds the sessions.
    settings.ANVIA_DJANGO = {"SCOPE": OWNER_CHECKED_SCOPE, **anvia}
    import django

    django.setup()


def writer_session(writer: int, index: int) -> tuple[str, str]:
    """The session and user of ``writer``'s append number ``index``: a few
    sessions per writer, made as it goes (new conversations of users whose
    key may be being replaced), users shared by two writers."""
    return f"w{writer}-s{index % SESSIONS_PER_WRITER}", f"u{writer % USERS}"


def append_until_stopped(
    database_name: str | None, anvia: dict[str, Any], writer: int, stop: Any, least: int
) -> int:
    """Append one message at a time, at least ``least`` times and then until
    ``stop`` is set; how many appends were made. ``database_name`` None: a
    thread of the test process, set up already."""
    if database_name is not None:
        setup_django(database_name, anvia)
    from django.db import connection

    from anvia_django.core.memory import MemoryAppendInput, MemoryContext
    from anvia_django.persistence import append_messages

    index = 0
    try:
        while index < least or not stop.is_set():
            session_id, user_id = writer_session(writer, index)
            append_messages(
                MemoryAppendInput(
                    context=MemoryContext(session_id, user_id=user_id),
                    run_id=f"writer-{writer}",
                    turn=index + 1,
                    messages=[{"role": "user", "content": f"{writer}:{index}"}],
                )
            )
            index += 1
    finally:
        connection.close()
    return index


def reencrypt_until_paused(
    database_name: str, anvia: dict[str, Any], paused: Any, steps: int
) -> None:
    """Run ``rotate-keys --reencrypt`` with batches of one row; on the
    ``steps``-th batch, having sealed its row again but before its commit,
    set ``paused`` and wait to be killed."""
    setup_django(database_name, anvia)
    from django.core.management import call_command

    from anvia_django.persistence.codec import reencrypt

    calls = 0
    real_steps = reencrypt.SEALED_TABLES

    def step_then_pause(alias: str, conversation_id: int, key: Any, limit: int) -> int:
        nonlocal calls
        done = sum(step(alias, conversation_id, key, limit) for step in real_steps)
        calls += 1
        if calls == steps:
            paused.set()
            time.sleep(600)  # killed long before
        return done

    reencrypt.SEALED_TABLES = (step_then_pause,)
    call_command("anvia_memory", "rotate-keys", "--reencrypt", "--batch-size", "1", verbosity=0)
