"""Listing an app's ADK sessions: ADK's whole list, and keyset pages.

Both read one index: ``(app_scope, updated_at, id)``, or with the user
``(app_scope, user_id, updated_at, id)``. Pages are newest first, keyed as
every list of the store is (:mod:`anvia_django.persistence.inspector.keyset`),
so a page costs the same at any depth and any number of sessions."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.db.models import QuerySet

from anvia_django.models import AdkSession
from anvia_django.persistence.adk.keys import app_scope_of
from anvia_django.persistence.adk.state import app_state, merged_state, session_state, user_states
from anvia_django.persistence.databases import write_alias
from anvia_django.persistence.inspector.keyset import KeysetPage, RowKey, older_than, page_of

_COLUMNS = (
    "id",
    "conversation_id",
    "conversation__session_id",
    "user_id",
    "state",
    "updated_at",
    "conversation__message_count",
)


@dataclass(frozen=True, slots=True)
class SessionRow:
    """A listed session: no events; its state merged with the shared state."""

    session_id: str
    user_id: str
    state: dict[str, Any]
    updated_at: datetime
    revision: int


def _sessions(alias: str, app_scope: str, user_id: str | None) -> QuerySet[AdkSession, Any]:
    rows = AdkSession.objects.using(alias).filter(app_scope=app_scope)
    return rows if user_id is None else rows.filter(user_id=user_id)


def _rows(
    alias: str, app_scope: str, rows: list[tuple[Any, ...]], every_user: bool = False
) -> list[SessionRow]:
    """``rows`` with their state merged with the app's and their users'.
    ``every_user``: read every user's state in the app (a whole list) rather
    than those of ``rows`` (a page), so no statement grows with the list."""
    if not rows:
        return []
    app = app_state(alias, app_scope)
    users = user_states(alias, app_scope, None if every_user else {row[3] for row in rows})
    return [
        SessionRow(
            session_id,
            user_id,
            merged_state(app, users.get(user_id, {}), session_state(alias, conversation_id, state)),
            at,
            count,
        )
        for _, conversation_id, session_id, user_id, state, at, count in rows
    ]


def list_sessions(
    app_name: str,
    user_id: str | None,
    metadata: dict[str, Any] | None = None,
    *,
    using: str | None = None,
) -> list[SessionRow]:
    """Every session of the app (of the user, when given), oldest update first."""
    alias = write_alias(using)
    app_scope = app_scope_of(app_name, metadata)
    rows = list(
        _sessions(alias, app_scope, user_id).order_by("updated_at", "id").values_list(*_COLUMNS)
    )
    return _rows(alias, app_scope, rows, every_user=user_id is None)


def list_session_page(
    app_name: str,
    user_id: str | None,
    metadata: dict[str, Any] | None = None,
    *,
    limit: int,
    after: RowKey | None = None,
    using: str | None = None,
) -> KeysetPage[SessionRow]:
    """One page of the app's sessions, most recently updated first; pass the
    page's ``next_key`` as ``after`` for the next one."""
    if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
        raise ValueError(f"limit must be a positive int, not {limit!r}")
    alias = write_alias(using)
    app_scope = app_scope_of(app_name, metadata)
    sessions = _sessions(alias, app_scope, user_id)
    if after is not None:
        sessions = sessions.filter(older_than("updated_at", after.moment, after.id))
    rows = list(sessions.order_by("-updated_at", "-id").values_list(*_COLUMNS)[: limit + 1])
    page = page_of(rows, limit, lambda row: RowKey(row[5], row[0]), lambda row: row)
    return KeysetPage(_rows(alias, app_scope, page.items), page.next_key)
