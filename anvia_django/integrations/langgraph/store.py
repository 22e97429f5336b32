"""``DjangoStore``: LangGraph's long-term memory (``BaseStore``) in the app's
table, on Django's connections.

    from anvia_django.integrations.langgraph.store import DjangoStore

    store = DjangoStore(ttl={"default_ttl": 60 * 24})
    graph = builder.compile(checkpointer=DjangoSaver(), store=store)

Namespaces, ``get``/``put``/``delete``, ``search`` with filters (no
semantic search: a ``query`` is ignored, as LangGraph's stores without an
index do), ``list_namespaces``, batches (one transaction each) and TTL in
minutes, refreshed on reads by default; expired items are never returned,
and :meth:`DjangoStore.sweep_ttl` deletes them. With encryption at rest on,
values are sealed under a key per namespace.
"""

from __future__ import annotations

from collections.abc import Iterable

from langgraph.store.base import BaseStore, Op, Result, TTLConfig

from anvia_django.persistence.threads.dispatch import run_for_sync_caller, run_in_db_thread

from .maintenance import sweep_expired
from .store_items import run_ops


class DjangoStore(BaseStore):
    supports_ttl = True

    def __init__(self, *, ttl: TTLConfig | None = None, using: str | None = None) -> None:
        self.ttl_config = ttl
        self.using = using

    def batch(self, ops: Iterable[Op]) -> list[Result]:
        return run_for_sync_caller(run_ops, list(ops), using=self.using)

    async def abatch(self, ops: Iterable[Op]) -> list[Result]:
        return await run_in_db_thread(run_ops, list(ops), using=self.using)

    def sweep_ttl(self) -> int:
        """Delete the expired items; how many went."""
        return run_for_sync_caller(sweep_expired, using=self.using)

    async def asweep_ttl(self) -> int:
        return await run_in_db_thread(sweep_expired, using=self.using)
