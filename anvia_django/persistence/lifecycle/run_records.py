"""Run records: writing one per run, and reading them back with totals.

A run is recorded under the conversation's row lock, so a retried record
(same run id) finds the first one and, when nothing differs, writes nothing.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from django.db import transaction
from django.db.models import Count, Q, Sum, TextField, Value
from django.utils import timezone

from anvia_django.conf import app_settings
from anvia_django.core.memory.run_records import (
    MemoryRunInput,
    RunRecord,
    RunTotals,
    TokenUsage,
    validate_run_input,
)
from anvia_django.core.memory.scope import ConversationScope
from anvia_django.core.memory.validation import validate_identifier
from anvia_django.models import AgentRun, FailedRun
from anvia_django.persistence.codec import Codec, codec_for
from anvia_django.persistence.databases import read_alias, write_alias
from anvia_django.persistence.dialects import ConversationLock
from anvia_django.persistence.inspector.conversations import validate_limit
from anvia_django.persistence.inspector.keyset import KeysetPage, RowKey, older_than, page_of
from anvia_django.persistence.inspector.rows import as_utc
from anvia_django.persistence.reconnect import (
    retry_if_connection_lost,
    retry_read_if_connection_lost,
)
from anvia_django.persistence.scope import check_scope, scope_key
from anvia_django.persistence.transcript.locking import (
    lock_conversation,
    lock_existing_conversation,
)

_RUN_FIELDS = (
    "run_id",
    "status",
    "started_at",
    "finished_at",
    "model_name",
    "input_tokens",
    "output_tokens",
    "total_tokens",
    "message_count",
    "failed_run__error_type",
    "failed_run__error_message",
)
_STORED = (
    "status",
    "started_at",
    "finished_at",
    "model_name",
    "input_tokens",
    "output_tokens",
    "total_tokens",
    "message_count",
    "failed_run_id",
)


@retry_if_connection_lost
def record_run(
    input: MemoryRunInput, *, using: str | None = None, scope: ConversationScope | None = None
) -> None:
    """Keep ``input`` as the conversation's record of that run.

    Creates the conversation if needed (as ``record_error`` does); a failed
    run is linked to the newest error record of the same run id. A retried
    record equal to the stored one writes nothing.
    """
    validate_run_input(input, app_settings.input_limits)
    alias = write_alias(using)
    context = input.context
    key = scope_key(context, scope)
    with transaction.atomic(using=alias):
        # A run record is bookkeeping: it leaves an existing conversation's
        # updated_at and metadata alone (the run's messages moved them).
        row = lock_existing_conversation(alias, context.session_id, key)
        if row is None:
            lock = ConversationLock(
                context.session_id, key, context.user_id, context.metadata, timezone.now()
            )
            created = lock_conversation(alias, lock)
            conversation_id, owner = created.id, created.user_id
        else:
            conversation_id, _, owner = row
        check_scope(owner, context.user_id)
        failed_run_id = None
        if input.status == "failed":
            failed_run_id = (
                FailedRun.objects.using(alias)
                .filter(conversation_id=conversation_id, run_id=input.run_id)
                .order_by("-id")
                .values_list("id", flat=True)
                .first()
            )
        usage = input.usage or TokenUsage()
        values: dict[str, Any] = {
            "status": input.status,
            "started_at": input.started_at,
            "finished_at": input.finished_at,
            "model_name": input.model or "",
            "input_tokens": usage.input_tokens,
            "output_tokens": usage.output_tokens,
            "total_tokens": usage.total_tokens,
            "message_count": input.message_count,
            "failed_run_id": failed_run_id,
        }
        runs = AgentRun.objects.using(alias).filter(
            conversation_id=conversation_id, run_id=input.run_id
        )
        stored = runs.values(*_STORED).first()
        if stored is None:
            AgentRun.objects.using(alias).create(
                conversation_id=conversation_id, run_id=input.run_id, **values
            )
        elif stored != values:
            runs.update(**values)


@retry_read_if_connection_lost
def list_runs(
    conversation_id: int,
    *,
    limit: int,
    run_id: str | None = None,
    error_messages: bool = True,
    using: str | None = None,
) -> list[RunRecord]:
    """The conversation's ``limit`` newest runs (or the one ``run_id``), newest first."""
    page = list_run_page(
        conversation_id, limit=limit, run_id=run_id, error_messages=error_messages, using=using
    )
    return page.items


