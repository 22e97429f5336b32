"""Which conversation an ADK session is: ADK's app name as part of the scope.

ADK names a session by ``(app_name, user_id, session_id)``. Its conversation
is found, as every conversation is, by the session id and a scope key; for
an ADK session that key is made from the user id, the metadata keys of
``ANVIA_DJANGO["SCOPE"]`` (tenants) and the app name, held in the context's
metadata under :data:`APP_KEY`. The same key without the user id is the
session's *app scope*: what app state is shared within and sessions are
listed by, so two tenants running one app share nothing.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from django.core.exceptions import ImproperlyConfigured

from anvia_django.conf import app_settings
from anvia_django.core.memory.scope import ConversationScope
from anvia_django.core.memory.types import JsonObject, MemoryContext

APP_KEY = "adk_app"
"""The metadata key of an ADK session's conversation that holds its app name."""


def tenant_keys() -> tuple[str, ...]:
    """The metadata keys of ``ANVIA_DJANGO[\"SCOPE\"]`` (tenants), in order."""
    scope = app_settings.scope
    if scope.function is not None:
        raise ImproperlyConfigured(
            "ADK sessions need ANVIA_DJANGO['SCOPE'] as user_id and metadata_keys, "
            f"not a function ({scope.describe()}): the app name is added to its keys"
        )
    if APP_KEY in scope.metadata_keys:
        raise ImproperlyConfigured(f"ANVIA_DJANGO['SCOPE'] must not name {APP_KEY!r} itself")
    return scope.metadata_keys


def session_scope() -> ConversationScope:
    """The scope of ADK sessions' conversations: always with the user id,
    as ADK keys sessions by user."""
    return ConversationScope(user_id=True, metadata_keys=(*tenant_keys(), APP_KEY))


def app_scope_of(app_name: str, metadata: JsonObject | None = None) -> str:
    """The app scope of ``app_name`` with the tenant values in ``metadata``."""
    scope = ConversationScope(user_id=False, metadata_keys=(*tenant_keys(), APP_KEY))
    return scope.key(MemoryContext("-", None, {**(metadata or {}), APP_KEY: app_name}))


@dataclass(frozen=True, slots=True)
class AdkKey:
    """One ADK session's name, with the tenant values of the service."""

    app_name: str
    user_id: str
    session_id: str
    metadata: JsonObject | None = field(default=None)

    @property
    def context(self) -> MemoryContext:
        return MemoryContext(
            self.session_id, self.user_id, {**(self.metadata or {}), APP_KEY: self.app_name}
        )

    @property
    def app_scope(self) -> str:
        return app_scope_of(self.app_name, self.metadata)
