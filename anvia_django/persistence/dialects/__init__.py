"""What differs by database, one module per vendor.

Everything else in the app is plain Django. Kept here:

- creating, locking and reserving positions on a conversation row. Doing it
  in one upsert statement is both the fastest way (about 2x the ORM form)
  and the race-free one: a first append from many processes at once must
  neither fail on the unique session id nor deadlock;
- the retried-append check and the multi-row message INSERT;
- the planner's row estimate the admin uses instead of a full count.

Any other backend gets :class:`~.base.Dialect`: the ORM with
``select_for_update``. Every statement of every dialect runs on Django's
connection for the calling thread, through its cursor wrappers.
"""

from __future__ import annotations

from django.db import connections
from django.db.backends.base.base import BaseDatabaseWrapper
from django.db.models import Model

from anvia_django.conf import app_settings

from .base import AppendRequest, ConversationLock, Dialect, LockedConversation, NewMessages
from .mysql import MariaDBDialect, MySQLDialect
from .postgresql import PostgreSQLDialect, forget_missing_functions
from .sqlite import SQLiteDialect

__all__ = [
    "GENERIC",
    "AppendRequest",
    "ConversationLock",
    "Dialect",
    "LockedConversation",
    "MariaDBDialect",
    "MySQLDialect",
    "NewMessages",
    "PostgreSQLDialect",
    "SQLiteDialect",
    "dialect_for",
    "estimated_row_count",
    "forget_missing_functions",
    "groups_appends",
    "one_writer_at_a_time",
    "unknown_vendor",
    "vendor_dialect",
]

GENERIC = Dialect()
_POSTGRESQL = PostgreSQLDialect()
_SQLITE = SQLiteDialect()
_MYSQL = MySQLDialect()
_MARIADB = MariaDBDialect()


def dialect_for(using: str) -> Dialect:
    """The dialect the store uses on database ``using``: its vendor's, or the
    generic one where ``ANVIA_DJANGO["SQL_DIALECT"]`` says ``"generic"``."""
    if app_settings.SQL_DIALECT == "generic":
        return GENERIC
    return vendor_dialect(connections[using])


def vendor_dialect(connection: BaseDatabaseWrapper) -> Dialect:
    """The dialect written for ``connection``'s vendor, else the generic one."""
    vendor = connection.vendor
    if vendor == "postgresql":
        return _POSTGRESQL
    if vendor == "sqlite":
        # RETURNING needs SQLite 3.35; Django 5.2 still runs on 3.31.
        return _SQLITE if connection.features.can_return_columns_from_insert else GENERIC
    if vendor == "mysql":
        return _MARIADB if connection.features.can_return_columns_from_insert else _MYSQL
    return GENERIC


_vendors: dict[str, str] = {}
"""The vendor of each alias, learnt once: what the event loop asks."""


def _vendor_of(alias: str) -> str:
    # Asked in the event loop on every store call: reading connections[alias]
    # there each time would leave state behind in a long-lived thread that
    # calls the store through async_to_sync (a worker, a command).
    vendor = _vendors.get(alias)
    if vendor is None:
        vendor = _vendors[alias] = connections[alias].vendor
    return vendor


def groups_appends(alias: str) -> bool:
    """Whether appends to ``alias``'s database run in groups: where it pays
    (PostgreSQL: one statement a group; SQLite: one commit a group). On
    another server each append in a shared transaction still costs its
    round trips, and waits for the others instead of running beside them
    (MariaDB, 16 tasks appending: 1.95x the raw driver alone, 2.80x
    grouped). The vendor alone decides: MySQL's features would open a
    connection."""
    return _vendor_of(alias) in ("postgresql", "sqlite")


def one_writer_at_a_time(alias: str) -> bool:
    """Whether ``alias``'s database runs one writing transaction at a time (SQLite)."""
    return _vendor_of(alias) == "sqlite"


def unknown_vendor(connection: BaseDatabaseWrapper) -> str | None:
    """The vendor name of ``connection`` if no dialect here is written for it."""
    return None if connection.vendor in ("postgresql", "sqlite", "mysql") else connection.vendor


def estimated_row_count(using: str, model: type[Model]) -> int | None:
    """The planner's row estimate for ``model``'s table, where there is one
    (PostgreSQL): for counts that must not scan a huge table."""
    return vendor_dialect(connections[using]).estimated_row_count(using, model)
