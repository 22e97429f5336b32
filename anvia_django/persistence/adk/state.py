"""ADK's state in its three stored scopes, by key prefix: ``app:`` shared by
the app (within its tenant), ``user:`` by the user's sessions of the app,
no prefix the session's own. ``temp:`` is never stored.

Each scope's row is written in the transaction of the event (or of the
session's creation) that changed it, under its row lock, so concurrent
appends to sessions sharing it each add their keys to it."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from django.db import IntegrityError, transaction

from anvia_django.models import AdkAppState, AdkUserState
from anvia_django.persistence.adk.keys import APP_KEY, tenant_keys

APP_PREFIX = "app:"
USER_PREFIX = "user:"
TEMP_PREFIX = "temp:"


@dataclass(frozen=True, slots=True)
class ScopedState:
    """A state (or a delta of it) split by scope, keys without their prefix."""

    app: dict[str, Any] = field(default_factory=dict)
    user: dict[str, Any] = field(default_factory=dict)
    session: dict[str, Any] = field(default_factory=dict)


def split_state(state: dict[str, Any] | None) -> ScopedState:
    """``state`` by scope; ``temp:`` keys left out."""
    scoped = ScopedState()
    for key, value in (state or {}).items():
        if key.startswith(APP_PREFIX):
            scoped.app[key.removeprefix(APP_PREFIX)] = value
        elif key.startswith(USER_PREFIX):
            scoped.user[key.removeprefix(USER_PREFIX)] = value
        elif not key.startswith(TEMP_PREFIX):
            scoped.session[key] = value
    return scoped


def merged_state(
    app: dict[str, Any], user: dict[str, Any], session: dict[str, Any]
) -> dict[str, Any]:
    """The state a session shows: its own keys and the shared ones, prefixed."""
    return {
        **session,
        **{APP_PREFIX + key: value for key, value in app.items()},
        **{USER_PREFIX + key: value for key, value in user.items()},
    }


def write_shared_state(
    alias: str, app_scope: str, user_id: str, delta: ScopedState, now: datetime
) -> None:
    """Add ``delta``'s app and user keys to their rows; inside the caller's
    transaction. The app row is locked before the user row, always."""
    if delta.app:
        _merge_into(alias, AdkAppState, {"app_scope": app_scope}, delta.app, now)
    if delta.user:
        _merge_into(
            alias, AdkUserState, {"app_scope": app_scope, "user_id": user_id}, delta.user, now
        )


def _merge_into(
    alias: str,
    model: type[AdkAppState] | type[AdkUserState],
    key: dict[str, str],
    delta: dict[str, Any],
    now: datetime,
) -> None:
    rows = model.objects.using(alias)
    found = rows.select_for_update().filter(**key).values_list("pk", "state").first()
    if found is None:
        try:
            with transaction.atomic(using=alias):
                rows.create(**key, state=delta, updated_at=now)
            return
        except IntegrityError:
            # Another transaction created it first: it is committed, lock it.
            found = rows.select_for_update().filter(**key).values_list("pk", "state").get()
    pk, state = found
    rows.filter(pk=pk).update(state={**state, **delta}, updated_at=now)


def shared_state(alias: str, app_scope: str, user_id: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """The app's and the user's stored state (empty when none is)."""
    app = (
        AdkAppState.objects.using(alias).filter(app_scope=app_scope).values_list("state", flat=True)
    )
    user = (
        AdkUserState.objects.using(alias)
        .filter(app_scope=app_scope, user_id=user_id)
        .values_list("state", flat=True)
    )
    return (app.first() or {}), (user.first() or {})


def erase_user_state(alias: str, user_id: str, metadata: Any = None) -> int:
    """Delete ``user_id``'s ADK user state (with ``metadata``, only in the
    app scopes holding these values: one tenant's, one app's); how many rows.

    An app scope is the JSON list of the tenant values and the app name
    (:mod:`.keys`); a ``metadata`` key that is neither matches no row."""
    rows = AdkUserState.objects.using(alias).filter(user_id=user_id)
    if not metadata:
        return int(rows.delete()[0])
    names = [*tenant_keys(), APP_KEY]
    chosen = []
    for pk, app_scope in rows.values_list("pk", "app_scope"):
        try:
            values = dict(zip(names, json.loads(app_scope), strict=True))
        except (ValueError, TypeError):
            continue  # a hashed (over-long) scope: never chosen by metadata
        if all(values.get(key, _NONE) == value for key, value in metadata.items()):
            chosen.append(pk)
    return int(AdkUserState.objects.using(alias).filter(pk__in=chosen).delete()[0])


_NONE = object()
