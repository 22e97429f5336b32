"""Operator queries over LangGraph's tables: whose threads and store
namespaces an action covers (by the scope their ids carry, ``scopes.py``),
how much they hold, retention, and deleting store items in batches.

Imports no LangGraph: the commands use it without the extra. Threads are
deleted by ``removal.delete_threads_in_batches``.
"""

from __future__ import annotations

from collections.abc import Collection, Iterator
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.db.models import Exists, Max, OuterRef, Q, QuerySet
from django.utils import timezone

from anvia_django.persistence.codec import codec_for
from anvia_django.persistence.databases import read_alias, write_alias
from anvia_django.persistence.dialects.prefixes import starts_with
from anvia_django.persistence.inspector.metadata_values import TenantRestriction

from .models import LangGraphBlob, LangGraphCheckpoint, LangGraphStoreItem, LangGraphWrite
from .removal import GROUP, delete_in_batches
from .scopes import (
    END,
    MARKER,
    TENANT,
    USER,
    ThreadScope,
    escape,
    namespace_scope,
    scope_prefix,
    tenant_pattern,
    thread_scope,
)

THREAD_TABLES = (LangGraphCheckpoint, LangGraphWrite, LangGraphBlob)


@dataclass(frozen=True, slots=True)
class ScopeSelection:
    """The threads and store namespaces of ``user_id`` in ``tenant``:
    ``None`` for any (ids that carry none included); both ``None``: all."""

    user_id: str | None = None
    tenant: str | None = None

    @property
    def everything(self) -> bool:
        return self.user_id is None and self.tenant is None

    def narrow(self, rows: QuerySet[Any], field: str) -> QuerySet[Any]:
        """``rows`` whose ``field`` (a thread id, a namespace) may be
        covered: a prefix of the indexed column, exact when a tenant is
        named; a user of any tenant also reads the ids of every tenant
        that name them (:meth:`covers` decides)."""
        if self.everything:
            return rows
        alias = rows.db
        prefix = scope_prefix(user_id=self.user_id, tenant=self.tenant)
        if self.tenant is not None or self.user_id is None:
            return rows.filter(starts_with(alias, field, prefix))
        named = Q(**{f"{field}__contains": f"{END}{USER}{escape(self.user_id)}{END}"})
        return rows.filter(
            starts_with(alias, field, prefix) | (starts_with(alias, field, MARKER + TENANT) & named)
        )

    def covers(self, scope: ThreadScope | None) -> bool:
        if self.everything:
            return True
        if scope is None:
            return False
        return (self.user_id is None or scope.user_id == self.user_id) and (
            self.tenant is None or scope.tenant == self.tenant
        )


def thread_scope_of(thread_id: str) -> ThreadScope | None:
    """``thread_id``'s scope, ``None`` for an id that carries none."""
    scope = thread_scope(thread_id)
    return None if scope.user_id is None and scope.tenant is None else scope


def thread_ids_of(selection: ScopeSelection, *, using: str | None = None) -> list[str]:
    """The threads ``selection`` covers, sorted: every id of the checkpoint,
    write and value tables (a thread a failed deletion left without
    checkpoints too)."""
    alias = write_alias(using)
    found: set[str] = set()
    for model in THREAD_TABLES:
        rows = selection.narrow(model.objects.using(alias), "thread_id")
        found.update(rows.order_by().values_list("thread_id", flat=True).distinct())
    return sorted(t for t in found if selection.covers(thread_scope_of(t)))


def stale_thread_ids(
    selection: ScopeSelection, cutoff: datetime, *, using: str | None = None
) -> list[str]:
    """The threads ``selection`` covers whose latest checkpoint was made
    before ``cutoff``, sorted."""
    alias = write_alias(using)
    rows = selection.narrow(LangGraphCheckpoint.objects.using(alias), "thread_id")
    found = _latest_before(rows, cutoff)
    return sorted(t for t in found if selection.covers(thread_scope_of(t)))


def leftover_thread_ids(selection: ScopeSelection, *, using: str | None = None) -> list[str]:
    """The threads ``selection`` covers that have channel values but no
    checkpoint, sorted: what a deletion interrupted between its batches
    leaves (checkpoints go first, values last), which reads as deleted.

    One pass over the value table's ``thread_id`` index (each thread's
    checkpoint looked up in its own), not a scan per thread. A thread whose
    first put is in flight is not among them: a put commits its values with
    its checkpoint (``writes.py``). Its pending writes may commit first
    (LangGraph stores them beside the put), so a thread with writes alone
    is left alone."""
    alias = write_alias(using)
    checkpoints = LangGraphCheckpoint.objects.using(alias).filter(thread_id=OuterRef("thread_id"))
    rows = selection.narrow(LangGraphBlob.objects.using(alias), "thread_id")
    found = rows.filter(~Exists(checkpoints)).order_by().values_list("thread_id", flat=True)
    return sorted(t for t in found.distinct() if selection.covers(thread_scope_of(t)))


