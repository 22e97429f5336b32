"""Child-process code of the tenant-scope concurrency test (see tests/workers.py)."""

from __future__ import annotations

from typing import Any

from .workers import setup_django, start_together

TENANT_SCOPE = {"user_id": True, "metadata_keys": ["tenant_id"]}


def append_as_tenant(
    database_name: str | None, session_ids: list[str], writer: int, gate: Any
) -> int:
    """Append once to each new session, as tenant ``t<writer % 2>`` with no
    user id: every session is created by four writers of each tenant at once."""
    if database_name is not None:
        setup_django(database_name)
    from django.db import connection

    from anvia_django.core.memory import MemoryAppendInput, MemoryContext
    from anvia_django.core.memory.scope import parse_scope
    from anvia_django.persistence import append_messages

    scope = parse_scope(TENANT_SCOPE)
    tenant = f"t{writer % 2}"
    start_together(gate)
    try:
        for session_id in session_ids:
            context = MemoryContext(session_id, metadata={"tenant_id": tenant})
            message = {"role": "user", "content": f"{tenant}:{writer}"}
            append_messages(MemoryAppendInput(context, f"w{writer}", 1, [message]), scope)
    finally:
        connection.close()
    return len(session_ids)
