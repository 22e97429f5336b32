"""The ``ANVIA_DJANGO`` settings dict, read at access time.

Reading on every access (instead of freezing values at import) keeps
``override_settings`` working in tests. The dict itself is kept until a
``setting_changed`` signal names it: fetching it from Django's lazy settings
cost more than a microsecond, several times per store call.
"""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured
from django.core.signals import setting_changed

from .core.memory.scope import ConversationScope, parse_scope
from .core.memory.validation import InputLimits

SETTINGS_NAME = "ANVIA_DJANGO"

DEFAULTS: dict[str, Any] = {
    # DRF permission classes (dotted paths or classes) guarding the inspector API.
    "INSPECTOR_PERMISSION_CLASSES": ["rest_framework.permissions.IsAdminUser"],
    # DRF authentication classes of the inspector API; None follows the
    # project's REST_FRAMEWORK["DEFAULT_AUTHENTICATION_CLASSES"].
    "INSPECTOR_AUTHENTICATION_CLASSES": None,
    # Conversations per page of the listing: default and largest ``limit``.
    "INSPECTOR_DEFAULT_LIMIT": 50,
    "INSPECTOR_MAX_LIMIT": 200,
    # Messages per page of a transcript (API detail and messages endpoint).
    "INSPECTOR_MESSAGES_DEFAULT_LIMIT": 100,
    "INSPECTOR_MESSAGES_MAX_LIMIT": 500,
    # Owner mode: every caller sees only the conversations whose user_id is
    # the one INSPECTOR_USER_RESOLVER returns for the request (none if None).
    "INSPECTOR_OWNER_MODE": False,
    "INSPECTOR_USER_RESOLVER": "anvia_django.api.owners.request_user_pk",
    # A callable (or its dotted path) taking the request and returning the
    # tenant ids its user may see in the admin and the API (None: all). See
    # anvia_django/tenants.py and docs/scopes.md.
    "STAFF_TENANTS": None,
    # Messages per page of the admin's transcript.
    "ADMIN_TRANSCRIPT_PAGE_SIZE": 100,
    # Largest message, as compact UTF-8 JSON, that append accepts; None for no bound.
    "MAX_MESSAGE_BYTES": 8 * 1024 * 1024,
    # Deepest nesting of lists and objects inside one message.
    "MAX_NESTING_DEPTH": 100,
    # "auto": the SQL written for the database (PostgreSQL, SQLite, MySQL,
    # MariaDB); "generic": the plain ORM with select_for_update everywhere.
    "SQL_DIALECT": "auto",
    # Threads (each with its own connections) that run store calls made from
    # async code with no request or async_to_sync caller around it; None sends
    # them all to asgiref's one shared thread. See anvia_django/persistence/threads/dispatch.py.
    "STORE_THREADS": 8,
    # What tells conversations apart besides the session id: the user id and
    # the named metadata keys (dotted paths to string values), or a dotted
    # path to a function of the context returning a stable string. See
    # anvia_django/core/memory/scope.py and docs/scopes.md.
    "SCOPE": {"user_id": True, "metadata_keys": []},
    # Encryption at rest of message content (None: off). A dict with KEYS
    # (key id -> URL-safe base64 of 32 bytes), CURRENT (the id new data keys
    # are wrapped with), optionally KEYS_ENV and KEY_DATABASE. See
    # anvia_django/encryption/keyring.py and docs/production.md.
    "ENCRYPTION": None,
}

REMOVED = {
    "EVENT_LOOP_APPENDS": "appends and loads always run on Django's connections now",
}
"""Settings of earlier versions, and why they are gone (system check W007)."""

ID_MAX_LENGTH = 255
"""Longest session id, user id or run id: the width of their columns."""


class AppSettings:
    def __init__(self) -> None:
        self._configured: dict[str, Any] | None = None
        self._scope: ConversationScope | None = None

    def _get(self, name: str) -> Any:
        configured = self._configured
        if configured is None:
            configured = self._configured = getattr(settings, SETTINGS_NAME, None) or {}
        return configured.get(name, DEFAULTS[name])

    def reload(self) -> None:
        """Read ``settings.ANVIA_DJANGO`` again at the next access."""
        self._configured = None
        self._scope = None

    @property
    def INSPECTOR_PERMISSION_CLASSES(self) -> list[Any]:
        return list(self._get("INSPECTOR_PERMISSION_CLASSES"))

    @property
    def INSPECTOR_DEFAULT_LIMIT(self) -> int:
        return int(self._get("INSPECTOR_DEFAULT_LIMIT"))

    @property
    def INSPECTOR_MAX_LIMIT(self) -> int:
        return int(self._get("INSPECTOR_MAX_LIMIT"))

    @property
    def INSPECTOR_AUTHENTICATION_CLASSES(self) -> list[Any] | None:
        value = self._get("INSPECTOR_AUTHENTICATION_CLASSES")
        return None if value is None else list(value)

    @property
    def INSPECTOR_MESSAGES_DEFAULT_LIMIT(self) -> int:
        return int(self._get("INSPECTOR_MESSAGES_DEFAULT_LIMIT"))

    @property
    def INSPECTOR_MESSAGES_MAX_LIMIT(self) -> int:
        return int(self._get("INSPECTOR_MESSAGES_MAX_LIMIT"))

    @property
    def INSPECTOR_OWNER_MODE(self) -> bool:
        return bool(self._get("INSPECTOR_OWNER_MODE"))

    @property
    def INSPECTOR_USER_RESOLVER(self) -> Any:
        """A dotted path or a callable ``(request) -> str | None``."""
        return self._get("INSPECTOR_USER_RESOLVER")

    @property
    def STAFF_TENANTS(self) -> Any:
        """``None``, a dotted path or a callable ``(request) -> Iterable[str] | None``."""
        return self._get("STAFF_TENANTS")

    @property
    def ADMIN_TRANSCRIPT_PAGE_SIZE(self) -> int:
        return int(self._get("ADMIN_TRANSCRIPT_PAGE_SIZE"))

    @property
    def MAX_MESSAGE_BYTES(self) -> int | None:
        value = self._get("MAX_MESSAGE_BYTES")
        return None if value is None else int(value)

    @property
    def MAX_NESTING_DEPTH(self) -> int:
        return int(self._get("MAX_NESTING_DEPTH"))

    @property
    def SQL_DIALECT(self) -> str:
        return str(self._get("SQL_DIALECT"))

    @property
    def STORE_THREADS(self) -> int | None:
        value = self._get("STORE_THREADS")
        return None if value is None else int(value)

    @property
    def ENCRYPTION(self) -> Any:
        return self._get("ENCRYPTION")

    @property
    def scope(self) -> ConversationScope:
        """``SCOPE`` parsed (a function imported) once per settings change;
        raises ``ImproperlyConfigured`` naming what is wrong."""
        if self._scope is None:
            try:
                self._scope = parse_scope(self._get("SCOPE"))
            except ValueError as error:
                raise ImproperlyConfigured(f"{SETTINGS_NAME}['SCOPE']: {error}") from error
        return self._scope

    @property
    def input_limits(self) -> InputLimits:
        return InputLimits(
            max_id_length=ID_MAX_LENGTH,
            max_message_bytes=self.MAX_MESSAGE_BYTES,
            max_depth=self.MAX_NESTING_DEPTH,
        )


app_settings = AppSettings()


def _reload_if_changed(*, setting: str, **kwargs: Any) -> None:
    if setting == SETTINGS_NAME:
        app_settings.reload()


setting_changed.connect(_reload_if_changed)
