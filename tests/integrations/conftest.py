"""Fixtures shared by the integration suites."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from asgiref.sync import SyncToAsync
from django.db import connections


@pytest.fixture(autouse=True)
def _no_agents_tracing() -> Iterator[None]:
    """The Agents SDK would try to export traces to OpenAI after each run."""
    try:
        from agents import set_tracing_disabled
    except ImportError:
        yield
        return
    set_tracing_disabled(True)
    yield


@pytest.fixture(autouse=True)
def _close_asgiref_thread_connections() -> Iterator[None]:
    """``sync_to_async`` calls made outside ``async_to_sync`` (under
    ``Runner.run_sync`` or ``asyncio.run``) run in asgiref's own worker
    thread, whose database connection must be closed before the test
    database is flushed or dropped."""
    yield
    SyncToAsync.single_thread_executor.submit(connections.close_all).result()
