"""LangGraph threads as the inspector reads them (the API, and the admin's
gate): the threads, newest first; a thread's checkpoint history, newest
first; one checkpoint's row.

Each is one query whatever the number of rows, paged by keyset (a page
fetches one row more than it shows, so no COUNT and no OFFSET). The
thread list is a ``GROUP BY thread_id`` over the checkpoints (there is no
table of threads): one query, but it reads every checkpoint's
``(thread_id, checkpoint_id)`` from the unique index. A history reads the
thread's rows alone.

Who may see which threads is :func:`visible`, the one gate every read here
(and the admin's checkpoint list) goes through.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Generic, TypeVar

from django.db.models import Count, Max, Model, Q, QuerySet

from anvia_django.persistence import TenantRestriction
from anvia_django.persistence.databases import read_alias
from anvia_django.persistence.dialects.prefixes import starts_with
from anvia_django.persistence.inspector.rows import as_utc

from .maintenance import visible_threads
from .models import LangGraphCheckpoint
from .reads import StoredCheckpoint
from .scopes import user_threads

M = TypeVar("M", bound=Model)
T = TypeVar("T")
K = TypeVar("K")


def visible(
    rows: QuerySet[M], *, tenants: TenantRestriction | None, owner: str | None = None
) -> QuerySet[M]:
    """The rows of LangGraph's thread tables a reader may see: ``tenants``
    from the ``STAFF_TENANTS`` hook (``None``: every tenant), ``owner`` the
    user id owner mode limits an API caller to (``None``: not limited).

    A thread's tenant and user are those its id carries (``scoped_thread_id``,
    ``scopes.py``): a reader limited to some tenants sees the threads of
    those tenants, an owner the threads naming them as user (in any tenant
    the tenant restriction leaves), and neither any thread whose id carries
    none. Exact prefixes of the indexed ``thread_id`` (``maintenance.py``);
    an owner's, prefixes and a substring that narrow and the id's form in
    full that decides, as ``thread_scope`` would (``scopes.user_threads``)."""
    shown: QuerySet[M] = visible_threads(rows, tenants)
    if owner is not None:
        theirs = user_threads(owner)
        alias = shown.db
        # Each pattern last in its branch, run on the rows the cheap
        # conditions leave (PostgreSQL would run a condition both branches
        # share, or one at the top level, first).
        shown = shown.filter(
            (
                starts_with(alias, "thread_id", theirs.alone)
                & Q(thread_id__regex=theirs.alone_pattern)
            )
            | (
                starts_with(alias, "thread_id", theirs.in_a_tenant)
                & Q(thread_id__contains=theirs.named)
                & Q(thread_id__regex=theirs.in_a_tenant_pattern)
            )
        )
    return shown


@dataclass(frozen=True, slots=True)
class ThreadKey:
    """Where the thread list stopped: the last thread's newest checkpoint id and its id."""

    latest_checkpoint_id: str
    thread_id: str


@dataclass(frozen=True, slots=True)
class CheckpointKey:
    """Where a thread's history stopped: the last checkpoint's id and namespace."""

    checkpoint_id: str
    checkpoint_ns: str


@dataclass(frozen=True, slots=True)
class ThreadSummary:
    thread_id: str
    latest_checkpoint_id: str
    checkpoint_count: int
    updated_at: datetime
    """When its newest checkpoint was written."""


@dataclass(frozen=True, slots=True)
class CheckpointSummary:
    thread_id: str
    checkpoint_ns: str
    checkpoint_id: str
    parent_checkpoint_id: str | None
    run_id: str | None
    created_at: datetime
    metadata: Any

    @property
    def source(self) -> str | None:
        value = self.metadata.get("source") if isinstance(self.metadata, dict) else None
        return value if isinstance(value, str) else None

    @property
    def step(self) -> int | None:
        value = self.metadata.get("step") if isinstance(self.metadata, dict) else None
        return value if isinstance(value, int) and not isinstance(value, bool) else None


@dataclass(frozen=True, slots=True)
class Page(Generic[T, K]):
    items: list[T]
    next_key: K | None
    """Pass as ``after`` for the next page; ``None`` on the last."""


