"""LangGraph's threads and store items in ``anvia_memory``'s actions.

``clear --user``, ``erase --user``, ``prune`` and ``export`` act on the
threads and store namespaces whose ids carry the user and tenant
(``integrations/langgraph/scopes.py``) beside the conversations; ``sweep``
deletes expired store items. Each function reads before anything is
deleted, so a refusal (``CommandError``) leaves everything in place. Ids
carry the tenant id alone (the scope's first metadata key): options that
name another key leave threads and items alone, and say so.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime

from django.core.management import CommandError
from django.core.management.base import OutputWrapper

from anvia_django.conf import app_settings
from anvia_django.integrations.langgraph import maintenance
from anvia_django.integrations.langgraph.export import iter_item_records, iter_thread_records
from anvia_django.integrations.langgraph.maintenance import ScopeSelection, thread_scope_of
from anvia_django.integrations.langgraph.models import LangGraphCheckpoint, LangGraphStoreItem
from anvia_django.integrations.langgraph.removal import (
    ThreadCounts,
    delete_leftovers_in_batches,
    delete_threads_in_batches,
)
from anvia_django.integrations.langgraph.scopes import namespace_scope
from anvia_django.persistence.databases import read_alias
from anvia_django.persistence.maintenance import DEFAULT_BATCH_SIZE

from .jsonl import json_line
from .progress import Progress
from .tenants import TenantChoice, option_names, refuse_several_tenants
from .tenants import describe as describe_tenants


@dataclass(frozen=True, slots=True)
class GraphPlan:
    """The threads and store namespaces an action covers, and what they hold."""

    thread_ids: list[str] = field(default_factory=list)
    namespaces: list[str] = field(default_factory=list)
    cutoff: datetime | None = None
    """Prune's: only checkpoints older than it go, and a thread that has a
    newer one is kept (checked again in each batch)."""
    leftovers: list[str] = field(default_factory=list)
    """Threads an interrupted deletion left with values but no checkpoint."""

    def __bool__(self) -> bool:
        return bool(self.thread_ids or self.namespaces or self.leftovers)

    def counts(self) -> ThreadCounts:
        return ThreadCounts(
            len(self.thread_ids),
            maintenance.count_checkpoints(self.thread_ids),
            maintenance.count_items(self.namespaces),
            len(self.leftovers),
        )


NOTHING = GraphPlan()


def plan_for_user(
    out: OutputWrapper | None, user_id: str | None, choice: TenantChoice, *, subject: str, verb: str
) -> GraphPlan:
    """The threads and items of ``user_id`` (any user's when ``None``) in
    the tenant ``choice`` names; refused across tenants as conversations are.
    ``out`` ``None``: a plan made again after a prompt, which says nothing
    (what it would say was said by the first)."""
    selection = _selection(out, user_id, choice)
    if selection is None:
        return NOTHING
    plan = GraphPlan(maintenance.thread_ids_of(selection), maintenance.namespaces_of(selection))
    _require_one_tenant(plan, choice, subject=subject, verb=verb)
    return plan


def plan_stale(
    out: OutputWrapper, cutoff: datetime, choice: TenantChoice, *, subject: str
) -> GraphPlan:
    """The threads (of the tenant ``choice`` names) whose latest checkpoint
    is older than ``cutoff``, and those an interrupted deletion left without
    one (of any age). Store items are not pruned by age: their TTL is their
    retention (``sweep``)."""
    selection = _selection(out, None, choice)
    if selection is None:
        return NOTHING
    plan = GraphPlan(
        maintenance.stale_thread_ids(selection, cutoff),
        cutoff=cutoff,
        leftovers=maintenance.leftover_thread_ids(selection),
    )
    _require_one_tenant(plan, choice, subject=subject, verb="delete")
    return plan


def delete(
    plan: GraphPlan, *, batch_size: int = DEFAULT_BATCH_SIZE, progress: Progress | None = None
) -> ThreadCounts:
    """Delete the plan's threads, then its items, ``batch_size`` rows per transaction."""
    done = ThreadCounts()

    def on_batch(counts: ThreadCounts) -> None:
        nonlocal done
        done += counts
        if progress is not None:
            progress.update(f"{done.threads} of {len(plan.thread_ids)} LangGraph threads")

    counts = delete_threads_in_batches(
        plan.thread_ids, batch_size=batch_size, using=None, cutoff=plan.cutoff, on_batch=on_batch
    )
    items = maintenance.delete_items(plan.namespaces, batch_size=batch_size)
    rest = delete_leftovers_in_batches(plan.leftovers, batch_size=batch_size, using=None)
    return counts + ThreadCounts(items=items, leftovers=len(rest))


def plan_thread(out: OutputWrapper, thread_id: str, choice: TenantChoice) -> GraphPlan:
    """One thread (``--thread``), refused (``CommandError``) unless it is
    stored, and carries the tenant ``choice`` names if it names one."""
    selection = _selection(out, None, choice)
    if (
        selection is None
        or not selection.covers(thread_scope_of(thread_id))
        or not maintenance.thread_exists(thread_id)
    ):
        whose = describe_tenants(choice)
        raise CommandError(f"No LangGraph thread{whose} has the id {thread_id!r}.")
    return GraphPlan([thread_id])


def export(
    write: Callable[[str], None], plan: GraphPlan, batch_size: int, progress: Progress
) -> ThreadCounts:
    """Write the plan's threads, then its items, a JSON line each
    (``integrations/langgraph/export.py``); what was written."""
    threads = checkpoints = items = 0
    for record in iter_thread_records(plan.thread_ids, batch_size=batch_size):
        write(json_line(record))
        if record["type"] == "langgraphThread":
            threads += 1
        else:
            checkpoints += 1
            if checkpoints % batch_size == 0:
                progress.update(f"{threads} LangGraph threads, {checkpoints} checkpoints")
    for record in iter_item_records(plan.namespaces, batch_size=batch_size):
        write(json_line(record))
        items += 1
    return ThreadCounts(threads, checkpoints, items)


def describe(counts: ThreadCounts) -> str:
    """``2 LangGraph threads (14 checkpoints) and 3 store items``, and ``the
    rest of 1 half-deleted LangGraph thread`` when there is one."""
    parts = []
    if counts.threads or not (counts.items or counts.leftovers):
        parts.append(
            f"{_plural(counts.threads, 'LangGraph thread')} "
            f"({_plural(counts.checkpoints, 'checkpoint')})"
        )
    if counts.items:
        parts.append(_plural(counts.items, "store item"))
    if counts.leftovers:
        parts.append(f"the rest of {_plural(counts.leftovers, 'half-deleted LangGraph thread')}")
    return ", ".join(parts[:-1]) + " and " + parts[-1] if len(parts) > 1 else parts[0]


def sweep(out: OutputWrapper, *, dry_run: bool, batch_size: int) -> None:
    """``sweep``: delete the store items whose TTL has passed, and what
    interrupted deletions left of threads (values without a checkpoint)."""
    leftovers = maintenance.leftover_thread_ids(ScopeSelection())
    if dry_run:
        expired = maintenance.expired_items(using=None).count()
        out.write(
            f"Would delete {_plural(expired, 'expired store item')}{_rest(len(leftovers))} "
            "(dry run; nothing deleted)."
        )
        return
    deleted = maintenance.sweep_expired(using=None, batch_size=batch_size)
    done = delete_leftovers_in_batches(leftovers, batch_size=batch_size, using=None)
    out.write(f"Deleted {_plural(deleted, 'expired store item')}{_rest(len(done))}.")


def _rest(leftovers: int) -> str:
    return f" and {describe(ThreadCounts(leftovers=leftovers))}" if leftovers else ""


def _selection(
    out: OutputWrapper | None, user_id: str | None, choice: TenantChoice
) -> ScopeSelection | None:
    if not choice.metadata:
        return ScopeSelection(user_id=user_id)
    paths = app_settings.scope.metadata_keys
    if paths and list(choice.metadata) == [paths[0]]:
        return ScopeSelection(user_id=user_id, tenant=choice.metadata[paths[0]])
    alias = read_alias(None)
    if out is not None and (
        LangGraphCheckpoint.objects.using(alias).exists()
        or LangGraphStoreItem.objects.using(alias).exists()
    ):
        out.write(
            "LangGraph threads and store items were left alone: their ids carry the "
            f"tenant id ({paths[0]}) alone, and {option_names(paths)[paths[0]]} by itself "
            "names them."
        )
    return None


def _require_one_tenant(plan: GraphPlan, choice: TenantChoice, *, subject: str, verb: str) -> None:
    paths = app_settings.scope.metadata_keys
    if not paths or choice.all_tenants or choice.metadata:
        return
    tenants: set[str | None] = set()
    for thread_id in [*plan.thread_ids, *plan.leftovers]:
        scope = thread_scope_of(thread_id)
        tenants.add(scope.tenant if scope else None)
    for namespace in plan.namespaces:
        found = namespace_scope(namespace)
        tenants.add(found.tenant if found else None)
    named = sorted(tenants, key=lambda tenant: (tenant is not None, tenant or ""))
    refuse_several_tenants(
        [(tenant,) for tenant in named], paths[:1], subject=subject, verb=verb, done="done"
    )


def _plural(count: int, noun: str) -> str:
    return f"{count} {noun}" if count == 1 else f"{count} {noun}s"
