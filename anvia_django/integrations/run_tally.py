"""Run records written by the framework integrations.

A framework session or history sees only its own reads and writes, not the
run around them. What it can know: a run starts with its first read or write
of the session since the last recorded run, and saved the messages written
in between. :class:`RunTally` keeps those two facts until a run is recorded;
the write functions here give them to ``persistence.record_run``.
"""

from __future__ import annotations

from datetime import UTC, datetime

from django.db import transaction

from anvia_django.conf import app_settings
from anvia_django.core.memory.errors import InvalidMemoryInputError
from anvia_django.core.memory.run_records import MemoryRunInput, RunStatus, TokenUsage
from anvia_django.core.memory.types import MemoryAppendInput, MemoryContext, MemoryErrorInput
from anvia_django.core.memory.validation import validate_identifier
from anvia_django.persistence import append_messages, record_failed_run, record_run
from anvia_django.persistence.databases import write_alias
from anvia_django.persistence.reconnect import retry_if_connection_lost


def utc_now() -> datetime:
    return datetime.now(UTC)


class RunTally:
    """When the current run started and how many messages it saved so far."""

    def __init__(self) -> None:
        self.started_at: datetime | None = None
        self.saved = 0

    def touched(self) -> None:
        if self.started_at is None:
            self.started_at = utc_now()

    def add_saved(self, count: int) -> None:
        self.touched()
        self.saved += count

    def reset(self) -> None:
        self.started_at = None
        self.saved = 0


def model_identifier(name: object) -> str | None:
    """``name`` if it is a string the store keeps as a model name, else ``None``:
    a model name the store cannot keep must not cost the run its record."""
    if not isinstance(name, str) or not name:
        return None
    try:
        validate_identifier(name, "model", app_settings.input_limits, optional=False)
    except InvalidMemoryInputError:
        return None
    return name


def run_input(
    context: MemoryContext,
    run_id: str,
    status: RunStatus,
    *,
    started_at: datetime | None,
    model: str | None,
    usage: TokenUsage | None,
    message_count: int,
) -> MemoryRunInput:
    finished_at = utc_now()
    started_at = finished_at if started_at is None else min(started_at, finished_at)
    return MemoryRunInput(
        context=context,
        run_id=run_id,
        status=status,
        started_at=started_at,
        finished_at=finished_at,
        model=model,
        usage=usage if usage is not None and usage.reported else None,
        message_count=message_count,
    )


@retry_if_connection_lost
def record_outcome(
    run: MemoryRunInput, error: MemoryErrorInput | None, *, using: str | None
) -> None:
    """Keep ``run`` and, for a failed run, its error record: both or neither.

    A retried call with the same run writes no second run record (but a
    second error record, which the run record then links to).
    """
    with transaction.atomic(using=write_alias(using)):
        if error is not None:
            record_failed_run(error, using=using)
        record_run(run, using=using)


@retry_if_connection_lost
def append_and_record(append: MemoryAppendInput, run: MemoryRunInput, *, using: str | None) -> None:
    """Append a batch that is a whole run, and record that run: both or neither.

    Both writes are idempotent for the same ids, so the retry on a lost
    connection cannot double either.
    """
    with transaction.atomic(using=write_alias(using)):
        append_messages(append, using=using)
        record_run(run, using=using)
