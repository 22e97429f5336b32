"""The private attributes of asgiref and Django that the store reads or
sets, each in one function: these tests fail when a release renames them,
before users see the store fall back to asgiref's one shared thread, or
reconnect on every call."""

from __future__ import annotations

import asyncio

import pytest
from asgiref.sync import AsyncToSync, SyncToAsync, async_to_sync
from django.db import connection

from anvia_django.persistence.threads.dispatch import has_outer_sync_thread, keep_between_calls


def test_asgiref_still_has_what_has_outer_sync_thread_reads() -> None:
    assert hasattr(AsyncToSync, "executors")
    assert hasattr(AsyncToSync, "loop_thread_executors")
    assert hasattr(SyncToAsync, "thread_sensitive_context")


def test_has_outer_sync_thread_tells_asyncio_run_from_async_to_sync() -> None:
    async def probe() -> bool:
        return has_outer_sync_thread()

    assert asyncio.run(probe()) is False
    assert async_to_sync(probe)() is True


@pytest.mark.django_db
def test_django_connections_still_have_the_deadline_keep_between_calls_clears() -> None:
    connection.ensure_connection()
    assert hasattr(connection, "close_at")
    saved = connection.close_at
    try:
        keep_between_calls(connection)
        assert connection.close_at is None
    finally:
        connection.close_at = saved
