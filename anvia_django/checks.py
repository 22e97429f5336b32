"""System checks for the misconfigurations that are easy to make."""

from __future__ import annotations

import importlib.util
from collections.abc import Sequence
from typing import Any

from django.apps import AppConfig
from django.conf import settings
from django.core import checks
from django.db import connections, router

from .conf import DEFAULTS, REMOVED, SETTINGS_NAME, app_settings
from .core.memory.scope import parse_scope


def register() -> None:
    checks.register(check_settings, checks.Tags.compatibility)
    checks.register(check_inspector_settings, checks.Tags.security)
    # Not Tags.database: these read DATABASES, never a connection, and Django
    # 6 runs database-tagged checks only for ``check --database``.
    checks.register(check_sqlite_transaction_mode, checks.Tags.compatibility)
    checks.register(check_database_vendors, checks.Tags.compatibility)
    # Asks each SQLite database's library: run by ``migrate`` and ``check --database``.
    checks.register(check_content_search, checks.Tags.database)
    checks.register(check_encryption, checks.Tags.security)
    checks.register(check_use_tz)


def check_settings(
    app_configs: Sequence[AppConfig] | None = None, **kwargs: Any
) -> list[checks.CheckMessage]:
    configured = getattr(settings, SETTINGS_NAME, {})
    if not isinstance(configured, dict):
        return [
            checks.Error(
                f"{SETTINGS_NAME} must be a dict, not {type(configured).__name__}.",
                id="anvia_django.E001",
            )
        ]
    messages: list[checks.CheckMessage] = []
    for key in sorted(set(configured) & set(REMOVED)):
        messages.append(
            checks.Warning(
                f"{SETTINGS_NAME}[{key!r}] was removed: {REMOVED[key]}; it is ignored.",
                hint="Delete it from your settings.",
                id="anvia_django.W007",
            )
        )
    for key in sorted(set(configured) - set(DEFAULTS) - set(REMOVED)):
        messages.append(
            checks.Warning(
                f"{SETTINGS_NAME}[{key!r}] is not a setting anvia_django knows; it is ignored.",
                hint=f"Known settings: {', '.join(sorted(DEFAULTS))}.",
                id="anvia_django.W003",
            )
        )
    values = {**DEFAULTS, **configured}
    default, maximum = values["INSPECTOR_DEFAULT_LIMIT"], values["INSPECTOR_MAX_LIMIT"]
    if not all(_is_positive_int(v) for v in (default, maximum)) or default > maximum:
        messages.append(
            checks.Error(
                "INSPECTOR_DEFAULT_LIMIT and INSPECTOR_MAX_LIMIT must be positive integers "
                "with the default not above the maximum.",
                id="anvia_django.E002",
            )
        )
    size = values["MAX_MESSAGE_BYTES"]
    if size is not None and not _is_positive_int(size):
        messages.append(
            checks.Error(
                "MAX_MESSAGE_BYTES must be a positive integer or None.", id="anvia_django.E003"
            )
        )
    if not _is_positive_int(values["MAX_NESTING_DEPTH"]):
        messages.append(
            checks.Error("MAX_NESTING_DEPTH must be a positive integer.", id="anvia_django.E004")
        )
    if values["SQL_DIALECT"] not in ("auto", "generic"):
        messages.append(
            checks.Error(
                f"SQL_DIALECT must be 'auto' or 'generic', not {values['SQL_DIALECT']!r}.",
                id="anvia_django.E005",
            )
        )
    threads = values["STORE_THREADS"]
    if threads is not None and not _is_positive_int(threads):
        messages.append(
            checks.Error(
                "STORE_THREADS must be a positive integer or None.", id="anvia_django.E006"
            )
        )
    try:
        parse_scope(values["SCOPE"])
    except ValueError as error:
        messages.append(
            checks.Error(
                f"SCOPE: {error}.",
                hint='For example {"user_id": True, "metadata_keys": ["tenant_id"]}.',
                id="anvia_django.E007",
            )
        )
    return messages