@retry_read_if_connection_lost
def list_run_page(
    conversation_id: int,
    *,
    limit: int,
    run_id: str | None = None,
    before: RowKey | None = None,
    error_messages: bool = True,
    using: str | None = None,
) -> KeysetPage[RunRecord]:
    """A page of :func:`list_runs`: the ``limit`` newest runs older than ``before``.

    ``error_messages=False``: each failed run's error message is ``None``,
    neither read nor opened (for readers who may not see failed runs)."""
    validate_limit(limit)
    alias = read_alias(using)
    runs = AgentRun.objects.using(alias).filter(conversation_id=conversation_id)
    if run_id is not None:
        runs = runs.filter(run_id=run_id)
    if before is not None:
        runs = runs.filter(older_than("started_at", before.moment, before.id))
    fields: tuple[str, ...] = _RUN_FIELDS
    if not error_messages:
        runs = runs.annotate(withheld_error=Value(None, output_field=TextField()))
        fields = tuple("withheld_error" if f == "failed_run__error_message" else f for f in fields)
    # Then the failed run's id (to open its sealed error) and the run's (the page key).
    columns = (*fields, "failed_run_id", "id")
    rows = list(runs.order_by("-started_at", "-id").values_list(*columns)[: limit + 1])
    codec = codec_for(alias)
    if codec.opens and error_messages:
        rows = _with_opened_errors(codec, alias, conversation_id, rows)
    started_at = _RUN_FIELDS.index("started_at")
    return page_of(
        rows,
        limit,
        lambda row: RowKey(as_utc(row[started_at]), row[-1]),
        lambda row: _run_from_row(row[:-2]),
    )


def _with_opened_errors(
    codec: Codec, alias: str, conversation_id: int, rows: list[tuple[Any, ...]]
) -> list[tuple[Any, ...]]:
    """``rows`` with the error message of each failed run opened: sealed, it
    is in its record's payload (one more query)."""
    failed = [row[-2] for row in rows if row[-2] is not None]
    if not failed:
        return rows
    payloads = FailedRun.objects.using(alias).filter(pk__in=failed)
    messages = {
        pk: codec.open_failed_run(conversation_id, run_id, *payload)[0]
        for pk, run_id, *payload in payloads.values_list(
            "pk", "run_id", "error_message", "traceback", "messages"
        )
    }
    at = _RUN_FIELDS.index("failed_run__error_message")
    return [(*row[:at], messages.get(row[-2], row[at]), *row[at + 1 :]) for row in rows]


@retry_read_if_connection_lost
def run_totals(conversation_id: int, *, using: str | None = None) -> RunTotals:
    """The sums over every run of the conversation, in one query."""
    runs = AgentRun.objects.using(read_alias(using)).filter(conversation_id=conversation_id)
    return _totals(runs.aggregate(**_TOTALS))


_TOTALS: dict[str, Any] = {
    "runs": Count("id"),
    "failed_runs": Count("id", filter=Q(status="failed")),
    "input_tokens": Sum("input_tokens"),
    "output_tokens": Sum("output_tokens"),
    "total_tokens": Sum("total_tokens"),
}


def _totals(row: dict[str, Any]) -> RunTotals:
    return RunTotals(**{name: row[name] or 0 for name in _TOTALS})


@retry_read_if_connection_lost
def usage_by_user(
    *,
    user_id: str | None = None,
    since: datetime | None = None,
    until: datetime | None = None,
    using: str | None = None,
) -> list[tuple[str | None, RunTotals]]:
    """Totals per conversation owner for runs started in ``[since, until)``,
    ordered by user id (conversations without a user last); one query."""
    validate_identifier(user_id, "user_id", app_settings.input_limits, optional=True)
    runs = AgentRun.objects.using(read_alias(using)).all()
    if user_id is not None:
        runs = runs.filter(conversation__user_id=user_id)
    if since is not None:
        runs = runs.filter(started_at__gte=since)
    if until is not None:
        runs = runs.filter(started_at__lt=until)
    rows = (
        runs.values("conversation__user_id").annotate(**_TOTALS).order_by("conversation__user_id")
    )
    found = [(row["conversation__user_id"], _totals(dict(row))) for row in rows]
    # NULL sorts first on some backends and last on others: fix one order.
    return [r for r in found if r[0] is not None] + [r for r in found if r[0] is None]


def _run_from_row(row: tuple[Any, ...]) -> RunRecord:
    (
        run_id,
        status,
        started_at,
        finished_at,
        model_name,
        input_tokens,
        output_tokens,
        total_tokens,
        message_count,
        error_type,
        error_message,
    ) = row
    return RunRecord(
        run_id=run_id,
        status=status,
        started_at=as_utc(started_at),
        finished_at=as_utc(finished_at),
        model=model_name or None,
        usage=TokenUsage(input_tokens, output_tokens, total_tokens),
        message_count=message_count,
        error_type=error_type,
        error_message=error_message,
    )
