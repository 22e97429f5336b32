"""Code that runs in child processes of the concurrency tests.

Each child configures Django itself (spawned processes share nothing with
the parent) and points at the test database the parent created.
"""

from __future__ import annotations

import os
import time


def setup_django(database_name: str) -> None:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "tests.settings")
    from django.conf import settings

    settings.DATABASES["default"]["NAME"] = database_name
    import django

    django.setup()


def append_many(
    database_name: str, session_ids: list[str], writer: int, count: int, start_at: float
) -> int:
    """Append ``count`` messages per session as ``writer``; return how many were written."""
    setup_django(database_name)
    from django.db import connection

    from anvia_django.core.memory import MemoryAppendInput, MemoryContext
    from anvia_django.persistence import append_messages

    while time.time() < start_at:
        time.sleep(0.001)
    written = 0
    try:
        for index in range(count):
            for session_id in session_ids:
                append_messages(
                    MemoryAppendInput(
                        context=MemoryContext(session_id),
                        run_id=f"writer-{writer}",
                        turn=index + 1,
                        messages=[{"role": "user", "content": f"{writer}:{index}"}],
                    )
                )
                written += 1
    finally:
        connection.close()
    return written