def check_inspector_settings(
    app_configs: Sequence[AppConfig] | None = None, **kwargs: Any
) -> list[checks.CheckMessage]:
    from .api.owners import load_resolver
    from .api.permissions import import_classes
    from .api.throttling import is_rate

    configured = getattr(settings, SETTINGS_NAME, {})
    if not isinstance(configured, dict):
        return []  # check_settings reports it
    values = {**DEFAULTS, **configured}
    messages: list[checks.CheckMessage] = []
    for name, error_id in (
        ("INSPECTOR_PERMISSION_CLASSES", "anvia_django.E101"),
        ("INSPECTOR_AUTHENTICATION_CLASSES", "anvia_django.E102"),
    ):
        value = values[name]
        if value is None and name == "INSPECTOR_AUTHENTICATION_CLASSES":
            continue
        try:
            if isinstance(value, str | bytes) or not hasattr(value, "__iter__"):
                raise TypeError("not a list")
            import_classes(value)
        except (ImportError, TypeError) as error:
            messages.append(
                checks.Error(
                    f"{SETTINGS_NAME}[{name!r}] must be a list of DRF classes or dotted "
                    f"paths to them ({error}).",
                    hint="The inspector API refuses every request until this is fixed.",
                    id=error_id,
                )
            )
    default, maximum = (
        values["INSPECTOR_MESSAGES_DEFAULT_LIMIT"],
        values["INSPECTOR_MESSAGES_MAX_LIMIT"],
    )
    if not all(_is_positive_int(v) for v in (default, maximum)) or default > maximum:
        messages.append(
            checks.Error(
                "INSPECTOR_MESSAGES_DEFAULT_LIMIT and INSPECTOR_MESSAGES_MAX_LIMIT must be "
                "positive integers with the default not above the maximum.",
                id="anvia_django.E103",
            )
        )
    if not _is_positive_int(values["ADMIN_TRANSCRIPT_PAGE_SIZE"]):
        messages.append(
            checks.Error(
                "ADMIN_TRANSCRIPT_PAGE_SIZE must be a positive integer.", id="anvia_django.E104"
            )
        )
    if not is_rate(values["INSPECTOR_THROTTLE_RATE"]):
        messages.append(
            checks.Error(
                f"INSPECTOR_THROTTLE_RATE must be None or a rate such as "
                f'"600/minute" (a count, then second, minute, hour or day), not '
                f"{values['INSPECTOR_THROTTLE_RATE']!r}.",
                id="anvia_django.E107",
            )
        )
    if not isinstance(values["INSPECTOR_OWNER_MODE"], bool):
        messages.append(
            checks.Error("INSPECTOR_OWNER_MODE must be True or False.", id="anvia_django.E105")
        )
    elif values["INSPECTOR_OWNER_MODE"]:
        try:
            load_resolver(values["INSPECTOR_USER_RESOLVER"])
        except (ImportError, TypeError) as error:
            messages.append(
                checks.Error(
                    f"INSPECTOR_USER_RESOLVER must be a callable or a dotted path to one "
                    f"({error}).",
                    hint="In owner mode every request is refused until this is fixed.",
                    id="anvia_django.E106",
                )
            )
        if list(values["INSPECTOR_PERMISSION_CLASSES"]) == list(
            DEFAULTS["INSPECTOR_PERMISSION_CLASSES"]
        ):
            messages.append(
                checks.Warning(
                    "INSPECTOR_OWNER_MODE is on but INSPECTOR_PERMISSION_CLASSES is still "
                    "staff-only, so ordinary users cannot read even their own conversations.",
                    hint='Set "INSPECTOR_PERMISSION_CLASSES": '
                    '["rest_framework.permissions.IsAuthenticated"].',
                    id="anvia_django.W101",
                )
            )
    messages.extend(_check_staff_tenants(values))
    return messages


