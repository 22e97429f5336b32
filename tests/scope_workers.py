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


TENANTS_AND_USERS = [(tenant, user) for tenant in ("acme", "globex") for user in ("u1", "u2")]


def append_in_groups_to_one_session_id(
    database_name: str | None, session_id: str, writer: int, appends: int, gate: Any
) -> list[float]:
    """``appends`` appends to ``session_id`` from 8 tasks at once, through a
    store with one thread (so they queue and run as groups), each task under
    one of 2 tenants x 2 users: every group holds several conversations of
    one session id. Returns each append's seconds."""
    if database_name is not None:
        setup_django(database_name)
    import asyncio
    import time

    from django.db import connection
    from django.test.utils import override_settings

    from anvia_django.core.memory import MemoryAppendInput, MemoryContext
    from anvia_django.persistence.threads.dispatch import close_db_threads
    from anvia_django.store import DjangoMemoryStore

    scope = {"user_id": True, "metadata_keys": ["tenant_id"]}
    tasks = 8

    async def task(number: int) -> list[float]:
        store = DjangoMemoryStore(scope=scope)
        tenant, user = TENANTS_AND_USERS[(writer + number) % len(TENANTS_AND_USERS)]
        context = MemoryContext(session_id, user, {"tenant_id": tenant})
        seconds = []
        for index in range(number, appends, tasks):
            message = {"role": "user", "content": f"{writer}:{index}"}
            began = time.perf_counter()
            await store.append(MemoryAppendInput(context, f"w{writer}", index + 1, [message]))
            seconds.append(time.perf_counter() - began)
        return seconds

    async def all_tasks() -> list[float]:
        results = await asyncio.gather(*(task(number) for number in range(tasks)))
        return [seconds for result in results for seconds in result]

    start_together(gate)
    try:
        with override_settings(ANVIA_DJANGO={"STORE_THREADS": 1}):
            return asyncio.run(all_tasks())
    finally:
        close_db_threads()
        connection.close()