def thread_exists(thread_id: str, *, using: str | None = None) -> bool:
    """Whether any row of ``thread_id`` is stored (a checkpoint, or what an
    interrupted deletion left)."""
    alias = read_alias(using)
    return any(
        model.objects.using(alias).filter(thread_id=thread_id).exists() for model in THREAD_TABLES
    )


def _latest_before(rows: QuerySet[LangGraphCheckpoint], cutoff: datetime) -> list[str]:
    return list(
        rows.values("thread_id")
        .annotate(latest=Max("created_at"))
        .filter(latest__lt=cutoff)
        .values_list("thread_id", flat=True)
        .order_by()
    )


def count_checkpoints(thread_ids: Collection[str], *, using: str | None = None) -> int:
    rows = LangGraphCheckpoint.objects.using(read_alias(using))
    return sum(group.count() for group in _in_groups(rows, "thread_id", thread_ids))


def namespaces_of(selection: ScopeSelection, *, using: str | None = None) -> list[str]:
    """The store namespaces (their column's text) ``selection`` covers, sorted."""
    alias = write_alias(using)
    rows = selection.narrow(LangGraphStoreItem.objects.using(alias), "namespace")
    found = rows.order_by().values_list("namespace", flat=True).distinct()
    return sorted(n for n in found if selection.covers(namespace_scope(n)))


def count_items(namespaces: Collection[str], *, using: str | None = None) -> int:
    rows = LangGraphStoreItem.objects.using(read_alias(using))
    return sum(group.count() for group in _in_groups(rows, "namespace", namespaces))


def delete_items(namespaces: Collection[str], *, batch_size: int, using: str | None = None) -> int:
    """Every item of ``namespaces``, at most ``batch_size`` per transaction;
    the data key of each that has no item left goes when the last commits
    (a namespace an item was put in meanwhile keeps its key)."""
    alias = write_alias(using)
    rows = LangGraphStoreItem.objects.using(alias)
    forget = codec_for(alias).forget_store_namespaces
    found = sorted(set(namespaces))
    deleted = 0
    for start in range(0, len(found), GROUP):
        names = found[start : start + GROUP]
        group = rows.filter(namespace__in=names)

        def forget_emptied(group: QuerySet[Any] = group, names: list[str] = names) -> None:
            left = set(group.values_list("namespace", flat=True).order_by().distinct())
            forget([name for name in names if name not in left])

        deleted += delete_in_batches(group, "pk", batch_size, last=forget_emptied)
    return deleted


def _in_groups(rows: QuerySet[Any], field: str, values: Collection[str]) -> Iterator[QuerySet[Any]]:
    """``rows`` whose ``field`` is one of ``values``, a bounded ``IN`` list at a time."""
    found = list(values)
    for start in range(0, len(found), GROUP):
        yield rows.filter(**{f"{field}__in": found[start : start + GROUP]})


def expired(now: datetime) -> Q:
    """The store items whose time (``expires_at``) has passed at ``now``:
    never read (``store_items.py``), deleted by :func:`sweep_expired`."""
    return Q(expires_at__lte=now)


def expired_items(*, using: str | None) -> QuerySet[LangGraphStoreItem]:
    """The store items that have expired by now, on the database the sweep deletes on."""
    return LangGraphStoreItem.objects.using(write_alias(using)).filter(expired(timezone.now()))


def sweep_expired(*, using: str | None, batch_size: int | None = None) -> int:
    """Delete the store items whose time has passed (``batch_size`` per
    transaction; all in one without it); how many went."""
    expired = expired_items(using=using)
    if batch_size is None:
        deleted, _ = expired.delete()
        return deleted
    return delete_in_batches(expired, "expires_at", batch_size)


def visible_threads(rows: QuerySet[Any], tenants: TenantRestriction | None) -> QuerySet[Any]:
    """``rows`` of LangGraph's thread tables narrowed to the threads of
    ``tenants`` (the ``STAFF_TENANTS`` restriction, ``tenants.py``): those
    whose id carries one of them (``scoped_thread_id``); unchanged for ``None``."""
    return _visible(rows, tenants, "thread_id")


def visible_items(rows: QuerySet[Any], tenants: TenantRestriction | None) -> QuerySet[Any]:
    """The same for store items, by their namespace's first label (``scoped_namespace``)."""
    return _visible(rows, tenants, "namespace")


def _visible(rows: QuerySet[Any], tenants: TenantRestriction | None, field: str) -> QuerySet[Any]:
    if tenants is None:
        return rows
    if not tenants.values:
        return rows.none()
    alias = rows.db
    namespace = field == "namespace"
    # The indexed prefix narrows; the id's form in full decides (its pattern
    # last in each branch, so that it runs on the rows the prefix leaves).
    branches = [
        starts_with(alias, field, scope_prefix(tenant=tenant))
        & Q(**{f"{field}__regex": tenant_pattern(tenant, namespace=namespace)})
        for tenant in sorted(tenants.values)
    ]
    visible = branches[0]
    for branch in branches[1:]:
        visible |= branch
    return rows.filter(visible)