def thread_page(
    limit: int,
    *,
    tenants: TenantRestriction | None,
    owner: str | None = None,
    thread_id: str | None = None,
    after: ThreadKey | None = None,
    using: str | None = None,
) -> Page[ThreadSummary, ThreadKey]:
    """Threads, the one with the newest checkpoint first (ties: the greater
    thread id first), one query."""
    rows = _checkpoints(using, tenants, owner)
    if thread_id is not None:
        rows = rows.filter(thread_id=thread_id)
    grouped = (
        rows.values("thread_id")
        .annotate(latest=Max("checkpoint_id"), updated=Max("created_at"), count=Count("pk"))
        .order_by("-latest", "-thread_id")
    )
    if after is not None:
        latest, last = after.latest_checkpoint_id, after.thread_id
        grouped = grouped.filter(Q(latest__lt=latest) | Q(latest=latest, thread_id__lt=last))
    found = [
        ThreadSummary(row["thread_id"], row["latest"], row["count"], as_utc(row["updated"]))
        for row in grouped[: limit + 1]
    ]
    return _page(found, limit, lambda row: ThreadKey(row.latest_checkpoint_id, row.thread_id))


_SUMMARY_COLUMNS = (
    "thread_id",
    "checkpoint_ns",
    "checkpoint_id",
    "parent_checkpoint_id",
    "run_id",
    "created_at",
    "metadata",
)


def history_page(
    thread_id: str,
    limit: int,
    *,
    tenants: TenantRestriction | None,
    owner: str | None = None,
    after: CheckpointKey | None = None,
    using: str | None = None,
) -> Page[CheckpointSummary, CheckpointKey]:
    """A thread's checkpoints in every namespace, newest first (as
    ``DjangoSaver.list`` orders them), one query; an empty page for a thread
    that is not stored (or not visible)."""
    rows = _checkpoints(using, tenants, owner).filter(thread_id=thread_id)
    if after is not None:
        rows = rows.filter(
            Q(checkpoint_id__lt=after.checkpoint_id)
            | Q(checkpoint_id=after.checkpoint_id, checkpoint_ns__lt=after.checkpoint_ns)
        )
    ordered = rows.order_by("-checkpoint_id", "-checkpoint_ns").values_list(*_SUMMARY_COLUMNS)
    found = [_summary(row) for row in ordered[: limit + 1]]
    return _page(found, limit, lambda row: CheckpointKey(row.checkpoint_id, row.checkpoint_ns))


def checkpoint_row(
    thread_id: str,
    checkpoint_ns: str,
    checkpoint_id: str,
    *,
    tenants: TenantRestriction | None,
    owner: str | None = None,
    using: str | None = None,
) -> tuple[CheckpointSummary, StoredCheckpoint] | None:
    """One checkpoint: its summary and its stored row (for ``reads.with_values``)."""
    rows = _checkpoints(using, tenants, owner).filter(
        thread_id=thread_id, checkpoint_ns=checkpoint_ns, checkpoint_id=checkpoint_id
    )
    found = rows.values_list(*_SUMMARY_COLUMNS, "type", "checkpoint").first()
    if found is None:
        return None
    summary = _summary(found[: len(_SUMMARY_COLUMNS)])
    kind, checkpoint = found[len(_SUMMARY_COLUMNS) :]
    stored = StoredCheckpoint(
        summary.thread_id,
        summary.checkpoint_ns,
        summary.checkpoint_id,
        summary.parent_checkpoint_id,
        kind,
        checkpoint,
        summary.metadata,
    )
    return summary, stored


def _checkpoints(
    using: str | None, tenants: TenantRestriction | None, owner: str | None
) -> QuerySet[LangGraphCheckpoint]:
    rows = LangGraphCheckpoint.objects.using(read_alias(using))
    return visible(rows, tenants=tenants, owner=owner)


def _summary(row: Any) -> CheckpointSummary:
    thread_id, checkpoint_ns, checkpoint_id, parent, run_id, created_at, metadata = row
    return CheckpointSummary(
        thread_id, checkpoint_ns, checkpoint_id, parent, run_id, as_utc(created_at), metadata
    )


def _page(found: list[T], limit: int, key: Callable[[T], K]) -> Page[T, K]:
    shown = found[:limit]
    return Page(shown, key(shown[-1]) if len(found) > limit else None)
