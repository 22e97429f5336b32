"""Database ids behind the contract's keys, for pages that link to rows.

The contract names a run by its run id and a conversation by its ref; the
admin links to a row by primary key. Each lookup is one query for a whole
page of keys.
"""

from __future__ import annotations

from collections.abc import Collection

from anvia_django.models import AgentRun, Conversation
from anvia_django.persistence.databases import read_alias
from anvia_django.persistence.reconnect import retry_read_if_connection_lost


@retry_read_if_connection_lost
def run_row_ids(
    conversation_id: int, run_ids: Collection[str], *, using: str | None = None
) -> dict[str, int]:
    """``{run_id: pk}`` for the recorded runs among ``run_ids`` (runs that
    were never recorded are absent)."""
    if not run_ids:
        return {}
    rows = AgentRun.objects.using(read_alias(using)).filter(
        conversation_id=conversation_id, run_id__in=set(run_ids)
    )
    return dict(rows.values_list("run_id", "pk"))


@retry_read_if_connection_lost
def conversation_row_ids(refs: Collection[str], *, using: str | None = None) -> dict[str, int]:
    """``{ref: pk}`` for the conversations among ``refs`` that still exist."""
    if not refs:
        return {}
    rows = Conversation.objects.using(read_alias(using)).filter(ref__in=set(refs))
    return dict(rows.values_list("ref", "pk"))