def _check_staff_tenants(values: dict[str, Any]) -> list[checks.CheckMessage]:
    from .tenants import load_hook

    hook = values["STAFF_TENANTS"]
    if hook is None:
        return []
    messages: list[checks.CheckMessage] = []
    try:
        load_hook(hook)
    except (ImportError, TypeError) as error:
        messages.append(
            checks.Error(
                f"STAFF_TENANTS must be a callable or a dotted path to one ({error}).",
                hint="Every page of the admin's agent memory and every inspector API request "
                "fails until this is fixed.",
                id="anvia_django.E110",
            )
        )
    try:
        scope = parse_scope(values["SCOPE"])
    except ValueError:
        return messages  # check_settings reports it
    if not scope.metadata_keys:
        messages.append(
            checks.Error(
                "STAFF_TENANTS restricts staff to tenants, but SCOPE names no metadata key "
                "to hold a conversation's tenant id.",
                hint='For example "SCOPE": {"user_id": True, "metadata_keys": ["tenant_id"]}; '
                "the first key is the tenant.",
                id="anvia_django.E111",
            )
        )
    return messages


def check_sqlite_transaction_mode(
    app_configs: Sequence[AppConfig] | None = None,
    databases: Sequence[str] | None = None,
    **kwargs: Any,
) -> list[checks.CheckMessage]:
    from .models import Conversation

    messages: list[checks.CheckMessage] = []
    for alias in connections:
        settings_dict = connections.settings[alias]
        if not settings_dict["ENGINE"].endswith("sqlite3"):
            continue
        if not router.allow_migrate_model(alias, Conversation):
            continue
        mode = (settings_dict.get("OPTIONS") or {}).get("transaction_mode")
        if str(mode).upper() != "IMMEDIATE":
            messages.append(
                checks.Warning(
                    f"SQLite database {alias!r} stores agent memory without "
                    "transaction_mode 'IMMEDIATE'; concurrent writers can fail with "
                    "'database is locked'.",
                    hint=f'Add "OPTIONS": {{"transaction_mode": "IMMEDIATE"}} to '
                    f"DATABASES[{alias!r}].",
                    id="anvia_django.W001",
                )
            )
    return messages


UNKNOWN_VENDOR_RISKS = (
    "creating a session is race-free only if a failed INSERT releases its locks "
    "(racing first appends may otherwise fail with a deadlock), ids compare exactly and "
    "4-byte characters round-trip only if the database's collation and charset do so"
)


def check_database_vendors(
    app_configs: Sequence[AppConfig] | None = None,
    databases: Sequence[str] | None = None,
    **kwargs: Any,
) -> list[checks.CheckMessage]:
    """What is not guaranteed on the databases that store agent memory."""
    from .models import Conversation
    from .persistence.dialects import unknown_vendor

    messages: list[checks.CheckMessage] = []
    for alias in connections:
        if not router.allow_migrate_model(alias, Conversation):
            continue
        connection = connections[alias]
        vendor = unknown_vendor(connection)
        if vendor is not None:
            messages.append(
                checks.Warning(
                    f"Database {alias!r} is {vendor!r}, which anvia_django has no SQL "
                    f"written for: it uses the plain ORM with select_for_update there. "
                    f"Not guaranteed: {UNKNOWN_VENDOR_RISKS}.",
                    hint="Tested: PostgreSQL, SQLite, MariaDB and MySQL. Run the store "
                    "conformance suite (anvia_django.testing) against this database.",
                    id="anvia_django.W004",
                )
            )
        elif connection.vendor == "mysql":
            messages.extend(_check_mysql_options(alias, connections.settings[alias]))
    return messages


def check_content_search(
    app_configs: Sequence[AppConfig] | None = None,
    databases: Sequence[str] | None = None,
    **kwargs: Any,
) -> list[checks.CheckMessage]:
    """SQLite without FTS5: content search works, by scanning every message."""
    from .models import Conversation
    from .persistence.dialects.full_text import sqlite_has_fts5

    return [
        checks.Warning(
            f"Database {alias!r}: this SQLite library has no FTS5, so content search "
            "(the admin's search box, ?q= in the API) reads every message's text.",
            hint="Use a Python or SQLite build with FTS5 (most have it), then run "
            "migrate anvia_django 0006 and migrate again to build the index.",
            id="anvia_django.W008",
        )
        for alias in databases or ()
        if connections[alias].vendor == "sqlite"
        and router.allow_migrate_model(alias, Conversation)
        and not sqlite_has_fts5(connections[alias])
    ]


