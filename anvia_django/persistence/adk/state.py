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

from anvia_django.models import AdkAppState, AdkSession, AdkUserState
from anvia_django.persistence.adk.keys import APP_KEY, AdkKey, session_scope, tenant_keys
from anvia_django.persistence.codec import StatePlace, codec_for

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


def user_place(key: AdkKey) -> StatePlace:
    """Where the user's state in the app is, with the owner of their
    sessions there (whose data key seals it)."""
    return StatePlace(key.app_scope, key.user_id, session_scope().key(key.context))


def session_place(key: AdkKey, conversation_id: int) -> StatePlace:
    """Where the session's own state is, with its conversation's owner."""
    return StatePlace(
        key.app_scope,
        key.user_id,
        session_scope().key(key.context),
        conversation_id=conversation_id,
        ref=key.session_id,
    )


def write_shared_state(alias: str, key: AdkKey, delta: ScopedState, now: datetime) -> None:
    """Add ``delta``'s app and user keys to their rows; inside the caller's
    transaction. The app row is locked before the user row, always."""
    if delta.app:
        place = StatePlace(key.app_scope)
        _merge_into(alias, AdkAppState, {"app_scope": key.app_scope}, place, delta.app, now)
    if delta.user:
        columns = {"app_scope": key.app_scope, "user_id": key.user_id}
        _merge_into(alias, AdkUserState, columns, user_place(key), delta.user, now)


def _merge_into(
    alias: str,
    model: type[AdkAppState] | type[AdkUserState],
    columns: dict[str, str],
    place: StatePlace,
    delta: dict[str, Any],
    now: datetime,
) -> None:
    codec = codec_for(alias)
    rows = model.objects.using(alias)
    found = rows.select_for_update().filter(**columns).values_list("pk", "state").first()
    if found is None:
        try:
            with transaction.atomic(using=alias):
                rows.create(**columns, state=codec.state_value(place, delta), updated_at=now)
            return
        except IntegrityError:
            # Another transaction created it first: it is committed, lock it.
            found = rows.select_for_update().filter(**columns).values_list("pk", "state").get()
    pk, stored = found
    state = {**codec.open_state(place, stored), **delta}
    rows.filter(pk=pk).update(state=codec.state_value(place, state), updated_at=now)


def app_state(alias: str, app_scope: str) -> dict[str, Any]:
    """The app's stored state (empty when none is)."""
    rows = AdkAppState.objects.using(alias).filter(app_scope=app_scope)
    stored = rows.values_list("state", flat=True).first()
    return {} if stored is None else codec_for(alias).open_state(StatePlace(app_scope), stored)


def user_states(alias: str, app_scope: str, user_ids: set[str] | None) -> dict[str, dict[str, Any]]:
    """The stored state of each user of ``user_ids`` (``None``: of every
    user) in the app, by user id; a user with none stored is left out."""
    rows = AdkUserState.objects.using(alias).filter(app_scope=app_scope)
    if user_ids is not None:
        rows = rows.filter(user_id__in=user_ids)
    codec = codec_for(alias)
    return {
        user_id: codec.open_state(StatePlace(app_scope, user_id), stored)
        for user_id, stored in rows.values_list("user_id", "state")
    }


def shared_state(alias: str, app_scope: str, user_id: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """The app's and the user's stored state (empty when none is)."""
    return app_state(alias, app_scope), user_states(alias, app_scope, {user_id}).get(user_id, {})


@dataclass(frozen=True, slots=True)
class SessionStates:
    """An ADK session's app and user, and its state by scope (keys without
    their prefix): its own, its user's in the app, the app's shared."""

    app_name: str
    user_id: str
    session: dict[str, Any]
    user: dict[str, Any]
    app: dict[str, Any]


def states_of_sessions(alias: str, conversation_ids: list[int]) -> dict[int, SessionStates]:
    """The state of the ADK sessions among ``conversation_ids`` (a page of
    an export), by conversation id: three statements whatever their number."""
    sessions = list(
        AdkSession.objects.using(alias)
        .filter(conversation_id__in=conversation_ids)
        .values_list("conversation_id", "app_name", "app_scope", "user_id", "state")
    )
    scopes = {row[2] for row in sessions}
    codec = codec_for(alias)
    apps = {
        scope: codec.open_state(StatePlace(scope), stored)
        for scope, stored in AdkAppState.objects.using(alias)
        .filter(app_scope__in=scopes)
        .values_list("app_scope", "state")
    }
    users = {
        (scope, user_id): codec.open_state(StatePlace(scope, user_id), stored)
        for scope, user_id, stored in AdkUserState.objects.using(alias)
        .filter(app_scope__in=scopes, user_id__in={row[3] for row in sessions})
        .values_list("app_scope", "user_id", "state")
    }
    return {
        conversation_id: SessionStates(
            app_name,
            user_id,
            session_state(alias, conversation_id, stored),
            users.get((scope, user_id), {}),
            apps.get(scope, {}),
        )
        for conversation_id, app_name, scope, user_id, stored in sessions
    }


def session_state(alias: str, conversation_id: int, stored: Any) -> dict[str, Any]:
    """A session's own state from its column's decoded value ``stored``."""
    place = StatePlace("", conversation_id=conversation_id)
    return codec_for(alias).open_state(place, stored)


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