def check_encryption(
    app_configs: Sequence[AppConfig] | None = None, **kwargs: Any
) -> list[checks.CheckMessage]:
    """``ANVIA_DJANGO["ENCRYPTION"]``: the keyring parses (messages name key
    ids, never keys), ``cryptography`` is installed, and what search does."""
    from .encryption import encryption_enabled

    if not encryption_enabled():
        return []
    from .encryption.keyring import KeyringError, parse_keyring

    if importlib.util.find_spec("cryptography") is None:
        return [
            checks.Error(
                "ANVIA_DJANGO['ENCRYPTION'] is set but the cryptography package is not installed.",
                hint='pip install "anvia-django[encryption]"',
                id="anvia_django.E201",
            )
        ]
    try:
        parse_keyring(app_settings.ENCRYPTION)
    except KeyringError as error:
        return [
            checks.Error(
                f"ANVIA_DJANGO['ENCRYPTION']: {error}.",
                hint="Each key is the URL-safe base64 of 32 random bytes, e.g. "
                "base64.urlsafe_b64encode(os.urandom(32)); CURRENT names one of them.",
                id="anvia_django.E202",
            )
        ]
    if app_settings.ENCRYPTION.get("BLIND_INDEX") is True:
        # Search finds sealed messages by exact words, under each owner's key.
        from .encryption.blind_index import MAX_SEARCH_KEYS

        return [
            checks.Warning(
                "The blind index is keyed per owner (so erasure reaches it): a search "
                "computes its tokens under the data key of every owner it covers, and "
                f"is refused past {MAX_SEARCH_KEYS} keys. Staff-wide search (no user or "
                "tenant filter) stops working once there are more owners than that.",
                hint="Search one user's or one tenant's conversations (docs/production.md, "
                "'Encryption at rest'). Silence with SILENCED_SYSTEM_CHECKS once accepted.",
                id="anvia_django.W202",
            )
        ]
    return [
        checks.Warning(
            "Encryption at rest is on: content search (the admin's search box, ?q= in "
            "the API) does not see encrypted messages, only rows written before it was "
            "turned on.",
            hint="See docs/production.md, 'Encryption at rest'. Silence with "
            "SILENCED_SYSTEM_CHECKS once accepted.",
            id="anvia_django.W201",
        )
    ]


def _check_mysql_options(alias: str, settings_dict: dict[str, Any]) -> list[checks.CheckMessage]:
    options = settings_dict.get("OPTIONS") or {}
    messages: list[checks.CheckMessage] = []
    charset = str(options.get("charset", "utf8mb4")).lower()
    if charset != "utf8mb4":
        messages.append(
            checks.Warning(
                f"MySQL/MariaDB database {alias!r} connects with charset {charset!r}: "
                "emoji and other 4-byte characters in agent memory fail to store.",
                hint=f'Set "OPTIONS": {{"charset": "utf8mb4"}} in DATABASES[{alias!r}].',
                id="anvia_django.W005",
            )
        )
    isolation = str(options.get("isolation_level", "read committed")).lower()
    if isolation == "serializable":
        messages.append(
            checks.Warning(
                f"MySQL/MariaDB database {alias!r} runs SERIALIZABLE transactions: "
                "InnoDB then locks ranges of the message index on every read, and "
                "concurrent appends to different sessions can deadlock.",
                hint='Use Django\'s default "read committed" (or "repeatable read").',
                id="anvia_django.W006",
            )
        )
    return messages


def check_use_tz(
    app_configs: Sequence[AppConfig] | None = None, **kwargs: Any
) -> list[checks.CheckMessage]:
    if settings.USE_TZ or settings.TIME_ZONE == "UTC":
        return []
    return [
        checks.Warning(
            "USE_TZ is False: memory timestamps are stored as naive datetimes and read back "
            "as UTC, which is wrong unless TIME_ZONE is 'UTC'.",
            hint="Set USE_TZ = True (Django's default).",
            id="anvia_django.W002",
        )
    ]


def _is_positive_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value > 0
